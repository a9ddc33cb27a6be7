"""Storage faults are never ``internal`` (issue 35): a resend after a restart, a failover or a lost
PostgreSQL session is answered from the store byte for byte; an unreachable database, a full disk
or a read-only file is ``unavailable`` (with a retry hint) until storage returns; one serving
process per SQLite file, whatever path reaches it; a database file deleted or replaced under a
running bridge stops it acknowledging.

PostgreSQL outages go through a TCP proxy the test starts (bench/outage.py), never by touching the
server; the full disk is a small tmpfs (root only: skipped elsewhere, required under
``FATE_BRIDGE_REQUIRE_SERVICES=1``)."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest
from structlog.testing import capture_logs

from bench.outage import OutageProxy, fill, tmpfs
from bridge.dice import ScriptedDice
from bridge.errors import StorageUnavailable
from bridge.session import Session, hash_token
from bridge.store.health import PROBE_SECONDS, RETRY_AFTER_MS
from bridge.store import SQLiteStore
from bridge.store.postgres import PostgresStore

from .helpers import ROOT
from .served import started, stopped
from .sohl_messages import frame
from .test_server import http_get

EXAMPLE = ROOT / "examples" / "hmtw-session.jsonl"
WORLDS = 8  # more than psycopg's prepare_threshold (5): its own statements get prepared on the way


def example_lines(count: int = 3) -> list[dict]:
    return [json.loads(line) for line in EXAMPLE.read_text().splitlines()[:count]]


async def decide_all(store, worlds: list[str]) -> dict[tuple[str, str], bytes]:
    """Each world of ``worlds`` (registered here if it is not) decides the example's first lines (a
    trusted session each); returns each (world, event_id)'s reply as sent, none an error."""
    sent = {}
    for world_id in worlds:
        if await store.world(world_id) is None:
            await store.add_world(world_id, None)
        session = Session(store, ScriptedDice([]), trusted=True, default_world=world_id)
        for message in example_lines():
            reply = await session.receive(frame({k: v for k, v in message.items() if k != "dice"}),
                                          ScriptedDice(message["dice"]))
            sent[world_id, message["event_id"]] = reply.frames[0]
            assert json.loads(reply.frames[0])["type"] != "error", reply.frames[0]
    return sent


async def resend_all(store, sent: dict[tuple[str, str], bytes]) -> dict[tuple[str, str], bytes]:
    """Send every request of ``sent`` again (no dice: nothing may run) and return the replies."""
    again = {}
    sessions: dict[str, Session] = {}
    for message in example_lines():
        for world_id in {w for w, _ in sent}:
            session = sessions.setdefault(world_id, Session(store, ScriptedDice([]), trusted=True,
                                                            default_world=world_id))
            reply = await session.receive(frame({k: v for k, v in message.items() if k != "dice"}))
            again[world_id, message["event_id"]] = reply.frames[0]
    return again


@pytest.fixture
async def proxy(pg_server):
    """A TCP proxy in front of the test server (bench/outage.py)."""
    proxy = OutageProxy.before(pg_server)
    await proxy.start()
    yield proxy
    await proxy.close()


