"""The SQLite store backend: one transaction per decision, never on the event loop.

:class:`~bridge.store.base.Store` is the one small async interface the shell uses; :class:`SQLiteStore` is the
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
import os
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from .. import wire
from ..errors import ConfigError, WorldNotRegistered
from ..startup import database_problem
from ..state import R, WorldState
from .audit_rows import AuditRows
from .base import Decided, DecisionFn
from .schema import MIGRATIONS, SCHEMA_VERSION, T, _encode, _in_transaction, _settings_decoder, utc_now
from .worlds import WorldRows

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey





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

    def peek(self, kind: str, key: str, type: type[R]) -> R | None:
        return self.get(kind, key, type)

    def put(self, kind: str, key: str, record: msgspec.Struct) -> None:
        self._conn.execute(
            "INSERT INTO records (world_id, kind, key, value) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (world_id, kind, key) DO UPDATE SET value = excluded.value",
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


class SQLiteStore(WorldRows, AuditRows):
    """The embedded store. ``path`` is a file (created with its folder) or ``":memory:"``.

    Raises ``ConfigError`` when the file cannot be opened or was written by a newer bridge.
    Use :meth:`open` (a classmethod coroutine) to construct.
    """

    def __init__(self, path: str | Path, *, audit_key: bytes | None = None,
                 signing_key: Ed25519PrivateKey | None = None) -> None:
        self.path = str(path)
        self.audit_key = audit_key
        self.signing_key = signing_key  # signs receipts (bridge/receipts.py); None: no receipts
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fate-bridge-db")
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._queue: list[_Queued] = []  # decisions waiting for the writer (group commit)
        self._queue_lock = threading.Lock()
        self._flushing = False  # a flush is scheduled or running on the writer thread
        self._wal: _WalCheckpointer | None = None

    @classmethod
    async def open(cls, path: str | Path, *, audit_key: bytes | None = None,
                   signing_key: Ed25519PrivateKey | None = None) -> SQLiteStore:
        """Open (and create or upgrade) the database at ``path``. With ``audit_key``, the audit
        chain gets signed checkpoints (every ``CHECKPOINT_EVERY`` records and at close); with
        ``signing_key`` (Ed25519), receipts can be checked (``receipts_check``)."""
        store = cls(path, audit_key=audit_key, signing_key=signing_key)
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
        try:
            if self.path != ":memory:":
                path = Path(self.path).expanduser()
                path.parent.mkdir(parents=True, exist_ok=True)
                if not path.exists():  # owner-only: it holds viewer keys and the table's history
                    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, DB_FILE_MODE))
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
        except (OSError, sqlite3.DatabaseError) as exc:
            raise ConfigError(database_problem(self.path, exc)) from None
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
        return Decided(result.reply, replayed=False, kept=result.kept)

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

    def _close_sync(self) -> None:
        if self._wal is not None:
            self._wal.stop()
            self._wal = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # --- the async interface -------------------------------------------------------------------

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

    async def close(self) -> None:
        """Sign the chains' heads (with an audit key), then close after queued work finishes;
        idempotent."""
        if self._closed:
            return
        await self._run(self._checkpoint_heads_sync)
        await self._run(self._close_sync)
        self._closed = True
        self._executor.shutdown(wait=True)
