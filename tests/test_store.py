"""The store on each backend: one transaction per decision, replay by event_id; the SQLite
file's mode and schema versions (PostgreSQL's own: tests/test_postgres.py)."""

from __future__ import annotations

import sqlite3

import pytest

from bridge import wire
from bridge.errors import ConfigError
from bridge.store import SCHEMA_VERSION, Decision, SQLiteStore, open_store


@pytest.fixture
async def store(db_url):
    """A store on a file or a PostgreSQL schema (each backend), with the world ``w``."""
    store = await open_store(db_url)
    await store.add_world("w", "hash")
    yield store
    await store.close()


@pytest.fixture
async def sqlite_store(tmp_path):
    store = await SQLiteStore.open(tmp_path / "nested" / "b.sqlite3")
    await store.add_world("w", "hash")
    yield store
    await store.close()


def put_settings(option: str, ok: bool = True, reply: bytes = b"reply"):
    def decision(state):
        state.put_settings(wire.WorldSettings(fate_option=option))
        return Decision(reply, ok)
    return decision


async def option(store) -> str:
    return (await store.world("w")).settings.fate_option


class TestDecide:
    async def test_commit_and_replay(self, store):
        first = await store.decide("w", "e1", put_settings("off"))
        assert (first.reply, first.replayed) == (b"reply", False)
        again = await store.decide("w", "e1", put_settings("pc_only", reply=b"other"))
        assert (again.reply, again.replayed) == (b"reply", True)
        assert await option(store) == "off"

    async def test_refused_decision_keeps_its_reply_but_none_of_its_writes(self, store):
        refused = await store.decide("w", "e1", put_settings("off", ok=False, reply=b"no"))
        assert refused.reply == b"no"
        assert await option(store) == "everyone"
        assert (await store.decide("w", "e1", put_settings("off"))).reply == b"no"

    async def test_raising_decision_leaves_nothing(self, store):
        def broken(state):
            state.put_settings(wire.WorldSettings(fate_option="off"))
            state.next_seq()
            raise RuntimeError("bug")
        with pytest.raises(RuntimeError):
            await store.decide("w", "e1", broken)
        assert await option(store) == "everyone"
        # the event id was not consumed: a retry runs
        assert (await store.decide("w", "e1", put_settings("pc_only"))).replayed is False

    async def test_event_ids_are_per_world(self, store):
        await store.add_world("other", "h2")
        await store.decide("w", "e1", put_settings("off"))
        second = await store.decide("other", "e1", put_settings("pc_only", reply=b"r2"))
        assert (second.reply, second.replayed) == (b"r2", False)

    async def test_sequence_numbers_count_per_world(self, store):
        seen = []

        def take(state):
            seen.append(state.next_seq())
            return Decision(b"", True)
        for event in ("a", "b", "c"):
            await store.decide("w", event, take)
        assert seen == [1, 2, 3]


class TestFile:
    async def test_wal_mode_and_schema_version(self, sqlite_store, tmp_path):
        conn = sqlite3.connect(tmp_path / "nested" / "b.sqlite3")
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)

    async def test_a_new_database_is_readable_by_its_owner_only(self, tmp_path):
        store = await SQLiteStore.open(tmp_path / "new.sqlite3")
        await store.add_world("w", "hash")
        mode = (tmp_path / "new.sqlite3").stat().st_mode & 0o777
        wal = (tmp_path / "new.sqlite3-wal").stat().st_mode & 0o777
        await store.close()
        assert (mode, wal) == (0o600, 0o600)

    async def test_a_newer_bridge_file_is_refused_clearly(self, tmp_path):
        path = tmp_path / "future.sqlite3"
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION + 1),))
        conn.commit()
        conn.close()
        with pytest.raises(ConfigError, match="newer fate-bridge"):
            await SQLiteStore.open(path)

    async def test_reopen_keeps_worlds(self, tmp_path):
        path = tmp_path / "b.sqlite3"
        store = await SQLiteStore.open(path)
        await store.add_world("w", "hash")
        await store.close()
        await store.close()  # idempotent
        reopened = await SQLiteStore.open(path)
        assert [w.world_id for w in await reopened.worlds()] == ["w"]
        await reopened.close()

    async def test_closed_store_says_so(self, tmp_path):
        store = await SQLiteStore.open(tmp_path / "b.sqlite3")
        await store.close()
        with pytest.raises(ConfigError, match="closed"):
            await store.world("w")