class TestResendOnPostgreSQL:
    """A resend of a decided event_id is answered from the store, byte for byte (no receipt key
    here, so no receipt to set aside), whatever the process went through since."""

    async def test_after_a_restart(self, pg_url):
        worlds = [f"w{n}" for n in range(WORLDS)]
        store = await PostgresStore.open(pg_url)
        sent = await decide_all(store, worlds)
        await store.close()
        store = await PostgresStore.open(pg_url)  # nothing in memory: each world loaded, then replayed
        try:
            assert await resend_all(store, sent) == sent
        finally:
            await store.close()

    async def test_after_a_failover(self, pg_url):
        """``a`` served the worlds; ``b`` takes each over (its lease) and answers the resends."""
        worlds = [f"w{n}" for n in range(WORLDS)]
        a, b = await PostgresStore.open(pg_url), await PostgresStore.open(pg_url)
        try:
            for world_id in worlds:
                await a.add_world(world_id, None)
                await a.take_lease(world_id, "a")
            sent = await decide_all(a, worlds)
            for world_id in worlds:
                await b.take_lease(world_id, "b")
            assert await resend_all(b, sent) == sent
            # and b's own decisions go on after them
            session = Session(b, ScriptedDice([]), trusted=True, default_world="w0")
            message = {**example_lines()[0], "event_id": "after-failover", "test_id": "after-failover"}
            reply = await session.receive(frame({k: v for k, v in message.items() if k != "dice"}),
                                          ScriptedDice(message["dice"]))
            assert json.loads(reply.frames[0])["type"] != "error"
        finally:
            await a.close()
            await b.close()

    async def test_after_its_sessions_were_lost(self, pg_url, proxy):
        """Every connection of the store is cut (the proxy): the next requests, resends of
        decided event_ids, are answered from the store on new sessions."""
        worlds = [f"w{n}" for n in range(WORLDS)]
        store = await PostgresStore.open(proxy.url(pg_url))
        try:
            sent = await decide_all(store, worlds)
            assert proxy.cut() >= 2  # the writer thread's session and the event loop's
            again = await resend_all(store, sent)
            assert again == sent
        finally:
            await store.close()

    async def test_after_its_sessions_lost_their_prepared_statements(self, pg_url):
        """psycopg's own statement cache sent ``DEALLOCATE ALL`` after a rollback it saw, dropping
        the store's prepared statements too (issue 35). It is off on every session now; and a
        session that lost them anyway has its batches prepared again: resends (written on the
        writer thread's session) and new decisions (the event loop's) both go through."""
        worlds = [f"w{n}" for n in range(WORLDS)]
        store = await PostgresStore.open(pg_url)
        try:
            sent = await decide_all(store, worlds)
            assert await resend_all(store, sent) == sent  # both sessions hold statements now
            writer, loop = store._conn.raw, store._loop_session.raw
            assert store._conn.prepared and store._loop_session.prepared
            assert writer.prepare_threshold is None and loop.prepare_threshold is None
            psycopgs = "SELECT count(*) FROM pg_prepared_statements WHERE name LIKE '\\_pg3\\_%'"
            assert writer.execute(psycopgs).fetchone() == (0,)
            assert await (await loop.execute(psycopgs)).fetchone() == (0,)
            writer.execute("DEALLOCATE ALL")
            await loop.execute("DEALLOCATE ALL")
            assert await resend_all(store, sent) == sent
            more = await decide_all(store, ["w-after"])
            assert len(more) == len(example_lines())
        finally:
            await store.close()


def unavailable(frame_bytes: bytes) -> bool:
    """Whether a reply is the ``unavailable`` refusal, with its retry hint."""
    reply = json.loads(frame_bytes)
    return reply["type"] == "error" and reply["code"] == "unavailable" and reply["retry_after_ms"] == RETRY_AFTER_MS


async def until_available(store) -> None:
    """Wait for the store's probe to find storage back (every PROBE_SECONDS; bounded by the
    test's own timeout, never asserted as a duration)."""
    while not store.health.available:
        await asyncio.sleep(PROBE_SECONDS / 5)


def request(n: int) -> dict:
    """The example's first request under a new event id, test id and obstacle (H9: a failed
    obstacle is not tested again)."""
    return {**example_lines()[0], "event_id": f"fault-{n}", "test_id": f"fault-{n}", "obstacle": f"obstacle {n}"}


async def send(session: Session, message: dict) -> bytes:
    reply = await session.receive(frame({k: v for k, v in message.items() if k != "dice"}),
                                  ScriptedDice(message["dice"]))
    return reply.frames[0]


async def test_postgresql_unreachable_is_unavailable_until_it_answers_again(pg_url, proxy):
    """The server unreachable (the proxy refuses and cuts every link): each request is answered
    ``unavailable`` with its retry hint, nothing applied, one log line for the outage's start and
    one for its end, no traceback; once it answers again the same requests are decided, and a
    resend of one decided before is answered from the store byte for byte."""
    store = await PostgresStore.open(proxy.url(pg_url))
    try:
        sent = await decide_all(store, ["w"])
        session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
        with capture_logs() as logs:
            proxy.down()
            replies = [await send(session, request(n)) for n in range(3)]
            assert all(unavailable(reply) for reply in replies), replies
            assert not store.health.available and store.health.reason == "unreachable"
            proxy.up()
            await until_available(store)
            decided = [json.loads(await send(session, request(n))) for n in range(3)]
        assert [reply["type"] for reply in decided] == ["hmtw_tested"] * 3, decided
        events = [entry["event"] for entry in logs if entry["log_level"] in ("error", "warning", "critical")]
        assert events == ["storage_unavailable", "storage_available"], logs
        assert not any("exc_info" in entry for entry in logs)
        assert await resend_all(store, sent) == sent
    finally:
        await store.close()


@pytest.fixture
def small_disk(tmp_path, tmpfs_mountable):
    """A 2 MiB tmpfs at ``tmp_path/disk``, unmounted after the test."""
    disk = tmp_path / "disk"
    disk.mkdir()
    with tmpfs(disk, 2):
        yield disk


