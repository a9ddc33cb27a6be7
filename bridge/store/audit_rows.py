"""The SQLite store's audit trail: appending chained records, signed checkpoints, listing, verifying.

The chain itself is :mod:`bridge.audit`, pure. This is a mixin of
:class:`~bridge.store.sqlite.SQLiteStore`. Its ``*_sync`` methods run on the store's writer
thread; the async ones are the :class:`~bridge.store.base.Store` methods.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .. import __version__, audit, wire
from ..derive import StoredState, as_stored, state_digest
from ..errors import ConfigError, SigningKeyChanged, WorldStateMismatch
from ..heads import KEY_CHANGE, Head, KeyChange, public_key_text, sign_head, stored_digest, stored_hash, stored_range
from ..receipts import key_id
from ..record import AuditEntry, AuditRecord, canonical, sorted_json
from .base import AuditFilter, AuditRow
from .blobs import frame_problem, pack, pack_record, unpack, written_as
from .codecs import _summary_decoder
from .schema import INSERT_EVENT, fold_tail, utc_now

if TYPE_CHECKING:
    from typing import TypeVar

    T = TypeVar("T")

CHECKPOINT_EVERY = audit.CHECKPOINT_EVERY
# An audit row's prev_hash, in a SELECT ... FROM audit: rows of older bridges store it;
# later rows store '' and link to the hash of the world's record before (the genesis hash for
# record 1). '' when that record is gone: `audit verify` reports the gap and the broken link.
PREV_HASH = ("CASE WHEN prev_hash <> '' THEN prev_hash WHEN seq = 1 THEN '" + audit.GENESIS_HASH + "' ELSE"
             " coalesce((SELECT p.hash FROM audit p WHERE p.world_id = audit.world_id AND p.seq = audit.seq - 1),"
             " '') END")
_INSERT_CHECKPOINT = ("INSERT INTO checkpoints (world_id, seq, hash, mac, ts) VALUES (?,?,?,?,?)"
                      " ON CONFLICT (world_id, seq) DO NOTHING")
_INSERT_HEAD = ("INSERT INTO heads (world_id, seq, hash, state_digest, public_key, sig, ts, stored_digest)"
                " VALUES (?,?,?,?,?,?,?,?) ON CONFLICT (world_id, seq) DO UPDATE SET hash = excluded.hash,"
                " state_digest = excluded.state_digest, public_key = excluded.public_key, sig = excluded.sig,"
                " ts = excluded.ts, stored_digest = excluded.stored_digest")


class Executes(Protocol):
    """A connection as the shared SQL uses it (``?`` placeholders).

    sqlite3's, or PostgreSQL's through bridge/store/postgres.py's ``_PgConnection``.
    """

    def execute(self, sql: str, params: Any = ..., /) -> Any: ...


class Sealed(msgspec.Struct, frozen=True):
    """An audit record made ready for its batch (:meth:`AuditRows._seal`).

    It holds its world ``seq``, its chain ``hash`` and the ``audit`` row to insert. It also holds the
    ``checkpoints`` row and the signed ``heads`` row; None when none is due.
    """

    seq: int
    hash: str
    row: tuple
    checkpoint: tuple | None
    head: tuple | None = None


class AuditRows:
    """The audit and checkpoints tables (see :class:`~bridge.store.base.Store`)."""

    _conn: sqlite3.Connection | None
    # Each backend's (bridge/store/sqlite.py, postgres.py): the SQL appending a record, and
    # whether its rows go to the tails first (SQLite's audit_tail and records_tail, schema 9).
    _insert_audit: str
    _tail: bool
    audit_key: bytes | None
    signing_key: Ed25519PrivateKey | None

    if TYPE_CHECKING:
        async def _run(self, fn: Callable[..., T], *args: object) -> T: ...
        def _transaction(self, work: Callable[[sqlite3.Connection], T]) -> T: ...
        @staticmethod
        def _require_world(conn: sqlite3.Connection, world_id: str, registered: bool) -> None: ...

    def _seal(self, world_id: str, entry: AuditEntry, ts: str, head: tuple[int, str],
              window: list[bytes]) -> Sealed:
        """The receipt hook: make ``entry``, decided at UTC time ``ts``, the world's next record after ``head``.

        ``head`` is the seq and hash of the world's last record. The new record's seq, canonical bytes
        and chain hash are known here, before its batch is committed. Its reply is sent after. Pure (no
        SQL).

        Returns the row to insert. It also returns the signed checkpoint row when the record is a
        multiple of ``CHECKPOINT_EVERY`` and the store has an audit key. With a signing key, that is a
        version 2 head.

        ``window`` is the world's ``WorldCache.window``: the :func:`~bridge.heads.stored_hash` of each
        record of this record's :func:`~bridge.heads.stored_range` before it. This record's hash is
        added to it, and it is emptied after a multiple of ``CHECKPOINT_EVERY``. So the head seals the
        frames the batch writes without reading them back.
        """
        seq, prev_hash = head[0] + 1, head[1]
        record = AuditRecord(
            world_id=world_id,
            seq=seq,
            ts=ts,
            bridge_version=__version__,
            type=entry.type,
            event_id=entry.event_id,
            user_id=entry.user_id,
            message=msgspec.Raw(entry.message),
            reads=entry.reads,
            dice=entry.dice,
            reply=msgspec.Raw(entry.reply),
            ok=entry.ok,
            summary=entry.summary,
            draws=entry.draws,
            dice_session=entry.dice_session,
        )
        canonical_bytes = canonical(record)
        record_hash = audit.chain_hash(prev_hash, canonical_bytes)
        summary = entry.summary
        # Stored once: the summary is the record's (row_summary), the prev_hash the
        # hash of the row before (PREV_HASH), so both columns stay empty.
        stored = pack(canonical_bytes, "audit", summary.ruleset)
        row = (world_id, seq, ts, entry.type, entry.event_id, entry.user_id, summary.ruleset,
               summary.actor_id, summary.outcome, b"", stored, "", record_hash)
        window.append(stored_hash(stored))
        checkpoint: tuple | None = None
        head_row: tuple | None = None
        if seq % CHECKPOINT_EVERY == 0:
            if self.audit_key is not None:
                mac = audit.checkpoint_mac(self.audit_key, world_id, seq, record_hash)
                checkpoint = (world_id, seq, record_hash, mac, ts)
            if self.signing_key is not None:
                digest = stored_digest(window)
                signed = sign_head(self.signing_key, world_id, seq, record_hash, None, digest)
                head_row = (world_id, seq, record_hash, None, signed.public_key, signed.sig, ts, digest)
            window.clear()
        return Sealed(seq, record_hash, row, checkpoint, head_row)

    def _write_sealed(self, conn: sqlite3.Connection, sealed: list[Sealed]) -> None:
        """Insert a batch's sealed records, their checkpoints and signed heads, inside its transaction.

        A record whose (world, seq) is in the table already raises ``sqlite3.IntegrityError``, failing
        the batch. Another process wrote the world, and its row is not folded yet. A folded one is
        found by the batch's ``_check_heads``.
        """
        conn.executemany(self._insert_audit, [s.row for s in sealed])
        checkpoints = [s.checkpoint for s in sealed if s.checkpoint is not None]
        if checkpoints:
            conn.executemany(_INSERT_CHECKPOINT, checkpoints)
        heads = [s.head for s in sealed if s.head is not None]
        if heads:
            conn.executemany(_INSERT_HEAD, heads)

    def _append_audit(self, conn: sqlite3.Connection, world_id: str, entry: AuditEntry, ts: str) -> tuple[int, str]:
        """Append ``entry`` to the world's chain straight in the file, inside the caller's transaction.

        For ``audit new-key``'s key change: no world is loaded in memory then. Returns the record's seq
        and chain hash.
        """
        head = conn.execute("SELECT seq, hash FROM audit WHERE world_id = ? ORDER BY seq DESC LIMIT 1",
                            (world_id,)).fetchone()
        head = (head[0], head[1]) if head else (0, audit.GENESIS_HASH)
        sealed = self._seal(world_id, entry, ts, head, window_hashes(conn, world_id, head[0]))
        self._write_sealed(conn, [sealed])
        return sealed.seq, sealed.hash

    def _checkpoint(self, conn: sqlite3.Connection, world_id: str, seq: int, record_hash: str,
                    digest: str | None = None) -> None:
        """Sign the world's chain at record ``seq``.

        With an HMAC key, an HMAC checkpoint. With the signing key, an Ed25519 head. ``digest`` seals the
        state after that record. The head seals the stored bytes of its range, read from the rows.
        """
        now = utc_now()
        if self.audit_key is not None:
            mac = audit.checkpoint_mac(self.audit_key, world_id, seq, record_hash)
            conn.execute(_INSERT_CHECKPOINT, (world_id, seq, record_hash, mac, now))
        if self.signing_key is not None:
            stored = stored_digest(stored_hashes(conn, world_id, stored_range(seq, CHECKPOINT_EVERY)))
            head = sign_head(self.signing_key, world_id, seq, record_hash, digest, stored)
            conn.execute(_INSERT_HEAD, (world_id, seq, record_hash, digest, head.public_key, head.sig, now, stored))

    def _checkpoint_heads_sync(self) -> None:
        """At a clean stop, sign each world's latest record with the digest of its state.

        So the tail of the chain is covered, and the next start can check the state cheaply. Signed are
        the worlds this process loaded (state checked against chain, ``_state_guard``) and decided in
        since their last such head. A world it never loaded, or refused, is not signed. A digest of
        state nobody checked would seal an offline edit as the bridge's.
        """
        if (self.audit_key is None and self.signing_key is None) or self._conn is None:
            return

        checked = sorted(self.__dict__.get("_state_checked", ()))

        def work(conn: sqlite3.Connection) -> None:
            for world_id, seq, record_hash in _chain_tails(conn, self._closing_worlds(conn, checked)):
                try:
                    self._key_guard(conn, world_id)
                except SigningKeyChanged:
                    continue  # the new key's holder signs it
                head = _latest_head(conn, world_id)
                if head is not None and head.seq == seq and head.state_digest is not None and head.signed():
                    continue  # signed at a stop already, and nothing decided since
                self._checkpoint(conn, world_id, seq, record_hash, state_digest(stored_state(conn, world_id)))

        self._transaction(work)

    def _closing_worlds(self, conn: sqlite3.Connection, checked: list[str]) -> list[str]:
        """Of the worlds this process ``checked``, those :meth:`_checkpoint_heads_sync` signs at close.

        Here, all of them. A backend shared by several processes narrows it to its own.
        """
        return checked

    def _event_record(self, conn: sqlite3.Connection, world_id: str,
                      event_id: str) -> tuple[int | None, str | None]:
        """The seq and chain hash of the record that decided ``event_id`` ((None, None): none)."""
        row = conn.execute("SELECT seq, hash FROM audit WHERE world_id = ? AND event_id = ? ORDER BY seq LIMIT 1",
                           (world_id, event_id)).fetchone()
        return (row[0], row[1]) if row else (None, None)

    def _holds_decision(self, conn: sqlite3.Connection, world_id: str, target: str) -> bool:
        """Whether ``world_id``'s trail holds a passed decision that ``target`` names.

        ``target`` may be its ``event_id``. That finds its record through the index on (world_id,
        event_id), or an older bridge's ``events`` row whose reply is not an ``error``. ``target`` may
        also be the ChatMessage its record's columns link (``summary.message_id``). That reads the
        world's records newest first until one matches. For a target the world does not hold, it reads
        every record: ~12 µs each, ~0.12 s for 10,000 on SQLite. That is fine: an override is a GM's
        rare act, and recent decisions are the ones overridden.
        """
        for (record,) in conn.execute("SELECT record FROM audit WHERE world_id = ? AND event_id = ?",
                                      (world_id, target)):
            if _passed(record):
                return True
        for (reply,) in conn.execute("SELECT reply FROM events WHERE world_id = ? AND event_id = ?",
                                     (world_id, target)):
            if _reply_type(stored_bytes(reply)) != "error":
                return True
        for (record,) in conn.execute("SELECT record FROM audit WHERE world_id = ? ORDER BY seq DESC", (world_id,)):
            if _passed(record, message_id=target):
                return True
        return False

    def _state_guard(self, conn: sqlite3.Connection, world_id: str, *, sealed: bool, stale_seal: bool) -> None:
        """Refuse to serve a world whose state rows differ from what its chain produces.

        Checked once per world per process, at its first decision or query.

        - ``sealed``: the rows are the ones the last batch writing them sealed
          (:mod:`bridge.store.seal`). Nothing more to check.
        - Else, after a clean stop, it is cheap: the digest of the stored state against the one the
          last signed head sealed.
        - Else the state is derived from the whole chain: a crash before any seal, a seal by another key.
        - ``stale_seal``: a seal is stored but does not match (rows edited, or another key's seal). Then
          the world is checked even before its chain's first signed head.
        - A trail with neither, an older bridge's, is not checked here; ``audit verify`` checks it.

        Raises :class:`~bridge.errors.WorldStateMismatch` naming the repair command.
        """
        checked: set[str] = self.__dict__.setdefault("_state_checked", set())
        if world_id in checked or sealed:
            checked.add(world_id)
            return
        head = _latest_head(conn, world_id)
        if stale_seal or (head is not None and head.signed()):
            # (ORDER BY ... LIMIT 1, not max(): the view's two indexes answer it, not every row of the world)
            tail = conn.execute("SELECT seq FROM audit WHERE world_id = ? ORDER BY seq DESC LIMIT 1",
                                (world_id,)).fetchone()
            if head is not None and tail is not None and head.seq == tail[0] and head.state_digest is not None:
                if head.state_digest != state_digest(stored_state(conn, world_id)):
                    raise WorldStateMismatch(_mismatch(world_id, f"its state rows were edited after record {head.seq}"))
            else:
                report = audit.verify_world(load_trail(conn, world_id), None)
                edited = [p for p in report.problems if p.kind == "state"]
                if edited:
                    raise WorldStateMismatch(_mismatch(world_id, edited[0].detail))
        checked.add(world_id)

    def _key_guard(self, conn: sqlite3.Connection, world_id: str) -> None:
        """Refuse to serve a world whose latest head another key than the store's signing key signed.

        ``audit new-key`` changed it in another process after this one started; serve checks the key
        once, at start. Heads this store signed with its old key would read as a swapped key in ``audit
        verify``. No signing key, or no head: nothing to check.

        Raises :class:`~bridge.errors.SigningKeyChanged` saying to restart serve.
        """
        if self.signing_key is None:
            return
        head = _latest_head(conn, world_id)
        if head is not None and head.public_key != public_key_text(self.signing_key.public_key()):
            raise SigningKeyChanged(
                f"world {world_id!r} is signed by key {head.key_id} now (`fate-bridge audit new-key`"
                f" ran), not by this bridge's key {key_id(self.signing_key.public_key())}: restart serve with the"
                " new key")

    _ROW = f"id, world_id, seq, ts, type, event_id, user_id, summary, record, {PREV_HASH}, hash"

    def _row(self, row: tuple) -> AuditRow:
        record = unpack(row[8])
        return AuditRow(row[0], row[1], row[2], row[3], row[4], row[5], row[6],
                        row_summary(row[7], record), record, row[9], row[10])

    def _audit_rows_sync(self, where: AuditFilter) -> list[AuditRow]:
        assert self._conn is not None
        clauses: list[str] = []
        params: list[object] = []
        for column, value in (("world_id", where.world_id), ("actor_id", where.actor_id),
                              ("ruleset", where.ruleset), ("outcome", where.outcome)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        if where.since is not None:
            clauses.append("ts >= ?")
            params.append(where.since)
        if where.until is not None:
            clauses.append("ts < ?")
            params.append(where.until)
        if where.before_seq is not None:
            clauses.append("seq < ?")
            params.append(where.before_seq)
        sql = f"SELECT {self._ROW} FROM audit"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += " ORDER BY id DESC"
        if where.limit is not None:
            sql += " LIMIT ?"
            params.append(where.limit)
        return [self._row(r) for r in self._conn.execute(sql, params)]

    def _world_audit_rows_sync(self, world_id: str, where: AuditFilter) -> list[AuditRow]:
        """A registered world's audit rows (its forwarder's window); raises WorldNotRegistered."""
        assert self._conn is not None
        self._require_world(self._conn, world_id, registered=True)
        return self._audit_rows_sync(where)

    def _audit_row_sync(self, row_id: int) -> AuditRow | None:
        assert self._conn is not None
        row = self._conn.execute(f"SELECT {self._ROW} FROM audit WHERE id = ?", (row_id,)).fetchone()
        return None if row is None else self._row(row)

    def _verify_sync(self, world_id: str | None, key: bytes | None, public_key: Ed25519PublicKey | None,
                     progress: Callable[[str, int], None] | None) -> list[audit.WorldReport]:
        assert self._conn is not None
        if public_key is None and self.signing_key is not None:
            public_key = self.signing_key.public_key()
        return verify_database(self._conn, world_id, key, public_key, progress)

    def _repair_sync(self, world_id: str, public_key: Ed25519PublicKey | None) -> audit.WorldReport:
        """Rebuild ``world_id``'s state rows from its chain and seal them in a new signed head."""
        assert self._conn is not None

        def work(conn: sqlite3.Connection) -> audit.WorldReport:
            report = audit.verify_world(load_trail(conn, world_id), self.audit_key, public_key)
            if not report.chain_ok or report.derived is None:
                return report
            settings, last_seq, records, events = as_stored(report.derived)
            conn.execute("UPDATE worlds SET settings = ?, last_seq = ? WHERE world_id = ?",
                         (settings, last_seq, world_id))
            if self._tail:  # the tails first: the rows below replace them all
                fold_tail(conn)
            records_table = "main.records" if self._tail else "records"
            conn.execute(f"DELETE FROM {records_table} WHERE world_id = ?", (world_id,))
            conn.executemany(f"INSERT INTO {records_table} (world_id, kind, key, value) VALUES (?,?,?,?)",
                             [(world_id, kind, key, pack_record(value, kind)) for kind, key, value in records])
            request_hashes = dict(conn.execute(
                "SELECT event_id, request_hash FROM events WHERE world_id = ?", (world_id,)).fetchall())
            conn.execute("DELETE FROM events WHERE world_id = ?", (world_id,))
            conn.executemany(INSERT_EVENT, [(world_id, event_id, reply, request_hashes.get(event_id))
                              for event_id, reply in events])
            tail = conn.execute("SELECT seq, hash FROM audit WHERE world_id = ? ORDER BY seq DESC LIMIT 1",
                                (world_id,)).fetchone()
            if tail is not None:
                self._checkpoint(conn, world_id, tail[0], tail[1], state_digest(stored_state(conn, world_id)))
            self.__dict__.setdefault("_state_checked", set()).discard(world_id)
            self.__dict__.get("_worlds", {}).pop(world_id, None)  # a loaded copy is stale now
            return report

        return self._transaction(work)

    def _new_key_sync(self, old_key: Ed25519PrivateKey | None, new_key: Ed25519PrivateKey) -> list[str]:
        """Write a key change record into every world's chain and sign its head with ``new_key``.

        ``new_key`` is the store's signing key from then on. Returns the worlds changed.
        """
        assert self._conn is not None
        change = KeyChange(old_public_key=None if old_key is None else public_key_text(old_key.public_key()),
                           new_public_key=public_key_text(new_key.public_key()))
        message = sorted_json(change)
        summary = wire.AuditColumns(outcome=KEY_CHANGE, detail=f"new key {key_id(new_key.public_key())}")

        def work(conn: sqlite3.Connection) -> list[str]:
            worlds = trail_worlds(conn)
            self.signing_key = new_key
            ts = utc_now()
            for world_id in worlds:
                entry = AuditEntry(type=KEY_CHANGE, event_id=None, user_id=None, message=message, reads=[],
                                   dice=[], reply=message, ok=True, summary=summary)
                seq, record_hash = self._append_audit(conn, world_id, entry, ts)
                self._checkpoint(conn, world_id, seq, record_hash, state_digest(stored_state(conn, world_id)))
            return worlds

        return self._transaction(work)

    async def audit_page(self, world_id: str, query: wire.AuditQuery) -> wire.AuditPage:
        """A page of ``world_id``'s audit trail for the module's audit window, newest first."""
        where = AuditFilter(world_id=world_id, actor_id=query.actor_id, ruleset=query.ruleset,
                            outcome=query.outcome, since=query.since, until=query.until,
                            before_seq=query.before_seq, limit=query.limit + 1)
        rows = await self._run(self._world_audit_rows_sync, world_id, where)
        more = len(rows) > query.limit
        rows = rows[: query.limit]
        return wire.AuditPage(
            query_id=query.query_id,
            records=[
                wire.AuditSummary(seq=r.seq, ts=r.ts, type=r.type, event_id=r.event_id,
                                  user_id=r.user_id, **msgspec.structs.asdict(r.summary))
                for r in rows
            ],
            next_before=rows[-1].seq if more and rows else None,
        )

    def _audit_hashes_sync(self, world_id: str, seqs: list[int], registered: bool) -> dict[int, str]:
        assert self._conn is not None
        if registered:
            self._require_world(self._conn, world_id, registered=True)
        return chain_hashes(self._conn, world_id, seqs)

    async def audit_hashes(self, world_id: str, seqs: list[int], *, registered: bool = False) -> dict[int, str]:
        """The chain hash of each of ``world_id``'s records whose ``seq`` is in ``seqs``.

        Absent seqs are left out. With ``registered``, raises WorldNotRegistered for a removed world
        (a forwarder's query).
        """
        return await self._run(self._audit_hashes_sync, world_id, seqs, registered)

    async def audit_rows(self, where: AuditFilter) -> list[AuditRow]:
        """Audit records matching ``where``, newest first."""
        return await self._run(self._audit_rows_sync, where)

    async def audit_row(self, row_id: int) -> AuditRow | None:
        """The audit record with global id ``row_id``, or None."""
        return await self._run(self._audit_row_sync, row_id)

    async def verify(self, world_id: str | None, key: bytes | None, public_key: Ed25519PublicKey | None = None,
                     progress: Callable[[str, int], None] | None = None) -> list[audit.WorldReport]:
        """Check every world's trail (or one world's): see :func:`verify_database`. ``public_key``
        defaults to the store's signing key's."""
        return await self._run(self._verify_sync, world_id, key, public_key, progress)

    async def repair(self, world_id: str, public_key: Ed25519PublicKey | None = None) -> audit.WorldReport:
        """Rebuild ``world_id``'s state from its chain and sign a head sealing it.

        The state is records, stored replies, settings and counter. Nothing is written when the chain
        itself fails; the report says why. Needs the signing key for the head the bridge checks at load.
        """
        return await self._run(self._repair_sync, world_id, public_key)

    async def new_key(self, old_key: Ed25519PrivateKey | None, new_key: Ed25519PrivateKey) -> list[str]:
        """Start signing with ``new_key``.

        Writes a ``key_change`` record (old and new public keys) in every world's chain, each head
        signed by the new key. Returns the worlds changed.
        """
        return await self._run(self._new_key_sync, old_key, new_key)


