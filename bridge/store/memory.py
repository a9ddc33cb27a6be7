"""One world's state, held in memory by the process that serves it and written through to the store.

No SQL, no threads: any backend uses it. A backend loads a :class:`WorldCache` once from its
database. Every decision runs against a :class:`CachedState` over it, so a decision does not
read the database, except the first read of an old record (below). The backend writes the
decision's rows in its batch's one transaction.

The cache holds the latest *decided* state, committed or still queued for the writer. When a
COMMIT fails, the backend drops its caches and fails every decision queued after the failed one.
None of them was acknowledged. It reloads on next use.

A world's records are loaded by key. A record written before the load is read the first time a
decision asks for it (:attr:`WorldCache.fetch`). So memory holds the keys of a long history and
only the values in use.

A decision's writes go to its own overlay first (:class:`CachedState`). They reach the cache
only when the decision passes (:meth:`CachedState.apply`). A refusal or an exception drops the
overlay; a SAVEPOINT rollback did this before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from .. import wire
from ..state import R
from . import seal
from .blobs import pack_record, unpack

_encode = msgspec.json.Encoder().encode

# A loaded world keeps its last RECENT_EVENTS event ids in a dict (WorldCache.events), up to twice
# as many between trims. Older ones, all committed, go into Bloom filters (EventFilter). A repeat
# the filters may hold is looked up in the store. So history does not grow memory.
RECENT_EVENTS = 1024
_FILTER_BITS_PER_ID = 10  # with 4 probes: ~1.2% of new event ids cost one indexed store look-up
_FILTER_PROBES = 4


class EventFilter:
    """A Bloom filter over event ids, sized for ``capacity`` ids.

    ``event_id in filter`` is True for every id added: never a false "no". While it holds at most
    ``capacity`` ids, it is also True for ~1.2% of the others. It costs ~1.25 bytes an id; a dict
    entry costs ~100. The probes come from the str's own ``hash()``, computed in C and cached on
    the str. That hash is salted per process (``PYTHONHASHSEED``). This is fine: the filter lives
    in one process and is rebuilt at each load.
    """

    __slots__ = ("_bits", "_size", "capacity", "count")

    def __init__(self, capacity: int) -> None:
        self.capacity = max(capacity, RECENT_EVENTS)
        self._size = self.capacity * _FILTER_BITS_PER_ID
        self._bits = bytearray((self._size + 7) // 8)
        self.count = 0

    def _probes(self, event_id: str) -> list[int]:
        h = hash(event_id) & 0xFFFFFFFFFFFFFFFF
        first, step, size = h & 0xFFFFFFFF, (h >> 32) | 1, self._size
        return [(first + i * step) % size for i in range(_FILTER_PROBES)]

    def add(self, event_id: str) -> None:
        bits = self._bits
        for bit in self._probes(event_id):
            bits[bit >> 3] |= 1 << (bit & 7)
        self.count += 1

    def __contains__(self, event_id: object) -> bool:
        if not isinstance(event_id, str):
            return False
        bits = self._bits
        return all(bits[bit >> 3] >> (bit & 7) & 1 for bit in self._probes(event_id))


@dataclass(slots=True)
class WorldCache:
    """One world's state as its serving process holds it.

    - ``settings``: the world's settings; ``settings_raw``: the same as stored (JSON).
    - ``last_seq``: the counter behind :meth:`~bridge.state.WorldState.next_seq`, the
      ``worlds.last_seq`` column.
    - ``head``: the seq and chain hash of the last audit record; ``(0, GENESIS_HASH)`` before one.
    - ``records``: stored JSON by ``(kind, key)``, for records written or read since the load.
    - ``on_disk``: records stored before the load and not read yet. ``fetch(kind, key)`` reads
      one from the database the first time a decision asks. That is the one read a decision may
      make, once per record. A record that does not exist never costs one.
    - ``events``: each recent ``event_id`` decided (:data:`RECENT_EVENTS`, oldest first). Its
      value is the audit seq of the record holding its reply. None: the reply is in an ``events``
      row, written by an older bridge or by a decision without an audit entry.
    - ``older``: Bloom filters of the older event ids, all committed (:meth:`retire_events`).
      The store looks an id up when a filter may hold it (:meth:`may_be_older`).
    - ``older_below``: event ids of records before this seq are not in ``older`` yet. 0: none
      missing. They are filed after a load. Until then, every id not among the recent ones is
      looked up in the store.
    - ``checked``: the store's count of changes made to the file by others
      (``BatchWriter._epoch``), when this state was read or last checked.
    - ``window``: stored hashes of the records after the last multiple of ``CHECKPOINT_EVERY``.
      The next signed head seals them (``AuditRows._seal``).
    - ``total``, ``count``: the :func:`~bridge.store.seal.rows_sum` of the world's state rows
      under ``hasher``. Each write keeps them current; each batch seals them. ``hasher`` None:
      the store has no key, so nothing is sealed.
    - ``elements``: the seal element of each record in ``records``. It leaves the sum when the
      record is written again.
    """

    world_id: str
    settings: wire.WorldSettings
    last_seq: int
    head: tuple[int, str]
    records: dict[tuple[str, str], bytes] = field(default_factory=dict)
    events: dict[str, int | None] = field(default_factory=dict)
    older: list[EventFilter] = field(default_factory=list)
    retired: int = 0  # event ids put into ``older`` so far
    on_disk: set[tuple[str, str]] = field(default_factory=set)
    fetch: Callable[[str, str], bytes] | None = None
    checked: int = 0
    window: list[bytes] = field(default_factory=list)
    older_below: int = 0
    settings_raw: bytes = b""
    total: int = 0
    count: int = 0
    hasher: Any = None  # the world's seal.world_hasher (None: nothing is sealed)
    elements: dict[tuple[str, str], int] = field(default_factory=dict)
    _decoded: dict[tuple[str, str], tuple[type, msgspec.Struct]] = field(default_factory=dict)

    def record(self, kind: str, key: str, type: type[R]) -> R | None:
        """The record under ``(kind, key)`` decoded as ``type``, or None.

        Decoded once, then shared: the rulesets' records are frozen Structs.
        """
        slot = (kind, key)
        decoded = self._decoded.get(slot)
        if decoded is not None and decoded[0] is type:
            return decoded[1]  # type: ignore[return-value]
        raw = self.records.get(slot)
        if raw is None:
            if slot not in self.on_disk:
                return None
            raw = self.records[slot] = self._fetch(kind, key)
            self.on_disk.discard(slot)
        value = msgspec.json.decode(raw, type=type)
        self._decoded[slot] = (type, value)
        return value

    def may_be_older(self, event_id: str) -> bool:
        """Whether ``event_id``, not among the recent ones, may be an older one of this world.

        True: the store looks it up. False: it was never decided here.
        """
        return self.older_below > 0 or any(event_id in older for older in self.older)

    def retire_events(self) -> None:
        """Keep the last :data:`RECENT_EVENTS` event ids in ``events``; put the others into ``older``.

        Call it only when their records are committed: at load, or when none of the world's
        decisions is queued (``BatchWriter._pending``).
        """
        retired = len(self.events) - RECENT_EVENTS
        if retired <= 0:
            return
        for event_id in list(self.events)[:retired]:
            self.file_older(event_id, retired)
            del self.events[event_id]

    def file_older(self, event_id: str, expected: int = 0) -> None:
        """Put ``event_id`` into ``older``; it is committed and not in ``events``.

        It goes into the last filter. When that is full, a new filter is made for ``expected`` ids
        or twice the last one's, whichever is more. So n older ids take ~log2(n) filters.
        """
        if not self.older or self.older[-1].count >= self.older[-1].capacity:
            self.older.append(EventFilter(max(expected, 2 * (self.older[-1].capacity if self.older else 0))))
        self.older[-1].add(event_id)
        self.retired += 1

    def _fetch(self, kind: str, key: str) -> bytes:
        """The JSON of a record stored before the world was loaded, read now.

        Its seal element is kept for when it is written again.
        """
        assert self.fetch is not None
        stored = self.fetch(kind, key)
        if self.hasher is not None:
            self.elements[kind, key] = seal.element(self.hasher, kind, key, stored)
        return unpack(stored)

    def store(self, kind: str, key: str, raw: bytes, value: msgspec.Struct) -> bytes:
        """Keep ``value`` (JSON ``raw``) under ``(kind, key)``; return its stored bytes.

        The bytes come from :func:`~bridge.store.blobs.pack_record`. In the sealed sum, the old
        element is replaced by the new one. An old value on disk, never read, is read here for that.
        """
        slot = (kind, key)
        stored = pack_record(raw, kind)
        if self.hasher is not None:
            old = self.elements.get(slot)
            if old is None and slot in self.on_disk:  # written before the load, never read since
                assert self.fetch is not None
                old = seal.element(self.hasher, kind, key, self.fetch(kind, key))
            if old is None:
                self.count += 1
            else:
                self.total = seal.remove(self.total, old)
            new = self.elements[slot] = seal.element(self.hasher, kind, key, stored)
            self.total = seal.add(self.total, new)
        self.records[kind, key] = raw
        self.on_disk.discard((kind, key))
        self._decoded[kind, key] = (type(value), value)
        return stored

    def add_event_row(self, event_id: str, reply: bytes) -> None:
        """Count a new ``events`` row (a decision without an audit record) in the sealed sum."""
        if self.hasher is not None:
            self.total = seal.add(self.total, seal.element(self.hasher, seal.EVENT, event_id, reply))
            self.count += 1

    def seal_input(self) -> tuple[tuple[int, str], int, bytes, int, int] | None:
        """What a batch seals of this world now, or None when nothing is sealed.

        These are :func:`bridge.store.seal.seal`'s arguments after the key and world id.
        """
        if self.hasher is None:
            return None
        return self.head, self.last_seq, self.settings_raw, self.total, self.count


class CachedState:
    """The :class:`~bridge.state.WorldState` one decision gets over a :class:`WorldCache`.

    Reads see the cache and this decision's own writes; writes stay here until :meth:`apply`.
    :meth:`apply` and :meth:`world_change` give the backend the rows the decision adds.
    """

    def __init__(self, cache: WorldCache) -> None:
        self._cache = cache
        self.world_id = cache.world_id
        self._settings: wire.WorldSettings | None = None
        self._seq = cache.last_seq
        self._written: dict[tuple[str, str], tuple[bytes, msgspec.Struct]] = {}

    def settings(self) -> wire.WorldSettings:
        return self._settings if self._settings is not None else self._cache.settings

    def put_settings(self, settings: wire.WorldSettings) -> None:
        self._settings = settings

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def get(self, kind: str, key: str, type: type[R]) -> R | None:
        written = self._written.get((kind, key))
        if written is not None:
            return written[1]  # type: ignore[return-value]
        return self._cache.record(kind, key, type)

    def peek(self, kind: str, key: str, type: type[R]) -> R | None:
        return self.get(kind, key, type)

    def audit_seq(self) -> int:
        """The audit record number the running decision will get.

        It is one more than the world's last record, queued ones included. The decision's dice
        derive from it (``bridge.fairness``).
        """
        return self._cache.head[0] + 1

    def put(self, kind: str, key: str, record: msgspec.Struct) -> None:
        self._written[kind, key] = (_encode(record), record)

    def world_change(self) -> tuple[int, bytes | None] | None:
        """The world's own columns after this decision, or None when it changed neither.

        Returns ``(last_seq, settings JSON)``; the JSON is None when the settings stayed.
        """
        if self._settings is None and self._seq == self._cache.last_seq:
            return None
        return self._seq, None if self._settings is None else _encode(self._settings)

    def apply(self) -> list[tuple[str, str, bytes]]:
        """Make this passed decision's writes the world's state.

        Returns the rows it adds for its batch, as ``(kind, key, stored bytes)``.
        """
        cache = self._cache
        if self._settings is not None:
            cache.settings = self._settings
            cache.settings_raw = _encode(self._settings)
        cache.last_seq = self._seq
        return [(kind, key, cache.store(kind, key, raw, value)) for (kind, key), (raw, value) in self._written.items()]
