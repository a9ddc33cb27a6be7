"""The batch writer both store backends share: world caches, group commit, the tick's transaction, leases.

:class:`BatchWriter` is everything :class:`~bridge.store.base.Store` does that does not depend on
the database. This is how :meth:`BatchWriter.decide` works:

- The world's state is held in memory (:class:`~bridge.store.memory.WorldCache`), loaded once
  per world. The decision runs against it on the caller's event loop, so it reads no database.
  Its writes reach the cache only if it passed. A refusal or an exception leaves the state as it
  was; no SAVEPOINT is needed.
- Its audit record is sealed at once: seq and chain hash are known (:meth:`AuditRows._seal`).
  Its rows wait for the batch. Decisions of one event-loop tick, and those arriving while the
  writer is busy, are written together. That is ONE transaction with one ``executemany`` per
  table: audit, records, worlds, and events for a decision without an audit record. The caller
  gets its reply only after that COMMIT.
- The reply is stored once, inside the audit record, key-sorted as the chain's canonical bytes
  need. A repeated ``event_id`` rebuilds the exact frame sent from it
  (:func:`bridge.replies.replayed_frame`). For replies decided by older bridges, it returns the
  ``events`` row's.
- If a COMMIT fails, its decisions fail, and so does every decision queued after them. None was
  acknowledged, and later ones may have read their state. The caches are reloaded from the
  database.
- Another process may change the database. A world it removed is noticed at the world's next
  batch; its decisions are refused. A world it wrote fails that batch, through the backend's
  :meth:`BatchWriter._check_heads` or the audit insert's ``UNIQUE (world_id, seq)``. So a second
  process on the same database never corrupts a chain.
- Leases (:meth:`BatchWriter._fence`): a backend shared by several processes locks each batch's
  worlds. It refuses with :class:`~bridge.errors.LeaseLost` the decisions read under a lease token
  the world no longer holds: another process took it, or this one took it again since. A
  backend of one process has no leases.

What differs per database is a small backend part: a subclass implementing the hooks below. It
holds the SQL dialect, the connection, and where a COMMIT runs and what it costs.
:mod:`bridge.store.sqlite` is an embedded file: batches written on the event loop, the tails and
their folds. :mod:`bridge.store.postgres` is a server: batches sent from the event loop, their
COMMIT awaited there (:meth:`BatchWriter._flush_async`), and per-world leases. Neither backend
derives from the other. The shared SQL uses ``?`` placeholders; PostgreSQL's connection
translates them.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter
from typing import TYPE_CHECKING, Any, Self

import msgspec
import structlog

from .. import audit
from ..record import AuditRecord
from ..config import MAX_WORLDS_IN_MEMORY, db_label
from ..errors import ConfigError, LeaseLost, StorageUnavailable, WorldNotRegistered
from ..replies import replayed_frame
from ..receipts import with_receipts
from ..state import WorldState
from .audit_rows import AuditRows, Sealed, stored_bytes, window_hashes
from .base import Decided, Decision, DecisionFn
from .blobs import unpack
from .health import PROBE_SECONDS, StorageHealth
from .memory import RECENT_EVENTS, CachedState, EventFilter, WorldCache
from . import seal
from .codecs import decode_settings
from .schema import INSERT_EVENT, UPDATE_WORLD, UPDATE_WORLD_SEALED, T, utc_now
from .invites import InviteRows
from .worlds import WorldRows

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

log = structlog.get_logger("fate_bridge")

GROUP_COMMIT_MAX = 64  # decisions per transaction at most: bounds the latency a batch adds
# A world's load hashes its state rows (bridge/store/seal.py) on the loading thread; every this many
# rows (~0.3 ms of work) it lets go of the GIL, so that the event loop's decisions of other worlds go on meanwhile.
LOAD_YIELD_ROWS = 128
# A loaded world's older event ids (beyond its RECENT_EVENTS) are filed into a Bloom filter after
# its load, this many records' worth per step on the loading thread (a step costs a few ms), so
# that a world's first decision never waits for its whole history.
OLDER_EVENTS_STEP = 2048


class WriteLocked(Exception):
    """Another connection holds the write lock; raised before anything is written.

    A backend's inline batch transaction (:meth:`BatchWriter._batch_transaction`) raises it. The
    batch then goes to the writer thread, which waits for the lock.
    """


@dataclass(slots=True)
class _Queued:
    """A decided request waiting for its batch's COMMIT.

    It holds what its caller gets, the rows it adds, and where to deliver the outcome. ``decided``
    None: a replay whose stored reply the writer reads. ``replay_seq`` is the audit record holding
    it; None means an ``events`` row.
    """

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
    seal_input: tuple | None = None  # the world after this decision, as its batch seals it (WorldCache.seal_input)
    lease: int | None = None  # the lease token the world's state in memory was read under (_lease_of)


_replay_decoder = msgspec.json.Decoder(AuditRecord)


def _settle_futures(settled: list[tuple[asyncio.Future[Decided], Decided | None, BaseException | None]]) -> None:
    """Deliver a committed batch's outcomes (runs on the event loop)."""
    for future, decided, exc in settled:
        if future.cancelled():
            continue
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(decided)  # type: ignore[arg-type]


