"""The audit trail: what each decision read, rolled and answered, chained and re-derivable.

Pure: no I/O, no clock. The store adds the sequence number, the timestamp and the chain links. It
does so inside the decision's transaction. ``fate-bridge audit verify`` runs a recorded decision
again with :func:`rederive`. That is the same :func:`bridge.core.decide` call a live decision makes.
Its inputs are the record's reads (:class:`ReplayState`, or :class:`~bridge.derive.DerivingState`)
and its dice, as the dice table (:class:`ReplayTable`).

How a decision is recorded is :mod:`bridge.record`, beneath the core. Its names are re-exported
here, where the trail's readers have always found them.

Chain (per world): ``hash = SHA-256(prev_hash_bytes || canonical)``. ``canonical`` is the record's
JSON with sorted keys. The first record's ``prev_hash`` is 32 zero bytes (hex). Checkpoints sign
``world_id, seq, hash`` with HMAC-SHA-256. The key is kept outside the database, so a rewrite of the
whole chain is caught too.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from . import cards, core, i18n, registry, wire
from .derive import (Derived, DerivingState, Diverged, StateProblem, StoredState, compare,
                     record_event, state_digest, without_card_html)
from .dice import ScriptedDice
from .errors import Refusal
from .fairness import decide as fairness
from .fairness.provable import Draw, TableDice
from .fairness.trail import check_dice
from .heads import KEY_CHANGE, Head, KeyChange, parse_public_key, public_key_text, stored_digest, stored_hash, stored_range
from .receipts import key_id
from .record import AuditRecord, Read
from .state import R, WorldState

GENESIS_HASH = "0" * 64
CHECKPOINT_EVERY = 16  # a signed checkpoint every 16 records of a world, and at each clean stop


class ListedColumns(msgspec.Struct, frozen=True):
    """A stored audit row's own columns: what ``audit list``, export and ``audit_query`` show.

    :func:`verify_world` checks them against the signed record. ``summary`` is the summary column's
    JSON. It is empty when the row keeps none of its own; newer rows list the record's."""

    ts: str
    type: str
    event_id: str | None
    user_id: str | None
    ruleset: str | None
    actor_id: str | None
    outcome: str
    summary: bytes


def chain_hash(prev_hash: str, canonical_bytes: bytes) -> str:
    """``SHA-256(bytes.fromhex(prev_hash) || canonical_bytes)`` as hex."""
    return hashlib.sha256(bytes.fromhex(prev_hash) + canonical_bytes).hexdigest()


def checkpoint_mac(key: bytes, world_id: str, seq: int, record_hash: str) -> str:
    """HMAC-SHA-256 (hex) over ``world_id``, ``seq`` and the record hash at ``seq``."""
    message = f"{world_id}\n{seq}\n{record_hash}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


# --- replaying ---------------------------------------------------------------------------------

class ReplayState:
    """A :class:`WorldState` answering reads from a record, in order; writes are dropped.

    Raises :class:`Diverged` when the decision reads something other than what was recorded."""

    def __init__(self, world_id: str, reads: list[Read]) -> None:
        self.world_id = world_id
        self._reads = list(reads)
        self._next = 0

    def _answer(self, op: str, args: list[str | int], type: Any) -> Any:
        if self._next >= len(self._reads):
            raise Diverged(f"read {op}{tuple(args)} was not recorded")
        read = self._reads[self._next]
        if (read.op, read.args) != (op, args):
            raise Diverged(f"read {op}{tuple(args)} where the record has {read.op}{tuple(read.args)}")
        self._next += 1
        return msgspec.json.decode(read.result, type=type)

    def settings(self) -> wire.WorldSettings:
        return self._answer("settings", [], wire.WorldSettings)

    def next_seq(self) -> int:
        return self._answer("next_seq", [], int)

    def get(self, kind: str, key: str, type: type[R]) -> R | None:
        return self._answer("get", [kind, key], type | None)

    def put_settings(self, settings: wire.WorldSettings) -> None:
        pass

    def again(self) -> ReplayState:
        """A fresh replay of the same reads (a second re-derivation, under an earlier era)."""
        return ReplayState(self.world_id, self._reads)

    def put(self, kind: str, key: str, record: msgspec.Struct) -> None:
        pass

    def peek(self, kind: str, key: str, type: type[R]) -> R | None:
        return None  # a replay compares the verdict, not the columns peeks describe


