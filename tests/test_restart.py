"""Issue 27: a crash costs milliseconds. A world's load after kill -9 checks its state rows against
the seal its last batch wrote (bridge/store/seal.py) instead of deriving its whole chain again, and
files its older event ids after the load; what the state guard protects stays protected (a state
row edited offline is refused at load, named, with the repair command). Both backends where the
store alone is enough; the offline edits on the SQLite file (bridge/store/seal.py says why the
backends share the code)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bridge import audit
from bridge.dice import ScriptedDice
from bridge.errors import WorldStateMismatch
from bridge.session import Session
from bridge.store import memory, open_store, seal, writer
from bridge.store.audit_rows import stored_bytes

from .helpers import ROOT
from .sohl_messages import actor, fate_spend, frame, rolled, sohl_test

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))


async def crash(store) -> None:
    """Stop ``store`` as kill -9 would: no head signed at the stop, connections dropped."""
    store._closed = True
    await asyncio.get_running_loop().run_in_executor(store._executor, store._close_sync)
    store._executor.shutdown(wait=True)
    if store._loader is not None:
        store._loader.shutdown(wait=True)


async def fate_some(store, world: str, results: int, start: int = 0) -> list[dict]:
    """``results`` SoHL tests rolled and fated once each in ``world`` (a fresh actor each; dice
    34, 80, 90 in turn: spent, lost, kept). Returns the Fate spends' replies."""
    session = Session(store, ScriptedDice([]), trusted=True, default_world=world)
    replies = []
    for n in range(start, start + results):
        who = actor(actor_id=f"actor{n:011d}")
        await session.receive(frame(rolled(f"r{n}", f"m{n}", actor_part=who, test=sohl_test(roll=88))))
        reply = await session.receive(frame(fate_spend(f"s{n}", f"m{n}")), ScriptedDice([(34, 80, 90)[n % 3]]))
        replies.append(json.loads(reply.frames[0]))
    return replies


async def test_a_world_loads_after_a_crash_from_its_seal_without_deriving_its_chain(db_url, monkeypatch):
    """After a crash (the last signed head older than the chain's end) the world's first decision
    is answered with no derivation of its chain: the seal written with its last batch matches its
    rows. Results fated before the crash stay fated (S11)."""
    store = await open_store(db_url, signing_key=KEY)
    await store.add_world("w", None)
    await fate_some(store, "w", 9)  # 18 records: the last periodic head is at 16
    await crash(store)

    def derive(*args, **kwargs):
        raise AssertionError("the world's chain was derived at load")

    monkeypatch.setattr(audit, "verify_world", derive)
    store = await open_store(db_url, signing_key=KEY)
    try:
        session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
        again = json.loads((await session.receive(frame(fate_spend("s-again", "m3")))).frames[0])
        assert again["type"] == "error" and again["code"] == "already_fated"
        new = await fate_some(store, "w", 1, start=9)
        assert new[0]["type"] != "error", new
    finally:
        await store.close()


async def test_each_batch_seals_the_rows_it_leaves(db_url):
    """The seal in the worlds row is the one :func:`bridge.store.seal.seal` makes of the rows as
    stored after the last batch: every records row and events row, the chain's end, last_seq."""
    store = await open_store(db_url, signing_key=KEY)
    await store.add_world("w", None)
    await fate_some(store, "w", 5)
    await crash(store)
    store = await open_store(db_url, signing_key=KEY)
    try:
        def read(conn):
            rows = [(kind, key, stored_bytes(value)) for kind, key, value in conn.execute(
                "SELECT kind, key, value FROM records WHERE world_id = 'w'")]
            settings, last_seq, stored_seal = conn.execute(
                "SELECT settings, last_seq, state_seal FROM worlds WHERE world_id = 'w'").fetchone()
            head = conn.execute("SELECT seq, hash FROM audit WHERE world_id = 'w' ORDER BY seq DESC LIMIT 1").fetchone()
            return rows, stored_bytes(settings), last_seq, stored_seal, (head[0], head[1])

        rows, settings, last_seq, stored_seal, head = await store._run(lambda: read(store._conn))
        key = seal.seal_key(KEY, None)
        total, count = seal.rows_sum(seal.world_hasher(key, "w"), rows)
        assert head[0] == 10 and count == len(rows) >= 10  # (graded, fate... rows of 5 results)
        assert stored_seal == seal.seal(key, "w", head, last_seq, settings, total, count)
        assert stored_seal != seal.seal(key, "w", head, last_seq, settings, total + 1, count)
    finally:
        await store.close()


async def test_a_state_row_edited_after_a_crash_is_refused_at_load(tmp_path):
    """The seal does not match an edited row, so the load falls back to the chain, which names the
    row: the world is refused (its first decision and any read), whatever the decision touches."""
    db = tmp_path / "bridge.sqlite3"
    store = await open_store(db, signing_key=KEY)
    await store.add_world("w", None)
    await fate_some(store, "w", 6)  # 12 records: no signed head yet, the seal alone covers them
    await crash(store)
    conn = sqlite3.connect(db)
    deleted = sum(conn.execute(f"DELETE FROM {table} WHERE world_id='w' AND kind='sohl.fate' AND key='m1'").rowcount
                  for table in ("main.records", "main.records_tail"))  # m1 unfated
    conn.commit()
    conn.close()
    assert deleted == 1
    store = await open_store(db, signing_key=KEY)
    try:
        session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
        reply = await session.receive(frame(rolled("r-new", "m-new")))
        error = json.loads(reply.frames[0])
        assert reply.close_code == 4001 and error["code"] == "unauthorized"
        assert "records('sohl.fate', 'm1')" in error["message"] and "audit repair --world w" in error["message"]
        with pytest.raises(WorldStateMismatch):
            await store.read("w", lambda state: state.settings())
    finally:
        await store.close()


