"""The SQLite backend's part of the store: an embedded file, or ``":memory:"``.

The file comes from ``--db``; ``":memory:"`` serves ``fate-bridge resolve`` and tests.
:class:`SQLiteStore` is the shared :class:`~bridge.store.writer.BatchWriter`: world state in
memory, group commit, one transaction per batch. It adds what only SQLite needs.

- Where a COMMIT runs. A file's batches are written on the event loop itself, right after the
  tick that decided them, on a connection of their own (as ``bench.durable`` does). In WAL mode
  with ``synchronous = NORMAL``, a COMMIT is a write into the log, with no fsync. The
  checkpointer thread copies the log into the file and syncs it (:class:`_WalCheckpointer`).
  Handing the batch to a thread and back cost more than the write: ~100 µs of CPU and two
  thread wake-ups per batch, most of a decision's latency at one connection.
- That connection never waits for the write lock. If the lock is held elsewhere, the batch goes
  to the writer thread (:class:`~bridge.store.writer.WriteLocked`). Everything else (registry,
  audit queries, verify) runs on the writer thread. Worlds load on a loader thread, a WAL
  reader. ``":memory:"`` has one connection for all, and its batches run on the writer thread.
- The tails (schema 9). A batch writes ``BEGIN IMMEDIATE ... COMMIT`` with one ``executemany``
  per table into ``audit_tail`` and ``records_tail``. These are small tables whose pages every
  world of the batch shares; an SQLite COMMIT pays per page written. The writer thread moves
  them into ``audit`` and ``records`` a chunk at a time (:meth:`SQLiteStore._fold_sync`). When
  it falls behind, the batches fold themselves (:meth:`SQLiteStore._batch_written`). Every
  connection reads each pair as one (:func:`~bridge.store.schema.read_as_one`).
- Other processes on the same file. ``PRAGMA data_version`` tells a batch whether anything else
  wrote the file (:meth:`SQLiteStore._changed_elsewhere`). A world written by another process
  fails that batch. Either its last record is at or past the seq this process chains next
  (:meth:`SQLiteStore._check_heads`), or the insert collides on audit_tail's
  ``(world_id, seq)``. So a second process on the same file never corrupts a chain.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import structlog

from ..errors import ConfigError
from ..startup import database_problem
from .audit_rows import stored_bytes
from .schema import (FOLD_BACKSTOP, FOLD_CHUNK, FOLD_ROWS, FOLD_WAIT_MS, T, _committed, _in_transaction, connect,
                     fold_tail, insert_audit_sql, read_as_one, storage_fault, upsert_records_sql)
from .writer import BatchWriter, WriteLocked, _Queued

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

WAL_CHECKPOINT_SECONDS = 5.0  # how often the log is copied into the database file
# Threads loading a file's worlds: two, so that a world with a short history is loaded
# while a long one is (a load reads and hashes every state row of its world), never queued behind it.
LOADERS = 2


class _WalCheckpointer:
    """Copies the WAL into the database file every ``WAL_CHECKPOINT_SECONDS``; truncates it at stop.

    It runs on a thread and connection of its own. PASSIVE: it never blocks the writer.
    """

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
        """Stop the thread, truncate the log, close.

        All committed pages are in the file by then. If storage refuses the checkpoint (a full disk,
        the file gone), the log stays as it is; the next start copies it in.
        """
        self._stop.set()
        self._thread.join()
        try:
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.OperationalError as exc:
            log.warning("wal_checkpoint_failed", error=str(exc))
        finally:
            self._conn.close()


log = structlog.get_logger("fate_bridge")


def _locked(exc: sqlite3.OperationalError) -> bool:
    """Whether ``exc`` says another connection holds the lock (busy), not that the work failed."""
    return getattr(exc, "sqlite_errorname", None) in ("SQLITE_BUSY", "SQLITE_LOCKED")


class DatabaseFileGone(Exception):
    """The database file this store writes was deleted or replaced while it ran.

    A COMMIT since went into a file no path reaches, so its batch is not acknowledged. Nothing is
    written until ``serve`` is started again.
    """


class SQLiteStore(BatchWriter):
    """The embedded store. ``path`` is a file (created with its folder) or ``":memory:"``.

    Raises ``ConfigError`` when the file cannot be opened or was written by a newer bridge.
    Use :meth:`open` (a classmethod coroutine) to construct.
    """

    # Every row is appended to the tails first, and read with audit and records as one
    # (schema.read_as_one); the writer thread folds them (_fold_sync).
    _tail = True
    _insert_audit = insert_audit_sql("audit_tail")
    _upsert_records = upsert_records_sql("records_tail")

    def __init__(self, path: str | Path, *, audit_key: bytes | None = None,
                 signing_key: Ed25519PrivateKey | None = None) -> None:
        super().__init__(path, audit_key=audit_key, signing_key=signing_key)
        self._wal: _WalCheckpointer | None = None
        # A file's worlds are loaded on threads (self._loader, LOADERS of them) and connections of
        # their own (WAL readers, one per thread); ":memory:" is one connection's alone, so there
        # the writer loads.
        self._loader_local = threading.local()
        self._loader_conns: list[sqlite3.Connection] = []
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
        self._identity: tuple[int, int] | None = None  # the file's (st_dev, st_ino) at open (_check_file)

    # --- runs on the writer thread -------------------------------------------------------------

    def _connect(self) -> None:
        try:
            conn = connect(self.path)
            try:  # what a killed bridge left in the tails
                _in_transaction(conn, fold_tail)
            except sqlite3.IntegrityError as exc:
                raise ConfigError(
                    f"the database {self.path!r} holds records in audit_tail that collide with its audit"
                    f" trail ({exc}): two bridge processes wrote the same world. `fate-bridge audit verify"
                    f" --db {self.path}` names it; restore your last backup (`fate-bridge restore`)") from None
            read_as_one(conn)
            if self.path != ":memory:":
                # what a killed bridge left in the log is copied into the file now, before serving:
                # the first periodic checkpoint would copy it all while the worlds decide (the
                # others' p99 was 6-7x while a long history loaded after a kill -9, ~1x after a
                # clean stop, which truncates the log)
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
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
                self._loader = ThreadPoolExecutor(max_workers=LOADERS, thread_name_prefix="fate-bridge-load")
                stat = Path(self.path).expanduser().stat()
                self._identity = (stat.st_dev, stat.st_ino)
        except (OSError, sqlite3.DatabaseError) as exc:
            raise ConfigError(database_problem(self.path, exc)) from None
        self._conn = conn

    def _transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` in one transaction on the writer's connection.

        Raises :class:`DatabaseFileGone` after its COMMIT if the file was deleted or replaced. What it
        wrote is then in no file a path reaches, so the caller must not acknowledge it.
        """
        assert self._conn is not None
        self._own_writes += 1  # the next batch checks what this may have changed (_changed_elsewhere)
        result = _in_transaction(self._conn, work)
        self._check_file()
        return result

    def _check_file(self) -> None:
        """Raise :class:`DatabaseFileGone` if the path no longer leads to the file this store opened.

        The file was deleted, renamed away, or replaced: its device and inode differ. One ``stat``,
        ~1 µs; nothing for ``":memory:"``.
        """
        if self._identity is None:
            return
        try:
            stat = os.stat(Path(self.path).expanduser())
        except FileNotFoundError:
            stat = None
        if stat is None or (stat.st_dev, stat.st_ino) != self._identity:
            raise DatabaseFileGone(
                f"the database file {self.path} was deleted or replaced while the bridge ran: "
                "restore it (`fate-bridge restore`) or put it back, then start serve again")

    def _fault_reason(self, exc: Exception) -> str | None:
        """A storage failure's reason (see :meth:`BatchWriter._fault_reason`).

        The file gone, or what :func:`~bridge.store.schema.storage_fault` says of ``exc``.
        """
        if isinstance(exc, DatabaseFileGone):
            return "database_file_gone"
        return storage_fault(exc, None if self._identity is None else self.path)

    def _probe_sync(self) -> None:
        """While storage is down: check the file is the one opened, and that a write commits.

        The write is an UPDATE of a row to its own value. SQLite writes the page all the same, so a full
        disk or a read-only file system fails it. Waits for no lock held elsewhere.
        """
        self._check_file()
        assert self._conn is not None
        self._conn.execute("PRAGMA busy_timeout = 0")
        try:
            self._transaction(lambda conn: conn.execute(
                "UPDATE meta SET value = value WHERE key = 'schema_version'"))
        finally:
            self._conn.execute("PRAGMA busy_timeout = 5000")

    def _state_rows(self, conn: sqlite3.Connection, world_id: str) -> Iterator[tuple[str, str, bytes]]:
        """A world's ``records`` rows (see :meth:`BatchWriter._state_rows`).

        The table and its tail are read apart; a tail row replaces its key's older value. The
        ``records`` view does the same with a subquery per row, a third slower for a long history. The
        store migrated the file at open, so both tables are there.
        """
        tail = {(kind, key): value for kind, key, value in conn.execute(
            "SELECT kind, key, value FROM main.records_tail WHERE world_id = ?", (world_id,))}
        for kind, key, value in conn.execute("SELECT kind, key, value FROM main.records WHERE world_id = ?", (world_id,)):
            if (kind, key) not in tail:
                yield kind, key, value if type(value) is bytes else stored_bytes(value)
        for (kind, key), value in tail.items():
            yield kind, key, stored_bytes(value)

    def _loading_connection(self) -> tuple[sqlite3.Connection | None, bool]:
        """A file's worlds load on their loader thread's connection and read record values on use.

        That connection is made on first use. ``":memory:"``'s load on the writer's, values at load.
        """
        if self._loader is None:
            return self._conn, False
        conn = getattr(self._loader_local, "conn", None)
        if conn is None:
            conn = self._loader_local.conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout = 5000")
            read_as_one(conn)
            with self._lock:
                self._loader_conns.append(conn)
        return conn, True

    def _fetch_record(self, world_id: str, kind: str, key: str) -> bytes:
        """The stored bytes of a record a decision asks for the first time.

        Read on the event loop with the store's lock held, on a connection of its own, seeing what was
        committed.
        """
        if self._fetch_conn is None:
            self._fetch_conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._fetch_conn.execute("PRAGMA busy_timeout = 5000")
            read_as_one(self._fetch_conn)
        (value,) = self._fetch_conn.execute(
            "SELECT value FROM records WHERE world_id = ? AND kind = ? AND key = ?",
            (world_id, kind, key)).fetchone()
        return stored_bytes(value)

    def _changed_elsewhere(self, conn: sqlite3.Connection) -> bool:
        """Has anything but this connection's batches committed to the file since its last batch?

        That is another process, or this store's writer thread on its own connection or this one.
        ``PRAGMA data_version`` on ``conn``, inside the batch's transaction, changes with every other
        connection's commit. ``_own_writes`` counts the writer thread's.
        """
        (version,) = conn.execute("PRAGMA data_version").fetchone()
        seen = (version, self._own_writes)
        changed = self._seen.get(conn) != seen
        self._seen[conn] = seen
        return changed

    def _check_heads(self, conn: sqlite3.Connection, batch: list[_Queued]) -> None:
        """Raise ``sqlite3.IntegrityError`` if another process wrote a world of ``batch`` since its load.

        That shows as a record at or past the seq the world's first record here takes. The batch fails
        and nothing is acknowledged. Two writers' rows in audit_tail would collide on its own UNIQUE
        (world_id, seq). This check covers the rows folded into audit.
        """
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

    def _writes_on_loop(self) -> bool:
        """A file's batches: on the event loop (the module docstring); ``":memory:"``'s: the writer's."""
        return self._batch_conn is not None

    def _batch_committed(self, appended: int) -> None:
        """After a batch: count its rows, and start a fold when the tail is full enough.

        It counts the ``appended`` rows the batch committed to audit_tail and those it folded
        (:meth:`_batch_written`). A failed batch counts none (``appended`` 0). For a file's store, a fold
        starts on the writer thread (:meth:`_fold_sync`) once the tail holds ``FOLD_ROWS`` rows. After a
        failed fold, it waits for ``_fold_retry_at`` instead.
        """
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
        """A fold failed while audit_tail held ``tail_rows`` rows: log it. Call it in the ``except``.

        Causes are a full disk or a damaged tail, not a lock held elsewhere. The fold changed nothing.
        No fold is tried again before the tail has grown by ``FOLD_ROWS`` rows, rather than at every
        batch.
        """
        log.exception("audit_tail_fold_failed")
        self._fold_retry_at = tail_rows + FOLD_ROWS

    def _batch_written(self, conn: sqlite3.Connection, adding: int) -> None:
        """Inside a batch's transaction: fold the tail's oldest rows when it holds too many.

        The batch appended ``adding`` rows to audit_tail. Once the tail holds ``FOLD_BACKSTOP`` rows or
        more, its oldest ``FOLD_CHUNK`` move into audit and records (:func:`~bridge.store.schema.fold_tail`).
        The limit is ``FOLD_ROWS`` when batches run on the writer thread (``":memory:"``). Under load
        the writer thread's folds (:meth:`_fold_sync`) may not get the write lock often enough. The fold
        runs under a savepoint, so a failing one leaves the batch as it was (:meth:`_fold_failed`).
        """
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
        """One fold on the writer thread, started by a batch once audit_tail holds ``FOLD_ROWS`` rows.

        It moves the oldest ``FOLD_CHUNK`` rows in one transaction. While more than half as many are
        left, the next chunk goes as another job, so a batch waiting on this thread for the write lock
        goes between two. The batches come first: a fold waits ``FOLD_WAIT_MS`` at most for their lock,
        then gives up until the next batch starts it again. Under load, the batches fold themselves
        (:meth:`_batch_written`). A failure is logged and changes nothing (:meth:`_fold_failed`).
        """
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
        except (sqlite3.Error, DatabaseFileGone):
            self._fold_failed(self._tail_rows)
        with self._queue_lock:
            self._tail_rows = max(0, self._tail_rows - moved)
            more = moved > 0 and self._tail_rows > FOLD_ROWS // 2 and not self._closed
            self._folding = more
        if more:
            self._executor.submit(self._fold_sync)

    def _fold_all_sync(self) -> None:
        """Fold both tails whole, on the writer thread, at stop.

        A start folds in :meth:`_connect`. A failure is logged and changes nothing. The rows stay in the
        tails, read as audit and records, and the next start moves them.
        """
        try:
            self._transaction(fold_tail)
        except (sqlite3.Error, DatabaseFileGone):
            log.exception("audit_tail_fold_failed")
            return
        with self._queue_lock:
            self._tail_rows = 0

    def _batch_transaction(self, work: Callable[[sqlite3.Connection], T], inline: bool) -> T:
        """Run a batch's ``work`` in one transaction.

        ``inline`` (on the event loop): on the batch connection, which never waits for a write lock
        held elsewhere. The lock may be held by another process or the writer thread's own work. Then
        it raises :class:`WriteLocked` before anything is written. Otherwise: on the writer's
        connection, which waits for the lock (``busy_timeout``).
        """
        if not inline or self._batch_conn is None:
            return self._transaction(work)
        try:
            self._batch_conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if _locked(exc):
                raise WriteLocked from exc
            raise
        result = _committed(self._batch_conn, work)
        self._check_file()  # nothing acknowledged that went into a file no path reaches
        return result

    def _copy_target(self, table: str) -> str:
        # the store's connection reads audit and records through TEMP views (schema.read_as_one):
        # copied rows go into the file's tables themselves
        return f"main.{table}"

    def _copied(self, conn: sqlite3.Connection) -> None:
        fold_tail(conn)  # the ids new records take in audit_tail (an empty fold sets its counter)

    def _close_sync(self) -> None:
        if self._conn is not None:
            self._fold_all_sync()  # a stopped bridge leaves every row in audit and records
        if self._loader is not None:
            self._loader.shutdown(wait=True)
            for conn in (*self._loader_conns, self._fetch_conn, self._batch_conn):
                if conn is not None:
                    conn.close()
            self._loader_conns.clear()
            self._loader = self._fetch_conn = self._batch_conn = None
        if self._wal is not None:
            self._wal.stop()
            self._wal = None
        super()._close_sync()