class ReplayTable(TableDice):
    """A recorded decision's dice table, for :func:`rederive` (``bridge.core.decide``'s ``dice_table``).

    It is the live table (:class:`~bridge.fairness.provable.TableDice`). The record's dice stand in
    for the dice session and the bridge's secret dice. A fair die derives from its session's seed,
    which the record does not hold. So the recorded value is the table's output.
    ``bridge.fairness.trail.check_dice`` recomputes it once the seed is revealed.

    Physical dice come from the request (``physical``) and are checked as live. So a refusal of them
    re-derives: a value outside ``1..faces``, or more values than the roll used.

    A die taken from the record is drawn ``fair`` when the record says so, else ``secret``, as the
    live table marks the bridge's own dice. Then :func:`rederive` can compare re-derived and
    recorded draws. A die of other faces differs. So does a recorded ``physical`` die for a request
    without physical values.

    A decision that asks for more dice than the record holds is refused ``bad_message`` (field
    ``dice``, :func:`bridge.ruleset.rolling`). No record holds that verdict."""

    def __init__(self, record: AuditRecord, physical: list[int] | None, *, required: bool = False) -> None:
        super().__init__(world_id=record.world_id, seq=lambda: record.seq, client_seed=None,
                         session=None, physical=physical, fallback=ScriptedDice(record.dice), required=required)
        self._recorded = record.draws

    def roll(self, faces: int) -> int:
        """The next die: the request's physical value, else the recorded one."""
        value = super().roll(faces)
        index = len(self.draws) - 1
        recorded = self._recorded
        if (recorded is not None and index < len(recorded) and recorded[index].source == "fair"
                and self.draws[index].source == "secret"):
            self.draws[index] = Draw(faces=faces, source="fair")
        return value


def _no_seed(n: int) -> bytes:
    """A replay draws no dice session seed (its dice table is given)."""
    raise AssertionError("a re-derived decision draws no seed")


def _without_card_text(value: Any) -> Any:
    """``value`` with every chat card's rendered ``html`` and ``title`` dropped, at any depth.

    A card is an object with ``html``, ``title`` and ``ruleset``."""
    if isinstance(value, dict):
        is_card = {"html", "title", "ruleset"} <= value.keys()
        return {k: _without_card_text(v) for k, v in value.items()
                if not (is_card and k in ("html", "title"))}
    if isinstance(value, list):
        return [_without_card_text(v) for v in value]
    return value


def verdict(reply: bytes) -> dict[str, Any]:
    """The decision-bearing part of a reply, for every ruleset: everything but presentation.

    Every chat card's rendered text (``html``, ``title``) is dropped wherever it sits: ``card``,
    ``notice``, or nested. So a template change in a later version does not fail old records. An
    error's wording is dropped too. Its code and field may not change."""
    decoded = _without_card_text(msgspec.to_builtins(registry.bridge_decoder().decode(reply)))
    if decoded.get("type") == "error":
        decoded.pop("message", None)
    return decoded


def rederive(record: AuditRecord, state: WorldState | None = None) -> str | None:
    """Run the recorded decision again from its recorded reads and dice.

    The call is :func:`bridge.core.decide`, as for a live decision. It runs against ``state``. By
    default that is a :class:`ReplayState` of the record. ``verify`` passes a
    :class:`~bridge.derive.DerivingState`, whose writes are kept when the decision passes. The dice
    table is a :class:`ReplayTable` of the record.

    Returns None when the decision follows, else a description of the difference. It follows when
    the re-derived entry rolled the recorded dice and its reply's verdict equals the recorded one.
    Dice compare by value, and by faces and source when the record has them. Cards are not rendered:
    their text is presentation (:func:`verdict`), and rendering is most of a decision's cost.

    A record may not follow from the current rules. Then it is tried again under each earlier
    :class:`~bridge.ruleset.Era` of its ruleset (e.g. hmtw before H14), on a fresh copy of the
    state. It passes when its reply and writes follow from one of them. That era's writes are kept."""
    message_bytes = bytes(record.message)
    try:
        message = registry.decode_client(message_bytes)
    except Refusal as exc:
        return f"the recorded message no longer decodes: {exc.message}"
    if state is None:
        state = ReplayState(record.world_id, record.reads)
    difference, commit = _rederive_once(record, message, message_bytes, state)
    if difference is not None and isinstance(state, (ReplayState, DerivingState)):
        for era in registry.eras_of(message):
            again = state.again()
            with era.rules():
                other, commit_era = _rederive_once(record, message, message_bytes, again)
            if other is None:
                commit = commit_era
                difference = None
                break
    if commit is not None:
        commit()
    return difference


