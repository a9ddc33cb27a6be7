"""The bridge's store: SQLite, one transaction per decision, never on the event loop.

:class:`Store` is the one small async interface the shell uses; :class:`SQLiteStore` is the
embedded default (a file from ``--db``, or ``":memory:"`` for ``fate-bridge resolve`` and tests).
A PostgreSQL store will implement the same interface.

Guarantees of :meth:`Store.decide`:

- The idempotency key (world, ``event_id``), the state change and the reply commit together in
  one ``BEGIN IMMEDIATE`` transaction; the caller sends the reply only after the commit.
- A repeated ``event_id`` returns the stored reply without running the decision again.
- A refused decision (the decision function returns ``ok=False``) keeps none of its writes, but
  its reply is stored under the ``event_id`` so a repeat gets the same answer.
- A decision that raises leaves the database as it was and stores nothing.

All SQLite work runs on one dedicated writer thread, so the event loop never blocks on disk.
Decisions that queue up while it is busy are committed together (group commit: one transaction,
one savepoint per decision), which keeps every guarantee above per decision.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

import msgspec

from . import __version__, audit, wire
from .errors import ConfigError, WorldNotRegistered
from .state import R, WorldState

CHECKPOINT_EVERY = audit.CHECKPOINT_EVERY

# Each step upgrades the file from the previous version; a file records its version in ``meta``.
# Never edit a released step: add the next one.
MIGRATIONS: dict[int, str] = {
    1: """
CREATE TABLE IF NOT EXISTS worlds (
    world_id   TEXT PRIMARY KEY,
    token_hash TEXT,
    settings   BLOB NOT NULL,
    last_seq   INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);
CREATE TABLE IF NOT EXISTS events (
    world_id TEXT NOT NULL, event_id TEXT NOT NULL, reply BLOB NOT NULL,
    PRIMARY KEY (world_id, event_id)
);
CREATE TABLE IF NOT EXISTS records (
    world_id TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,
    PRIMARY KEY (world_id, kind, key)
);
""",
    2: """
CREATE TABLE audit (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    world_id   TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    ts         TEXT NOT NULL,
    type       TEXT NOT NULL,
    event_id   TEXT,
    user_id    TEXT,
    ruleset    TEXT,
    actor_id   TEXT,
    outcome    TEXT NOT NULL,
    summary    BLOB NOT NULL,
    record     BLOB NOT NULL,
    prev_hash  TEXT NOT NULL,
    hash       TEXT NOT NULL,
    UNIQUE (world_id, seq)
);
CREATE INDEX audit_by_actor ON audit (world_id, actor_id, seq);
CREATE INDEX audit_by_ts ON audit (ts);
CREATE TABLE checkpoints (
    world_id TEXT NOT NULL, seq INTEGER NOT NULL, hash TEXT NOT NULL, mac TEXT NOT NULL,
    ts TEXT NOT NULL,
    PRIMARY KEY (world_id, seq)
);
""",
    # The world's read-only overlay viewer key, kept in clear text: the overlay URL carries it and
    # the GM's module shows it (see docs/security.md).
    3: """
ALTER TABLE worlds ADD COLUMN viewer_key TEXT;
""",
    4: """
ALTER TABLE events ADD COLUMN request_hash TEXT;
""",
    5: """
ALTER TABLE worlds ADD COLUMN removed_at TEXT;
""",
}
SCHEMA_VERSION = max(MIGRATIONS)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class World:
    """A registered world: its token's SHA-256 (hex; None for ``resolve``'s implicit world), its
    settings and its overlay viewer key (clear text; None until one is made)."""

    world_id: str
    token_hash: str | None
    settings: wire.WorldSettings
    viewer_key: str | None = None


@dataclass(frozen=True, slots=True)
class Decided:
    """The outcome of :meth:`Store.decide`: the reply frame, whether it was replayed from a
    repeated ``event_id`` (nothing ran), and, when replayed, whether the repeat carried a
    different request than the one first decided (``other_request``: the event_id was reused)."""

    reply: bytes
    replayed: bool
    other_request: bool = False


AuditEntry = audit.AuditEntry


def utc_now() -> str:
    """The current UTC time as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (sorts as text)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