# --- reading a trail (any connection: the store's, or verify's read-only one) ------------------


class _RecordSummary(msgspec.Struct):
    summary: wire.AuditColumns


_record_summary = msgspec.json.Decoder(_RecordSummary)


class _Link(msgspec.Struct):
    message_id: str | None = None


class _Passed(msgspec.Struct):
    """What :meth:`AuditRows._holds_decision` reads of a record.

    Whether it passed, and the ChatMessage its columns link. The rest of the record is skipped, not
    decoded.
    """

    ok: bool
    summary: _Link


class _Tagged(msgspec.Struct):
    type: str = ""


_passed_decoder = msgspec.json.Decoder(_Passed)
_tagged_decoder = msgspec.json.Decoder(_Tagged)


def _passed(stored: bytes, *, message_id: str | None = None) -> bool:
    """Whether the stored record ``stored`` is of a decision that passed.

    With ``message_id``, its columns must also link that ChatMessage. A record too damaged to read
    holds no decision; ``audit verify`` reports it.
    """
    try:
        record = _passed_decoder.decode(unpack(stored))
    except msgspec.MsgspecError:
        return False
    return record.ok and (message_id is None or record.summary.message_id == message_id)


def _reply_type(reply: bytes) -> str:
    """The ``type`` of a stored reply (empty when it cannot be read)."""
    try:
        return _tagged_decoder.decode(reply).type
    except msgspec.MsgspecError:
        return ""


