"""Provably fair dice (commit and reveal): the pure derivation, the commitment, one decision's dice table.

The table gives derived, physical or secret dice, and records each draw with its source.

Derivation (``v1``; ``bridge/fairness/page/verify.js`` implements the same for the ``/verify`` page)::

    message(attempt) = "fate-bridge die v1\\n" world_id "\\n" seq "\\n" index "\\n" faces "\\n"
                       client_seed "\\n" attempt                       (UTF-8, decimal numbers)
    h = HMAC-SHA256(key=seed, message(attempt))
    x = the first 4 bytes of h as a big-endian unsigned 32-bit integer
    accept when x < 2**32 - (2**32 mod faces): die = x mod faces + 1; else attempt + 1

- ``seed``: the dice session's 32 secret bytes.
- ``seq``: the world's audit record number of the decision that rolls.
- ``index``: the die's place among that decision's dice (0, 1, ...).
- ``client_seed``: the text the asking player's browser added to the request; ``""`` when none.

Rejection sampling keeps every face exactly equally likely: no modulo bias.

The commitment is ``SHA-256(seed)`` as hex. It is shown as a short fingerprint: its first 16
hex digits in groups of four. The session id is the same 16 digits.

Pure: no clock, no I/O. The secret seed comes from the caller (``secrets.token_bytes`` in the
shell).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Sequence
from typing import Literal

import msgspec

from ..dice import Dice
from ..errors import BadMessage, Forbidden
from ..i18n import N_

SEED_BYTES = 32
DERIVATION = "fate-bridge die v1"
_RANGE = 2**32

Source = Literal["fair", "physical", "secret"]
"""Where a die came from: ``fair`` derived from an open dice session's seed; ``physical`` a real
die the roller entered; ``secret`` the bridge's CSPRNG (no dice session open)."""


class Draw(msgspec.Struct, kw_only=True, frozen=True):
    """One die of a decision as the audit trail keeps it beside the value (``AuditRecord.dice``).

    Its number of ``faces`` and its ``source``.
    """

    faces: int
    source: Source


def commitment(seed: bytes) -> str:
    """The commitment to ``seed``: SHA-256, hex (64 digits)."""
    return hashlib.sha256(seed).hexdigest()


def fingerprint(commitment_hex: str) -> str:
    """The short form players compare: the first 16 hex digits in groups of four
    (``"1a2b 3c4d 5e6f 7a8b"``)."""
    head = commitment_hex[:16]
    return " ".join(head[i:i + 4] for i in range(0, 16, 4))


def session_id(commitment_hex: str) -> str:
    """A dice session's id: the first 16 hex digits of its commitment."""
    return commitment_hex[:16]


def derive_die(seed: bytes, client_seed: str, world_id: str, seq: int, index: int, faces: int) -> int:
    """The die of ``faces`` sides at draw ``index`` of record ``seq`` of ``world_id``, in ``1..faces``.

    See the module docstring. Raises ``ValueError`` for ``faces < 1``.
    """
    if faces < 1 or faces > _RANGE:
        raise ValueError(f"a die has 1..{_RANGE} faces, not {faces}")
    limit = _RANGE - _RANGE % faces
    prefix = f"{DERIVATION}\n{world_id}\n{seq}\n{index}\n{faces}\n{client_seed}\n".encode()
    attempt = 0
    while True:
        digest = hmac.new(seed, prefix + str(attempt).encode(), hashlib.sha256).digest()
        x = int.from_bytes(digest[:4], "big")
        if x < limit:
            return x % faces + 1
        attempt += 1


class OpenSession(msgspec.Struct, kw_only=True, frozen=True):
    """What a decision's dice need of the world's open dice session.

    It never owns the seed: the seed is handed in only to derive.
    """

    session_id: str
    seed: bytes


class TableDice:
    """One decision's dice.

    First the roller's ``physical`` values, when given. Else dice derived from the open dice
    ``session``. Else ``fallback``, the bridge's secret dice. ``seq()`` gives the decision's audit
    record number; it is asked once, on the first derived die.

    ``required``: the world requires provable dice. Then a die with neither physical values nor an
    open session is refused (:class:`~bridge.errors.Forbidden`, field ``dice_session``). A
    physical value outside ``1..faces`` is refused, naming ``physical[i]`` and the range. Every
    die is kept in :attr:`draws` (faces and source), parallel to the recorded values.
    """

    def __init__(self, *, world_id: str, seq: Callable[[], int], client_seed: str | None,
                 session: OpenSession | None, physical: Sequence[int] | None,
                 fallback: Dice, required: bool) -> None:
        self._world_id, self._seq_of = world_id, seq
        self._seq: int | None = None
        self._client_seed = client_seed or ""
        self._session, self._physical = session, physical
        self._fallback, self._required = fallback, required
        self.draws: list[Draw] = []

    def roll(self, faces: int) -> int:
        """The next die of ``faces`` sides (see the class docstring for where it comes from)."""
        index = len(self.draws)
        if self._physical is not None:
            if index >= len(self._physical):
                raise BadMessage(N_("physical: %(given)s physical dice given, but this roll needs more: "
                                    "die %(die)s is a d%(faces)s (1..%(faces)s)"),
                                 {"given": len(self._physical), "die": index + 1, "faces": faces},
                                 field="physical")
            value = self._physical[index]
            if not 1 <= value <= faces:
                raise BadMessage(N_("physical[%(index)s]: %(value)s is not a possible d%(faces)s roll "
                                    "(allowed 1..%(faces)s)"), {"index": index, "value": value, "faces": faces},
                                 field=f"physical[{index}]")
            source: Source = "physical"
        elif self._session is not None:
            if self._seq is None:
                self._seq = self._seq_of()
            value = derive_die(self._session.seed, self._client_seed, self._world_id, self._seq,
                               index, faces)
            source = "fair"
        elif self._required:
            raise Forbidden(N_("this world rolls provable dice only: no dice session is open, so no "
                               "die can be rolled; the GM starts one (dice_session_start) and its "
                               "commitment is posted first"), field="dice_session")
        else:
            value, source = self._fallback.roll(faces), "secret"
        self.draws.append(Draw(faces=faces, source=source))
        return value

    def check_all_used(self) -> None:
        """After the decision: raise if physical values were given that no die used.

        Raises :class:`~bridge.errors.BadMessage` (field ``physical``).
        """
        if self._physical is not None and len(self._physical) != len(self.draws):
            raise BadMessage(N_("physical: %(given)s physical dice given, but this roll used %(used)s"),
                             {"given": len(self._physical), "used": len(self.draws)}, field="physical")