async def test_a_world_without_a_seal_is_checked_against_its_chain_once_then_sealed(tmp_path, monkeypatch):
    """A world no batch sealed yet (a file of an older bridge, or a seal by another key) is
    derived from its chain at its first load, as before; its next batch seals it, so the load
    after the next crash derives nothing."""
    db = tmp_path / "bridge.sqlite3"
    store = await open_store(db, signing_key=KEY)
    await store.add_world("w", None)
    await fate_some(store, "w", 9)  # 18 records: a signed head at 16, older than the chain's end
    await crash(store)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE worlds SET state_seal = NULL")
    conn.commit()
    conn.close()
    derived: list[str] = []
    verify_world = audit.verify_world

    def counted(trail, *args, **kwargs):
        derived.append(trail.world_id)
        return verify_world(trail, *args, **kwargs)

    monkeypatch.setattr(audit, "verify_world", counted)
    store = await open_store(db, signing_key=KEY)
    await fate_some(store, "w", 1, start=9)
    await crash(store)
    assert derived == ["w"]
    store = await open_store(db, signing_key=KEY)
    try:
        await fate_some(store, "w", 1, start=10)
    finally:
        await store.close()
    assert derived == ["w"]


async def test_older_event_ids_are_filed_after_the_load_and_repeats_found_meanwhile(db_url, monkeypatch):
    """A load reads the world's last RECENT_EVENTS event ids only (4 here); the older ones are
    filed into a filter afterwards, and until then a repeat of one is looked up in the store: a
    repeated request gets its stored reply before and after, never a second decision."""
    monkeypatch.setattr(memory, "RECENT_EVENTS", 4)
    monkeypatch.setattr(writer, "RECENT_EVENTS", 4)
    monkeypatch.setattr(writer, "OLDER_EVENTS_STEP", 3)  # several steps
    store = await open_store(db_url, signing_key=KEY)
    await store.add_world("w", None)
    first = await fate_some(store, "w", 6)  # 12 records, event ids r0 s0 ... r5 s5
    await crash(store)
    store = await open_store(db_url, signing_key=KEY)
    release = asyncio.Event()  # the filing waits for the test (else it may finish first)
    file_older_events = store._file_older_events

    async def held(cache):
        await release.wait()
        await file_older_events(cache)

    store._file_older_events = held
    try:
        session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
        await session.receive(frame(rolled("r-new", "m-new")))  # loads the world
        cache = store._worlds["w"]
        assert list(cache.events)[:4] == ["r4", "s4", "r5", "s5"] and cache.older_below == 9
        assert cache.may_be_older("anything")  # until the older ids are filed: looked up
        repeat = json.loads((await session.receive(frame(fate_spend("s1", "m1")))).frames[0])
        assert repeat == first[1]
        release.set()
        await asyncio.gather(*store._filing)
        assert cache.older_below == 0 and all(f"s{n}" in cache.older[0] for n in range(4))
        assert cache.older[0].count == 8  # r0 s0 ... r3 s3: the records before seq 9
        again = json.loads((await session.receive(frame(fate_spend("s0", "m0")))).frames[0])
        assert again == first[0]
    finally:
        await store.close()


async def test_what_a_killed_bridge_left_in_the_log_is_copied_before_serving(tmp_path):
    """A SQLite file's log is checkpointed and truncated when the store opens (issue 27): copied
    by the first periodic checkpoint instead, it stalled the other worlds' decisions while a long
    history loaded (p99 5.9-7.3x)."""
    db = tmp_path / "bridge.sqlite3"
    # a process that decides, then ends as kill -9 ends it: nothing closed, the log left as it is
    script = ("import asyncio, os, sys; from tests.test_restart import KEY, fate_some; from bridge.store import open_store\n"
              "async def main():\n"
              f"    store = await open_store({str(db)!r}, signing_key=KEY)\n"
              "    await store.add_world('w', None)\n"
              "    await fate_some(store, 'w', 3)\n"
              "    os._exit(0)\n"
              "asyncio.run(main())\n")
    killed = await asyncio.create_subprocess_exec(sys.executable, "-c", script, cwd=ROOT,
                                                  stdout=asyncio.subprocess.DEVNULL)
    assert await killed.wait() == 0
    wal = tmp_path / "bridge.sqlite3-wal"
    assert wal.stat().st_size > 0  # the killed bridge's decisions, still in the log
    store = await open_store(db, signing_key=KEY)
    try:
        assert wal.stat().st_size == 0
        again = await fate_some(store, "w", 1, start=3)
        assert again[0]["type"] != "error"
    finally:
        await store.close()


async def test_a_clean_stop_signs_only_the_worlds_checked_and_decided_in_since_their_last_head(tmp_path):
    """At a clean stop a head with the state's digest is signed for each world this process
    checked and decided in since its last one; a world it only read, or never loaded, gets none
    (a digest of state nobody checked would seal an offline edit as the bridge's)."""
    db = tmp_path / "bridge.sqlite3"
    store = await open_store(db, signing_key=KEY)
    for world in ("decided", "read", "untouched"):
        await store.add_world(world, None)
        await fate_some(store, world, 1)
    await store.close()

    def heads() -> dict[str, int]:
        conn = sqlite3.connect(db)
        try:
            return dict(conn.execute("SELECT world_id, count(*) FROM heads GROUP BY world_id").fetchall())
        finally:
            conn.close()

    before = heads()
    assert before == {"decided": 1, "read": 1, "untouched": 1}  # each signed at the first stop
    store = await open_store(db, signing_key=KEY)
    await fate_some(store, "decided", 1, start=1)
    await store.read("read", lambda state: state.settings())
    await store.close()
    assert heads() == {"decided": 2, "read": 1, "untouched": 1}
