"""The SQLite store's worlds: registering, tokens, viewer keys, languages, removal (state kept).

A mixin of :class:`~bridge.store.sqlite.SQLiteStore`: its ``*_sync`` methods run on the store's
writer thread; the async ones are the :class:`~bridge.store.base.Store` methods.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection
from typing import TYPE_CHECKING

from ..errors import ConfigError, WorldNotRegistered, WorldSettingsInvalid
from .schema import utc_now
from .world_values import World

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    T = TypeVar("T")


_IDS_PER_QUERY = 500  # world ids per IN (...): below SQLite's bound on host parameters

# A new world's stored settings: bridge.store.codecs._encode(wire.WorldSettings()), written out so
# that registering a world imports neither msgspec nor the wire messages (the world commands,
# bridge/store/admin.py); tests/test_store_protocol.py checks the two are the same bytes.
NEW_SETTINGS = b'{"fate_option":"everyone"}'


class WorldRows:
    """The worlds table (see :class:`~bridge.store.base.Store` for each method's contract)."""

    _conn: sqlite3.Connection | None
    _WORLD = "world_id, token_hash, settings, viewer_key, language"

    if TYPE_CHECKING:
        async def _run(self, fn: Callable[..., T], *args: object) -> T: ...
        def _transaction(self, work: Callable[[sqlite3.Connection], T]) -> T: ...

    # worlds whose stored settings could not be read at the last worlds() call: id -> the reason
    # (``serve`` reports each at start; their connections are refused, the others served)
    invalid_worlds: dict[str, str] = {}

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

    @staticmethod
    def _world_row(row: tuple) -> World:
        """Raises ``WorldSettingsInvalid`` when the row's settings cannot be read."""
        from .codecs import decode_settings  # (only what reads settings imports msgspec and the wire)

        return World(row[0], row[1], decode_settings(row[0], row[2]), row[3], row[4])

    def _world_sync(self, world_id: str) -> World | None:
        assert self._conn is not None
        row = self._conn.execute(
            f"SELECT {self._WORLD} FROM worlds WHERE world_id = ? AND removed_at IS NULL", (world_id,)
        ).fetchone()
        return None if row is None else self._world_row(row)

    def _add_world_sync(self, world_id: str, token_hash: str | None) -> None:
        def work(conn: sqlite3.Connection) -> None:
            self._require_world(conn, world_id, registered=False)
            # a removed world comes back with everything it had (results stay fated, S11)
            conn.execute(
                "INSERT INTO worlds (world_id, token_hash, settings) VALUES (?, ?, ?)"
                " ON CONFLICT (world_id) DO UPDATE SET token_hash = excluded.token_hash, removed_at = NULL",
                (world_id, token_hash, NEW_SETTINGS))
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
        worlds, invalid = [], {}
        for row in rows:
            try:
                worlds.append(self._world_row(row))
            except WorldSettingsInvalid as exc:
                invalid[row[0]] = str(exc)
        self.invalid_worlds = invalid
        return worlds

    def _worlds_of_sync(self, world_ids: list[str]) -> dict[str, World]:
        assert self._conn is not None
        found: dict[str, World] = {}
        for start in range(0, len(world_ids), _IDS_PER_QUERY):
            chunk = world_ids[start:start + _IDS_PER_QUERY]
            found.update((row[0], self._world_row(row)) for row in self._conn.execute(
                f"SELECT {self._WORLD} FROM worlds WHERE removed_at IS NULL AND world_id IN"
                f" ({','.join('?' * len(chunk))})", chunk).fetchall())
        return found

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

    def _set_language_sync(self, world_id: str, language: str) -> None:
        def work(conn: sqlite3.Connection) -> None:
            self._require_world(conn, world_id, registered=True)
            conn.execute("UPDATE worlds SET language = ? WHERE world_id = ?", (language, world_id))
        self._transaction(work)

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
        """Every registered world whose settings can be read, by id (the others: in
        :attr:`invalid_worlds` after the call)."""
        return await self._run(self._worlds_sync)

    async def worlds_of(self, world_ids: Collection[str]) -> dict[str, World]:
        """The registered worlds among ``world_ids``, by id (see :class:`Store`)."""
        return await self._run(self._worlds_of_sync, sorted(world_ids))

    async def viewer_key(self, world_id: str, candidate: str, *, rotate: bool = False) -> str:
        """The world's overlay viewer key, made from ``candidate`` when needed (see :class:`Store`)."""
        return await self._run(self._viewer_key_sync, world_id, candidate, rotate)

    async def set_language(self, world_id: str, language: str) -> None:
        """Keep ``language`` as the world's (see :class:`Store`)."""
        await self._run(self._set_language_sync, world_id, language)