def _rederive_once(record: AuditRecord, message: wire.Request, message_bytes: bytes,
                   state: WorldState) -> tuple[str | None, Callable[[], None] | None]:
    """One re-derivation of ``record`` (:func:`rederive`) against ``state``.

    Returns the difference (None when it follows) and what keeps its writes in a
    :class:`DerivingState`. The second is None when there is nothing to keep: a refusal, or another
    state."""
    # Against the chain's state (verify), the dice settings the live table read: physical dice of
    # a ruleset they do not allow, and a die of a provable world with no dice session, are refused
    # again as they were live; a lone record (no chain) is taken as it is.
    settings = None
    if isinstance(state, DerivingState):
        settings = state.chained(fairness.SETTINGS_KIND, "world", fairness.wire.DiceSettings) or fairness.DEFAULT_SETTINGS
    table = ReplayTable(record, getattr(message, "physical", None),
                        required=settings is not None and settings.provable and record.dice_session is None)

    def replay_table(state: WorldState) -> tuple[TableDice, str | None]:
        if settings is not None:  # inside the decision: its Forbidden refuses it as the live table's did
            fairness.check_physical(message, settings, registry.ruleset_of)
        return table, record.dice_session

    try:
        with cards.unrendered():
            decision = core.decide(message, state, table, message_bytes=message_bytes, new_seed=_no_seed,
                                   language=i18n.DEFAULT, dice_table=replay_table)
    except Diverged as exc:
        return f"the decision no longer follows from its inputs: {exc}", None
    commit = state.commit if isinstance(state, DerivingState) and decision.ok else None
    entry = decision.audit
    assert entry is not None, "core.decide audits every decision"
    if entry.dice != record.dice:
        return f"the decision rolled {entry.dice} where the record has {record.dice}", commit
    if record.draws is not None and entry.draws != (record.draws or None):
        shown = [f"d{d.faces} {d.source}" for d in entry.draws or ()]
        return (f"the decision drew {shown} where the record has "
                f"{[f'd{d.faces} {d.source}' for d in record.draws]}"), commit
    recorded_reply = bytes(record.reply)
    plain = without_card_html(recorded_reply)  # the common case: equal but for the card text
    if plain == entry.reply:
        return None, commit
    expected, recorded = verdict(entry.reply), verdict(recorded_reply)
    if expected != recorded:
        keys = sorted(k for k in expected.keys() | recorded.keys() if expected.get(k) != recorded.get(k))
        return "recorded outputs do not follow from the recorded inputs and dice: " + ", ".join(
            f"{k} recorded {recorded.get(k)!r}, re-derived {expected.get(k)!r}" for k in keys
        ), commit
    return None, commit