async def test_a_full_disk_is_unavailable_with_healthz_503_until_space_returns(small_disk):
    """SQLite on a full disk: the request that cannot be stored is answered ``unavailable``
    (nothing applied), ``/healthz`` answers 503 and the gauge is 0, with one log line each for
    the start and the end; once space returns the same request (same event_id) is decided, and
    every acknowledged decision is in the file after a restart."""
    db = small_disk / "bridge.sqlite3"
    store = await SQLiteStore.open(db)
    server, _ = await started(store)
    port = server.sockets[0].getsockname()[1]
    try:
        sent = await decide_all(store, ["w"])
        session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
        with capture_logs() as logs:
            filler = fill(small_disk)
            n, refused = 0, None
            while refused is None:  # the WAL takes a few more frames before the disk refuses one
                reply = await send(session, request(n))
                if json.loads(reply)["type"] == "error":
                    assert unavailable(reply), reply
                    refused = request(n)
                else:
                    sent["w", f"fault-{n}"] = reply
                n += 1
                assert n < 500, "the disk never filled"
            assert store.health.reason == "disk_full"
            assert await asyncio.to_thread(http_get, port, "/healthz") == (503, "storage unavailable: disk_full\n")
            assert "fate_bridge_storage_available 0.0" in (await asyncio.to_thread(http_get, port, "/metrics"))[1]
            assert unavailable(await send(session, refused))  # still full: refused at once
            filler.unlink()
            await until_available(store)
            assert await asyncio.to_thread(http_get, port, "/healthz") == (200, "ok\n")
            decided = json.loads(await send(session, refused))
        assert decided["type"] == "hmtw_tested", decided
        problems = [(entry["event"], entry.get("reason")) for entry in logs if entry["log_level"] in ("error", "warning")]
        assert problems == [("storage_unavailable", "disk_full"), ("storage_available", "disk_full")], logs
        assert not any("exc_info" in entry for entry in logs)
    finally:
        await stopped(server)
        await store.close()
    store = await SQLiteStore.open(db)
    try:
        assert await resend_all(store, {k: v for k, v in sent.items() if not k[1].startswith("fault-")}) == \
            {k: v for k, v in sent.items() if not k[1].startswith("fault-")}
    finally:
        await store.close()


@pytest.mark.parametrize("how", ["deleted", "replaced"])
async def test_a_database_file_deleted_or_replaced_under_the_bridge_stops_it_acknowledging(tmp_path, how):
    """The file is deleted (or another put in its place) while the store runs: the next batch,
    committed into a file no path reaches, is not acknowledged (``unavailable``), one log line
    says so, and the store stays down (its probe fails) until it is started again."""
    db = tmp_path / "bridge.sqlite3"
    store = await SQLiteStore.open(db)
    try:
        await decide_all(store, ["w"])
        session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
        with capture_logs() as logs:
            db.unlink()
            if how == "replaced":
                db.write_bytes(b"")
            assert unavailable(await send(session, request(0)))
            assert unavailable(await send(session, request(1)))
            with pytest.raises(StorageUnavailable):
                await store._run(store._probe_sync)
        assert store.health.reason == "database_file_gone"
        assert [entry["event"] for entry in logs if entry["log_level"] == "error"] == ["storage_unavailable"]
    finally:
        await store.close()


async def test_a_world_with_an_invalid_settings_row_is_named_and_refused_while_the_others_are_served(tmp_path):
    """A settings value outside its enum (written by hand): ``worlds()`` (what serve lists at start)
    leaves the world out and names it with the value in one line; its hello is refused
    ``unauthorized`` with that line; the other worlds decide as before."""
    db = tmp_path / "bridge.sqlite3"
    store = await SQLiteStore.open(db)
    await store.add_world("good", hash_token("t"))
    await store.add_world("bad", hash_token("t"))
    await store.close()
    with sqlite3.connect(db) as conn:
        conn.execute("""UPDATE worlds SET settings = '{"fate_option":"sometimes"}' WHERE world_id = 'bad'""")
    store = await SQLiteStore.open(db)
    try:
        assert [w.world_id for w in await store.worlds()] == ["good"]
        (problem,) = store.invalid_worlds.values()
        assert problem.startswith("world 'bad' has invalid stored settings (") and '"sometimes"' in problem
        assert "fate-bridge audit repair bad" in problem and "\n" not in problem
        refused = Session(store, ScriptedDice([]))
        reply = json.loads((await refused.receive(frame({"type": "hello", "v": 1, "world_id": "bad", "token": "t"}))).frames[0])
        assert (reply["code"], reply["message"]) == ("unauthorized", problem)
        assert len(await decide_all(store, ["good"])) == len(example_lines())
    finally:
        await store.close()