@dataclass(frozen=True, slots=True)
class AuditFilter:
    """Filters of ``audit list``/``export`` and ``audit_query``; None = any. ``since`` is
    inclusive, ``until`` exclusive (ISO-8601 UTC text)."""

    world_id: str | None = None
    actor_id: str | None = None
    ruleset: str | None = None
    outcome: str | None = None
    since: str | None = None
    until: str | None = None
    before_seq: int | None = None
    limit: int | None = None


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One stored audit record: the global ``id`` (for ``audit show``), the record's canonical
    bytes, its chain links and its summary."""

    id: int
    world_id: str
    seq: int
    ts: str
    type: str
    event_id: str | None
    user_id: str | None
    summary: wire.AuditColumns
    record: bytes
    prev_hash: str
    hash: str


@dataclass(frozen=True, slots=True)
class Decision:
    """What a decision function returns: the reply frame; ``ok`` False for a refusal (its
    writes are rolled back, the reply is still kept under the event_id); the audit entry to
    append to the world's chain in the same transaction (None: not audited)."""

    reply: bytes
    ok: bool
    audit: AuditEntry | None = None


DecisionFn = Callable[[WorldState], Decision]
"""A decision run on the writer thread inside the decision's transaction."""


class Store(Protocol):
    """The async store interface the server, CLI and ``resolve`` use."""

    async def world(self, world_id: str) -> World | None:
        """The registered world, or None."""
        ...

    async def add_world(self, world_id: str, token_hash: str | None) -> None:
        """Register a world. Raises ``ConfigError`` if it exists."""
        ...

    async def set_token(self, world_id: str, token_hash: str) -> None:
        """Give a world a new token hash. Raises ``ConfigError`` if it is not registered."""
        ...

    async def remove_world(self, world_id: str) -> None:
        """Unregister a world (token and viewer key stop working); its state and audit trail are
        kept for when it is added again. Raises ``ConfigError`` if it is not registered."""
        ...

    async def viewer_key(self, world_id: str, candidate: str, *, rotate: bool = False) -> str:
        """The world's overlay viewer key: the stored one, or ``candidate`` stored in its place
        when there is none yet or ``rotate`` is set. Raises ``ConfigError`` if the world is not
        registered."""
        ...

    async def worlds(self) -> list[World]:
        """Every registered world, by id."""
        ...

    async def decide(self, world_id: str, event_id: str | None, decision: DecisionFn,
                     request_hash: str | None = None) -> Decided:
        """Run one decision in one transaction (see the module docstring). ``request_hash``
        identifies the request, so a reused ``event_id`` can be told from a repeat (the stored
        reply is returned either way, as the contract says)."""
        ...

    async def read(self, world_id: str, query: Callable[[WorldState], T]) -> T:
        """Run a read-only ``query`` on the world's state; anything it writes is discarded."""
        ...

    async def close(self) -> None:
        """Finish pending work and close; idempotent."""
        ...


_settings_decoder = msgspec.json.Decoder(wire.WorldSettings)
_summary_decoder = msgspec.json.Decoder(wire.AuditColumns)
_encode = msgspec.json.Encoder().encode


def _blob(value: bytes | str) -> bytes:
    """A stored record's bytes, also when a hand edit (SQL ``replace()``) turned it into TEXT."""
    return value.encode() if isinstance(value, str) else bytes(value)