def row_summary(stored: bytes | str, record: bytes) -> wire.AuditColumns:
    """An audit row's summary, as ``audit list`` and the audit window show it.

    It comes from the row's ``summary`` column and its record's JSON. Rows of older bridges kept a
    copy in the column. Later rows leave it empty, and the record's own is read. A record too
    damaged to read is listed with the outcome ``unreadable``; ``audit verify`` reports it.
    """
    copy = unpack(stored)
    if copy:
        return _summary_decoder.decode(copy)
    try:
        return _record_summary.decode(record).summary
    except msgspec.MsgspecError:
        return wire.AuditColumns(outcome="unreadable")


def _mismatch(world_id: str, why: str) -> str:
    return (f"world {world_id!r} is not served: its state does not match its audit trail ({why}); "
            f"check it with `fate-bridge audit verify --world {world_id}` and rebuild it from the "
            f"chain with `fate-bridge audit repair --world {world_id}`")


def _tables(conn: Executes) -> set[str]:
    """The tables the database has (a file of an older schema may lack ``heads``)."""
    if isinstance(conn, sqlite3.Connection):
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return {r[0] for r in conn.execute(  # another backend's connection (PostgreSQL)
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")}


def _chain_tails(conn: sqlite3.Connection, world_ids: list[str]) -> list[tuple[str, int, str]]:
    """Each of ``world_ids``' last record: (world_id, seq, hash).

    Read world by world, each by the index on (world_id, seq). A GROUP BY over SQLite's audit view
    (audit and audit_tail, read_as_one) would read every row of both tables.
    """
    tails = []
    for world_id in world_ids:
        row = conn.execute("SELECT seq, hash FROM audit WHERE world_id = ? ORDER BY seq DESC LIMIT 1",
                           (world_id,)).fetchone()
        if row is not None:
            tails.append((world_id, row[0], row[1]))
    return tails


def heads_of(conn: sqlite3.Connection, world_id: str, latest: bool = False) -> list[Head]:
    """A world's signed heads in seq order (``latest``: only the last one)."""
    if "heads" not in _tables(conn):
        return []
    # a file read as it is (audit verify's read-only connection) may predate the column
    columns = [d[0] for d in conn.execute("SELECT * FROM heads LIMIT 0").description]
    stored = "stored_digest" if "stored_digest" in columns else "NULL"
    order = "DESC LIMIT 1" if latest else ""
    return [Head(*row) for row in conn.execute(
        f"SELECT world_id, seq, hash, state_digest, public_key, sig, {stored} FROM heads WHERE world_id = ?"
        f" ORDER BY seq {order}", (world_id,))]


def stored_bytes(value: bytes | bytearray | memoryview | str) -> bytes:
    """A blob column's value as the bytes it holds; TEXT, after a hand edit, as UTF-8."""
    return value.encode() if isinstance(value, str) else bytes(value)


def stored_hashes(conn: sqlite3.Connection, world_id: str, seqs: range) -> list[bytes]:
    """The :func:`~bridge.heads.stored_hash` of each of ``world_id``'s stored records in ``seqs``.

    In seq order. These are a version 2 head's inputs, read from the rows.
    """
    if not seqs:
        return []
    # sorted here: an ORDER BY over SQLite's audit view (read_as_one) runs as a co-routine
    rows = conn.execute("SELECT seq, record FROM audit WHERE world_id = ? AND seq BETWEEN ? AND ?",
                        (world_id, seqs.start, seqs.stop - 1)).fetchall()
    return [stored_hash(stored_bytes(value)) for _, value in sorted(rows)]


def window_hashes(conn: sqlite3.Connection, world_id: str, last_seq: int) -> list[bytes]:
    """The ``window`` :meth:`AuditRows._seal` takes for the record after ``last_seq``.

    That is the stored hashes of the records of its stored range written already. It is empty
    after a multiple of ``CHECKPOINT_EVERY``.
    """
    return stored_hashes(conn, world_id, range(last_seq // CHECKPOINT_EVERY * CHECKPOINT_EVERY + 1, last_seq + 1))


def _latest_head(conn: sqlite3.Connection, world_id: str) -> Head | None:
    heads = heads_of(conn, world_id, latest=True)
    return heads[0] if heads else None


def trail_worlds(conn: sqlite3.Connection) -> list[str]:
    """Every world the database knows of, not only the worlds whose audit rows survive.

    It reads the registry (removed worlds too), the signed heads, checkpoints, audit rows and state
    rows.
    """
    tables = _tables(conn)
    sources = [t for t in ("worlds", "heads", "checkpoints", "audit", "records", "events") if t in tables]
    if not sources:
        return []
    return sorted(r[0] for r in conn.execute(" UNION ".join(f"SELECT world_id FROM {t}" for t in sources)))


def latest_checkpoints(conn: sqlite3.Connection) -> list[tuple[str, int, str, str]]:
    """Each world's latest HMAC checkpoint, ``(world_id, seq, hash, mac)``, by world.

    It tells whether an audit key is the one that signed the database's checkpoints. ``serve``
    refuses another key; ``audit verify`` says so.
    """
    if "checkpoints" not in _tables(conn):
        return []
    return [tuple(row) for row in conn.execute(
        "SELECT c.world_id, c.seq, c.hash, c.mac FROM checkpoints c JOIN (SELECT world_id, max(seq) AS seq"
        " FROM checkpoints GROUP BY world_id) m ON c.world_id = m.world_id AND c.seq = m.seq ORDER BY c.world_id")]


def chain_hashes(conn: sqlite3.Connection, world_id: str, seqs: list[int]) -> dict[int, str]:
    """``seq`` -> chain hash of ``world_id``'s records among ``seqs`` (missing ones left out)."""
    found: dict[int, str] = {}
    wanted = sorted(set(seqs))
    for start in range(0, len(wanted), 500):  # SQLite's bound on host parameters
        chunk = wanted[start:start + 500]
        found.update(conn.execute(
            f"SELECT seq, hash FROM audit WHERE world_id = ? AND seq IN ({','.join('?' * len(chunk))})",
            (world_id, *chunk)).fetchall())
    return found


def signers(conn: sqlite3.Connection) -> set[str]:
    """The public keys (text) that signed the worlds' latest heads.

    A bridge must hold that signing key to go on with this trail. None before the first signed head.
    """
    return {head.public_key for world in trail_worlds(conn) for head in heads_of(conn, world, latest=True)}


def stored_state(conn: sqlite3.Connection, world_id: str) -> StoredState:
    """A world's state rows as stored (see :class:`bridge.derive.StoredState`)."""
    unsealed: list[tuple[str, str]] = []

    def read(row: str, value: bytes) -> bytes:
        if (problem := frame_problem(value)) is not None:
            unsealed.append((row, problem))
        return unpack(value)

    world = conn.execute("SELECT settings, last_seq FROM worlds WHERE world_id = ?", (world_id,)).fetchone()
    records = {(kind, key): read(f"records({kind!r}, {key!r})", value) for kind, key, value in
               conn.execute("SELECT kind, key, value FROM records WHERE world_id = ?", (world_id,))}
    events = {event_id: read(f"events({event_id!r})", reply) for event_id, reply in
              conn.execute("SELECT event_id, reply FROM events WHERE world_id = ?", (world_id,))}
    if world is None:
        return StoredState(None, 0, records, events, unsealed)
    return StoredState(read("worlds.settings", world[0]), world[1], records, events, unsealed)


def load_trail(conn: sqlite3.Connection, world_id: str) -> audit.Trail:
    """One world's trail and state rows, for :func:`bridge.audit.verify_world` (rows streamed)."""
    registered = conn.execute("SELECT 1 FROM worlds WHERE world_id = ?", (world_id,)).fetchone() is not None
    rows = conn.execute(
        f"SELECT seq, record, {PREV_HASH}, hash, ts, type, event_id, user_id, ruleset, actor_id,"
        " outcome, summary FROM audit WHERE world_id = ? ORDER BY seq", (world_id,))
    checkpoints = conn.execute("SELECT seq, hash, mac FROM checkpoints WHERE world_id = ? ORDER BY seq",
                               (world_id,)).fetchall()
    unsealed: dict[int, str] = {}  # filled as the rows stream (verify_world reads them per row)
    stored: dict[int, bytes] = {}

    def row(r: tuple) -> tuple[int, bytes, str, str, audit.ListedColumns]:
        if (problem := frame_problem(r[1])) is not None:
            unsealed[r[0]] = problem
        stored[r[0]] = stored_bytes(r[1])
        return r[0], unpack(r[1]), r[2], r[3], audit.ListedColumns(r[4], r[5], r[6], r[7], r[8], r[9], r[10], unpack(r[11]))

    return audit.Trail(world_id, (row(r) for r in rows), checkpoints, heads_of(conn, world_id),
                       stored_state(conn, world_id), registered, unsealed, stored, written_as)


def verify_database(conn: sqlite3.Connection, world_id: str | None, key: bytes | None,
                    public_key: Ed25519PublicKey | None,
                    progress: Callable[[str, int], None] | None = None) -> list[audit.WorldReport]:
    """Verify every world the database knows of (:func:`trail_worlds`), or ``world_id``; one
    report each (:func:`bridge.audit.verify_world`). ``progress(world_id, records)`` now and then."""
    reports = []
    for world in [world_id] if world_id else trail_worlds(conn):
        step = None if progress is None else (lambda n, w=world: progress(w, n))
        reports.append(audit.verify_world(load_trail(conn, world), key, public_key, step))
    return reports


class DatabaseUnreadable(Exception):
    """``audit verify`` cannot read the database: missing, empty, truncated or not one."""


REQUIRED_TABLES = ("worlds", "audit", "checkpoints", "records", "events")


def refuse_newer_schema(conn: Executes, label: str, known: int) -> None:
    """Raise ``ConfigError`` when a newer bridge wrote the database ``label``.

    ``label`` is its path or URL, for the message. Newer means ``meta.schema_version`` above
    ``known``, this bridge's schema version for that backend. Its rows may not read as this
    bridge's, and each would be reported changed. The read-only openers call it; a store's
    migration refuses such a database itself.
    """
    if "meta" not in _tables(conn):
        return
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is not None and int(row[0]) > known:
        raise ConfigError(f"the database {label} was written by a newer fate-bridge (schema {row[0]}, this "
                          f"bridge knows {known}); upgrade fate-bridge to read it")