# --- verifying ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a world's trail.

    ``seq`` is the record it is found at; 0 means the world as a whole. ``kind`` is one of ``gap``,
    ``link``, ``hash``, ``stored``, ``record``, ``columns``, ``checkpoint``, ``head``, ``key``,
    ``rederive``, ``dice``, ``state``. ``detail`` is a sentence."""

    seq: int
    kind: str
    detail: str


@dataclass(slots=True)
class WorldReport:
    """The verification of one world's trail.

    It holds the record count and the last signed checkpoint or head. It lists the key ids its heads
    are signed by, and the problems found (empty means pass). Notes do not fail it. ``derived`` is
    the state its chain derives, for ``audit repair``."""

    world_id: str
    records: int = 0
    last_checkpoint: int | None = None
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    key_ids: list[str] = field(default_factory=list)
    derived: Derived | None = None

    @property
    def ok(self) -> bool:
        """True when the trail passed: no problem found (notes do not fail it)."""
        return not self.problems

    @property
    def chain_ok(self) -> bool:
        """True when the chain itself holds: every problem, if any, is in the state rows.

        Then the state it derives can be trusted, and ``audit repair`` may write it back."""
        return all(p.kind == "state" for p in self.problems)


@dataclass(slots=True)
class Trail:
    """What verification reads of one world: from the database (read-only), or from an export.

    - ``rows``: ``(seq, canonical record bytes, prev_hash, hash, listed columns or None)``, in seq
      order. ``prev_hash`` is '' when the record before is gone.
    - ``checkpoints``: HMAC ``(seq, hash, mac)``.
    - ``heads``: Ed25519 signed heads.
    - ``state``: the stored state rows. None for an export, which has none.
    - ``registered``: the world has a row in the registry (``worlds``), removed or not.
    - ``unsealed``: seq -> why that row's stored bytes are not the frame the sealed record is
      stored as (bridge.store.blobs.frame_problem). Filled by the time ``rows`` yields the row.
    - ``stored``: seq -> the row's record bytes as stored in the database. Version 2 heads seal
      them. Filled the same way, and taken out as read. None for an export, which has none.
    - ``written_as(stored)``: the bytes this bridge would store for the record those bytes decode
      to (None: cannot tell). It names which record of a differing range was changed
      (bridge.store.blobs.written_as)."""

    world_id: str
    rows: Iterable[tuple[int, bytes, str, str, ListedColumns | None]]
    checkpoints: list[tuple[int, str, str]]
    heads: list[Head]
    state: StoredState | None = None
    registered: bool = True
    unsealed: dict[int, str] = field(default_factory=dict)
    stored: dict[int, bytes] | None = None
    written_as: Callable[[bytes], bytes | None] | None = None


_record_decoder = msgspec.json.Decoder(AuditRecord)
_key_change_decoder = msgspec.json.Decoder(KeyChange)
_columns_decoder = msgspec.json.Decoder(wire.AuditColumns)


def _listed_summary(summary: bytes) -> wire.AuditColumns | None:
    """A summary column's own copy decoded (None: unreadable)."""
    try:
        return _columns_decoder.decode(summary)
    except msgspec.MsgspecError:
        return None


def _column_differences(record: AuditRecord, listed: ListedColumns) -> list[str]:
    """The listed columns of a row that disagree with its signed record."""
    signed = {"ts": record.ts, "type": record.type, "event_id": record.event_id,
              "user_id": record.user_id, "ruleset": record.summary.ruleset,
              "actor_id": record.summary.actor_id, "outcome": record.summary.outcome}
    shown = {"ts": listed.ts, "type": listed.type, "event_id": listed.event_id,
             "user_id": listed.user_id, "ruleset": listed.ruleset, "actor_id": listed.actor_id,
             "outcome": listed.outcome}
    differences = [name for name in signed if signed[name] != shown[name]]
    if listed.summary and _listed_summary(listed.summary) != record.summary:
        differences.append("summary")
    return differences


