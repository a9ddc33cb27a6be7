"""A world's state as its audit chain produces it.

That is: charges spent, fated results, pending choices, decks, ledgers (the ``records`` rows),
settings, the decision counter, and the stored replies an ``event_id`` replay returns.

Pure: no I/O. ``audit verify`` replays every record through :class:`DerivingState`. It is the state
``bridge.audit.rederive`` gives ``bridge.core.decide``, the call a live decision makes. It answers
the decision's reads from the record. It also checks each read against the state the records before
it produced. A read that differs means the state was edited between two decisions: say a fated
result's rows were deleted, so the same card was fated again. The writes are kept. :func:`compare`
then names every stored row that differs from the derived one, with the record that wrote it.
``audit repair`` writes :class:`Derived` back. :func:`state_digest` seals the stored state in a
signed head.

Values are compared as JSON with sorted keys (:func:`normal`). So the store's own encoding may
change without making old state look edited. A value that still differs is compared by its
:func:`facts`, as the current code reads it. So a field an older bridge kept, and the record no
longer has, does not make it look edited. An example is presentation: the rendered Fate card older
sohl records stored.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

import msgspec

from . import wire
from .fairness.decide import OFFER_KIND, SECRET_KIND
from .state import R

EVENTS_ROW_PER_DECISION = False
"""False: a decision's reply is kept once, in its audit record, which a repeat of
its ``event_id`` is answered from; ``events`` rows are only those of older bridges (and of
decisions without a record), and only the rows that exist are compared with the chain's replies
(an edited or forged one would be served on a repeat)."""

SHELL_KINDS = frozenset({SECRET_KIND, OFFER_KIND})
"""Record kinds the shell writes before a decision, outside the chain (``bridge.fairness``: a dice
session's seed, kept secret until its reveal, and its public offer). The chain cannot produce
them: a recorded read of one is taken as the state, and they are not compared at the end (the
seed is checked against its commitment by ``bridge.fairness.trail.check_dice`` instead)."""

_sorted = msgspec.json.Encoder(order="sorted")
_decode = msgspec.json.Decoder()
_CARD_HTML = re.compile(rb'"html":"[^"\\]*(?:\\.[^"\\]*)*"')  # a JSON string, unrolled: no per-character branch


def without_card_html(value: bytes) -> bytes:
    """JSON with every chat card's rendered ``html`` emptied.

    Re-derivation does not render cards: their text is presentation (:func:`bridge.audit.verdict`).
    So state holding a card compares without it."""
    return _CARD_HTML.sub(b'"html":""', value) if b'"html":"' in value else value


def normal(value: bytes | str) -> bytes:
    """Stored JSON re-encoded with sorted keys, card text emptied: what two encodings of one value share.

    Text that is not JSON is returned as its bytes. It then differs from any derived value."""
    raw = value.encode() if isinstance(value, str) else bytes(value)
    try:
        return without_card_html(_sorted.encode(_decode.decode(raw)))
    except msgspec.DecodeError:
        return raw


def facts(value: bytes, type: type) -> bytes | None:
    """``value`` (stored JSON) as the current code reads it.

    It is decoded as ``type`` (the record kind's ``msgspec.Struct``, or None) and encoded again,
    key-sorted, card text emptied. So fields ``type`` no longer has drop out: msgspec ignores them
    when it decodes. None when it does not decode as ``type``; then it differs from any derived
    value."""
    try:
        return without_card_html(_sorted.encode(_optional(type).decode(value)))
    except msgspec.MsgspecError:
        return None


def _same_facts(held: bytes, chain: bytes | None, type: type | None) -> bool:
    """Whether a value that differs from the chain's as JSON reads as the same record of ``type``.

    The value is a stored or recorded one. A ``type`` of None is unknown, so not the same."""
    if chain is None or type is None:
        return False
    found = facts(held, type)
    return found is not None and found == facts(chain, type)


def reply_normal(value: bytes | str) -> bytes:
    """A stored reply normalised, without its ``receipt`` and ``rolls``.

    Those are added beside the reply when it is sent."""
    raw = value.encode() if isinstance(value, str) else bytes(value)
    try:
        decoded = _decode.decode(raw)
    except msgspec.DecodeError:
        return raw
    if isinstance(decoded, dict):
        decoded.pop("receipt", None)
        decoded.pop("rolls", None)  # attached beside the reply too, from the record's dice
    return _sorted.encode(decoded)  # card text included: the record holds the reply as sent


DEFAULT_SETTINGS = _sorted.encode(wire.WorldSettings())
_settings = msgspec.json.Decoder(wire.WorldSettings)
_decoders: dict[type, msgspec.json.Decoder] = {}


def _optional(type: type) -> msgspec.json.Decoder:
    """A decoder of ``type | None``, made once per type.

    Building one per read costs more than the decode."""
    decoder = _decoders.get(type)
    if decoder is None:
        decoder = _decoders[type] = msgspec.json.Decoder(type | None)
    return decoder


@dataclass(slots=True)
class StoredState:
    """A world's state rows as the database holds them.

    ``settings`` and ``records`` values and ``events`` replies are as stored (bytes). ``last_seq``
    is the decision counter. ``None`` settings: the world has no registry row. ``unsealed``: the
    rows whose stored bytes are not the frame their value is stored as, as (row name, why)
    (bridge.store.blobs.frame_problem)."""

    settings: bytes | None
    last_seq: int
    records: dict[tuple[str, str], bytes]
    events: dict[str, bytes]
    unsealed: list[tuple[str, str]] = field(default_factory=list)


def state_digest(state: StoredState) -> str:
    """SHA-256 (hex) over the world's stored state, normalised and in key order.

    A signed head seals it. So the first load of a world can tell cheaply whether its rows were
    edited since."""
    h = hashlib.sha256()
    h.update(b"settings\0" + (normal(state.settings) if state.settings is not None else b"") + b"\n")
    h.update(b"last_seq\0%d\n" % state.last_seq)
    for (kind, key), value in sorted(state.records.items()):
        h.update(b"record\0" + kind.encode() + b"\0" + key.encode() + b"\0" + normal(value) + b"\n")
    for event_id, reply in sorted(state.events.items()):
        h.update(b"event\0" + event_id.encode() + b"\0" + reply_normal(reply) + b"\n")
    return h.hexdigest()


@dataclass(frozen=True, slots=True)
class StateProblem:
    """A difference between the stored state and the chain's.

    ``seq`` is the record that wrote the row; 0 when none did. ``detail`` is a sentence naming the
    row."""

    seq: int
    detail: str


@dataclass(slots=True)
class Derived:
    """One world's state as its chain produced it.

    Each value is normalised JSON, with the ``seq`` of the record that last wrote it. ``events``
    holds each reply as its record holds it. ``types``: the ``msgspec.Struct`` each record was
    written as, for :func:`facts`."""

    settings: tuple[bytes, int] = (DEFAULT_SETTINGS, 0)
    last_seq: tuple[int, int] = (0, 0)
    records: dict[tuple[str, str], tuple[bytes, int]] = field(default_factory=dict)
    events: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    types: dict[tuple[str, str], type] = field(default_factory=dict)


class Diverged(Exception):
    """A re-derived decision asked for a read the record does not hold (its inputs differ)."""


def _show(value: bytes | None, limit: int = 80) -> str:
    if value is None or value == b"null":
        return "nothing"
    text = value.decode(errors="replace")
    return text if len(text) <= limit else text[:limit] + "..."


class DerivingState:
    """The :class:`~bridge.state.WorldState` a recorded decision is replayed against.

    Reads come from the record, in order. :class:`Diverged` is raised when the decision asks for
    another one. Each read is checked against ``derived``; differences go to ``problems``. Writes
    are kept apart and applied by :meth:`commit`. A refused decision's writes are dropped, as its
    transaction's were."""

    def __init__(self, world_id: str, seq: int, reads: list[Any], derived: Derived,
                 problems: list[StateProblem]) -> None:
        self.world_id = world_id
        self._seq = seq
        self._reads = reads
        self._next = 0
        self._derived = derived
        self._problems = problems
        self._settings: bytes | None = None
        self._last_seq: int | None = None
        self._records: dict[tuple[str, str], bytes] = {}
        self._types: dict[tuple[str, str], type] = {}

    def _answer(self, op: str, args: list[str | int]) -> bytes:
        if self._next >= len(self._reads):
            raise Diverged(f"read {op}{tuple(args)} was not recorded")
        read = self._reads[self._next]
        if read.op != op or read.args != args:
            raise Diverged(f"read {op}{tuple(args)} where the record has {read.op}{tuple(read.args)}")
        self._next += 1
        return bytes(read.result)

    def _check(self, what: str, recorded: bytes, chain: bytes | None, written_by: int,
               type: type | None = None) -> None:
        if recorded == chain or (chain is None and recorded == b"null"):
            return  # recorded reads are key-sorted JSON already: the common case costs no decode
        if (without_card_html(recorded) != chain and normal(recorded) != chain
                and not _same_facts(recorded, chain, type)):
            origin = f"record {written_by} left {_show(chain)}" if written_by else f"the chain held {_show(chain)}"
            self._problems.append(StateProblem(self._seq, (
                f"record {self._seq} read {what} as {_show(recorded)}, but {origin}: the state was "
                "edited between decisions")))

    def settings(self) -> wire.WorldSettings:
        recorded = self._answer("settings", [])
        if self._settings is None:
            chain, seq = self._derived.settings
            self._check("the settings", recorded, chain, seq)
        return _settings.decode(recorded)

    def put_settings(self, settings: wire.WorldSettings) -> None:
        self._settings = _sorted.encode(settings)

    def next_seq(self) -> int:
        recorded = self._answer("next_seq", [])
        value = int(recorded)
        current = self._last_seq if self._last_seq is not None else self._derived.last_seq[0]
        if value != current + 1:
            self._problems.append(StateProblem(self._seq, (
                f"record {self._seq} was given decision number {value}, but the chain had counted "
                f"{current}: the world's counter was edited")))
        self._last_seq = value
        return value

    def get(self, kind: str, key: str, type: type[R]) -> R | None:
        recorded = self._answer("get", [kind, key])
        if kind in SHELL_KINDS:
            self._derived.records[kind, key] = (normal(recorded), self._seq)  # as the shell left it
        elif (kind, key) not in self._records:
            chain, seq = self._derived.records.get((kind, key), (None, 0))
            self._check(f"{kind} {key!r}", recorded, chain, seq, type)
        return _optional(type).decode(recorded)

    def put(self, kind: str, key: str, record: msgspec.Struct) -> None:
        self._records[kind, key] = without_card_html(_sorted.encode(record))
        self._types[kind, key] = type(record)

    def peek(self, kind: str, key: str, type: type[R]) -> R | None:
        return None  # describes a refusal's columns; a replay compares the verdict only

    def chained(self, kind: str, key: str, type: type[R]) -> R | None:
        """The record as the chain left it before this decision; None when never written.

        It is read without a recorded read. The live dice table read it on the plain state
        (``bridge.fairness.decide.table_for``: the dice settings). The record does not hold it."""
        found = self._derived.records.get((kind, key))
        return None if found is None else msgspec.json.decode(found[0], type=type | None)

    def again(self) -> DerivingState:
        """A fresh replay of the same record against the same chain: a second re-derivation.

        It runs under an earlier era. Its read checks go to a list of their own; they repeat this
        one's."""
        return DerivingState(self.world_id, self._seq, self._reads, self._derived, [])

    def commit(self) -> None:
        """Apply the decision's writes to the derived state (it was not refused)."""
        derived, seq = self._derived, self._seq
        if self._settings is not None:
            derived.settings = (self._settings, seq)
        if self._last_seq is not None:
            derived.last_seq = (self._last_seq, seq)
        for key, value in self._records.items():
            derived.records[key] = (value, seq)
        derived.types.update(self._types)


def compare(derived: Derived, stored: StoredState) -> list[StateProblem]:
    """Every stored row that differs from the chain's, naming the row and the record that wrote it."""
    problems: list[StateProblem] = []
    if stored.settings is not None and normal(stored.settings) != derived.settings[0]:
        problems.append(StateProblem(derived.settings[1], (
            f"the world's settings row holds {_show(normal(stored.settings))}, but "
            f"{_origin(derived.settings[1])} {_show(derived.settings[0])}")))
    if stored.last_seq != derived.last_seq[0]:
        problems.append(StateProblem(derived.last_seq[1], (
            f"the world's decision counter (worlds.last_seq) is {stored.last_seq}, but "
            f"{_origin(derived.last_seq[1])} {derived.last_seq[0]}")))
    for kind, key in sorted(k for k in derived.records.keys() | stored.records.keys() if k[0] not in SHELL_KINDS):
        chain, seq = derived.records.get((kind, key), (None, 0))
        held = stored.records.get((kind, key))
        row = f"state row records({kind!r}, {key!r})"
        if held is None:
            problems.append(StateProblem(seq, f"{row}, written by record {seq}, is missing"))
        elif chain is None:
            problems.append(StateProblem(0, f"{row} was written by no record of the chain: {_show(normal(held))}"))
        elif normal(held) != chain and not _same_facts(held, chain, derived.types.get((kind, key))):
            problems.append(StateProblem(seq, f"{row} holds {_show(normal(held))}, but record {seq} wrote {_show(chain)}"))
    event_ids = derived.events.keys() | stored.events.keys() if EVENTS_ROW_PER_DECISION else stored.events.keys()
    for event_id in sorted(event_ids):
        chain, seq = derived.events.get(event_id, (None, 0))
        held = stored.events.get(event_id)
        row = f"stored reply events({event_id!r})"
        if held is None:
            problems.append(StateProblem(seq, f"{row} of record {seq} is missing: a repeat would be decided again"))
        elif chain is None:
            problems.append(StateProblem(0, f"{row} is held by no record of the chain: a repeat would get it"))
        elif reply_normal(held) != reply_normal(chain):
            problems.append(StateProblem(seq, f"{row} differs from record {seq}'s reply: a repeat would get {_show(reply_normal(held))}"))
    return problems


def _origin(seq: int) -> str:
    return f"record {seq} left" if seq else "the chain holds"


def as_stored(derived: Derived) -> tuple[bytes, int, list[tuple[str, str, bytes]], list[tuple[str, bytes]]]:
    """The derived state as rows to write back (``audit repair``).

    These are settings, last_seq, records ``(kind, key, value)`` and events ``(event_id, reply)``.
    Events may be none: a repeat is answered from the record. An ``events`` row no record agrees
    with is dropped."""
    events = sorted(derived.events.items()) if EVENTS_ROW_PER_DECISION else []
    return (derived.settings[0], derived.last_seq[0],
            [(kind, key, value) for (kind, key), (value, _) in sorted(derived.records.items())],
            [(event_id, reply) for event_id, (reply, _) in events])


def record_event(derived: Derived, event_id: str | None, reply: bytes, seq: int) -> None:
    """Keep the reply a record's ``event_id`` replays.

    Only the first record under it counts. A repeat is answered from it and not recorded again."""
    if event_id is not None and event_id not in derived.events:
        derived.events[event_id] = (reply, seq)  # as recorded: normalised only when compared
