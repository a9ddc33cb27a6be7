"""The decision write path of issue 17: state in memory, one transaction per batch, a refusal
writes nothing, the reply stored once (inside the audit record) and replayed byte for byte, a
failed COMMIT fails what read its state, another process on the same file is noticed."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import threading

import msgspec
import pytest

from bridge import audit, record, wire
from bridge.dice import ScriptedDice
from bridge.errors import ConfigError, WorldNotRegistered
from bridge.session import Session
from bridge.store import SCHEMA_VERSION, Decision, SQLiteStore, open_store
from bridge.replies import replayed_frame
from bridge.store.audit_rows import PREV_HASH
from bridge.store.blobs import unpack
from bridge.store.schema import read_as_one

from .helpers import ROOT, old_schema_file
from .sohl_messages import frame

KEY = b"k" * 32
EXAMPLES = sorted((ROOT / "examples").glob("*-session.jsonl"))


def counts(db) -> dict[str, int]:
    conn = sqlite3.connect(db)
    read_as_one(conn)  # a running store's records in audit_tail count (schema migration 9)
    try:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("audit", "events", "records", "checkpoints")}
    finally:
        conn.close()


async def run_example(example, db) -> dict[str, bytes]:
    """Send every line of ``example`` through a trusted Session on a new store at ``db``; returns
    each event_id's reply frame as sent. The store is closed. (``db``: a file, or a PostgreSQL
    URL for tests/test_postgres.py.)"""
    store = await open_store(db, audit_key=KEY)
    await store.add_world("w", None)
    session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
    sent: dict[str, bytes] = {}
    try:
        for line in example.read_text().splitlines():
            message = json.loads(line)
            reply = await session.receive(frame({k: v for k, v in message.items() if k != "dice"}),
                                          ScriptedDice(message.get("dice", [])))
            if message.get("event_id") and message["event_id"] not in sent:
                sent[message["event_id"]] = reply.frames[0]
    finally:
        await store.close()
    return sent


async def assert_replayed(store, example, sent: dict[str, bytes]) -> None:
    """Send ``example``'s lines again through a trusted Session on ``store`` (reopened: nothing in
    memory); each event_id of ``sent`` (from :func:`run_example`) must be answered with the same
    bytes."""
    session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
    for line in example.read_text().splitlines():
        message = json.loads(line)
        if message.get("event_id") in sent:
            reply = await session.receive(frame({k: v for k, v in message.items() if k != "dice"}))
            assert reply.frames[0] == sent[message["event_id"]], message["event_id"]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
async def test_every_example_reply_is_replayed_byte_for_byte_from_its_audit_record(example, tmp_path):
    db = tmp_path / "b.sqlite3"
    sent = await run_example(example, db)
    assert sent, "the example has decisions"
    conn = sqlite3.connect(db)
    records = {e: msgspec.json.decode(unpack(r), type=audit.AuditRecord) for e, r in
               conn.execute("SELECT event_id, record FROM audit WHERE event_id IS NOT NULL")}
    assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 0  # no second copy
    conn.close()
    for event_id, reply in sent.items():
        assert replayed_frame(records[event_id]) == reply, event_id

    # after a restart (nothing in memory), every event_id again: the same bytes, nothing decided
    before = counts(db)
    store = await SQLiteStore.open(db, audit_key=KEY)
    try:
        await assert_replayed(store, example, sent)
    finally:
        await store.close()
    assert {k: v for k, v in counts(db).items() if k != "checkpoints"} == \
        {k: v for k, v in before.items() if k != "checkpoints"}


@pytest.fixture
async def store(tmp_path):
    store = await SQLiteStore.open(tmp_path / "b.sqlite3")
    await store.add_world("w", "hash")
    yield store
    await store.close()


def settings_to(option: str, ok: bool = True, reply: bytes = b"reply", event_id: str | None = None):
    """A decision setting ``option``, audited under ``event_id`` (the store finds a reply's record
    by the event_id the record names, as the session's do)."""
    def decision(state):
        state.put_settings(wire.WorldSettings(fate_option=option))
        state.next_seq()
        return Decision(reply, ok, record.AuditEntry(
            type="settings", event_id=event_id, user_id=None, message=b"{}", reads=[], dice=[],
            reply=b'{"type":"pong","v":1}', ok=ok, summary=wire.AuditColumns(outcome="x")))
    return decision


class TestWrites:
    async def test_a_refusal_writes_its_audit_record_and_nothing_else(self, store, tmp_path):
        db = tmp_path / "b.sqlite3"
        before = counts(db)
        conn = sqlite3.connect(db)
        world_before = conn.execute("SELECT settings, last_seq FROM worlds").fetchall()
        refused = await store.decide("w", "e1", settings_to("off", ok=False))
        assert refused.seq == 1 and refused.record_hash is not None
        assert counts(db) == {**before, "audit": before["audit"] + 1}
        assert conn.execute("SELECT settings, last_seq FROM worlds").fetchall() == world_before
        conn.close()
        assert (await store.world("w")).settings.fate_option == "everyone"

    async def test_decisions_of_one_tick_commit_in_one_transaction(self, store, tmp_path):
        for world in ("a", "b", "c"):
            await store.add_world(world, "h")
            await store.decide(world, f"warm-{world}", settings_to("pc_only"))  # loaded in memory
        commits = []
        conns = [c for c in (store._conn, store._batch_conn) if c is not None]
        for conn in conns:  # the writer's and the event loop's batch connection: every COMMIT counted
            conn.set_trace_callback(lambda sql: commits.append(threading.get_ident()) if sql == "COMMIT" else None)
        decided = await asyncio.gather(*(store.decide(w, f"e-{w}", settings_to("off")) for w in "abc"))
        for conn in conns:
            conn.set_trace_callback(None)
        assert commits == [threading.get_ident()]  # one, on this event loop's thread: no hand-off
        assert [d.seq for d in decided] == [2, 2, 2]
        assert {(await store.world(w)).settings.fate_option for w in "abc"} == {"off"}

    async def test_the_audit_record_is_sealed_with_the_seq_and_hash_the_caller_gets(self, store, tmp_path):
        first = await store.decide("w", "e1", settings_to("off"))
        second = await store.decide("w", "e2", settings_to("pc_only"))
        conn = sqlite3.connect(tmp_path / "b.sqlite3")
        read_as_one(conn)
        rows = conn.execute(f"SELECT seq, hash, {PREV_HASH}, prev_hash FROM audit ORDER BY seq").fetchall()
        conn.close()
        # each links to the one before, which is not stored again (issue 17)
        assert rows == [(1, first.record_hash, audit.GENESIS_HASH, ""), (2, second.record_hash, first.record_hash, "")]


def note_to(key: str, option: str, event_id: str):
    """A decision storing the record ("test.note", ``key``) with ``option`` in it, audited."""
    def decision(state):
        state.put("test.note", key, wire.WorldSettings(fate_option=option))
        state.next_seq()
        return Decision(b"reply", True, record.AuditEntry(
            type="note", event_id=event_id, user_id=None, message=b"{}", reads=[], dice=[],
            reply=b'{"type":"pong","v":1}', ok=True, summary=wire.AuditColumns(outcome="x")))
    return decision


def physical(db) -> dict[str, int]:
    """Rows in each table as stored (no view): where the records are."""
    conn = sqlite3.connect(db)
    try:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("audit", "audit_tail", "records", "records_tail")}
    finally:
        conn.close()