def _in_transaction(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    """Run ``work`` in one ``BEGIN IMMEDIATE`` transaction: committed if it returns, rolled back
    if it raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = work(conn)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return result


class _SQLiteWorldState:
    """:class:`WorldState` over an open SQLite transaction. Records read or written are kept for
    the rest of the decision (one per decision: the state never outlives its savepoint), so a
    record read twice (the rules, then the audit columns) is fetched and decoded once."""

    def __init__(self, conn: sqlite3.Connection, world_id: str) -> None:
        self._conn = conn
        self.world_id = world_id
        self._records: dict[tuple[str, str], msgspec.Struct | None] = {}

    def settings(self) -> wire.WorldSettings:
        row = self._conn.execute(
            "SELECT settings FROM worlds WHERE world_id = ?", (self.world_id,)
        ).fetchone()
        return _settings_decoder.decode(row[0]) if row else wire.WorldSettings()

    def put_settings(self, settings: wire.WorldSettings) -> None:
        self._conn.execute(
            "UPDATE worlds SET settings = ? WHERE world_id = ?", (_encode(settings), self.world_id)
        )

    def next_seq(self) -> int:
        (seq,) = self._conn.execute(
            "UPDATE worlds SET last_seq = last_seq + 1 WHERE world_id = ? RETURNING last_seq",
            (self.world_id,),
        ).fetchone()
        return seq

    def get(self, kind: str, key: str, type: type[R]) -> R | None:
        if (kind, key) in self._records:
            return self._records[kind, key]  # type: ignore[return-value]
        row = self._conn.execute(
            "SELECT value FROM records WHERE world_id = ? AND kind = ? AND key = ?",
            (self.world_id, kind, key),
        ).fetchone()
        record = None if row is None else msgspec.json.decode(row[0], type=type)
        self._records[kind, key] = record
        return record

    def put(self, kind: str, key: str, record: msgspec.Struct) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO records (world_id, kind, key, value) VALUES (?, ?, ?, ?)",
            (self.world_id, kind, key, _encode(record)),
        )
        self._records[kind, key] = record


WAL_CHECKPOINT_SECONDS = 5.0  # how often the log is copied into the database file


class _WalCheckpointer:
    """Copies the WAL into the database file every ``WAL_CHECKPOINT_SECONDS`` from a thread and
    connection of its own (PASSIVE: it never blocks the writer), and truncates the log at stop."""

    def __init__(self, path: str) -> None:
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA busy_timeout = 5000")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fate-bridge-wal", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(WAL_CHECKPOINT_SECONDS):
            try:
                self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            except sqlite3.Error:
                pass  # busy or locked: the next round copies what this one could not

    def stop(self) -> None:
        """Stop the thread, truncate the log (all committed pages are in the file), close."""
        self._stop.set()
        self._thread.join()
        try:
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            self._conn.close()


DB_FILE_MODE = 0o600  # a new database file is readable by its owner only (SQLite's -wal/-shm follow)
GROUP_COMMIT_MAX = 64  # decisions per transaction at most: bounds the latency a batch adds


@dataclass(frozen=True, slots=True)
class _Queued:
    """A decision waiting for the writer thread, and where to deliver its outcome."""

    world_id: str
    event_id: str | None
    request_hash: str | None
    decision: DecisionFn
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Decided]


def _settle_futures(settled: list[tuple[asyncio.Future[Decided], Decided | None, BaseException | None]]) -> None:
    """Deliver a committed batch's outcomes (runs on the event loop)."""
    for future, decided, exc in settled:
        if future.cancelled():
            continue
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(decided)  # type: ignore[arg-type]


class SQLiteStore:
    """The embedded store. ``path`` is a file (created with its folder) or ``":memory:"``.

    Raises ``ConfigError`` when the file cannot be opened or was written by a newer bridge.
    Use :meth:`open` (a classmethod coroutine) to construct.
    """

    def __init__(self, path: str | Path, *, audit_key: bytes | None = None) -> None:
        self.path = str(path)
        self.audit_key = audit_key
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fate-bridge-db")
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._queue: list[_Queued] = []  # decisions waiting for the writer (group commit)
        self._queue_lock = threading.Lock()
        self._flushing = False  # a flush is scheduled or running on the writer thread
        self._wal: _WalCheckpointer | None = None

    @classmethod
    async def open(cls, path: str | Path, *, audit_key: bytes | None = None) -> SQLiteStore:
        """Open (and create or upgrade) the database at ``path``. With ``audit_key``, the audit
        chain gets signed checkpoints (every ``CHECKPOINT_EVERY`` records and at close)."""
        store = cls(path, audit_key=audit_key)
        try:
            await store._run(store._connect)
        except BaseException:
            store._executor.shutdown(wait=False)
            raise
        return store

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        if self._closed:
            raise ConfigError("the store is closed")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    # --- runs on the writer thread -------------------------------------------------------------

    def _connect(self) -> None:
        if self.path != ":memory:":
            path = Path(self.path).expanduser()
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists():  # owner-only: it holds viewer keys and the table's history
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, DB_FILE_MODE))
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout = 5000")
            if self.path != ":memory:":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            self._migrate(conn)
            if self.path != ":memory:":
                # WAL checkpoints (copying the log into the file, with an fsync) run on their own
                # thread: done inside a COMMIT they would stall decisions (p99 x5 measured).
                conn.execute("PRAGMA wal_autocheckpoint = 0")
                self._wal = _WalCheckpointer(self.path)
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"cannot open the database {self.path!r}: {exc}") from None
        self._conn = conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        """Create or upgrade the schema step by step (``MIGRATIONS``); refuse a newer file."""

        def work(conn: sqlite3.Connection) -> None:
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                raise ConfigError(
                    f"the database {self.path!r} was written by a newer fate-bridge (schema "
                    f"{version}, this bridge knows {SCHEMA_VERSION}); upgrade fate-bridge or use"
                    " another --db"
                )
            for step in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[step].strip().split(";\n"):
                    conn.execute(statement)
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                         (str(SCHEMA_VERSION),))

        _in_transaction(conn, work)

    _WORLD = "world_id, token_hash, settings, viewer_key"

    @staticmethod
    def _world_row(row: tuple) -> World:
        return World(row[0], row[1], _settings_decoder.decode(row[2]), row[3])

    def _world_sync(self, world_id: str) -> World | None:
        assert self._conn is not None
        row = self._conn.execute(
            f"SELECT {self._WORLD} FROM worlds WHERE world_id = ? AND removed_at IS NULL", (world_id,)
        ).fetchone()
        return None if row is None else self._world_row(row)

    def _transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        assert self._conn is not None
        return _in_transaction(self._conn, work)

    @staticmethod
    def _require_world(conn: sqlite3.Connection, world_id: str, registered: bool) -> None:
        exists = conn.execute(
            "SELECT 1 FROM worlds WHERE world_id = ? AND removed_at IS NULL", (world_id,)
        ).fetchone()
        if registered and not exists:
            raise WorldNotRegistered(f"world {world_id!r} is not registered (see `fate-bridge world list`)")
        if exists and not registered:
            raise ConfigError(f"world {world_id!r} is registered already; "
                              "`fate-bridge world rotate-token` gives it a new token")

    def _add_world_sync(self, world_id: str, token_hash: str | None) -> None:
        def work(conn: sqlite3.Connection) -> None:
            self._require_world(conn, world_id, registered=False)
            # a removed world comes back with everything it had (results stay fated, S11)
            conn.execute(
                "INSERT INTO worlds (world_id, token_hash, settings) VALUES (?, ?, ?)"
                " ON CONFLICT (world_id) DO UPDATE SET token_hash = excluded.token_hash, removed_at = NULL",
                (world_id, token_hash, _encode(wire.WorldSettings())))
        self._transaction(work)

    def _set_token_sync(self, world_id: str, token_hash: str) -> None:
        def work(conn: sqlite3.Connection) -> None:
            self._require_world(conn, world_id, registered=True)
            conn.execute("UPDATE worlds SET token_hash = ? WHERE world_id = ?", (token_hash, world_id))
        self._transaction(work)

    def _remove_world_sync(self, world_id: str) -> None:
        def work(conn: sqlite3.Connection) -> None:
            self._require_world(conn, world_id, registered=True)
            conn.execute("UPDATE worlds SET token_hash = NULL, viewer_key = NULL, removed_at = ?"
                         " WHERE world_id = ?", (utc_now(), world_id))
        self._transaction(work)

    def _worlds_sync(self) -> list[World]:
        assert self._conn is not None
        rows = self._conn.execute(
            f"SELECT {self._WORLD} FROM worlds WHERE removed_at IS NULL ORDER BY world_id").fetchall()
        return [self._world_row(r) for r in rows]

    def _viewer_key_sync(self, world_id: str, candidate: str, rotate: bool) -> str:
        def work(conn: sqlite3.Connection) -> str:
            self._require_world(conn, world_id, registered=True)
            (current,) = conn.execute(
                "SELECT viewer_key FROM worlds WHERE world_id = ?", (world_id,)
            ).fetchone()
            if current is not None and not rotate:
                return current
            conn.execute("UPDATE worlds SET viewer_key = ? WHERE world_id = ?", (candidate, world_id))
            return candidate
        return self._transaction(work)

    def _decide_one(self, conn: sqlite3.Connection, item: _Queued, ts: str) -> Decided:
        """One decision inside the batch's transaction (see :meth:`_flush_sync`); ``ts`` is the
        batch's UTC time, recorded in its audit records."""
        world_id, event_id, decision = item.world_id, item.event_id, item.decision
        self._require_world(conn, world_id, registered=True)  # removed while connected?
        if event_id is not None:
            row = conn.execute(
                "SELECT reply, request_hash FROM events WHERE world_id = ? AND event_id = ?",
                (world_id, event_id),
            ).fetchone()
            if row is not None:
                other = None not in (row[1], item.request_hash) and row[1] != item.request_hash
                return Decided(bytes(row[0]), replayed=True, other_request=other)
        conn.execute("SAVEPOINT decision")
        result = decision(_SQLiteWorldState(conn, world_id))
        if not result.ok:
            conn.execute("ROLLBACK TO decision")
        conn.execute("RELEASE decision")
        if event_id is not None:
            conn.execute(
                "INSERT INTO events (world_id, event_id, reply, request_hash) VALUES (?, ?, ?, ?)",
                (world_id, event_id, result.reply, item.request_hash),
            )
        if result.audit is not None:
            self._append_audit(conn, world_id, result.audit, ts)
        return Decided(result.reply, replayed=False)

    def _flush_sync(self) -> None:
        """Group commit: run every queued decision, each in its own savepoint, in ONE transaction,
        then resolve their futures after the COMMIT. A decision that raises is rolled back to its
        savepoint alone; a failed COMMIT fails the whole batch (nothing was acknowledged)."""
        while True:
            with self._queue_lock:
                batch = self._queue[:GROUP_COMMIT_MAX]
                del self._queue[:GROUP_COMMIT_MAX]
                if not batch:
                    self._flushing = False
                    return
            outcomes: list[tuple[_Queued, Decided | None, BaseException | None]] = []

            def work(conn: sqlite3.Connection) -> None:
                ts = utc_now()  # one clock read per batch: its decisions commit together
                for item in batch:
                    conn.execute("SAVEPOINT item")
                    try:
                        decided = self._decide_one(conn, item, ts)
                    except Exception as exc:  # the decision's own bug: only it is rolled back
                        conn.execute("ROLLBACK TO item")
                        conn.execute("RELEASE item")
                        outcomes.append((item, None, exc))
                    else:
                        conn.execute("RELEASE item")
                        outcomes.append((item, decided, None))

            try:
                self._transaction(work)
            except Exception as exc:
                outcomes = [(item, None, exc) for item in batch]
            by_loop: dict[asyncio.AbstractEventLoop, list[tuple]] = {}
            for item, decided, exc in outcomes:
                by_loop.setdefault(item.loop, []).append((item.future, decided, exc))
            for loop, settled in by_loop.items():  # one wake-up of each loop per batch
                loop.call_soon_threadsafe(_settle_futures, settled)

    def _append_audit(self, conn: sqlite3.Connection, world_id: str, entry: AuditEntry, ts: str) -> None:
        """Append ``entry``, decided at UTC time ``ts``, to the world's chain (inside the caller's
        transaction)."""
        head = conn.execute(
            "SELECT seq, hash FROM audit WHERE world_id = ? ORDER BY seq DESC LIMIT 1", (world_id,)
        ).fetchone()
        seq, prev_hash = (head[0] + 1, head[1]) if head else (1, audit.GENESIS_HASH)
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
        )
        canonical = audit.canonical(record)
        record_hash = audit.chain_hash(prev_hash, canonical)
        summary = entry.summary
        conn.execute(
            "INSERT INTO audit (world_id, seq, ts, type, event_id, user_id, ruleset, actor_id,"
            " outcome, summary, record, prev_hash, hash) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (world_id, seq, record.ts, entry.type, entry.event_id, entry.user_id, summary.ruleset,
             summary.actor_id, summary.outcome, _encode(summary), canonical, prev_hash,
             record_hash),
        )
        if seq % CHECKPOINT_EVERY == 0:
            self._checkpoint(conn, world_id, seq, record_hash)

    def _checkpoint(self, conn: sqlite3.Connection, world_id: str, seq: int, record_hash: str) -> None:
        if self.audit_key is None:
            return
        mac = audit.checkpoint_mac(self.audit_key, world_id, seq, record_hash)
        conn.execute(
            "INSERT OR IGNORE INTO checkpoints (world_id, seq, hash, mac, ts) VALUES (?,?,?,?,?)",
            (world_id, seq, record_hash, mac, utc_now()),
        )

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

    def _close_sync(self) -> None:
        if self._wal is not None:
            self._wal.stop()
            self._wal = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # --- the async interface -------------------------------------------------------------------

    async def world(self, world_id: str) -> World | None:
        """The registered world, or None."""
        return await self._run(self._world_sync, world_id)

    async def add_world(self, world_id: str, token_hash: str | None) -> None:
        """Register ``world_id`` with ``token_hash`` (see :class:`Store`)."""
        await self._run(self._add_world_sync, world_id, token_hash)

    async def set_token(self, world_id: str, token_hash: str) -> None:
        """Give ``world_id`` a new token hash (see :class:`Store`)."""
        await self._run(self._set_token_sync, world_id, token_hash)

    async def remove_world(self, world_id: str) -> None:
        """Unregister ``world_id``: its token and viewer key stop working. Its Fate state and audit
        trail are kept; adding it again resumes where it was."""
        await self._run(self._remove_world_sync, world_id)

    async def worlds(self) -> list[World]:
        """Every registered world, by id."""
        return await self._run(self._worlds_sync)

    async def viewer_key(self, world_id: str, candidate: str, *, rotate: bool = False) -> str:
        """The world's overlay viewer key, made from ``candidate`` when needed (see :class:`Store`)."""
        return await self._run(self._viewer_key_sync, world_id, candidate, rotate)

    async def decide(self, world_id: str, event_id: str | None, decision: DecisionFn,
                     request_hash: str | None = None) -> Decided:
        """Run ``decision`` atomically (see the module docstring). Decisions arriving while the
        writer is busy are committed together (group commit); each still sees the writes of
        those before it, and its reply is returned only after the COMMIT."""
        if self._closed:
            raise ConfigError("the store is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Decided] = loop.create_future()
        with self._queue_lock:
            self._queue.append(_Queued(world_id, event_id, request_hash, decision, loop, future))
            start = not self._flushing
            self._flushing = True
        if start:
            self._executor.submit(self._flush_sync)
        return await future

    async def read(self, world_id: str, query: Callable[[WorldState], T]) -> T:
        """Run a read-only ``query`` on the world's state, in a transaction that is rolled back
        (a query cannot write)."""
        return await self._run(self._read_sync, world_id, query)

    def _read_sync(self, world_id: str, query: Callable[[WorldState], T]) -> T:
        assert self._conn is not None
        self._conn.execute("BEGIN")
        try:
            self._require_world(self._conn, world_id, registered=True)
            return query(_SQLiteWorldState(self._conn, world_id))
        finally:
            self._conn.execute("ROLLBACK")

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

    async def close(self) -> None:
        """Sign the chains' heads (with an audit key), then close after queued work finishes;
        idempotent."""
        if self._closed:
            return
        await self._run(self._checkpoint_heads_sync)
        await self._run(self._close_sync)
        self._closed = True
        self._executor.shutdown(wait=True)
