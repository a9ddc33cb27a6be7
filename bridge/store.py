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
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

import msgspec

from . import wire
from .errors import ConfigError
from .state import FateRecord, GradedRecord, WorldState

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
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
CREATE TABLE IF NOT EXISTS graded (
    world_id TEXT NOT NULL, message_id TEXT NOT NULL, record BLOB NOT NULL,
    PRIMARY KEY (world_id, message_id)
);
CREATE TABLE IF NOT EXISTS fated (
    world_id TEXT NOT NULL, message_id TEXT NOT NULL, record BLOB NOT NULL,
    PRIMARY KEY (world_id, message_id)
);
CREATE TABLE IF NOT EXISTS spends (
    world_id TEXT NOT NULL, seq INTEGER NOT NULL, actor_id TEXT NOT NULL,
    point_id TEXT NOT NULL, message_id TEXT NOT NULL,
    PRIMARY KEY (world_id, seq)
);
CREATE INDEX IF NOT EXISTS spends_by_point ON spends (world_id, actor_id, point_id, seq);
"""

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class World:
    """A registered world: its token's SHA-256 (hex; None for ``resolve``'s implicit world) and
    its settings."""

    world_id: str
    token_hash: str | None
    settings: wire.WorldSettings


@dataclass(frozen=True, slots=True)
class Decided:
    """The outcome of :meth:`Store.decide`: the reply frame and whether it was replayed from a
    repeated ``event_id`` (nothing ran)."""

    reply: bytes
    replayed: bool


Decision = Callable[[WorldState], tuple[bytes, bool]]
"""A decision run inside the transaction: returns (reply frame, ok); ok False = refused, roll
back its writes but keep the reply under the event_id."""


class Store(Protocol):
    """The async store interface the server, CLI and ``resolve`` use."""

    async def world(self, world_id: str) -> World | None:
        """The registered world, or None."""
        ...

    async def add_world(self, world_id: str, token_hash: str | None, *, replace: bool) -> None:
        """Register a world (or, with ``replace``, set a new token). Raises ``ConfigError`` if
        it exists and ``replace`` is false."""
        ...

    async def worlds(self) -> list[World]:
        """Every registered world, by id."""
        ...

    async def decide(self, world_id: str, event_id: str | None, decision: Decision) -> Decided:
        """Run one decision in one transaction (see the module docstring)."""
        ...

    async def close(self) -> None:
        """Finish pending work and close; idempotent."""
        ...


_settings_decoder = msgspec.json.Decoder(wire.WorldSettings)
_graded_decoder = msgspec.json.Decoder(GradedRecord)
_fate_decoder = msgspec.json.Decoder(FateRecord)
_encode = msgspec.json.Encoder().encode


class _SQLiteWorldState:
    """:class:`WorldState` over an open SQLite transaction."""

    def __init__(self, conn: sqlite3.Connection, world_id: str) -> None:
        self._conn = conn
        self.world_id = world_id

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

    def graded(self, message_id: str) -> GradedRecord | None:
        row = self._conn.execute(
            "SELECT record FROM graded WHERE world_id = ? AND message_id = ?",
            (self.world_id, message_id),
        ).fetchone()
        return _graded_decoder.decode(row[0]) if row else None

    def put_graded(self, record: GradedRecord) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO graded (world_id, message_id, record) VALUES (?, ?, ?)",
            (self.world_id, record.message_id, _encode(record)),
        )

    def fate(self, message_id: str) -> FateRecord | None:
        row = self._conn.execute(
            "SELECT record FROM fated WHERE world_id = ? AND message_id = ?",
            (self.world_id, message_id),
        ).fetchone()
        return _fate_decoder.decode(row[0]) if row else None

    def put_fate(self, record: FateRecord) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO fated (world_id, message_id, record) VALUES (?, ?, ?)",
            (self.world_id, record.message_id, _encode(record)),
        )

    def charges_spent_since(self, actor_id: str, point_id: str, seq: int) -> int:
        (count,) = self._conn.execute(
            "SELECT count(*) FROM spends WHERE world_id = ? AND actor_id = ? AND point_id = ?"
            " AND seq > ?",
            (self.world_id, actor_id, point_id, seq),
        ).fetchone()
        return count

    def add_spend(self, actor_id: str, point_id: str, message_id: str, seq: int) -> None:
        self._conn.execute(
            "INSERT INTO spends (world_id, seq, actor_id, point_id, message_id)"
            " VALUES (?, ?, ?, ?, ?)",
            (self.world_id, seq, actor_id, point_id, message_id),
        )


class SQLiteStore:
    """The embedded store. ``path`` is a file (created with its folder) or ``":memory:"``.

    Raises ``ConfigError`` when the file cannot be opened or was written by a newer bridge.
    Use :meth:`open` (a classmethod coroutine) to construct.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fate-bridge-db")
        self._conn: sqlite3.Connection | None = None
        self._closed = False

    @classmethod
    async def open(cls, path: str | Path) -> SQLiteStore:
        """Open (and create or upgrade) the database at ``path``."""
        store = cls(path)
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
            Path(self.path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout = 5000")
            if self.path != ":memory:":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            self._migrate(conn)
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"cannot open the database {self.path!r}: {exc}") from None
        self._conn = conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                raise ConfigError(
                    f"the database {self.path!r} was written by a newer fate-bridge (schema "
                    f"{version}, this bridge knows {SCHEMA_VERSION}); upgrade fate-bridge or use"
                    " another --db"
                )
            if version < SCHEMA_VERSION:
                for statement in _SCHEMA.strip().split(";\n"):
                    conn.execute(statement)
                conn.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _world_sync(self, world_id: str) -> World | None:
        assert self._conn is not None
        row = self._conn.execute(
            "SELECT world_id, token_hash, settings FROM worlds WHERE world_id = ?", (world_id,)
        ).fetchone()
        if row is None:
            return None
        return World(row[0], row[1], _settings_decoder.decode(row[2]))

    def _add_world_sync(self, world_id: str, token_hash: str | None, replace: bool) -> None:
        assert self._conn is not None
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            exists = conn.execute("SELECT 1 FROM worlds WHERE world_id = ?", (world_id,)).fetchone()
            if exists and not replace:
                raise ConfigError(f"world {world_id!r} is registered already")
            if exists:
                conn.execute("UPDATE worlds SET token_hash = ? WHERE world_id = ?",
                             (token_hash, world_id))
            else:
                conn.execute(
                    "INSERT INTO worlds (world_id, token_hash, settings) VALUES (?, ?, ?)",
                    (world_id, token_hash, _encode(wire.WorldSettings())),
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _worlds_sync(self) -> list[World]:
        assert self._conn is not None
        rows = self._conn.execute(
            "SELECT world_id, token_hash, settings FROM worlds ORDER BY world_id"
        ).fetchall()
        return [World(r[0], r[1], _settings_decoder.decode(r[2])) for r in rows]

    def _decide_sync(self, world_id: str, event_id: str | None, decision: Decision) -> Decided:
        assert self._conn is not None
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            if event_id is not None:
                row = conn.execute(
                    "SELECT reply FROM events WHERE world_id = ? AND event_id = ?",
                    (world_id, event_id),
                ).fetchone()
                if row is not None:
                    conn.execute("COMMIT")
                    return Decided(bytes(row[0]), replayed=True)
            conn.execute("SAVEPOINT decision")
            reply, ok = decision(_SQLiteWorldState(conn, world_id))
            if ok:
                conn.execute("RELEASE decision")
            else:
                conn.execute("ROLLBACK TO decision")
                conn.execute("RELEASE decision")
            if event_id is not None:
                conn.execute(
                    "INSERT INTO events (world_id, event_id, reply) VALUES (?, ?, ?)",
                    (world_id, event_id, reply),
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return Decided(reply, replayed=False)

    def _close_sync(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # --- the async interface -------------------------------------------------------------------

    async def world(self, world_id: str) -> World | None:
        """The registered world, or None."""
        return await self._run(self._world_sync, world_id)

    async def add_world(self, world_id: str, token_hash: str | None, *, replace: bool = False) -> None:
        """Register ``world_id`` with ``token_hash`` (see :class:`Store`)."""
        await self._run(self._add_world_sync, world_id, token_hash, replace)

    async def worlds(self) -> list[World]:
        """Every registered world, by id."""
        return await self._run(self._worlds_sync)

    async def decide(self, world_id: str, event_id: str | None, decision: Decision) -> Decided:
        """Run ``decision`` in one transaction (see the module docstring)."""
        return await self._run(self._decide_sync, world_id, event_id, decision)

    async def close(self) -> None:
        """Close the database after queued work finishes; idempotent."""
        if self._closed:
            return
        await self._run(self._close_sync)
        self._closed = True
        self._executor.shutdown(wait=True)