def verify_world(trail: Trail, key: bytes | None, public_key: Ed25519PublicKey | None = None,
                 progress: Callable[[int], None] | None = None) -> WorldReport:
    """Verify one world's trail.

    ``key`` is the HMAC checkpoint key of older trails. With None, HMAC checkpoints cannot be
    checked, a problem when there are any. ``public_key`` is the Ed25519 key the trail must be
    signed by now. With None, whatever key its heads carry is used, and noted. ``progress(records)``
    is called now and then.

    It finds:

    - missing sequence numbers (a deleted record).
    - links that do not point at the previous record (reordered or deleted).
    - hashes that do not match the record's bytes (edited).
    - records whose content disagrees with their row: its seq, world, or the columns ``audit list``
      shows.
    - stored bytes that are not the frame the record is stored as (``trail.unsealed``).
    - stored bytes that differ from what a version 2 head sealed (``trail.stored``,
      :func:`_stored_differs`).
    - checkpoints or heads missing every ``CHECKPOINT_EVERY`` records.
    - heads or checkpoints whose signature does not verify, or that sign another hash (rewritten).
    - heads past the end of the chain (its last records deleted).
    - heads signed by a key other than the chain's key changes allow, or than ``public_key`` (a
      swapped key).
    - decisions whose outputs do not follow from their inputs and dice (:func:`rederive`).
    - fair dice that the revealed seed of their session does not give
      (:func:`bridge.fairness.trail.check_dice`).
    - reads that differ from the state the records before produced (state edited between
      decisions).
    - stored state rows that differ from what the chain produces (:func:`bridge.derive.compare`)."""
    world_id = trail.world_id
    report = WorldReport(world_id)
    derived = Derived()
    state_problems: list[StateProblem] = []
    hashes: dict[int, str] = {}
    key_changes: list[tuple[int, KeyChange]] = []
    decoded: list[AuditRecord] = []
    expected_seq, expected_prev = 1, GENESIS_HASH
    problems = report.problems
    sealed_stored = {head.seq: head.stored_digest for head in trail.heads if head.stored_digest is not None}
    window: list[tuple[int, bytes, bytes]] = []  # (seq, stored bytes, record) of the current stored range
    stored_differs: dict[int, str] = {}  # head seq -> why its range's stored bytes differ
    for seq, record_bytes, prev_hash, record_hash, listed in trail.rows:
        report.records += 1
        if progress is not None and report.records % 1000 == 0:
            progress(report.records)
        if seq != expected_seq:
            problems.append(Problem(seq, "gap", f"records {expected_seq}..{seq - 1} are missing before record {seq}"))
        if prev_hash != expected_prev:
            problems.append(Problem(seq, "link", f"record {seq} does not link to the record before it"))
        if prev_hash and chain_hash(prev_hash, record_bytes) != record_hash:  # '': the record before is gone
            problems.append(Problem(seq, "hash", f"record {seq} was changed after it was written (hash mismatch)"))
        if (unsealed := trail.unsealed.get(seq)) is not None:
            problems.append(Problem(seq, "stored", f"record {seq}'s stored bytes are not what was sealed: "
                                                   f"{unsealed}"))
        stored = None if trail.stored is None else trail.stored.pop(seq, b"")  # (taken out: read once)
        if stored is not None and sealed_stored:
            first = (seq - 1) // CHECKPOINT_EVERY * CHECKPOINT_EVERY + 1
            if window and window[0][0] < first:
                window.clear()
            window.append((seq, stored, record_bytes))
            if seq in sealed_stored:
                why = _stored_differs(trail, seq, sealed_stored[seq], window)
                if why is not None:
                    stored_differs[seq] = why
        hashes[seq] = record_hash
        expected_seq, expected_prev = seq + 1, record_hash
        try:
            record = _record_decoder.decode(record_bytes)
        except msgspec.MsgspecError as exc:
            problems.append(Problem(seq, "record", f"record {seq} is unreadable: {exc}"))
            continue
        decoded.append(record)
        if (record.world_id, record.seq) != (world_id, seq):
            problems.append(Problem(seq, "record", f"record {seq} claims to be {record.world_id} #{record.seq}"))
        if listed is not None:
            edited = _column_differences(record, listed)
            if edited:
                problems.append(Problem(seq, "columns", f"record {seq}'s listed {', '.join(edited)} "
                                                        "differ from what was signed (edited after it was written)"))
        if record.type == KEY_CHANGE:
            try:
                key_changes.append((seq, _key_change_decoder.decode(record.message)))
            except msgspec.MsgspecError as exc:
                problems.append(Problem(seq, "key", f"record {seq} is a key change that does not read: {exc}"))
            continue
        state = DerivingState(world_id, seq, record.reads, derived, state_problems)
        difference = rederive(record, state)
        if difference:
            problems.append(Problem(seq, "rederive", f"record {seq}: {difference}"))
        record_event(derived, record.event_id, bytes(record.reply), seq)
    last_seq = expected_seq - 1
    dice = check_dice(decoded)  # every fair die of a revealed dice session, recomputed
    problems.extend(Problem(seq, "dice", detail) for seq, detail in dice.problems)
    report.notes.extend(dice.notes)
    if progress is not None:
        progress(report.records)
    _check_checkpoints(report, trail, hashes, last_seq, key)
    _check_heads(report, trail, hashes, last_seq, key_changes, public_key, stored_differs)
    if trail.state is not None:
        state_problems.extend(compare(derived, trail.state))
        state_problems.extend(StateProblem(0, f"state row {row}'s stored bytes are not what was written: {why}")
                              for row, why in trail.state.unsealed)
        latest = max(trail.heads, key=lambda h: h.seq, default=None)
        if (latest is not None and latest.seq == last_seq and latest.state_digest is not None
                and latest.signed() and latest.state_digest != state_digest(trail.state)):
            state_problems.append(StateProblem(0, f"the stored state differs from what the head at record "
                                                  f"{latest.seq} sealed: it was edited after the bridge stopped"))
    for problem in state_problems:
        problems.append(Problem(problem.seq, "state", problem.detail))
    if not trail.registered:
        problems.append(Problem(0, "world", f"world {world_id!r} has a trail but no row in the world registry"))
    report.derived = derived
    problems.sort(key=lambda p: (p.kind == "state", p.seq))  # the chain's own first: they explain the state's
    return report


