"""The SQLite store backend: decisions decided in memory, written in one transaction per tick.

:class:`~bridge.store.base.Store` is the one small async interface the shell uses; :class:`SQLiteStore` is the
embedded default (a file from ``--db``, or ``":memory:"`` for ``fate-bridge resolve`` and tests).

How :meth:`SQLiteStore.decide` works (issue 17):

- The world's state is held in memory (:class:`~bridge.store.memory.WorldCache`, loaded once per
  world); the decision runs on the caller's event loop against it, so no read during a decision
  touches SQLite. Its writes reach the cache only if it passed; a refusal or an exception leaves
  the state as it was (no SAVEPOINT).
- Its audit record is sealed at once (seq and chain hash known: :meth:`AuditRows._seal`), and its
  rows wait for the writer thread. Decisions of one event-loop tick, and those arriving while the
  writer is busy, are written together: ONE ``BEGIN IMMEDIATE ... COMMIT`` with one
  ``executemany`` per table (audit_tail, records_tail, worlds; events only for a decision without
  an audit record). The caller gets its reply only after that COMMIT. The two tails (schema 9)
  are small tables whose pages every world of the batch shares; the writer thread moves them
  into ``audit`` and ``records`` a chunk at a time (:meth:`SQLiteStore._fold_sync`; the
  batches themselves when it falls behind, :meth:`SQLiteStore._fold_some`), and every
  connection reads each pair as one (:func:`~bridge.store.schema.read_as_one`).
- The reply is stored once, inside the audit record (key-sorted, as the chain's canonical bytes
  need); a repeated ``event_id`` rebuilds the exact frame sent from it
  (:func:`bridge.frames.replayed_frame`), or,
  for replies decided by older bridges, returns the ``events`` row's.
- If a COMMIT fails, its decisions and every decision queued after them fail (none was
  acknowledged; later ones may have read their state) and the caches are reloaded from the file.
  A world removed by another process is noticed at its next batch after the file changed (its
  decisions are refused); a world written by another process fails that batch the same way (its
  last record is at or past the seq this process chains next: :meth:`SQLiteStore._check_heads`,
  or the insert collides on audit_tail's ``(world_id, seq)``), so a second process on the same
  file never corrupts a chain.

The batches of a database file are written on the event loop itself, right after the tick that
decided them, on a connection of their own (as ``bench.durable`` does): in WAL mode with
``synchronous = NORMAL`` a COMMIT is a write into the log, no fsync (the log is copied into the
file and synced by the checkpointer thread), so handing the batch to a thread and its outcome back
cost more than the write (measured: ~100 µs of CPU and two thread wake-ups per batch, most of a
decision's latency at one connection). Everything else (registry, audit queries, verify, the
world loads) runs on the writer thread and the loader thread, as do the batches of ``":memory:"``
(one connection for all) and of subclasses without a batch connection (PostgreSQL: a network
round trip per COMMIT must not block the loop).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import structlog

from .. import audit, wire
from ..errors import ConfigError, WorldNotRegistered
from ..frames import replayed_frame
from ..receipts import with_receipts
from ..startup import database_problem
from ..state import WorldState
from .audit_rows import AuditRows, Sealed, window_hashes
from .base import Decided, Decision, DecisionFn
from .blobs import pack, unpack
from .memory import CachedState, WorldCache
from .schema import (FOLD_BACKSTOP, FOLD_CHUNK, FOLD_ROWS, FOLD_WAIT_MS, MIGRATIONS, SCHEMA_VERSION, T,
                     _committed, _encode, _in_transaction, _settings_decoder, fold_tail, read_as_one,
                     upsert_records_sql, utc_now)
from .worlds import WorldRows

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey





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


log = structlog.get_logger("fate_bridge")

DB_FILE_MODE = 0o600  # a new database file is readable by its owner only (SQLite's -wal/-shm follow)
GROUP_COMMIT_MAX = 64  # decisions per transaction at most: bounds the latency a batch adds


class _WriteLocked(Exception):
    """Another connection holds the database's write lock: the batch goes to the writer thread."""


