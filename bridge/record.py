"""What one decision leaves for the store and the audit trail, and how its inputs are recorded.

Pure values. This sits beneath the decision core (:mod:`bridge.core`), which fills them in. It sits
beneath the audit trail (:mod:`bridge.audit`), which chains and verifies what they become.

The core wraps the world state in :class:`RecordingState` and the dice in :class:`RecordingDice`.
Every read the decision makes is captured: settings, the graded test with its actor snapshot, the
Fate record, the charges spent since the snapshot, the sequence numbers. So is every die. So the
record holds exactly the inputs the decision used. The core returns one :class:`Decision`: the reply
frame, the :class:`AuditEntry`, what the shells keep. The store makes the :class:`AuditRecord` from
it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from . import wire
from .dice import Dice
from .fairness.provable import Draw
from .state import R, WorldState


class Read(msgspec.Struct, kw_only=True, frozen=True):
    """One read a decision made: the ``op`` (a :class:`WorldState` method), its ``args``, the
    ``result`` as JSON."""

    op: str
    args: list[str | int]
    result: msgspec.Raw


class AuditRecord(msgspec.Struct, kw_only=True, frozen=True):
    """One decision as the audit trail keeps it; the canonical bytes are this, with sorted keys.

    - ``seq``: the world's audit sequence number (1, 2, ... without gaps).
    - ``ts``: UTC ISO-8601.
    - ``message``: the client message as decoded.
    - ``reads``/``dice``: the inputs.
    - ``reply``: the frame sent.
    - ``ok``: false for a refusal. Its writes were rolled back.
    - ``summary``: the columns the record is listed and filtered by. They are hashed with it, so they
      cannot be edited apart.
    - ``draws``: each die's faces and source (``fair``/``physical``/``secret``), parallel to
      ``dice``. None in records older than dice sessions.
    - ``dice_session``: the dice session open when it was decided. Its fair dice derive from that
      session's seed (``bridge.fairness``)."""

    world_id: str
    seq: int
    ts: str
    bridge_version: str
    type: str
    event_id: str | None
    user_id: str | None
    message: msgspec.Raw
    reads: list[Read]
    dice: list[int]
    reply: msgspec.Raw
    ok: bool
    summary: wire.AuditColumns
    draws: list[Draw] | None = None
    dice_session: str | None = None


class AuditEntry(msgspec.Struct, kw_only=True, frozen=True):
    """What the session hands the store for one decision.

    The store makes the :class:`AuditRecord` from it, adding seq, ts and version. It makes the
    summary columns too."""

    type: str
    event_id: str | None
    user_id: str | None
    message: bytes
    reads: list[Read]
    dice: list[int]
    reply: bytes
    ok: bool
    summary: wire.AuditColumns
    draws: list[Draw] | None = None
    dice_session: str | None = None


_encoder = msgspec.json.Encoder(order="sorted")


def sorted_json(value: Any) -> bytes:
    """``value`` as JSON with keys sorted at every level.

    A record's parts (message, reads, reply) are encoded so. Then :func:`canonical` needs one pass."""
    return _encoder.encode(value)


def canonical(record: AuditRecord) -> bytes:
    """The record's canonical bytes: JSON, keys sorted at every level.

    Its raw parts were encoded by :func:`sorted_json`."""
    return _encoder.encode(record)


FLOAT_FIELDS = frozenset({"pass_chance"})
"""The keys whose numbers the record's types hold as floats (msgspec writes ``1.0``, not ``1``):
every float-typed field of the wire and state types (tests/test_trail.py derives them), mirrored
by the /verify page (``FLOAT_FIELDS`` in bridge/fairness/page/verify.js)."""

_EXACT_FLOAT = 2 ** 53  # an integral float below this is exactly the integer it reads as