def _check_checkpoints(report: WorldReport, trail: Trail, hashes: dict[int, str], last_seq: int,
                       key: bytes | None) -> None:
    """Check HMAC checkpoints, and that every ``CHECKPOINT_EVERY``-th record is signed.

    HMAC checkpoints come from older bridges, and from bridges given an HMAC key. A record is signed
    by a checkpoint or a head."""
    signed = {seq: (record_hash, mac) for seq, record_hash, mac in trail.checkpoints}
    covered = set(signed) | {head.seq for head in trail.heads}
    if signed and key is None and not trail.heads:
        report.problems.append(Problem(0, "checkpoint", "the audit key is missing: checkpoints cannot be checked (use --audit-key)"))
    for seq in range(CHECKPOINT_EVERY, last_seq + 1, CHECKPOINT_EVERY):
        if seq not in covered:
            report.problems.append(Problem(seq, "checkpoint", f"the checkpoint at record {seq} is missing"))
    if key is None:
        return
    for seq, (record_hash, mac) in sorted(signed.items()):
        if not hmac.compare_digest(checkpoint_mac(key, trail.world_id, seq, record_hash), mac):
            report.problems.append(Problem(seq, "checkpoint", f"the checkpoint at record {seq} is not signed by this bridge's key"))
        elif seq > last_seq:
            report.problems.append(Problem(seq, "checkpoint", f"the checkpoint at record {seq} signs a record the chain "
                                                              f"no longer has (it ends at {last_seq}): records were deleted"))
        elif hashes.get(seq) != record_hash:
            report.problems.append(Problem(seq, "checkpoint", f"record {seq} differs from what the checkpoint signed: the chain was rewritten"))
        else:
            report.last_checkpoint = max(report.last_checkpoint or 0, seq)
    if last_seq and report.last_checkpoint != last_seq and not trail.heads:
        report.notes.append(f"records {(report.last_checkpoint or 0) + 1}..{last_seq} are chained but not "
                            "yet covered by a signed checkpoint")