def _locked(exc: sqlite3.OperationalError) -> bool:
    """Whether ``exc`` says another connection holds the lock (busy), not that the work failed."""
    return getattr(exc, "sqlite_errorname", None) in ("SQLITE_BUSY", "SQLITE_LOCKED")


@dataclass(slots=True)
class _Queued:
    """A decided request waiting for its batch's COMMIT: what its caller gets, the rows it adds,
    and where to deliver the outcome. ``decided`` None: a replay whose stored reply the writer
    reads (``replay_seq``: the audit record holding it; None: an ``events`` row)."""

    world_id: str
    generation: int  # the caches' generation the decision read (a failed COMMIT starts a new one)
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Decided]
    decided: Decided | None = None
    sealed: Sealed | None = None
    records: list[tuple[str, str, bytes]] | None = None
    world_row: tuple[int, bytes | None] | None = None  # last_seq, settings JSON (None: unchanged)
    event_row: tuple | None = None  # an events row (a decision without an audit record)
    event_id: str | None = None
    request_hash: str | None = None
    replay_seq: int | None = None


_replay_decoder = msgspec.json.Decoder(audit.AuditRecord)


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

    _upsert_records = upsert_records_sql("records_tail")  # PostgreSQL's: records

    def __init__(self, path: str | Path, *, audit_key: bytes | None = None,
                 signing_key: Ed25519PrivateKey | None = None) -> None:
        self.path = str(path)
        self.audit_key = audit_key
        self.signing_key = signing_key  # signs heads and receipts (bridge/heads.py, receipts.py)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fate-bridge-db")
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._queue: list[_Queued] = []  # decisions waiting for the writer (group commit)
        self._queue_lock = threading.Lock()
        self._flushing = False  # a flush is scheduled or running on the writer thread
        self._last_batch = 0  # decisions in the last batch written (group commit waits a tick when > 1)
        self._wal: _WalCheckpointer | None = None
        # The worlds' state in memory (bridge/store/memory.py). The lock guards it against
        # decisions from several event loops and the writer thread's resets.
        self._worlds: dict[str, WorldCache] = {}
        self._lock = threading.Lock()
        self._generation = 0  # bumped when a COMMIT fails: decisions read before it fail too
        self._failure: BaseException | None = None  # what failed the last generation
        self._ts: str | None = None  # the UTC time of the batch being gathered (one clock read)
        # A file's worlds are loaded on a thread and connection of their own (a WAL reader), so a
        # world's first decision never holds up the batches of the others; ":memory:" is one
        # connection's alone, so there the writer loads.
        self._loader: ThreadPoolExecutor | None = None
        self._loader_conn: sqlite3.Connection | None = None
        self._fetch_conn: sqlite3.Connection | None = None  # WorldCache.fetch's, on the event loop
        self._batch_conn: sqlite3.Connection | None = None  # a file's batches, written on the event loop
        self._tail_rows = 0  # rows in audit_tail, as this store counts them (guarded by _queue_lock)
        self._folded = 0  # rows the batch being written folded (applied to _tail_rows after its COMMIT)
        self._folding = False  # a fold is queued or running on the writer thread
        self._fold_retry_at = 0  # after a failed fold: no other before the tail holds this many rows
        # What each batch connection saw at its last batch: PRAGMA data_version (other
        # connections' commits) and _own_writes (this store's writer-thread transactions).
        self._seen: dict[sqlite3.Connection, tuple[int, int]] = {}
        self._own_writes = 0
        # Bumped by each batch that finds the file changed elsewhere: a loaded world whose
        # WorldCache.checked is lower is checked at its next batch (it may have been written or
        # removed meanwhile, though the batch that noticed the change did not hold it).
        self._epoch = 0

    @classmethod
    async def open(cls, path: str | Path, *, audit_key: bytes | None = None,
                   signing_key: Ed25519PrivateKey | None = None) -> SQLiteStore:
        """Open (and create or upgrade) the database at ``path``. With ``audit_key``, the audit
        chain gets HMAC checkpoints (every ``CHECKPOINT_EVERY`` records and at close); with
        ``signing_key`` (Ed25519), signed heads there too and receipts on replies."""
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
            try:  # what a killed bridge left in the tails
                _in_transaction(conn, fold_tail)
            except sqlite3.IntegrityError as exc:
                raise ConfigError(
                    f"the database {self.path!r} holds records in audit_tail that collide with its audit"
                    f" trail ({exc}): two bridge processes wrote the same world. `fate-bridge audit verify"
                    f" --db {self.path}` names it; restore your last backup (`fate-bridge restore`)") from None
            read_as_one(conn)
            if self.path != ":memory:":
                # WAL checkpoints (copying the log into the file, with an fsync) run on their own
                # thread: done inside a COMMIT they would stall decisions (p99 x5 measured).
                conn.execute("PRAGMA wal_autocheckpoint = 0")
                self._wal = _WalCheckpointer(self.path)
                self._batch_conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
                # no waiting: a write lock held elsewhere sends the batch to the writer thread
                self._batch_conn.execute("PRAGMA busy_timeout = 0")
                self._batch_conn.execute("PRAGMA synchronous = NORMAL")
                self._batch_conn.execute("PRAGMA foreign_keys = ON")
                self._batch_conn.execute("PRAGMA wal_autocheckpoint = 0")
                read_as_one(self._batch_conn)
                self._loader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fate-bridge-load")
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
        self._own_writes += 1  # the next batch checks what this may have changed (_changed_elsewhere)
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

    def _load_world_sync(self, world_id: str) -> WorldCache:
        """Read a registered world's whole state from the file (once per world, then it lives in
        memory), in one read transaction. Raises ``WorldNotRegistered``."""
        if self._loader is None:
            conn = self._conn
        else:
            if self._loader_conn is None:
                self._loader_conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
                self._loader_conn.execute("PRAGMA busy_timeout = 5000")
                read_as_one(self._loader_conn)
            conn = self._loader_conn
        assert conn is not None
        epoch = self._epoch  # read before the snapshot: a change noticed later bumps it past this
        conn.execute("BEGIN")  # one snapshot for every SELECT below
        try:
            cache = self._read_world(conn, world_id, values=self._loader is None)
        finally:
            conn.execute("ROLLBACK")
        cache.checked = epoch
        if self._loader is not None:
            cache.fetch = functools.partial(self._fetch_record, world_id)
        return cache

    def _fetch_record(self, world_id: str, kind: str, key: str) -> bytes:
        """The stored JSON of a record a decision asks for the first time (on the event loop,
        with the store's lock held: a connection of its own, reading what was committed)."""
        if self._fetch_conn is None:
            self._fetch_conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._fetch_conn.execute("PRAGMA busy_timeout = 5000")
            read_as_one(self._fetch_conn)
        (value,) = self._fetch_conn.execute(
            "SELECT value FROM records WHERE world_id = ? AND kind = ? AND key = ?",
            (world_id, kind, key)).fetchone()
        return unpack(value)

    def _read_world(self, conn: sqlite3.Connection, world_id: str, *, values: bool) -> WorldCache:
        """The world's state: settings, counters, chain head, event ids, and its records' keys
        (with their values too when ``values``; else :meth:`_fetch_record` reads them on use)."""
        row = conn.execute("SELECT settings, last_seq FROM worlds WHERE world_id = ? AND removed_at IS NULL",
                           (world_id,)).fetchone()
        if row is None:
            raise WorldNotRegistered(f"world {world_id!r} is not registered (see `fate-bridge world list`)")
        self._state_guard(conn, world_id)  # its state must be what its chain produces (issue 15)
        self._key_guard(conn, world_id)  # and its key this bridge's (audit new-key meanwhile)
        head = conn.execute("SELECT seq, hash FROM audit WHERE world_id = ? ORDER BY seq DESC LIMIT 1",
                            (world_id,)).fetchone()
        cache = WorldCache(world_id, _settings_decoder.decode(row[0]), row[1],
                           (head[0], head[1]) if head else (0, audit.GENESIS_HASH),
                           window=window_hashes(conn, world_id, head[0]) if head else [])
        if values:
            cache.records = {(kind, key): unpack(value) for kind, key, value in conn.execute(
                "SELECT kind, key, value FROM records WHERE world_id = ?", (world_id,))}
        else:  # the primary key's index alone
            cache.on_disk = set(conn.execute("SELECT kind, key FROM records WHERE world_id = ?", (world_id,)))
        # the index audit_by_event alone (and audit_tail's rows; a GROUP BY over the view would
        # read every record of the world): an event id's first record answers its repeats
        events: dict[str, int | None] = {}
        for event_id, seq in conn.execute(
                "SELECT event_id, seq FROM audit WHERE world_id = ? AND event_id IS NOT NULL", (world_id,)):
            if events.setdefault(event_id, seq) > seq:
                events[event_id] = seq
        # an events row (older bridges wrote one per decision) holds the reply as sent: it wins
        events.update((event_id, None) for (event_id,) in conn.execute(
            "SELECT event_id FROM events WHERE world_id = ?", (world_id,)))
        cache.events = events
        return cache

    def _write_batch(self, conn: sqlite3.Connection, batch: list[_Queued]
                     ) -> list[tuple[_Queued, Decided | None, BaseException | None]]:
        """Write one batch's rows inside its transaction, then one ``executemany`` per table;
        replays read their stored reply last (so a repeat of a request in the same batch finds
        it). Each world of the batch not checked since the file was last written by anything
        else (:meth:`_changed_elsewhere`; the world's ``WorldCache.checked`` below ``_epoch``)
        is checked first: still registered (a world removed meanwhile gets its decisions
        refused and its cache dropped), and its last record the one this process chained after
        (:meth:`_check_heads`)."""
        names = sorted({item.world_id for item in batch})
        if self._changed_elsewhere(conn):
            self._epoch += 1
        with self._lock:
            caches = {name: self._worlds.get(name) for name in names}
        unchecked = [name for name, cache in caches.items() if cache is None or cache.checked < self._epoch]
        live = set(names).difference(unchecked)
        if unchecked:
            live.update(r[0] for r in conn.execute(
                "SELECT world_id FROM worlds WHERE removed_at IS NULL"
                f" AND world_id IN ({','.join('?' * len(unchecked))})", unchecked))
            if self._tail:
                self._check_heads(conn, [item for item in batch if item.world_id in live and item.world_id in unchecked])
            for name in unchecked:
                cache = caches[name]
                if cache is not None and name in live:
                    cache.checked = self._epoch
        outcomes: list[tuple[_Queued, Decided | None, BaseException | None]] = []
        kept: list[_Queued] = []
        for item in batch:
            if item.world_id in live:
                kept.append(item)
                continue
            with self._lock:
                self._worlds.pop(item.world_id, None)
            gone = WorldNotRegistered(f"world {item.world_id!r} is not registered (see `fate-bridge world list`)")
            outcomes.append((item, None, gone))
        sealed = [item.sealed for item in kept if item.sealed is not None]
        if sealed:
            self._write_sealed(conn, sealed)
            if self._tail:
                self._fold_some(conn, len(sealed))
        records: dict[tuple[str, str, str], bytes] = {}
        worlds: dict[str, tuple[int, bytes | None]] = {}
        for item in kept:
            for kind, key, raw in item.records or ():
                records[item.world_id, kind, key] = raw
            if item.world_row is not None:
                last_seq, settings = item.world_row
                before = worlds.get(item.world_id)
                worlds[item.world_id] = (last_seq, settings if settings is not None else before and before[1])
        if records:
            conn.executemany(self._upsert_records,
                             [(*slot, pack(raw, "records")) for slot, raw in records.items()])
        if worlds:
            conn.executemany("UPDATE worlds SET last_seq = ?, settings = coalesce(?, settings) WHERE world_id = ?",
                             [(last_seq, settings, world_id) for world_id, (last_seq, settings) in worlds.items()])
        events = [item.event_row for item in kept if item.event_row is not None]
        if events:
            conn.executemany("INSERT INTO events (world_id, event_id, reply, request_hash) VALUES (?, ?, ?, ?)",
                             events)
        for item in kept:
            outcomes.append((item, item.decided or self._replay_sync(conn, item), None))
        return outcomes

    def _changed_elsewhere(self, conn: sqlite3.Connection) -> bool:
        """Has anything but this connection's batches committed to the file since its last
        batch (another process, or this store's writer thread on its own connection or this
        one)? ``PRAGMA data_version`` on ``conn`` (inside the batch's transaction) changes with
        every other connection's commit; ``_own_writes`` counts the writer thread's."""
        (version,) = conn.execute("PRAGMA data_version").fetchone()
        seen = (version, self._own_writes)
        changed = self._seen.get(conn) != seen
        self._seen[conn] = seen
        return changed

    @staticmethod
    def _check_heads(conn: sqlite3.Connection, batch: list[_Queued]) -> None:
        """Raise ``sqlite3.IntegrityError`` (failing the batch, nothing acknowledged) if a world
        of ``batch`` has a record at or past the seq its first record here takes: another
        process wrote the world since this one loaded it. (Two writers' rows in audit_tail would
        collide on its own UNIQUE (world_id, seq); this covers the rows folded into audit.)"""
        first: dict[str, int] = {}
        for item in batch:
            if item.sealed is not None:
                first.setdefault(item.world_id, item.sealed.seq)
        for world_id, seq in first.items():
            (stored,) = conn.execute(
                "SELECT max(s) FROM (SELECT max(seq) AS s FROM main.audit WHERE world_id = ?1"
                " UNION ALL SELECT max(seq) FROM audit_tail WHERE world_id = ?1)", (world_id,)).fetchone()
            if stored is not None and stored >= seq:
                raise sqlite3.IntegrityError(
                    f"world {world_id!r} has record {stored} already, written by another process:"
                    f" this one's record {seq} is not stored")

    def _replay_sync(self, conn: sqlite3.Connection, item: _Queued) -> Decided:
        """The stored reply of a repeated ``event_id``: from the audit record that holds it, or
        from an ``events`` row (``item.replay_seq`` None)."""
        if item.replay_seq is None:
            reply, stored_hash = conn.execute(
                "SELECT reply, request_hash FROM events WHERE world_id = ? AND event_id = ?",
                (item.world_id, item.event_id)).fetchone()
            reply = bytes(reply)
            seq, record_hash = self._event_record(conn, item.world_id, item.event_id)
        else:
            record, record_hash = conn.execute("SELECT record, hash FROM audit WHERE world_id = ? AND seq = ?",
                                               (item.world_id, item.replay_seq)).fetchone()
            stored = _replay_decoder.decode(unpack(record))
            reply = replayed_frame(stored)
            stored_hash = hashlib.sha256(bytes(stored.message)).hexdigest()
            seq = item.replay_seq
        other = None not in (stored_hash, item.request_hash) and stored_hash != item.request_hash
        return Decided(reply, replayed=True, other_request=other, seq=seq, record_hash=record_hash)

    def _flush_sync(self, on_loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Group commit: write every queued decision's rows in ONE transaction, then resolve their
        futures after the COMMIT (at once for those of ``on_loop``, the loop this runs on, if
        any). A failed COMMIT fails the whole batch and every decision queued after it (a new
        cache generation); nothing of theirs was acknowledged."""
        while True:
            with self._queue_lock:
                batch = self._queue[:GROUP_COMMIT_MAX]
                del self._queue[:GROUP_COMMIT_MAX]
                if batch:
                    self._last_batch = len(batch)
                if not batch:
                    self._flushing = False
                    return
            with self._lock:
                generation, failure = self._generation, self._failure
            outcomes: list[tuple[_Queued, Decided | None, BaseException | None]] = [
                (item, None, failure) for item in batch if item.generation != generation]
            current = [item for item in batch if item.generation == generation]
            if current:
                try:
                    outcomes += self._batch_transaction(lambda conn: self._write_batch(conn, current),
                                                        inline=on_loop is not None)
                except _WriteLocked:
                    with self._queue_lock:  # back in front, in order, for the writer thread
                        self._queue[:0] = batch
                    raise
                except Exception as exc:
                    with self._lock:
                        self._generation += 1
                        self._failure = exc
                        self._worlds.clear()
                    outcomes += [(item, None, exc) for item in current]
            if self._tail:
                self._count_tail(sum(1 for item, _, exc in outcomes if exc is None and item.sealed is not None))
            if self.signing_key is not None:  # one signature for the batch's receipts
                try:
                    outcomes = with_receipts(self.signing_key, outcomes)
                except Exception:  # committed: the replies go out, without receipts, rather than never
                    log.exception("receipts_failed", decisions=len(outcomes))
            by_loop: dict[asyncio.AbstractEventLoop, list[tuple]] = {}
            for item, decided, exc in outcomes:
                by_loop.setdefault(item.loop, []).append((item.future, decided, exc))
            for loop, settled in by_loop.items():  # one wake-up of each loop per batch
                if on_loop is loop:
                    _settle_futures(settled)
                else:
                    loop.call_soon_threadsafe(_settle_futures, settled)

    def _count_tail(self, appended: int) -> None:
        """After a batch: count the ``appended`` rows it committed to audit_tail and those it
        folded (:meth:`_fold_some`; none if it failed, ``appended`` 0), and once the tail holds
        ``FOLD_ROWS`` rows (or, after a failed fold, ``_fold_retry_at``) start folding on the
        writer thread (:meth:`_fold_sync`) for a file's store."""
        folded, self._folded = (self._folded if appended else 0), 0
        with self._queue_lock:
            self._tail_rows = max(0, self._tail_rows + appended - folded)
            start = (self._tail_rows >= max(FOLD_ROWS, self._fold_retry_at) and not self._folding
                     and self._batch_conn is not None and not self._closed)
            if start:
                self._folding = True
        if start:
            self._executor.submit(self._fold_sync)

    def _fold_failed(self, tail_rows: int) -> None:
        """A fold failed (disk full, a damaged tail; not a lock held elsewhere) when audit_tail
        held ``tail_rows`` rows: logged (call it in the ``except``); it changed nothing, and no
        fold is tried again before the tail has grown by ``FOLD_ROWS`` rows, rather than at
        every batch."""
        log.exception("audit_tail_fold_failed")
        self._fold_retry_at = tail_rows + FOLD_ROWS

    def _fold_some(self, conn: sqlite3.Connection, adding: int) -> None:
        """Inside a batch's transaction (``adding`` rows appended to audit_tail by it): once the
        tail holds ``FOLD_BACKSTOP`` rows or more (``FOLD_ROWS`` when the batches run on the
        writer thread: ``":memory:"``), fold its oldest ``FOLD_CHUNK`` into audit and records
        (:func:`~bridge.store.schema.fold_tail`): under load the writer thread's folds
        (:meth:`_fold_sync`) may not get the write lock often enough to keep up. Under a
        savepoint: a failing fold leaves the batch as it was (:meth:`_fold_failed`)."""
        self._folded = 0
        threshold = FOLD_ROWS if self._batch_conn is None else FOLD_BACKSTOP
        if self._tail_rows + adding < max(threshold, self._fold_retry_at):
            return
        conn.execute("SAVEPOINT fold")
        try:
            self._folded = fold_tail(conn, FOLD_CHUNK)
        except sqlite3.Error:
            conn.execute("ROLLBACK TO fold")
            self._fold_failed(self._tail_rows + adding)
        conn.execute("RELEASE fold")

    def _fold_sync(self) -> None:
        """One fold on the writer thread, started by a batch once audit_tail holds ``FOLD_ROWS``
        rows: its oldest ``FOLD_CHUNK`` rows in one transaction, then (while more than half as
        many are left) the next chunk as another job, so that a batch waiting on this thread for
        the write lock goes between two. The batches come first: a fold waits ``FOLD_WAIT_MS``
        at most for the lock they hold, and gives up until the next batch starts it again (under
        load, the batches fold themselves: :meth:`_fold_some`). A failure is logged and changes
        nothing (:meth:`_fold_failed`)."""
        conn, moved = self._conn, 0
        try:
            if conn is not None:
                conn.execute(f"PRAGMA busy_timeout = {FOLD_WAIT_MS}")
                try:
                    moved = self._transaction(lambda c: fold_tail(c, FOLD_CHUNK))
                finally:
                    conn.execute("PRAGMA busy_timeout = 5000")
        except sqlite3.OperationalError as exc:
            if not _locked(exc):
                self._fold_failed(self._tail_rows)
        except sqlite3.Error:
            self._fold_failed(self._tail_rows)
        with self._queue_lock:
            self._tail_rows = max(0, self._tail_rows - moved)
            more = moved > 0 and self._tail_rows > FOLD_ROWS // 2 and not self._closed
            self._folding = more
        if more:
            self._executor.submit(self._fold_sync)

    def _fold_all_sync(self) -> None:
        """Fold both tails whole, on the writer thread (a stop; a start folds in
        :meth:`_connect`). A failure is logged and changes nothing: the rows stay in the tails,
        read as audit and records, and the next start moves them."""
        try:
            self._transaction(fold_tail)
        except sqlite3.Error:
            log.exception("audit_tail_fold_failed")
            return
        with self._queue_lock:
            self._tail_rows = 0

    def _batch_transaction(self, work: Callable[[sqlite3.Connection], T], inline: bool) -> T:
        """Run a batch's ``work`` in one transaction: ``inline`` (on the event loop) on the
        batch connection, which never waits for a write lock held elsewhere (another process,
        the writer thread's own work: raises :class:`_WriteLocked` before anything is written);
        else on the writer's connection, which waits for it (``busy_timeout``)."""
        if not inline or self._batch_conn is None:
            return self._transaction(work)
        try:
            self._batch_conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if _locked(exc):
                raise _WriteLocked from exc
            raise
        return _committed(self._batch_conn, work)

    def _close_sync(self) -> None:
        if self._tail and self._conn is not None:
            self._fold_all_sync()  # a stopped bridge leaves every row in audit and records
        if self._loader is not None:
            self._loader.shutdown(wait=True)
            for conn in (self._loader_conn, self._fetch_conn, self._batch_conn):
                if conn is not None:
                    conn.close()
            self._loader = self._loader_conn = self._fetch_conn = self._batch_conn = None
        if self._wal is not None:
            self._wal.stop()
            self._wal = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # --- the async interface -------------------------------------------------------------------

    async def _load_world(self, world_id: str) -> None:
        """Load the world's state into memory (a no-op if another call did meanwhile). Raises
        ``WorldNotRegistered``."""
        if self._loader is None:
            loaded = await self._run(self._load_world_sync, world_id)
        else:
            if self._closed:
                raise ConfigError("the store is closed")
            loaded = await asyncio.get_running_loop().run_in_executor(
                self._loader, self._load_world_sync, world_id)
        with self._lock:
            self._worlds.setdefault(world_id, loaded)

    async def decide(self, world_id: str, event_id: str | None, decision: DecisionFn,
                     request_hash: str | None = None) -> Decided:
        """Run ``decision`` on the world's state in memory and return its reply once its rows
        are committed (see the module docstring). A repeated ``event_id`` returns the stored reply
        without running anything. A decision that raises stores nothing and raises here."""
        if self._closed:
            raise ConfigError("the store is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Decided] = loop.create_future()
        while True:
            with self._lock:  # a COMMIT failing from now on fails this decision too (its generation)
                cache = self._worlds.get(world_id)
                if cache is not None:
                    item = _Queued(world_id, self._generation, loop, future, event_id=event_id,
                                   request_hash=request_hash)
                    if event_id is not None and event_id in cache.events:
                        item.replay_seq = cache.events[event_id]
                    else:
                        self._decide_in_memory(cache, item, decision)
                    break
            await self._load_world(world_id)
        with self._queue_lock:
            self._queue.append(item)
            start = not self._flushing
            self._flushing = True
        if start:  # the first decision of this tick: the others of the tick join its batch
            if self._last_batch > 1:
                # Busy (the last batch held several): wait one more loop iteration, so that the
                # frames read in this one, whose handlers run in the next, join this batch (at
                # C=10: ~5 -> ~8 decisions a COMMIT, -14% CPU, +16% decisions/s, p99 lower). At
                # one connection every batch holds one decision and nothing waits.
                loop.call_soon(loop.call_soon, self._start_flush)
            else:
                loop.call_soon(self._start_flush)
        return await future

    def _start_flush(self) -> None:
        self._ts = None
        if self._batch_conn is not None:  # a file: written here, on the loop (module docstring)
            try:
                self._flush_sync(asyncio.get_running_loop())
                return
            except _WriteLocked:
                pass  # the writer thread waits for the lock; the loop goes on serving
        self._executor.submit(self._flush_sync)

    def _decide_in_memory(self, cache: WorldCache, item: _Queued, decision: DecisionFn) -> None:
        """Run ``decision`` against ``cache`` and fill ``item`` with its outcome and rows (called
        with the lock held). Raises what the decision raises, leaving the cache as it was."""
        state = CachedState(cache)
        result: Decision = decision(state)
        if result.ok:
            item.records, item.world_row = state.changed, state.world_change()
            state.apply()
        seq = record_hash = None
        if result.audit is not None:
            if self._ts is None:
                self._ts = utc_now()  # one clock read per batch: its decisions commit together
            item.sealed = self._seal(cache.world_id, result.audit, self._ts, cache.head, cache.window)
            seq, record_hash = item.sealed.seq, item.sealed.hash
            cache.head = (seq, record_hash)
        if item.event_id is not None:
            cache.events[item.event_id] = seq
            if seq is None:
                item.event_row = (cache.world_id, item.event_id, result.reply, item.request_hash)
        item.decided = Decided(result.reply, replayed=False, kept=result.kept, seq=seq,
                               record_hash=record_hash)

    async def read(self, world_id: str, query: Callable[[WorldState], T]) -> T:
        """Run a read-only ``query`` on the world's state in memory (anything it writes is
        dropped). Raises ``WorldNotRegistered`` for a world not registered."""
        await self._run(self._require_registered_sync, world_id)
        while True:
            with self._lock:
                cache = self._worlds.get(world_id)
                if cache is not None:
                    return query(CachedState(cache))
            await self._load_world(world_id)

    def _require_registered_sync(self, world_id: str) -> None:
        assert self._conn is not None
        self._require_world(self._conn, world_id, registered=True)

    async def close(self) -> None:
        """Sign the chains' heads (with an audit key), then close after queued work finishes;
        idempotent."""
        if self._closed:
            return
        await self._run(self._checkpoint_heads_sync)
        await self._run(self._close_sync)
        self._closed = True
        self._executor.shutdown(wait=True)
