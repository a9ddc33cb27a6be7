"""Reading dice out of an audit trail.

It recomputes every die of a revealed dice session from the trail and the revealed seed alone.
It counts physical dice and GM overrides per session.

Pure: it takes decoded :class:`~bridge.audit.AuditRecord` values, or any object with their
fields. They come from the store or from an exported trail. :func:`records_of_export` is the one
place that reads the export format, today ``audit export --format jsonl``. ``fate-bridge audit
verify`` runs :func:`check_dice` on every world (``bridge.audit.verify_world``). The ``/verify``
page does the same in a browser.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..record import AuditRecord
from .provable import derive_die, session_id as session_id_of

START, END, OVERRIDE = "dice_session_start", "dice_session_end", "gm_override"


@dataclass(slots=True)
class DiceSession:
    """One dice session as the trail shows it: where it was committed and revealed, what it holds."""

    session_id: str
    commitment: str | None = None
    start_seq: int | None = None
    reveal_seq: int | None = None
    seed: str | None = None
    fair: int = 0
    physical: int = 0
    overrides: int = 0


@dataclass(slots=True)
class DiceCheck:
    """The dice of one world's trail.

    Its sessions by id. ``problems`` as ``(seq, sentence)``, each naming its record. ``notes``: dice
    that cannot be checked yet.
    """

    sessions: dict[str, DiceSession] = field(default_factory=dict)
    problems: list[tuple[int, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    verified_dice: int = 0


def _json(raw: Any) -> dict[str, Any]:
    value = msgspec.json.decode(bytes(raw)) if not isinstance(raw, dict) else raw
    return value if isinstance(value, dict) else {}


def check_dice(records: Iterable[Any]) -> DiceCheck:
    """Check the dice of one world's records, in ``seq`` order.

    For each revealed session:

    - The revealed seed must hash to the commitment its start record posted. Else: a problem at the
      start record.
    - Every ``fair`` die of every record in the session must equal the die derived from the seed,
      the request's ``client_seed`` and the record's place. Else: a problem naming the record and
      the die.
    - A die marked ``secret`` inside a session is a problem. Every die of an open session is
      derived or physical.

    Fair dice of a session not yet revealed are noted, not failed. So is each revealed session's
    count of recomputed dice. Records whose ``dice`` and ``draws`` differ in length are problems.
    So are records whose fair dice name no committed session.
    """
    check = DiceCheck()
    records = list(records)

    def session(sid: str) -> DiceSession:
        return check.sessions.setdefault(sid, DiceSession(sid))

    for record in records:
        if not record.ok or record.type not in (START, END):
            continue
        reply = _json(record.reply)
        sid = reply.get("session_id")
        if not isinstance(sid, str):
            check.problems.append((record.seq, f"record {record.seq}: a {record.type} reply without a session_id"))
            continue
        found = session(sid)
        if record.type == START:
            found.commitment, found.start_seq = reply.get("commitment"), record.seq
        else:
            found.seed, found.reveal_seq = reply.get("seed"), record.seq
            if reply.get("commitment") != found.commitment:
                check.problems.append((record.seq, f"record {record.seq}: the reveal of dice session {sid} "
                                                   "names another commitment than its start record posted"))

    for found in check.sessions.values():
        if found.seed is None:
            continue
        where = found.start_seq if found.start_seq is not None else found.reveal_seq or 0
        try:
            seed_ok = found.commitment is not None and hmac.compare_digest(
                hashlib.sha256(bytes.fromhex(found.seed)).hexdigest(), found.commitment)
        except ValueError:
            seed_ok = False
        if not seed_ok or session_id_of(found.commitment or "") != found.session_id:
            check.problems.append((where, f"record {where}: the commitment of dice session {found.session_id} "
                                          f"does not match the seed revealed at record {found.reveal_seq}"))
            found.seed = None  # nothing of it can be trusted

    unrevealed: dict[str, int] = {}
    for record in records:
        sid = record.dice_session
        if record.ok and sid is not None and record.type == OVERRIDE:
            session(sid).overrides += 1
        draws: Sequence[Any] | None = record.draws
        if not draws:
            continue
        if len(draws) != len(record.dice):
            check.problems.append((record.seq, f"record {record.seq}: {len(record.dice)} dice but {len(draws)} draws"))
            continue
        client_seed = _json(record.message).get("client_seed") or ""
        for index, (value, draw) in enumerate(zip(record.dice, draws)):
            if draw.source == "secret" and sid is not None:
                check.problems.append((record.seq, f"record {record.seq}: die {index + 1} is marked secret inside "
                                                   f"dice session {sid}, where every die is derived"))
            if draw.source == "physical" and sid is not None:
                session(sid).physical += 1
            if draw.source != "fair":
                continue
            if sid is None or sid not in check.sessions or check.sessions[sid].start_seq is None:
                check.problems.append((record.seq, f"record {record.seq}: die {index + 1} is marked fair but "
                                                   f"no dice session {sid} was committed before it"))
                continue
            found = check.sessions[sid]
            found.fair += 1
            if found.start_seq is not None and record.seq < found.start_seq:
                check.problems.append((record.seq, f"record {record.seq}: die {index + 1} was rolled before "
                                                   f"dice session {sid} was committed (record {found.start_seq})"))
            if found.seed is None:
                unrevealed[sid] = unrevealed.get(sid, 0) + 1
                continue
            expected = derive_die(bytes.fromhex(found.seed), client_seed, record.world_id, record.seq,
                                  index, draw.faces)
            if expected != value:
                check.problems.append((record.seq, f"record {record.seq}: die {index + 1} (d{draw.faces}) "
                                                   f"recorded {value}, the revealed seed of dice session "
                                                   f"{sid} gives {expected}"))
            else:
                check.verified_dice += 1
    for found in check.sessions.values():
        if found.seed is not None:
            check.notes.append(f"dice session {found.session_id} (records {found.start_seq}..{found.reveal_seq}): "
                               f"{found.fair} fair dice recomputed from its revealed seed")
    for sid, count in sorted(unrevealed.items()):
        check.notes.append(f"dice session {sid}: {count} fair dice wait for its reveal (dice_session_end)")
    check.problems.sort()
    return check


def overrides_per_session(records: Iterable[Any]) -> dict[str | None, int]:
    """How many GM overrides each dice session holds, from a world's audit records. For ``audit report``.

    Key None: outside any session. Refused overrides do not count.
    """
    counts: dict[str | None, int] = {}
    for record in records:
        if record.type == OVERRIDE and record.ok:
            counts[record.dice_session] = counts.get(record.dice_session, 0) + 1
    return counts


def physical_per_session(records: Iterable[Any]) -> dict[str | None, int]:
    """How many physical dice each dice session holds (key None: outside any session)."""
    counts: dict[str | None, int] = {}
    for record in records:
        physical = sum(1 for d in record.draws or () if d.source == "physical")
        if physical:
            counts[record.dice_session] = counts.get(record.dice_session, 0) + physical
    return counts


class _ExportLine(msgspec.Struct):
    """One line of an exported trail, as read here: its record. The line's other fields are skipped."""

    record: AuditRecord


def records_of_export(text: str) -> list[Any]:
    """Decoded audit records of an exported trail, oldest first.

    The trail is ``fate-bridge audit export --format jsonl``: one ``{"record": {...}, ...}`` per
    line. This is the one reader of the export format. So a new format, the signed trail file
    (:mod:`bridge.trail_file`), is read here. Raises ``ValueError`` naming the line for a line that
    is not a record.
    """
    decoder = msgspec.json.Decoder(_ExportLine)
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(decoder.decode(line).record)
        except msgspec.MsgspecError as exc:
            raise ValueError(f"line {number} of the export is not an audit record: {exc}") from None
    return sorted(records, key=lambda r: (r.world_id, r.seq))