def _stored_differs(trail: Trail, seq: int, sealed: str, window: list[tuple[int, bytes, bytes]]) -> str | None:
    """Why the stored bytes a version 2 head at record ``seq`` seals are not the ones it sealed.

    Returns None when they are. The range is :func:`bridge.heads.stored_range`. ``sealed`` is the
    head's stored digest. ``window`` is ``(seq, stored bytes, record)`` of the records read of that
    range. The answer names the records whose stored bytes differ from what ``trail.written_as``
    gives, else the range. The bridge that wrote them normally used the same zstd."""
    covered = stored_range(seq, CHECKPOINT_EVERY)
    rows = [row for row in window if row[0] in covered]
    if stored_digest(stored_hash(stored) for _, stored, _ in rows) == sealed:
        return None
    span = f"{covered.start}..{seq}" if covered.start != seq else f"{seq}"
    present = {row[0] for row in rows}
    missing = [n for n in covered if n not in present]
    if missing:  # reported as a gap too
        return (f"the signed head at record {seq} sealed the stored bytes of records {span}, and record "
                f"{missing[0]} of them is missing")
    written_as = trail.written_as or (lambda stored: None)
    changed = [n for n, stored, record in rows
               if (ours := written_as(stored)) is not None and ours != stored]
    if changed:
        names = ", ".join(map(str, changed))
        return (f"record{'s' if len(changed) > 1 else ''} {names}'s stored bytes are not what the signed head at "
                f"record {seq} sealed: not the zstd frame this bridge writes for {'their' if len(changed) > 1 else 'its'} "
                "record (changed after it was written, though it may still decode to the sealed record)")
    return (f"the stored bytes of one of records {span} are not what the signed head at record {seq} "
            "sealed (changed after they were written; each is the zstd frame this bridge writes for its "
            "record, so which one cannot be told)")


def _check_heads(report: WorldReport, trail: Trail, hashes: dict[int, str], last_seq: int,
                 key_changes: list[tuple[int, KeyChange]], public_key: Ed25519PublicKey | None,
                 stored_differs: dict[int, str]) -> None:
    """Check Ed25519 heads: each signature, the hash it signs, and the key each period must use.

    The key changes in the chain set the periods. The current key must be ``public_key`` when given.
    Also checks the stored bytes a version 2 head seals (``stored_differs``: head seq -> why they
    differ)."""
    problems = report.problems
    # (first record, key) of each key period; None: the trail's first key, known from its heads
    periods: list[list] = [[1, key_changes[0][1].old_public_key if key_changes else None]]
    periods += [[seq, change.new_public_key] for seq, change in key_changes]
    last_good = 0
    for head in sorted(trail.heads, key=lambda h: h.seq):
        period = next(p for p in reversed(periods) if p[0] <= head.seq)
        if period[1] is None and head.signed():
            period[1] = head.public_key
        expected = period[1]
        if not head.signed():
            problems.append(Problem(head.seq, "head", f"the signed head at record {head.seq} does not verify: its signature was forged or edited"))
        elif head.public_key != expected:
            problems.append(Problem(head.seq, "key", f"the head at record {head.seq} is signed by key {head.key_id}, not by the "
                                                     f"key the chain names for that record: a key was swapped"))
        elif head.seq > last_seq:
            problems.append(Problem(head.seq, "head", f"the head signed at record {head.seq}, but the chain ends at record "
                                                      f"{last_seq}: records {last_seq + 1}..{head.seq} were deleted"))
        elif hashes.get(head.seq) != head.hash:
            problems.append(Problem(head.seq, "head", f"record {head.seq} differs from what its signed head holds: the chain was rewritten"))
        else:
            last_good = max(last_good, head.seq)
            if (why := stored_differs.get(head.seq)) is not None:
                problems.append(Problem(head.seq, "stored", why))
        if head.key_id not in report.key_ids:
            report.key_ids.append(head.key_id)
    if last_good:
        report.last_checkpoint = max(report.last_checkpoint or 0, last_good)
    current = periods[-1][1]
    if public_key is not None and current is not None and current != public_key_text(public_key):
        problems.append(Problem(0, "key", f"the trail is signed by key {key_id_of(current)}, not by the given key "
                                          f"{key_id(public_key)}: a swapped key, or the wrong --public-key"))
    if trail.heads and public_key is None:
        report.notes.append("no public key given: heads checked against the key they carry "
                            f"({', '.join(report.key_ids)}); compare it with `fate-bridge audit public-key`")
    if last_seq and last_good != last_seq and trail.heads:
        report.notes.append(f"records {last_good + 1}..{last_seq} are chained but not yet covered by a signed head")


def key_id_of(text: str) -> str:
    """The key id (:func:`bridge.receipts.key_id`) of a public key in its text form.

    ``"?"`` when the text is not a public key."""
    try:
        return key_id(parse_public_key(text))
    except ValueError:
        return "?"