def as_read(db) -> tuple[list[tuple], list[tuple]]:
    """The audit rows (id, seq, hash) and the test.note records as every reader sees them."""
    conn = sqlite3.connect(db)
    read_as_one(conn)
    try:
        return (conn.execute("SELECT id, seq, hash FROM audit ORDER BY id").fetchall(),
                [(key, msgspec.json.decode(unpack(value))["fate_option"]) for key, value in conn.execute(
                    "SELECT key, value FROM records WHERE kind = 'test.note' ORDER BY key")])
    finally:
        conn.close()


class TestTails:
    """Schema migration 9 (issue 17): a batch writes audit_tail and records_tail, whose pages
    all its worlds share; the writer thread folds them into audit and records now and then;
    every connection reads each pair as one."""

    async def test_records_wait_in_the_tails_read_as_one_and_keep_their_ids_when_folded(self, store, tmp_path):
        db = tmp_path / "b.sqlite3"
        decided = [await store.decide("w", f"e{i}", note_to("a", f"v{i}", f"e{i}")) for i in (1, 2)]
        decided.append(await store.decide("w", "e3", note_to("b", "v3", "e3")))
        assert physical(db) == {"audit": 0, "audit_tail": 3, "records": 0, "records_tail": 2}
        rows, notes = as_read(db)
        assert rows == [(1, 1, decided[0].record_hash), (2, 2, decided[1].record_hash), (3, 3, decided[2].record_hash)]
        assert notes == [("a", "v2"), ("b", "v3")]  # the latest value of "a", once
        await store._run(store._fold_all_sync)
        assert physical(db) == {"audit": 3, "audit_tail": 0, "records": 2, "records_tail": 0}
        assert as_read(db) == (rows, notes)  # the same ids, hashes and values, now in audit and records
        fourth = await store.decide("w", "e4", note_to("a", "v4", "e4"))  # a newer value over a folded one
        assert physical(db) == {"audit": 3, "audit_tail": 1, "records": 2, "records_tail": 1}
        assert as_read(db) == (rows + [(4, 4, fourth.record_hash)], [("a", "v4"), ("b", "v3")])
        assert (await store.decide("w", "e2", note_to("a", "again", "e2"))).replayed  # found in audit
        assert (await store.decide("w", "e4", note_to("a", "again", "e4"))).replayed  # and in audit_tail

    async def test_the_writer_thread_folds_the_oldest_chunks_once_the_tail_holds_fold_rows(self, tmp_path,
                                                                                           monkeypatch):
        monkeypatch.setattr("bridge.store.sqlite.FOLD_ROWS", 6)
        monkeypatch.setattr("bridge.store.sqlite.FOLD_CHUNK", 2)
        db = tmp_path / "b.sqlite3"
        store = await SQLiteStore.open(db)
        try:
            for world in "abc":
                await store.add_world(world, "hash")
            for n, world in enumerate("abcab"):
                await store.decide(world, f"{world}{n}", note_to("n", f"v{n}", f"{world}{n}"))
            await asyncio.sleep(0.2)
            assert physical(db) == {"audit": 0, "audit_tail": 5, "records": 0, "records_tail": 3}
            await store.decide("c", "c5", note_to("n", "v", "c5"))  # the 6th row starts a fold
            folded = {"audit": 4, "audit_tail": 2, "records": 3, "records_tail": 0}
            deadline = asyncio.get_running_loop().time() + 30  # a bound on a hang, not a timing (issue 26)
            while physical(db) != folded and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.02)  # it folds 2 rows a transaction until 3 are left: ids 1-4
            assert physical(db) == folded
            conn = sqlite3.connect(db)
            assert [r[0] for r in conn.execute("SELECT id FROM main.audit")] == [1, 2, 3, 4]  # oldest first, in order
            conn.close()
            assert [row[0] for row in as_read(db)[0]] == [1, 2, 3, 4, 5, 6]
        finally:
            await store.close()
        assert physical(db) == {"audit": 6, "audit_tail": 0, "records": 3, "records_tail": 0}

    async def test_a_tail_the_writer_thread_cannot_keep_down_is_folded_by_the_batches(self, tmp_path, monkeypatch):
        import bridge.store.sqlite as sqlite_module

        monkeypatch.setattr(sqlite_module, "FOLD_ROWS", 2)
        monkeypatch.setattr(sqlite_module, "FOLD_BACKSTOP", 5)
        monkeypatch.setattr(sqlite_module, "FOLD_CHUNK", 4)
        monkeypatch.setattr(sqlite_module.SQLiteStore, "_fold_sync", lambda self: None)  # as if it never got the lock
        db = tmp_path / "b.sqlite3"
        store = await SQLiteStore.open(db)
        try:
            await store.add_world("w", "hash")
            for i in range(4):
                await store.decide("w", f"e{i}", note_to("a", f"v{i}", f"e{i}"))
            assert physical(db)["audit_tail"] == 4
            await store.decide("w", "e4", note_to("a", "v4", "e4"))  # the 5th row: the batch folds ids 1-4
            assert physical(db) == {"audit": 4, "audit_tail": 1, "records": 1, "records_tail": 1}
        finally:
            await store.close()

    @pytest.mark.parametrize("by", ["writer thread", "batches"])
    async def test_a_failing_fold_changes_nothing_and_is_tried_again_after_fold_rows_more(self, tmp_path, monkeypatch, by):
        import bridge.store.sqlite as sqlite_module

        monkeypatch.setattr(sqlite_module, "FOLD_ROWS", 2)
        if by == "batches":
            monkeypatch.setattr(sqlite_module, "FOLD_BACKSTOP", 2)
            monkeypatch.setattr(sqlite_module.SQLiteStore, "_fold_sync", lambda self: None)
        tries = []

        def failing(conn, rows=None):
            tries.append(rows)
            raise sqlite3.OperationalError("database or disk is full")

        db = tmp_path / "b.sqlite3"
        store = await SQLiteStore.open(db)
        monkeypatch.setattr(sqlite_module, "fold_tail", failing)  # (the start's fold passed)
        try:
            await store.add_world("w", "hash")
            for i in range(5):  # every decision is answered: the failing fold is not theirs
                assert (await store.decide("w", f"e{i}", note_to("a", f"v{i}", f"e{i}"))).seq == i + 1
                await store._run(lambda: None)  # the writer thread's fold, if one started, has tried
            assert len(tries) == 2  # at the 2nd and the 4th record, not after every batch
            assert physical(db)["audit_tail"] == 5  # kept, read as audit
            assert [row[1] for row in as_read(db)[0]] == [1, 2, 3, 4, 5]
            monkeypatch.undo()
        finally:
            await store.close()  # folds everything
        assert physical(db)["audit_tail"] == 0

    async def test_a_fold_moves_the_oldest_rows_asked_for_or_all_there_are(self, store, tmp_path):
        from bridge.store.schema import fold_tail

        for i in range(3):
            await store.decide("w", f"e{i}", note_to("a", f"v{i}", f"e{i}"))
        assert await store._run(store._transaction, lambda conn: fold_tail(conn, 2)) == 2
        conn = sqlite3.connect(tmp_path / "b.sqlite3")
        assert [r[0] for r in conn.execute("SELECT id FROM main.audit")] == [1, 2]
        conn.close()
        assert await store._run(store._transaction, lambda conn: fold_tail(conn, 128)) == 1  # fewer than asked
        assert await store._run(store._transaction, lambda conn: fold_tail(conn, 128)) == 0
        assert physical(tmp_path / "b.sqlite3") == {"audit": 3, "audit_tail": 0, "records": 1, "records_tail": 0}

    async def test_ids_follow_on_from_rows_put_into_audit_by_hand(self, tmp_path):
        db = tmp_path / "b.sqlite3"
        store = await SQLiteStore.open(db)
        await store.add_world("w", "hash")
        await store.decide("w", "e1", note_to("a", "v1", "e1"))
        await store.close()
        conn = sqlite3.connect(db)
        conn.execute("INSERT INTO audit (id, world_id, seq, ts, type, outcome, summary, record, prev_hash, hash)"
                     " SELECT 100, world_id, 2, ts, type, outcome, summary, record, prev_hash, hash FROM audit")
        conn.commit()
        conn.close()
        store = await SQLiteStore.open(db)  # its start's fold moves audit_tail's counter past id 100
        try:
            decided = await store.decide("w", "e3", note_to("a", "v3", "e3"))
            assert decided.seq == 3
            assert [row[:2] for row in as_read(db)[0]] == [(1, 1), (100, 2), (101, 3)]
        finally:
            await store.close()  # and the fold of id 101 into audit does not collide
        assert physical(db)["audit_tail"] == 0

    async def test_a_fold_on_the_writer_thread_gives_way_to_a_write_lock_held_elsewhere(self, store, tmp_path):
        import time

        for i in range(3):
            await store.decide("w", f"e{i}", note_to("a", f"v{i}", f"e{i}"))
        other = sqlite3.connect(tmp_path / "b.sqlite3", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            began = time.monotonic()
            await store._run(store._fold_sync)
            waited = time.monotonic() - began
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert waited < 4.0  # FOLD_WAIT_MS, not the writer's 5 s busy timeout (room for a busy machine)
        assert physical(tmp_path / "b.sqlite3")["audit_tail"] == 3  # nothing moved
        assert store._fold_retry_at == 0 and not store._folding  # not a failure: tried again soon
        await store._run(store._fold_sync)
        assert physical(tmp_path / "b.sqlite3")["audit_tail"] == 0

    async def test_a_stop_folds_everything_and_a_killed_bridges_tails_are_folded_at_the_next_start(self, tmp_path):
        db = tmp_path / "b.sqlite3"
        first = await SQLiteStore.open(db, audit_key=KEY)
        await first.add_world("w", "hash")
        await first.decide("w", "e1", note_to("a", "v1", "e1"))
        # as kill -9 leaves it: the tails hold the record; nothing closed the store
        assert physical(db) == {"audit": 0, "audit_tail": 1, "records": 0, "records_tail": 1}
        second = await SQLiteStore.open(db, audit_key=KEY)  # the restart
        assert physical(db) == {"audit": 1, "audit_tail": 0, "records": 1, "records_tail": 0}
        decided = await second.decide("w", "e2", note_to("a", "v2", "e2"))
        assert decided.seq == 2 and physical(db)["audit_tail"] == 1
        await second.close()
        assert physical(db) == {"audit": 2, "audit_tail": 0, "records": 1, "records_tail": 0}
        await first.close()
        assert physical(db) == {"audit": 2, "audit_tail": 0, "records": 1, "records_tail": 0}

    async def test_a_start_refuses_a_tail_that_collides_with_the_trail_saying_what_happened(self, tmp_path):
        db = tmp_path / "b.sqlite3"
        store = await SQLiteStore.open(db)
        await store.add_world("w", "hash")
        await store.decide("w", "e1", note_to("a", "v1", "e1"))
        await store.close()  # record 1 folded into audit
        conn = sqlite3.connect(db)
        conn.execute("INSERT INTO audit_tail (world_id, seq, ts, type, outcome, summary, record, prev_hash, hash)"
                     " SELECT world_id, seq, ts, type, outcome, summary, record, prev_hash, hash FROM audit")
        conn.commit()
        conn.close()
        with pytest.raises(ConfigError, match="two bridge processes wrote the same world"):
            await SQLiteStore.open(db)

    async def test_a_read_only_audit_verify_while_serving_reads_the_tails(self, store, tmp_path):
        from bridge.store.audit_rows import verify_database
        from bridge.store.sqlite_file import connect_readonly as open_readonly

        for i in range(3):
            await store.decide("w", f"e{i}", note_to("a", f"v{i}", f"e{i}"))
        assert physical(tmp_path / "b.sqlite3")["audit_tail"] == 3
        conn = open_readonly(tmp_path / "b.sqlite3")
        try:
            (report,) = verify_database(conn, "w", None, None)
        finally:
            conn.close()
        assert report.records == 3
        assert [p.kind for p in report.problems if p.kind not in ("rederive", "state")] == []


def plans_of(db, statements: list[str]) -> dict[str, list[str]]:
    """EXPLAIN QUERY PLAN of each statement (parameters bound in it) as every reader sees the file."""
    conn = sqlite3.connect(db)
    read_as_one(conn)
    try:
        return {sql: [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}")] for sql in statements}
    finally:
        conn.close()


class TestReadsThroughTheViews:
    """A world's load and a clean stop read audit through the UNION ALL view: an aggregate
    over it (max, min ... GROUP BY) runs as a co-routine reading every row of the world, or of
    the table, and their record blobs, where audit's own indexes answered before schema 9."""

    async def test_loading_a_world_and_a_clean_stop_read_audit_by_its_indexes_alone(self, tmp_path, monkeypatch):
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        db, key = tmp_path / "b.sqlite3", Ed25519PrivateKey.generate()
        store = await SQLiteStore.open(db, audit_key=KEY, signing_key=key)
        await store.add_world("w", "hash")
        for i in range(3):
            await store.decide("w", f"e{i}", note_to("a", f"v{i}", f"e{i}"))
        await store._run(store._fold_all_sync)  # rows in audit, and in audit_tail
        await store.decide("w", "e3", note_to("a", "v3", "e3"))
        await store.close()  # a clean stop: the head signed with the state's digest
        statements: list[str] = []
        connect = sqlite3.connect

        def traced(*args, **kwargs):
            conn = connect(*args, **kwargs)
            conn.set_trace_callback(statements.append)
            return conn
        monkeypatch.setattr("bridge.store.sqlite.sqlite3.connect", traced)
        again = await SQLiteStore.open(db, audit_key=KEY, signing_key=key)
        await again.decide("w", "e4", note_to("a", "v4", "e4"))  # the world's load
        await again.close()  # signs each chain's head
        monkeypatch.undo()
        reads = [sql for sql in statements if re.search(r"\bFROM audit\b", sql)]  # the view's readers
        assert len(reads) >= 4
        for sql, plan in plans_of(db, reads).items():
            assert not [line for line in plan if line.startswith("CO-ROUTINE") or line == "SCAN main.audit"], (sql, plan)


async def elsewhere(db, work) -> None:
    """Run ``work(store)`` on a second store on the file ``db``, as another process would, and
    close it (its close folds its tails into audit and records)."""
    other = await SQLiteStore.open(db)
    try:
        await work(other)
    finally:
        await other.close()


class TestAnotherWriter:
    async def test_a_world_written_by_another_process_fails_the_batch_then_continues(self, store, tmp_path):
        db = tmp_path / "b.sqlite3"
        await store.decide("w", "e1", settings_to("off"))
        await elsewhere(db, lambda other: other.decide("w", "e2", settings_to("pc_only", event_id="e2")))
        # this store's memory says the head is record 1: its insert collides, nothing is acked
        with pytest.raises(sqlite3.IntegrityError):
            await store.decide("w", "e3", settings_to("everyone"))
        # the caches were dropped: the next decision reads the file again and chains after record 2
        again = await store.decide("w", "e3", settings_to("everyone"))
        assert again.replayed is False and again.seq == 3
        assert (await store.decide("w", "e2", settings_to("off"))).replayed is True
        (report,) = await store.verify("w", None)
        # one chain, no gap, every link and hash right (these test decisions do not re-derive)
        assert report.records == 3
        # (nor derive state: issue 15's state checks follow from the re-derivation)
        assert [p.kind for p in report.problems if p.kind not in ("rederive", "state")] == []

    async def test_a_failed_commit_fails_the_decisions_that_read_its_state(self, store, monkeypatch):
        await store.decide("w", "e1", settings_to("off"))

        def failing(conn, batch):
            raise sqlite3.OperationalError("disk I/O error")

        monkeypatch.setattr(store, "_write_batch", failing)
        results = await asyncio.gather(store.decide("w", "e2", settings_to("pc_only")),
                                       store.decide("w", "e3", settings_to("everyone")),
                                       return_exceptions=True)
        assert all(isinstance(r, sqlite3.OperationalError) for r in results)
        monkeypatch.undo()
        assert (await store.world("w")).settings.fate_option == "off"
        retried = await store.decide("w", "e2", settings_to("pc_only"))
        assert (retried.replayed, retried.seq) == (False, 2)

    async def test_a_world_removed_by_another_process_is_refused(self, store, tmp_path):
        await store.decide("w", "e1", settings_to("off"))
        await elsewhere(tmp_path / "b.sqlite3", lambda other: other.remove_world("w"))
        with pytest.raises(WorldNotRegistered):
            await store.decide("w", "e2", settings_to("pc_only"))


    async def test_a_world_written_elsewhere_is_noticed_though_a_batch_of_another_world_saw_the_change_first(
            self, store, tmp_path):
        # The checks run when the file changed since this store's last batch: every world loaded
        # then must be checked at its next batch, not only the worlds of the batch that noticed
        db = tmp_path / "b.sqlite3"
        await store.add_world("x", "hash")
        await store.decide("w", "e1", settings_to("off"))
        await store.decide("x", "x1", settings_to("off"))
        await elsewhere(db, lambda other: other.decide("w", "e2", settings_to("pc_only", event_id="e2")))
        await store.decide("x", "x2", settings_to("pc_only"))  # the batch that sees the file changed
        with pytest.raises(sqlite3.IntegrityError):  # this store's memory of w is stale: record 2 is taken
            await store.decide("w", "e3", settings_to("everyone"))
        again = await store.decide("w", "e3", settings_to("everyone"))
        assert again.seq == 3
        await store._run(store._fold_all_sync)
        (report,) = await store.verify("w", None)
        assert report.records == 3
        assert [p.kind for p in report.problems if p.kind not in ("rederive", "state")] == []

    async def test_a_world_removed_elsewhere_is_refused_though_a_batch_of_another_world_saw_the_change_first(
            self, store, tmp_path):
        await store.add_world("x", "hash")
        await store.decide("w", "e1", settings_to("off"))
        await store.decide("x", "x1", settings_to("off"))
        await elsewhere(tmp_path / "b.sqlite3", lambda other: other.remove_world("w"))
        await store.decide("x", "x2", settings_to("pc_only"))
        with pytest.raises(WorldNotRegistered):
            await store.decide("w", "e2", settings_to("pc_only"))


async def test_an_old_database_replays_its_events_rows_and_verifies(tmp_path):
    """A file of schema 5 (before issue 17) whose decisions each have an events row: its replies
    come back from those rows, its trail verifies, and new decisions chain after it."""
    db = tmp_path / "old.sqlite3"
    sent = await run_example(EXAMPLES[0], tmp_path / "new.sqlite3")
    new = sqlite3.connect(tmp_path / "new.sqlite3")
    conn = old_schema_file(db, 5)
    for table in ("worlds", "audit", "records", "checkpoints"):
        columns = ", ".join(row[1] for row in conn.execute(f"PRAGMA table_info({table})"))  # schema 5's
        rows = new.execute(f"SELECT {columns} FROM {table}").fetchall()
        if rows:
            conn.executemany(f"INSERT INTO {table} ({columns}) VALUES ({','.join('?' * len(rows[0]))})", rows)
    # an older bridge kept each reply a second time, as sent, in events
    # (the first one marked, to tell where a repeat's reply comes from)
    marked = next(iter(sent))
    conn.executemany("INSERT INTO events (world_id, event_id, reply, request_hash) VALUES ('w', ?, ?, NULL)",
                     [(e, b"stored " + e.encode() if e == marked else reply) for e, reply in sent.items()])
    conn.commit()
    conn.close()
    new.close()
    store = await SQLiteStore.open(db, audit_key=KEY)
    try:
        upgraded = sqlite3.connect(db)
        assert upgraded.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
        assert upgraded.execute("SELECT 1 FROM sqlite_master WHERE name = 'audit_by_event'").fetchone()
        upgraded.close()
        (report,) = await store.verify(None, KEY)
        # rows as sent agree with the chain; the marked one is a reply no record holds (issue 15)
        assert [(p.kind, f"stored reply events({marked!r}) differs" in p.detail) for p in report.problems] == [
            ("state", True)]
        event_id = marked
        replayed = await store.decide("w", event_id, settings_to("off"))
        assert (replayed.reply, replayed.replayed) == (b"stored " + event_id.encode(), True)
        fresh = await store.decide("w", "after-upgrade", settings_to("off"))
        assert fresh.replayed is False and fresh.seq == len(sent) + 1
    finally:
        await store.close()


class Note(msgspec.Struct, frozen=True):
    text: str


async def test_a_record_from_before_the_restart_is_read_once_when_first_asked_for(tmp_path, monkeypatch):
    db = tmp_path / "b.sqlite3"
    store = await SQLiteStore.open(db)
    await store.add_world("w", None)

    def write(state):
        state.put("test.note", "a", Note("kept"))
        return Decision(b"ok", True)

    await store.decide("w", "e1", write)
    await store.close()

    store = await SQLiteStore.open(db)
    fetched = []
    fetch = store._fetch_record
    monkeypatch.setattr(store, "_fetch_record", lambda *args: fetched.append(args) or fetch(*args))
    seen = []

    def read(state):
        seen.append((state.get("test.note", "a", Note), state.get("test.note", "never", Note)))
        return Decision(b"ok", True)

    try:
        await store.decide("w", "e2", read)
        await store.decide("w", "e3", read)
    finally:
        await store.close()
    assert seen == [(Note("kept"), None)] * 2
    assert fetched == [("w", "test.note", "a")]  # once; a record that does not exist costs nothing


class TestWriteLockHeldElsewhere:
    """A file's batches are committed on the event loop, which must never wait for a write lock
    another connection holds (a CLI command, another process): the batch goes to the writer
    thread, which waits for it, while the loop goes on."""

    async def test_the_loop_runs_on_and_the_decision_commits_after_the_lock_is_released(self, store, tmp_path):
        await store.decide("w", "warm", settings_to("pc_only"))  # loaded in memory
        other = sqlite3.connect(tmp_path / "b.sqlite3", isolation_level=None)
        read_as_one(other)
        other.execute("BEGIN IMMEDIATE")  # the write lock, held by someone else
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.005)
                ticks += 1

        async def ticked(n: int) -> None:
            while ticks < n:
                await asyncio.sleep(0.005)

        counting = asyncio.create_task(ticker())
        deciding = asyncio.create_task(store.decide("w", "e-locked", settings_to("off")))
        await asyncio.wait_for(ticked(10), 30)  # the loop is not blocked meanwhile (a hang would time out)
        assert not deciding.done()  # not committed (so not answered) while the lock is held
        other.execute("COMMIT")
        decided = await asyncio.wait_for(deciding, 30)
        counting.cancel()
        assert decided.seq == 2 and not decided.replayed
        rows = other.execute("SELECT seq, hash FROM audit ORDER BY seq").fetchall()
        assert rows[-1] == (2, decided.record_hash)  # committed, by the writer thread
        other.close()
        again = await store.decide("w", "e-after", settings_to("pc_only"))  # back on the loop
        assert again.seq == 3


async def test_a_failing_receipt_signature_still_answers_the_committed_decisions(tmp_path, monkeypatch):
    """The batch is committed before its receipts are signed: if signing failed, its replies go
    out without receipts (and the failure is logged) instead of never."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from bridge.store import writer as store_module

    store = await SQLiteStore.open(tmp_path / "b.sqlite3", signing_key=Ed25519PrivateKey.generate())
    await store.add_world("w", "hash")

    def broken(*_):
        raise RuntimeError("no signature today")

    monkeypatch.setattr(store_module, "with_receipts", broken)
    decided = await asyncio.wait_for(store.decide("w", "e1", settings_to("off")), 5)
    assert decided.seq == 1 and decided.receipt is None
    assert (await store.world("w")).settings.fate_option == "off"
    await store.close()


class TestGroupCommitWhenBusy:
    """After a batch of several decisions, the next batch waits one more loop iteration for the
    decisions of the iteration after (their frames were read meanwhile); after a batch of one it
    does not wait, so one connection's decisions are never delayed."""

    @staticmethod
    def commits_of(store) -> list[str]:
        commits: list[str] = []
        for conn in (store._conn, store._batch_conn):
            if conn is not None:
                conn.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
        return commits

    @staticmethod
    async def one_tick_apart(store, first: str, second: str):
        a = asyncio.ensure_future(store.decide("w", first, settings_to("off")))
        await asyncio.sleep(0)  # the first decision is queued in this iteration (task a ran) ...
        assert len(store._queue) == 1
        b = asyncio.ensure_future(store.decide("w", second, settings_to("pc_only")))  # ... the second in the next
        return await a, await b

    async def test_after_a_busy_batch_the_next_iterations_decision_joins_the_batch(self, store):
        await store.decide("w", "warm", settings_to("pc_only"))
        await asyncio.gather(*(store.decide("w", f"busy-{n}", settings_to("off")) for n in range(3)))
        assert store._last_batch == 3
        commits = self.commits_of(store)
        first, second = await self.one_tick_apart(store, "e1", "e2")
        assert len(commits) == 1 and (first.seq, second.seq) == (5, 6)

    async def test_after_a_batch_of_one_nothing_waits(self, store):
        await store.decide("w", "warm", settings_to("pc_only"))
        assert store._last_batch == 1
        commits = self.commits_of(store)
        first, second = await self.one_tick_apart(store, "e1", "e2")
        assert len(commits) == 2 and (first.seq, second.seq) == (2, 3)