class BatchWriter(WorldRows, InviteRows, AuditRows):
    """The shared part of a store backend (see the module docstring).

    A backend subclass provides:

    - ``_connect``: open, migrate, set ``_conn``.
    - ``_transaction``: run work in one transaction on the writer's connection.
    - its tables' SQL: ``_insert_audit`` and ``_upsert_records`` (schema's ``insert_audit_sql``,
      ``upsert_records_sql``).
    - ``_tail``: whether rows go to tails first.

    It overrides the hooks below whose default does not fit. Use :meth:`open` (a classmethod
    coroutine) to construct.
    """

    _upsert_records: str

    def __init__(self, path: str | Path, *, audit_key: bytes | None = None,
                 signing_key: Ed25519PrivateKey | None = None) -> None:
        self.path = str(path)
        self.audit_key = audit_key
        self.signing_key = signing_key  # signs heads and receipts (bridge/heads.py, receipts.py)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fate-bridge-db")
        self._conn: Any = None  # the writer thread's connection (the backend's _connect sets it)
        self._closed = False
        self._queue: list[_Queued] = []  # decisions waiting for the writer (group commit)
        self._queue_lock = threading.Lock()
        self._flushing = False  # a flush is scheduled or running (writer thread or _flush_async)
        self._flush_task: asyncio.Task[None] | None = None  # the last _flush_async started
        self._closing = False  # close() has begun: decide() refuses
        self._last_batch = 0  # decisions in the last batch written (group commit waits a tick when > 1)
        # The worlds' state in memory (bridge/store/memory.py). The lock guards it against
        # decisions from several event loops and the writer thread's resets.
        # Least recently used first: beyond ``max_worlds``, the idle ones leave (:meth:`_evict`).
        self._worlds: OrderedDict[str, WorldCache] = OrderedDict()
        self._lock = threading.Lock()
        self.max_worlds = MAX_WORLDS_IN_MEMORY  # the budget of worlds in memory
        # Decisions queued and not yet through their batch, per world: such a world never leaves.
        self._pending: dict[str, int] = {}
        self._generation = 0  # bumped when a COMMIT fails: decisions read before it fail too
        self._failure: BaseException | None = None  # what failed the last generation
        self._ts: str | None = None  # the UTC time of the batch being gathered (one clock read)
        # Where worlds are loaded: the backend may give them a thread of their own (SQLite's file),
        # so a world's first decision never holds up the batches of the others; None: the writer's.
        self._loader: ThreadPoolExecutor | None = None
        # Bumped by each batch that finds the database changed elsewhere: a loaded world whose
        # WorldCache.checked is lower is checked at its next batch (it may have been written or
        # removed meanwhile, though the batch that noticed the change did not hold it).
        self._epoch = 0
        # Plain callbacks a server's metrics set (bridge/metrics.py; the store imports nothing of
        # them): the size of each batch written (called on the thread writing it), and the seconds
        # each world's state took to read (called on the thread reading it).
        self.on_batch: Callable[[int], None] | None = None
        self.on_world_load: Callable[[float], None] | None = None
        self._seal_keys: tuple[object, object, bytes | None] = (None, None, None)
        self._filing: set[asyncio.Task[None]] = set()  # older event ids being filed (_file_older_events)
        # Whether storage can be written now (bridge/store/health.py): set down by a
        # failure the backend names (_fault_reason), up by a committed batch or the probe.
        self.health = StorageHealth(db_label(self.path))
        self._probe: threading.Thread | None = None  # trying the database again while it is down

    @property
    def _seal_key(self) -> bytes | None:
        """The key of the state seals (:func:`bridge.store.seal.seal_key`).

        Made again when the store's keys change (``audit new-key``).
        """
        signing_key, audit_key, key = self._seal_keys
        if signing_key is not self.signing_key or audit_key is not self.audit_key:
            key = seal.seal_key(self.signing_key, self.audit_key)
            self._seal_keys = (self.signing_key, self.audit_key, key)
        return key

    def worlds_in_memory(self) -> int:
        """How many worlds' state is held in memory now."""
        return len(self._worlds)

    def unload(self, world_id: str) -> bool:
        """Drop ``world_id``'s state from memory now, as :meth:`_evict` does beyond the budget.

        It is loaded again, event ids and all, on its next use. A world with a decision queued or in
        its batch stays. True when it was held and is dropped. bench/memory.py uses it to time reloads.
        """
        with self._lock:
            if world_id in self._pending:
                return False
            return self._worlds.pop(world_id, None) is not None

    @classmethod
    async def open(cls, path: str | Path, *, audit_key: bytes | None = None,
                   signing_key: Ed25519PrivateKey | None = None) -> Self:
        """Open the database at ``path``, creating or upgrading it.

        ``path`` is a file, ``":memory:"`` or a ``postgresql://`` URL, as the backend takes. With
        ``audit_key``, the audit chain gets HMAC checkpoints: every ``CHECKPOINT_EVERY`` records and at
        close. With ``signing_key`` (Ed25519), it also gets signed heads there, and replies get
        receipts. Raises ``ConfigError`` when the database cannot be opened or was written by a newer
        bridge.
        """
        store = cls(path, audit_key=audit_key, signing_key=signing_key)
        try:
            await store._run(store._connect)
        except BaseException:
            store._executor.shutdown(wait=False)
            raise
        return store

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        """Run ``fn(*args)`` on the writer thread. Raises what it raises, a storage outage as
        :class:`~bridge.errors.StorageUnavailable` (:meth:`_unavailable`)."""
        if self._closed:
            raise ConfigError("the store is closed")
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
        except Exception as exc:
            raise self._unavailable(exc) from exc

    def _unavailable(self, exc: Exception) -> Exception:
        """``exc`` as the store's callers get it.

        A failure of storage itself is one the backend's :meth:`_fault_reason` names. It marks the
        store's health down and becomes :class:`StorageUnavailable`. The outage is logged once, then
        probed (:meth:`_probe_until_up`). Anything else is returned as it is.
        """
        if isinstance(exc, StorageUnavailable):
            return exc
        reason = self._fault_reason(exc)
        if reason is None:
            return exc
        if (self.health.down(reason, str(exc).strip()) and not self._closing
                and (self._probe is None or not self._probe.is_alive())):
            self._probe = threading.Thread(target=self._probe_until_up, name="fate-bridge-probe", daemon=True)
            self._probe.start()
        return self.health.refusal()

    def _probe_until_up(self) -> None:
        """While storage is down, probe it until its return is confirmed.

        Every ``PROBE_SECONDS`` it tries the database on the writer thread (:meth:`_probe_sync`). A
        success lets requests through again. The outage's end is logged once storage stayed writable,
        or a batch committed (:meth:`StorageHealth.up`). Stops when the store closes.
        """
        while (not self.health.available or self.health.recovering) and not self._closing:
            time.sleep(PROBE_SECONDS)
            try:
                self._executor.submit(self._probe_sync).result()
            except RuntimeError:  # the writer thread was shut down: the store closed
                return
            except Exception as exc:
                reason = self._fault_reason(exc)
                if reason is not None:
                    self.health.down(reason, str(exc).strip())  # still down (its reason may change)
                continue
            self.health.up(confirmed=False)

    # --- the backend's part (hooks) --------------------------------------------------------------

    def _connect(self) -> None:
        """Open the database, create or upgrade its schema and set ``_conn`` (writer thread)."""
        raise NotImplementedError

    def _transaction(self, work: Callable[[Any], T]) -> T:
        """Run ``work(conn)`` in one transaction on the writer's connection (writer thread)."""
        raise NotImplementedError

    def _batch_transaction(self, work: Callable[[Any], T], inline: bool) -> T:
        """Run a batch's ``work`` in one transaction.

        ``inline``: on the event loop, only when :meth:`_writes_on_loop`. There the backend raises
        :class:`WriteLocked` rather than wait for a lock. Default: the writer's transaction.
        """
        return self._transaction(work)

    def _fault_reason(self, exc: Exception) -> str | None:
        """The reason when ``exc`` is a failure of storage itself, not of the work; else None.

        A reason is one of :data:`bridge.store.health.REASONS`. Default: never.
        """
        return None

    def _probe_sync(self) -> None:
        """While storage is down (writer thread): raise unless the database can be written now.
        Default: nothing to try (up at once)."""

    def _writes_async(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Whether a batch started on ``loop`` is written from it without blocking it
        (:meth:`_flush_async`, :meth:`_batch_transaction_async`). Default: no."""
        return False

    async def _batch_transaction_async(self, batch: list[_Queued]) -> list[tuple]:
        """Write ``batch`` (:meth:`_write_batch`) in one transaction, awaited on the event loop.

        Only when :meth:`_writes_async`. Returns its outcomes.
        """
        raise NotImplementedError

    def _writes_on_loop(self) -> bool:
        """Whether a batch is written on the event loop right after its tick; else on the writer thread.

        The loop suits a COMMIT cheaper than handing it to a thread. A COMMIT that waits, e.g. a
        network round trip, must not block the loop. Default: the writer thread.
        """
        return False

    def _loading_connection(self) -> tuple[Any, bool]:
        """The connection a world is loaded on, and whether record values are read on use.

        The connection is on the ``_loader`` thread if any, else on the writer thread. Values read on
        use go through ``_fetch_record``; else they are read at load. Default: the writer's, values at
        load.
        """
        return self._conn, False

    def _fetch_record(self, world_id: str, kind: str, key: str) -> bytes:
        """The stored bytes of a record a decision asks for the first time (lazy loading only)."""
        raise NotImplementedError

    def _state_rows(self, conn: Any, world_id: str) -> Iterator[tuple[str, str, bytes]]:
        """Every ``records`` row of ``world_id`` as stored: (kind, key, stored bytes).

        Read in a read transaction on the loading connection. Default: one SELECT, streamed.
        """
        for kind, key, value in conn.execute("SELECT kind, key, value FROM records WHERE world_id = ?", (world_id,)):
            yield kind, key, stored_bytes(value)

    def _changed_elsewhere(self, conn: Any) -> bool:
        """Inside a batch's transaction: may anything else have written the database since the last batch?

        Anything but this store's batches. If so, its worlds are checked again. Default: always.
        """
        return True

    def _check_heads(self, conn: Any, batch: list[_Queued]) -> None:
        """Inside a batch's transaction: fail the batch if another process wrote one of its worlds.

        Only for the items of worlds checked again, since each was loaded. Default: nothing; the audit
        insert's ``UNIQUE (world_id, seq)`` fails such a batch.
        """

    def _fence(self, conn: Any, batch: list[_Queued]) -> set[int]:
        """Inside a batch's transaction, first: lock the batch's worlds and return decisions to refuse.

        It locks the worlds' rows and leases. It returns the ``id()`` of each decision to refuse with
        ``LeaseLost``: its world's lease is not the one it was decided under. Either another process
        holds the world, or this one took it again since and reloaded its state. Default: no leases,
        none.
        """
        return set()

    def _lease_of(self, world_id: str) -> int | None:
        """The lease token this process holds for ``world_id`` (kept with each decision, for
        :meth:`_fence`). Default: no leases, None."""
        return None

    def _batch_written(self, conn: Any, appended: int) -> None:
        """Inside a batch's transaction, after its ``appended`` audit rows: backend upkeep.

        SQLite's tails fold here under load. Default: nothing.
        """

    def _batch_committed(self, appended: int) -> None:
        """After a batch (``appended`` audit rows committed; 0 if it failed). Default: nothing."""

    def _copy_target(self, table: str) -> str:
        """The table ``fate-bridge migrate`` inserts the copied rows of ``table`` into
        (bridge/migrate.py). Default: ``table`` itself."""
        return table

    def _copied(self, conn: Any) -> None:
        """After ``fate-bridge migrate`` inserted rows with their audit ids: make the next id follow on.

        Runs inside its transaction.
        """
        raise NotImplementedError

    def _close_sync(self) -> None:
        """Close the connections (writer thread; after the heads are signed)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # --- runs on the writer thread -------------------------------------------------------------

    def _load_world_sync(self, world_id: str) -> WorldCache:
        """Read a registered world's whole state in one read transaction.

        Once per world; then it lives in memory. Raises ``WorldNotRegistered``.
        """
        started = perf_counter()
        conn, lazy = self._loading_connection()
        assert conn is not None
        epoch = self._epoch  # read before the snapshot: a change noticed later bumps it past this
        conn.execute("BEGIN")  # one snapshot for every SELECT below
        try:
            cache = self._read_world(conn, world_id, values=not lazy)
        finally:
            conn.execute("ROLLBACK")
        cache.checked = epoch
        if lazy:
            cache.fetch = functools.partial(self._fetch_record, world_id)
        if self.on_world_load is not None:
            self.on_world_load(perf_counter() - started)
        return cache

    def _read_world(self, conn: Any, world_id: str, *, values: bool) -> WorldCache:
        """The world's state: settings, counters, chain head, recent event ids and record keys.

        With ``values``, the records' values too; else :meth:`_fetch_record` reads them on use. The
        state rows are read once, as stored, for the state guard and the sealed sum
        (:mod:`bridge.store.seal`). The older event ids are filed after the load
        (:meth:`_file_older_events`); ``older_below`` marks them until then. So a load costs the
        world's state rows and :data:`RECENT_EVENTS` index entries, whatever its chain's length.
        """
        row = conn.execute("SELECT settings, last_seq, state_seal FROM worlds WHERE world_id = ? AND removed_at IS NULL",
                           (world_id,)).fetchone()
        if row is None:
            raise WorldNotRegistered(f"world {world_id!r} is not registered (see `fate-bridge world list`)")
        head = conn.execute("SELECT seq, hash FROM audit WHERE world_id = ? ORDER BY seq DESC LIMIT 1",
                            (world_id,)).fetchone()
        head = (head[0], head[1]) if head else (0, audit.GENESIS_HASH)
        settings = stored_bytes(row[0])
        event_rows = [(event_id, stored_bytes(reply)) for event_id, reply in conn.execute(
            "SELECT event_id, reply FROM events WHERE world_id = ?", (world_id,))]
        key = self._seal_key
        hasher = None if key is None else seal.world_hasher(key, world_id)
        # one pass over the rows as stored: their keys (and values), and the sum of their seal
        # elements; the GIL let go now and then, so a long history's load never holds up the
        # event loop's decisions for more than a moment
        on_disk: set[tuple[str, str]] = set()
        stored_values: dict[tuple[str, str], bytes] = {}
        elements: dict[tuple[str, str], int] = {}
        total = count = 0
        for count, (kind, name, stored) in enumerate(self._state_rows(conn, world_id), 1):
            slot = (kind, name)
            if hasher is not None:
                item = seal.element(hasher, kind, name, stored)
                total += item
                if values:
                    elements[slot] = item
            if values:
                stored_values[slot] = stored
            else:
                on_disk.add(slot)
            if not count % LOAD_YIELD_ROWS:
                time.sleep(0)
        sealed = False
        if hasher is not None:
            assert key is not None  # a hasher is made only with a key
            events_total, events_count = seal.rows_sum(hasher, ((seal.EVENT, *event) for event in event_rows))
            total, count = seal.add(total, events_total), count + events_count
            sealed = seal.matches(row[2], seal.seal(key, world_id, head, row[1], settings, total, count))
        # its state must be what its chain produces: sealed by the last batch that
        # wrote it, else checked against the clean stop's head or derived from the chain
        self._state_guard(conn, world_id, sealed=sealed, stale_seal=row[2] is not None and not sealed)
        self._key_guard(conn, world_id)  # and its key this bridge's (audit new-key meanwhile)
        cache = WorldCache(world_id, decode_settings(world_id, row[0]), row[1], head,
                           window=window_hashes(conn, world_id, head[0]) if head[0] else [],
                           settings_raw=settings, total=total, count=count,
                           hasher=hasher, on_disk=on_disk, elements=elements)
        if values:
            cache.records = {slot: unpack(stored) for slot, stored in stored_values.items()}
        # the last RECENT_EVENTS records' event ids (the index on (world_id, seq), newest first: a
        # later row is an earlier record of an event id, whose first record answers its repeats);
        # the older ones are filed into a filter after the load (older_below until then)
        recent: dict[str, int | None] = {}
        oldest = None
        for event_id, seq in conn.execute("SELECT event_id, seq FROM audit WHERE world_id = ?"
                                          " AND event_id IS NOT NULL ORDER BY seq DESC LIMIT ?",
                                          (world_id, RECENT_EVENTS)):
            recent[event_id] = seq
            oldest = seq
        # an events row (older bridges wrote one per decision) holds the reply as sent: it wins;
        # oldest first in the dict (those rows first of all), as retire_events takes them
        events: dict[str, int | None] = dict.fromkeys(event_id for event_id, _ in event_rows)
        events.update((event_id, seq) for event_id, seq in reversed(recent.items()) if event_id not in events)
        cache.events = events
        if len(recent) >= RECENT_EVENTS and oldest is not None and oldest > 1:
            cache.older_below = oldest
        cache.retire_events()
        return cache

    def _lookup_event_sync(self, world_id: str, event_id: str) -> tuple[bool, int | None]:
        """Whether ``event_id`` was decided in ``world_id``, and the audit seq holding its reply.

        This is for an older id a world's filters may hold (:meth:`WorldCache.may_be_older`). The seq
        is None when an ``events`` row holds the reply. Indexed reads: ``audit_by_event``, the events
        key.
        """
        conn, _ = self._loading_connection()
        assert conn is not None
        if conn.execute("SELECT 1 FROM events WHERE world_id = ? AND event_id = ?", (world_id, event_id)).fetchone():
            return True, None
        seq, _ = self._event_record(conn, world_id, event_id)
        return seq is not None, seq

    async def holds_decision(self, world_id: str, target: str) -> bool:
        """Whether ``world_id`` holds a passed decision under the event id or ChatMessage id ``target``.

        It reads committed records and an older bridge's ``events`` rows
        (:meth:`AuditRows._holds_decision`), where worlds are loaded. Raises ``WorldNotRegistered``
        for a world not registered.
        """
        return await self._in_loader(self._holds_decision_sync, world_id, target)

    async def decided(self, world_id: str, event_id: str) -> bool:
        """Whether a request under ``event_id`` was decided in ``world_id``, committed or queued.

        Passed or refused, its reply is stored; a repeat gets it from :meth:`decide`.
        """
        with self._lock:
            cache = self._worlds.get(world_id)
            if cache is not None and event_id in cache.events:
                return True
        found, _ = await self._in_loader(self._lookup_event_sync, world_id, event_id)
        return found

    def _holds_decision_sync(self, world_id: str, target: str) -> bool:
        conn, _ = self._loading_connection()
        assert conn is not None
        self._require_world(conn, world_id, registered=True)
        return self._holds_decision(conn, world_id, target)

    def _write_batch(self, conn: Any, batch: list[_Queued]
                     ) -> list[tuple[_Queued, Decided | None, BaseException | None]]:
        """Write one batch's rows inside its transaction: one ``executemany`` per table.

        Replays read their stored reply last, so a repeat in the same batch finds it.

        Some worlds of the batch were not checked since something else last wrote the file
        (:meth:`_changed_elsewhere`; ``WorldCache.checked`` below ``_epoch``). Each is checked first.
        Is it still registered? A world removed meanwhile gets its decisions refused and its cache
        dropped. Is its last record the one this process chained after (:meth:`_check_heads`)?

        Before all that, the backend's :meth:`_fence` locks the batch's worlds. Decisions of a world
        whose lease another process took are refused with ``LeaseLost``; nothing of them is applied.
        """
        refused = self._fence(conn, batch)
        names = sorted({item.world_id for item in batch if id(item) not in refused})
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
            self._check_heads(conn, [item for item in batch if item.world_id in live and item.world_id in unchecked])
            for name in unchecked:
                cache = caches[name]
                if cache is not None and name in live:
                    cache.checked = self._epoch
        outcomes: list[tuple[_Queued, Decided | None, BaseException | None]] = []
        kept: list[_Queued] = []
        for item in batch:
            if id(item) in refused:  # decided on state this process no longer holds (_fence)
                outcomes.append((item, None, LeaseLost(
                    f"world {item.world_id!r} is served by another bridge process now")))
                continue
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
            self._batch_written(conn, len(sealed))
        records: dict[tuple[str, str, str], bytes] = {}
        worlds: dict[str, tuple[int, bytes | None]] = {}
        seals: dict[str, tuple] = {}  # each world's state after its last decision of the batch
        for item in kept:
            for kind, name, stored in item.records or ():
                records[item.world_id, kind, name] = stored
            if item.world_row is not None:
                last_seq, settings = item.world_row
                before = worlds.get(item.world_id)
                worlds[item.world_id] = (last_seq, settings if settings is not None else before and before[1])
            if item.seal_input is not None:
                seals[item.world_id] = item.seal_input
        if records:
            conn.executemany(self._upsert_records,
                             [(*slot, stored) for slot, stored in records.items()])
        if seals:  # every world the batch changed, its new state sealed (bridge/store/seal.py)
            key = self._seal_key  # (a world has a seal input only if the store had a key at its load)
            assert key is not None
            conn.executemany(UPDATE_WORLD_SEALED, [
                (last_seq, worlds.get(world_id, (0, None))[1], seal.seal(key, world_id, head, last_seq, *rest), world_id)
                for world_id, (head, last_seq, *rest) in seals.items()])
        unsealed = [(last_seq, settings, world_id) for world_id, (last_seq, settings) in worlds.items()
                    if world_id not in seals]
        if unsealed:  # (a world loaded before the store had a key)
            conn.executemany(UPDATE_WORLD, unsealed)
        events = [item.event_row for item in kept if item.event_row is not None]
        if events:
            conn.executemany(INSERT_EVENT, events)
        for item in kept:
            outcomes.append((item, item.decided or self._replay_sync(conn, item), None))
        return outcomes

    def _replay_sync(self, conn: Any, item: _Queued) -> Decided:
        """The stored reply of a repeated ``event_id``.

        From the audit record that holds it, or from an ``events`` row when ``item.replay_seq`` is None.
        """
        if item.replay_seq is None:
            reply, stored_hash = conn.execute(
                "SELECT reply, request_hash FROM events WHERE world_id = ? AND event_id = ?",
                (item.world_id, item.event_id)).fetchone()
            reply = bytes(reply)
            assert item.event_id is not None  # a repeat without a seq is found by its event_id
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
        """Group commit: write every queued decision's rows in ONE transaction.

        Their futures resolve after the COMMIT; at once for those of ``on_loop``, the loop this runs
        on, if any. A failed COMMIT fails the whole batch and every decision queued after it: a new
        cache generation. Nothing of theirs was acknowledged.
        """
        while (taken := self._take_batch()) is not None:
            batch, outcomes, current = taken
            if current:
                try:
                    # (the lambda runs inside this call, with this iteration's batch)
                    outcomes += self._batch_transaction(lambda conn: self._write_batch(conn, current),  # noqa: B023
                                                        inline=on_loop is not None)
                    self.health.up()
                except WriteLocked:
                    with self._queue_lock:  # back in front, in order, for the writer thread
                        self._queue[:0] = batch
                    raise
                except Exception as exc:
                    outcomes += self._batch_failed(current, exc)
            self._batch_done(batch, outcomes, on_loop)

    async def _flush_async(self) -> None:
        """:meth:`_flush_sync` on the event loop, for a backend whose COMMIT is awaited there.

        That is when :meth:`_writes_async`. Each batch's rows are gathered on the loop and
        :meth:`_batch_transaction_async` sends them. Meanwhile the loop serves other connections.
        """
        loop = asyncio.get_running_loop()
        while (taken := self._take_batch()) is not None:
            batch, outcomes, current = taken
            if current:
                try:
                    outcomes += await self._batch_transaction_async(current)
                    self.health.up()
                except Exception as exc:
                    outcomes += self._batch_failed(current, exc)
                except BaseException:  # cancelled (the loop shutting down): not acknowledged
                    outcomes += self._batch_failed(current, ConfigError(
                        "the store stopped while writing this decision: it may not be stored"))
                    self._batch_done(batch, outcomes, loop)
                    raise  # the rest of the queue: _flush_ended
            self._batch_done(batch, outcomes, loop)

    def _flush_ended(self, task: asyncio.Task[None]) -> None:
        """A :meth:`_flush_async` task's end.

        If it was cancelled, before it began or with a batch in flight, every decision still queued
        fails, none acknowledged. The next decision starts a flush again.
        """
        if task.cancelled():
            failed = ConfigError("the store stopped before writing this decision")
            while (taken := self._take_batch()) is not None:
                batch, outcomes, current = taken
                self._batch_done(batch, outcomes + [(item, None, failed) for item in current], task.get_loop())

    def _take_batch(self) -> tuple[list[_Queued], list[tuple], list[_Queued]] | None:
        """The next batch: at most ``GROUP_COMMIT_MAX`` queued decisions, or None when nothing is queued.

        Returns the batch, the outcomes of those of an older cache generation (failed with its
        failure), and the current ones to write. On None, the flush ends.
        """
        with self._queue_lock:
            batch = self._queue[:GROUP_COMMIT_MAX]
            del self._queue[:GROUP_COMMIT_MAX]
            if not batch:
                self._flushing = False
                return None
            self._last_batch = len(batch)
        with self._lock:
            generation, failure = self._generation, self._failure
        return (batch, [(item, None, failure) for item in batch if item.generation != generation],
                [item for item in batch if item.generation == generation])

    def _batch_failed(self, current: list[_Queued], exc: BaseException) -> list[tuple]:
        """A batch's transaction failed: start a new cache generation and return the batch's outcomes.

        Every world is reloaded; every decision read before it fails too. Each outcome is ``exc``. A
        storage outage's is :class:`StorageUnavailable` (:meth:`_unavailable`).
        """
        exc = self._unavailable(exc) if isinstance(exc, Exception) else exc
        with self._lock:
            self._generation += 1
            self._failure = exc
            self._worlds.clear()
        return [(item, None, exc) for item in current]

    def _batch_done(self, batch: list[_Queued], outcomes: list[tuple],
                    on_loop: asyncio.AbstractEventLoop | None) -> None:
        """After a batch's transaction: release its worlds, sign its receipts, resolve its futures.

        Its worlds may leave memory. Its receipts take one signature. Futures of ``on_loop``, the loop
        this runs on, resolve at once; each other loop is woken once.
        """
        with self._lock:  # the batch is through: its worlds may leave memory now, if idle
            for item in batch:
                left = self._pending.pop(item.world_id) - 1
                if left:
                    self._pending[item.world_id] = left
                elif (cache := self._worlds.get(item.world_id)) is not None and len(cache.events) > 2 * RECENT_EVENTS:
                    cache.retire_events()  # every event id of it is committed now
            self._evict()
        self._batch_committed(sum(1 for item, _, exc in outcomes if exc is None and item.sealed is not None))
        if self.signing_key is not None:  # one signature for the batch's receipts
            try:
                outcomes = with_receipts(self.signing_key, outcomes)
            except Exception:  # committed: the replies go out, without receipts, rather than never
                log.exception("receipts_failed", decisions=len(outcomes))
        if self.on_batch is not None:  # once per batch (a write-locked one comes back, counted then)
            self.on_batch(len(batch))
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple]] = {}
        for item, decided, exc in outcomes:
            by_loop.setdefault(item.loop, []).append((item.future, decided, exc))
        for loop, settled in by_loop.items():  # one wake-up of each loop per batch
            if on_loop is loop:
                _settle_futures(settled)
            else:
                loop.call_soon_threadsafe(_settle_futures, settled)

    # --- the async interface -------------------------------------------------------------------

    async def _in_loader(self, fn: Callable[..., T], *args: object) -> T:
        """Run ``fn`` where worlds are loaded (the backend's ``_loader`` thread, else the writer's)."""
        if self._loader is None:
            return await self._run(fn, *args)
        if self._closed:
            raise ConfigError("the store is closed")
        try:
            return await asyncio.get_running_loop().run_in_executor(self._loader, fn, *args)
        except Exception as exc:
            raise self._unavailable(exc) from exc

    async def _load_world(self, world_id: str) -> None:
        """Load the world's state into memory, then file its older event ids in the background.

        A no-op if another call loaded it meanwhile. The filing is :meth:`_file_older_events`. Raises
        ``WorldNotRegistered``.
        """
        loaded = await self._in_loader(self._load_world_sync, world_id)
        with self._lock:
            cache = self._worlds.setdefault(world_id, loaded)
            self._evict(keep=world_id)
        if cache is loaded and loaded.older_below:
            task = asyncio.get_running_loop().create_task(self._file_older_events(loaded))
            self._filing.add(task)
            task.add_done_callback(self._filing.discard)

    async def _file_older_events(self, cache: WorldCache) -> None:
        """Put the event ids of ``cache``'s records before ``cache.older_below`` into one Bloom filter.

        It takes :data:`OLDER_EVENTS_STEP` records a step on the loading thread. Other worlds' loads
        and look-ups go between the steps. Then it hands the filter to the world, under the lock. Until
        then, ids not among the recent ones are looked up in the store, so no repeat is missed. Stops
        if the world left memory or the store closed; the next load starts again.
        """
        below = cache.older_below
        older = EventFilter(below)  # at most one event id per record
        done = 0
        try:
            while done < below - 1:
                with self._lock:
                    if self._closed or self._worlds.get(cache.world_id) is not cache:
                        return
                done = await self._in_loader(self._file_older_sync, cache.world_id, older, done,
                                             min(done + OLDER_EVENTS_STEP, below - 1))
        except (ConfigError, StorageUnavailable):  # the store closed meanwhile, or its storage is down
            return
        with self._lock:
            cache.older.insert(0, older)
            cache.older_below = 0

    def _file_older_sync(self, world_id: str, older: EventFilter, after: int, until: int) -> int:
        """Add to ``older`` the event ids of ``world_id``'s records ``after`` < seq <= ``until``.

        Uses the index on (world_id, seq). Returns ``until``.
        """
        conn, _ = self._loading_connection()
        assert conn is not None
        for n, (event_id,) in enumerate(conn.execute("SELECT event_id FROM audit WHERE world_id = ? AND seq > ?"
                                                     " AND seq <= ? AND event_id IS NOT NULL", (world_id, after, until))):
            older.add(event_id)
            if not n % LOAD_YIELD_ROWS:
                time.sleep(0)  # (the GIL, as a load lets go of it)
        return until

    def _evict(self, keep: str | None = None) -> None:
        """Drop the least recently used worlds beyond :attr:`max_worlds`. Called with the lock held.

        It never drops ``keep``, the world just loaded. Nor a world with a decision queued or in its
        batch (``_pending``): its rows are not all committed, so the store is behind its cache. A
        dropped world is loaded again on its next use, event ids and all. So a repeated ``event_id``
        still gets its stored reply, and a spent charge stays spent.
        """
        over = len(self._worlds) - self.max_worlds
        if over <= 0:
            return
        for name in list(self._worlds):
            if over <= 0:
                break
            if name != keep and name not in self._pending:
                del self._worlds[name]
                over -= 1

    async def decide(self, world_id: str, event_id: str | None, decision: DecisionFn,
                     request_hash: str | None = None) -> Decided:
        """Run ``decision`` on the world's state in memory; return its reply once its rows are committed.

        See the module docstring. A repeated ``event_id`` returns the stored reply without running
        anything. A decision that raises stores nothing and raises here.
        """
        if self._closed or self._closing:
            raise ConfigError("the store is closed")
        if not self.health.available:  # refused at once until the probe finds storage back
            raise self.health.refusal()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Decided] = loop.create_future()
        # an older event id's look-up in the store: (found, its seq), valid while the world's cache
        # and what it retired are as they were before the look-up (else a repeat decided and
        # retired meanwhile could be missed)
        older: tuple[bool, int | None] | None = None
        stamp: tuple[WorldCache, int] | None = None
        while True:
            with self._lock:  # a COMMIT failing from now on fails this decision too (its generation)
                cache = self._worlds.get(world_id)
                if cache is not None and (stamp is None or stamp[0] is not cache or stamp[1] != cache.retired):
                    older = None
                lookup = (cache is not None and older is None and event_id is not None
                          and event_id not in cache.events and cache.may_be_older(event_id))
                if lookup and cache is not None:
                    stamp = (cache, cache.retired)
                if cache is not None and not lookup:
                    self._worlds.move_to_end(world_id)
                    item = _Queued(world_id, self._generation, loop, future, event_id=event_id,
                                   request_hash=request_hash, lease=self._lease_of(world_id))
                    if event_id is not None and event_id in cache.events:
                        item.replay_seq = cache.events[event_id]
                    elif older is not None and older[0]:
                        item.replay_seq = older[1]
                    else:
                        self._decide_in_memory(cache, item, decision)
                    self._pending[world_id] = self._pending.get(world_id, 0) + 1  # stays until its batch is through
                    break
            if lookup:  # committed before (it is in a filter): its reply is in the store, if anywhere
                older = await self._in_loader(self._lookup_event_sync, world_id, event_id)
            else:
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
        if self._writes_on_loop():
            try:
                self._flush_sync(asyncio.get_running_loop())
                return
            except WriteLocked:
                pass  # the writer thread waits for the lock; the loop goes on serving
        loop = asyncio.get_running_loop()
        if self._writes_async(loop):
            self._flush_task = loop.create_task(self._flush_async())
            self._flush_task.add_done_callback(self._flush_ended)
            return
        self._executor.submit(self._flush_sync)

    def _decide_in_memory(self, cache: WorldCache, item: _Queued, decision: DecisionFn) -> None:
        """Run ``decision`` against ``cache`` and fill ``item`` with its outcome and rows.

        Called with the lock held. Raises what the decision raises, leaving the cache as it was.
        """
        state = CachedState(cache)
        result: Decision = decision(state)
        if result.ok:
            item.world_row = state.world_change()
            item.records = state.apply()
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
                cache.add_event_row(item.event_id, result.reply)
        item.seal_input = cache.seal_input()
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
                    self._worlds.move_to_end(world_id)
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
        self._closing = True  # no new decision from here (one already deciding still goes in)
        for task in list(self._filing):
            task.cancel()
        await self._flushed()
        await self._run(self._checkpoint_heads_sync)
        await self._run(self._close_sync)
        self._closed = True
        self._executor.shutdown(wait=True)
        await self._flushed()
        await self._close_on_loop()

    async def _flushed(self) -> None:
        """Wait until the batches written from this event loop (:meth:`_flush_async`) are through.

        So none is cut off by the close: its decisions would be committed, yet answered as failed.
        """
        loop = asyncio.get_running_loop()
        while self._flushing and self._writes_async(loop):
            task = self._flush_task
            if task is not None and not task.done() and task.get_loop() is loop:
                await asyncio.shield(task)
            else:
                await asyncio.sleep(0)  # a flush scheduled (call_soon) and not started yet

    async def _close_on_loop(self) -> None:
        """At the end of :meth:`close`: what the backend holds on the event loop. Default: nothing."""