def _by_value(value: Any, key: str | None) -> Any:
    """``value`` (decoded JSON) with every number as the record's types hold it.

    A number under a key of :data:`FLOAT_FIELDS` is a float. Else it is an integer when its value is
    one below 2**53. ``3.0`` and ``3`` are one number; ``jq`` writes ``1.0`` as ``1``. A list's
    items are under its key. Raises ``ValueError`` for an integer under such a key too large for a
    float."""
    if isinstance(value, dict):
        return {k: _by_value(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_by_value(v, key) for v in value]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if key in FLOAT_FIELDS:
        try:
            value = float(value)
        except OverflowError:
            raise ValueError(f"{key} {value} is too large for a float") from None
    if isinstance(value, float) and key not in FLOAT_FIELDS and value.is_integer() and abs(value) < _EXACT_FLOAT:
        return int(value)
    return value


def canonical_json(data: bytes) -> bytes:
    """The canonical bytes of a record read back from any JSON text of it.

    The text may be indented any way, its keys in any order, its strings escaped (``\\u00e9``) or
    UTF-8. It is decoded, then encoded as :func:`canonical` encodes a record: keys sorted at every
    level, no whitespace, strings in UTF-8. Each number is as the record's types hold it
    (:func:`_by_value`). For the bytes :func:`canonical` wrote, it gives them back unchanged. The
    /verify page's ``canonicalText`` (bridge/fairness/page/verify.js) is the same function.

    Raises ``msgspec.DecodeError`` for text that is not JSON. That includes a lone surrogate, and a
    number beyond a float's range. Raises ``ValueError`` for an integer too large for a float field."""
    return _encoder.encode(_by_value(msgspec.json.decode(data), None))


class Decision(msgspec.Struct, frozen=True):
    """What a decision function returns.

    - the reply frame.
    - ``ok``: False for a refusal. Its writes are dropped; the reply is still kept under the
      event_id.
    - the audit entry, to append to the world's chain in the same transaction. None: not audited.
      Then its ``reply`` must be the frame itself, which the record holds once for ``event_id``
      replay.
    - ``kept``: whatever the caller wants back. It is returned as ``Decided.kept``, never stored.
      :func:`bridge.core.decide` keeps the overlay frame and the log keys."""

    reply: bytes
    ok: bool
    audit: AuditEntry | None = None
    kept: Any = None


# --- recording ---------------------------------------------------------------------------------

_NULL = msgspec.Raw(b"null")  # sorted_json(None)


class RecordingState:
    """A :class:`WorldState` that passes everything to ``inner`` and records every read."""

    def __init__(self, inner: WorldState) -> None:
        self._inner = inner
        self.world_id = inner.world_id
        self.reads: list[Read] = []

    def _read(self, op: str, args: list[str | int], result: Any) -> Any:
        raw = _NULL if result is None else msgspec.Raw(sorted_json(result))  # None: a record not there
        self.reads.append(Read(op=op, args=args, result=raw))
        return result

    def settings(self) -> wire.WorldSettings:
        return self._read("settings", [], self._inner.settings())

    def put_settings(self, settings: wire.WorldSettings) -> None:
        self._inner.put_settings(settings)

    def next_seq(self) -> int:
        return self._read("next_seq", [], self._inner.next_seq())

    def get(self, kind: str, key: str, type: type[R]) -> R | None:
        return self._read("get", [kind, key], self._inner.get(kind, key, type))

    def put(self, kind: str, key: str, record: msgspec.Struct) -> None:
        self._inner.put(kind, key, record)

    def peek(self, kind: str, key: str, type: type[R]) -> R | None:
        # describes the decision: not an input, not recorded; the inner state's peek, so a
        # replayed decision (bridge.audit.rederive) answers None as a replay does
        return self._inner.peek(kind, key, type)


class RecordingDice:
    """Dice that pass through to ``inner`` and keep every value rolled."""

    def __init__(self, inner: Dice) -> None:
        self._inner = inner
        self.rolled: list[int] = []

    def roll(self, faces: int) -> int:
        value = self._inner.roll(faces)
        self.rolled.append(value)
        return value
