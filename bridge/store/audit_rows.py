"""The SQLite store's audit trail: appending chained records, signed checkpoints, listing and
verifying them (the chain itself is :mod:`bridge.audit`, pure).

A mixin of :class:`~bridge.store.sqlite.SQLiteStore`: its ``*_sync`` methods run on the store's
writer thread; the async ones are the :class:`~bridge.store.base.Store` methods.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec

from .. import __version__, audit, wire
from .base import AuditEntry, AuditFilter, AuditRow
from .schema import _blob, _encode, _summary_decoder, utc_now

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    T = TypeVar("T")

CHECKPOINT_EVERY = audit.CHECKPOINT_EVERY
_INSERT_AUDIT = ("INSERT INTO audit (world_id, seq, ts, type, event_id, user_id, ruleset, actor_id,"
                 " outcome, summary, record, prev_hash, hash) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)")
_INSERT_CHECKPOINT = "INSERT INTO checkpoints (world_id, seq, hash, mac, ts) VALUES (?,?,?,?,?) ON CONFLICT DO NOTHING"


@dataclass(frozen=True, slots=True)
class Sealed:
    """An audit record made ready for its batch (:meth:`AuditRows._seal`): its world ``seq``, its
    chain ``hash``, the ``audit`` row to insert and the ``checkpoints`` row (None: none due)."""

    seq: int
    hash: str
    row: tuple
    checkpoint: tuple | None


class AuditRows:
    """The audit and checkpoints tables (see :class:`~bridge.store.base.Store`)."""

    _conn: sqlite3.Connection | None
    audit_key: bytes | None

    if TYPE_CHECKING:
        async def _run(self, fn: Callable[..., T], *args: object) -> T: ...
        def _transaction(self, work: Callable[[sqlite3.Connection], T]) -> T: ...

    def _seal(self, world_id: str, entry: AuditEntry, ts: str, head: tuple[int, str]) -> Sealed:
        """The receipt hook: ``entry``, decided at UTC time ``ts``, made the world's next record
        after ``head`` (the seq and hash of its last record): its seq, canonical bytes and chain
        hash are known here, before the batch holding it is committed (its reply is sent after).
        Pure (no SQL): returns the row to insert, and the signed checkpoint row when the record is
        a multiple of ``CHECKPOINT_EVERY`` and the store has an audit key."""
        seq, prev_hash = head[0] + 1, head[1]
        record = audit.AuditRecord(
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
        canonical = audit.canonical(record)
        record_hash = audit.chain_hash(prev_hash, canonical)
        summary = entry.summary
        row = (world_id, seq, ts, entry.type, entry.event_id, entry.user_id, summary.ruleset,
               summary.actor_id, summary.outcome, _encode(summary), canonical, prev_hash, record_hash)
        checkpoint = None
        if seq % CHECKPOINT_EVERY == 0 and self.audit_key is not None:
            mac = audit.checkpoint_mac(self.audit_key, world_id, seq, record_hash)
            checkpoint = (world_id, seq, record_hash, mac, ts)
        return Sealed(seq, record_hash, row, checkpoint)

    def _write_sealed(self, conn: sqlite3.Connection, sealed: list[Sealed]) -> None:
        """Insert a batch's sealed records and their checkpoints (inside the batch's transaction).
        A record whose (world, seq) exists already (another process wrote the world) raises
        ``sqlite3.IntegrityError``, failing the batch."""
        conn.executemany(_INSERT_AUDIT, [s.row for s in sealed])
        checkpoints = [s.checkpoint for s in sealed if s.checkpoint is not None]
        if checkpoints:
            conn.executemany(_INSERT_CHECKPOINT, checkpoints)

    def _checkpoint(self, conn: sqlite3.Connection, world_id: str, seq: int, record_hash: str) -> None:
        if self.audit_key is None:
            return
        mac = audit.checkpoint_mac(self.audit_key, world_id, seq, record_hash)
        conn.execute(_INSERT_CHECKPOINT, (world_id, seq, record_hash, mac, utc_now()))

    def _checkpoint_heads_sync(self) -> None:
        """Sign each world's latest record, so the tail of the chain is covered too."""
        if self.audit_key is None or self._conn is None:
            return

        def work(conn: sqlite3.Connection) -> None:
            heads = conn.execute(
                "SELECT a.world_id, a.seq, a.hash FROM audit a JOIN"
                " (SELECT world_id, max(seq) AS seq FROM audit GROUP BY world_id) h"
                " ON a.world_id = h.world_id AND a.seq = h.seq"
            ).fetchall()
            for world_id, seq, record_hash in heads:
                self._checkpoint(conn, world_id, seq, record_hash)

        self._transaction(work)

    _ROW = ("id, world_id, seq, ts, type, event_id, user_id, summary, record, prev_hash, hash")

    def _row(self, row: tuple) -> AuditRow:
        return AuditRow(row[0], row[1], row[2], row[3], row[4], row[5], row[6],
                        _summary_decoder.decode(row[7]), _blob(row[8]), row[9], row[10])

    def _audit_rows_sync(self, where: AuditFilter) -> list[AuditRow]:
        assert self._conn is not None
        clauses, params = [], []
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

    def _verify_sync(self, world_id: str | None, key: bytes | None) -> list[audit.WorldReport]:
        assert self._conn is not None
        conn = self._conn
        worlds = [world_id] if world_id else [
            r[0] for r in conn.execute("SELECT DISTINCT world_id FROM audit ORDER BY world_id")
        ]
        reports = []
        for world in worlds:
            rows = conn.execute(
                "SELECT seq, record, prev_hash, hash, ts, type, event_id, user_id, ruleset, actor_id,"
                " outcome, summary FROM audit WHERE world_id = ? ORDER BY seq",
                (world,),
            )
            checkpoints = conn.execute(
                "SELECT seq, hash, mac FROM checkpoints WHERE world_id = ? ORDER BY seq", (world,)
            ).fetchall()
            reports.append(audit.verify_world(
                world, ((r[0], _blob(r[1]), r[2], r[3], audit.ListedColumns(*r[4:11], _blob(r[11])))
                        for r in rows), checkpoints, key))
        return reports

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
        found: dict[int, str] = {}
        wanted = sorted(set(seqs))
        for start in range(0, len(wanted), 500):  # SQLite's bound on host parameters
            chunk = wanted[start:start + 500]
            found.update(self._conn.execute(
                f"SELECT seq, hash FROM audit WHERE world_id = ? AND seq IN ({','.join('?' * len(chunk))})",
                (world_id, *chunk)).fetchall())
        return found

    async def audit_hashes(self, world_id: str, seqs: list[int], *, registered: bool = False) -> dict[int, str]:
        """The chain hash of each of ``world_id``'s records whose ``seq`` is in ``seqs`` (absent
        seqs are left out). With ``registered``, raises WorldNotRegistered for a removed world
        (a forwarder's query)."""
        return await self._run(self._audit_hashes_sync, world_id, seqs, registered)

    async def audit_rows(self, where: AuditFilter) -> list[AuditRow]:
        """Audit records matching ``where``, newest first."""
        return await self._run(self._audit_rows_sync, where)

    async def audit_row(self, row_id: int) -> AuditRow | None:
        """The audit record with global id ``row_id``, or None."""
        return await self._run(self._audit_row_sync, row_id)

    async def verify(self, world_id: str | None, key: bytes | None) -> list[audit.WorldReport]:
        """Check every world's chain (or one world's): links, hashes, sequence gaps,
        checkpoints (with ``key``) and re-derivation of each decision. See
        :func:`bridge.audit.verify_world`."""
        return await self._run(self._verify_sync, world_id, key)
