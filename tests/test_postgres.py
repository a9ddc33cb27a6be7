"""The PostgreSQL store's own parts (issue 18): versioned migrations, the per-world lease whose
fencing token the database checks in every decision, the notices between processes, and
``fate-bridge migrate`` from SQLite with ``audit verify`` passing on the copy. (The store's
common behaviour runs on both backends through the ``store`` fixture in conftest.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import tempfile
import types

import psycopg
import pytest

from bridge import wire
from bridge.cli import main
from bridge import cluster as cluster_module
from bridge.cluster import MAX_PAYLOAD, Cluster, Notice
from bridge.config import db_label, load_signing_key
from bridge.errors import ConfigError, LeaseLost, StorageUnavailable
from bridge.credentials import hash_token, new_invite_code
from bridge.store import AuditFilter, Decision, Invite, Registration, SQLiteStore
from bridge.store.postgres import SCHEMA_VERSION, PostgresStore

from .helpers import ROOT, replay
from .test_store_memory import EXAMPLES, KEY as MEMORY_KEY, assert_replayed, run_example

KEY = bytes(range(32))


def put_option(option: str):
    def decision(state):
        state.put_settings(wire.WorldSettings(fate_option=option))
        return Decision(b"ok", True)
    return decision


async def option(store) -> str:
    return (await store.world("w")).settings.fate_option


@pytest.fixture
async def two(pg_url):
    """Two stores on one database, as two bridge processes have them; the world ``w``."""
    a, b = await PostgresStore.open(pg_url), await PostgresStore.open(pg_url)
    await a.add_world("w", "hash")
    yield a, b
    await a.close()
    await b.close()


def audited(option: str):
    """A decision setting ``option`` with an audit entry (its record's seq is the chain's next)."""
    from bridge.record import AuditEntry
    from bridge.wire import AuditColumns

    def decision(state):
        state.put_settings(wire.WorldSettings(fate_option=option))
        entry = AuditEntry(type="settings", event_id=None, user_id=None, message=b"{}", reads=[], dice=[],
                           reply=b"{}", ok=True, summary=AuditColumns(outcome="ok"))
        return Decision(b"ok", True, entry)
    return decision


class TestLease:
    async def test_the_process_that_lost_the_lease_cannot_write(self, two):
        a, b = two
        assert await a.take_lease("w", "GM on a") == 1
        await a.decide("w", "e1", put_option("off"))
        assert await b.take_lease("w", "GM on b") == 2
        with pytest.raises(LeaseLost, match="another bridge process"):
            await a.decide("w", "e2", put_option("pc_only"))
        assert await option(b) == "off"  # a's refused write was not applied
        await b.decide("w", "e2", put_option("pc_only"))
        assert await option(a) == "pc_only"
        assert a.lease_token("w") is None and b.lease_token("w") == 2

    async def test_a_late_notice_of_an_older_token_leaves_the_newer_one_taken_here(self, two):
        """Issue 28: ``a``'s lease notice (token 1) reaches ``b`` after ``b`` took the world
        (token 2): ``b`` keeps its token and decides; a notice of a newer one makes it let go.
        ``lease_holder`` names whoever took it last (for a fenced forwarder's 4003 reason)."""
        a, b = two
        assert await a.take_lease("w", "GM Ann on a:1") == 1
        assert await b.take_lease("w", "GM Bob on b:2") == 2
        await b.drop_lease("w", 1)
        await b.decide("w", "e1", put_option("off"))
        assert b.lease_token("w") == 2 and await a.lease_holder("w") == "GM Bob on b:2"
        await b.drop_lease("w", 3)
        assert b.lease_token("w") is None and await a.lease_holder("nobody-took-it") is None

    async def test_a_refused_write_consumes_no_event_id(self, two):
        a, b = two
        await a.take_lease("w", "a")
        await b.take_lease("w", "b")
        with pytest.raises(LeaseLost):
            await a.decide("w", "e1", put_option("off"))
        decided = await b.decide("w", "e1", put_option("pc_only"))
        assert decided.replayed is False and await option(b) == "pc_only"

    async def test_a_process_without_the_lease_of_a_leased_world_is_refused(self, two):
        a, b = two
        await a.take_lease("w", "a")
        with pytest.raises(LeaseLost):
            await b.decide("w", "e1", put_option("off"))

    async def test_taking_it_back_gives_a_new_token(self, two):
        a, b = two
        tokens = [await a.take_lease("w", "a"), await b.take_lease("w", "b"), await a.take_lease("w", "a")]
        assert tokens == [1, 2, 3]
        await a.decide("w", "e1", put_option("off"))
        with pytest.raises(LeaseLost):
            await b.decide("w", "e2", put_option("pc_only"))

    async def test_taking_the_world_back_works_on_what_the_other_process_wrote(self, two):
        """``a`` holds the world in memory; ``b`` takes it and writes; ``a`` takes it back: its
        next decision sees ``b``'s write and continues ``b``'s chain (its memory was dropped)."""
        a, b = two
        await a.take_lease("w", "a")
        await a.decide("w", "e1", audited("off"))
        await b.take_lease("w", "b")
        await b.decide("w", "e2", audited("pc_only"))
        await a.take_lease("w", "a")
        assert await a.read("w", lambda state: state.settings().fate_option) == "pc_only"
        assert (await a.decide("w", "e3", audited("everyone"))).seq == 3

    async def test_a_process_closing_signs_the_chains_of_its_own_worlds_only(self, pg_url):
        """Issue 28: a stopping process signs the heads of the worlds it holds (and of worlds
        nobody leased), never those another process holds: its stop costs its own worlds."""
        a, b = [await PostgresStore.open(pg_url, audit_key=KEY) for _ in range(2)]
        try:
            for world in ("mine", "theirs", "nobodys"):
                await a.add_world(world, "hash")
            await a.take_lease("mine", "a")
            await b.take_lease("theirs", "b")
            await a.decide("mine", "e1", audited("off"))
            await b.decide("theirs", "e1", audited("off"))
            await a.decide("nobodys", "e1", audited("off"))
            await a.close()
            with psycopg.connect(pg_url) as conn:
                signed = sorted(w for (w,) in conn.execute("SELECT DISTINCT world_id FROM checkpoints"))
            assert signed == ["mine", "nobodys"]
        finally:
            await a.close()
            await b.close()

    async def test_a_session_the_server_ended_is_made_again_for_the_next_transaction(self, two, pg_server):
        """Issue 28: after a PostgreSQL restart (here: its backend terminated) the batch on the dead
        session fails, nothing of it applied, and the next decision runs on a new session, not
        ``internal`` until the process is restarted. Both of the store's sessions end: the writer
        thread's (loads, leases; the world is loaded again on it after the failure) and the event
        loop's (the batches)."""
        a, _ = two
        await a.take_lease("w", "a")
        await a.decide("w", "e1", audited("off"))
        with psycopg.connect(pg_server, autocommit=True) as conn:
            for session in (a._conn.raw, a._loop_session.raw):
                conn.execute("SELECT pg_terminate_backend(%s)", (session.info.backend_pid,))
        with pytest.raises(StorageUnavailable):  # (answered `unavailable`: issue 35)
            await a.decide("w", "e2", audited("pc_only"))
        while not a.health.available:  # the store's probe finds the server answering (a new session)
            await asyncio.sleep(0.05)
        assert (await a.decide("w", "e3", audited("everyone"))).seq == 2
        assert await option(a) == "everyone"

    async def test_without_leases_a_write_from_stale_memory_fails_and_never_forks_the_chain(self, two):
        """Nobody leased the world: ``a`` holds it in memory, ``b`` writes it meanwhile, so ``a``'s
        next decision collides on its record's sequence number and fails; ``a`` reloads and goes
        on, and the chain verifies."""
        a, b = two
        await a.decide("w", "e1", audited("off"))
        await b.decide("w", "e2", audited("pc_only"))
        with pytest.raises(psycopg.errors.UniqueViolation):
            await a.decide("w", "e3", audited("off"))
        again = await a.decide("w", "e4", audited("everyone"))
        assert (again.seq, await option(b)) == (3, "everyone")
        (report,) = await b.verify("w", None)
        assert report.records == 3 and [p.kind for p in report.problems if p.kind != "rederive"] == []  # the chain links (synthetic messages do not re-derive)


@contextlib.contextmanager
def round_trips(pgconn):
    """Count the round trips a connection (``pgconn``: psycopg's libpq connection) makes
    meanwhile (issue 28), from libpq's protocol trace: the server's ``ReadyForQuery`` messages,
    one per wait for it (a pipeline's Sync, a simple query). Yields a list that holds the count
    once the block ends."""
    counted: list[int] = []
    with tempfile.TemporaryFile("w+") as trace:
        pgconn.trace(trace.fileno())
        pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            yield counted
        finally:
            pgconn.untrace()
            trace.seek(0)
            counted.append(sum(line.split("\t")[:3] == ["B", "5", "ReadyForQuery"] for line in trace))


def writes_all_tables(option: str):
    """A decision writing an audit record, a state record and the world's row."""
    inner = audited(option)

    def decision(state):
        state.put("test.note", option, wire.WorldSettings(fate_option=option))
        return inner(state)
    return decision


class TestOneRoundTrip:
    """Issue 28: a batch is one round trip to PostgreSQL, its lease check inside it."""

    @pytest.fixture
    async def leased(self, pg_url):
        """Two stores on one database; ``a`` holds the leases of worlds w1..w3 and their state."""
        a, b = await PostgresStore.open(pg_url), await PostgresStore.open(pg_url)
        for world in ("w1", "w2", "w3"):
            await a.add_world(world, "hash")
            await a.take_lease(world, "a")
            await a.decide(world, f"{world}-0", put_option("off"))  # loaded: no read in the batches below
        batches: list[int] = []
        a.on_batch = batches.append
        yield a, b, batches
        await a.close()
        await b.close()

    async def test_a_batch_of_several_worlds_and_every_table_is_one_round_trip(self, leased):
        a, b, batches = leased
        with round_trips(a._loop_session.raw.pgconn) as counted:  # the batches' session (the loop's)
            decided = await asyncio.gather(a.decide("w1", "e1", writes_all_tables("pc_only")),
                                           a.decide("w2", "e2", put_option("everyone")),  # an events row
                                           a.decide("w3", "e3", writes_all_tables("everyone")))
        assert batches == [3] and counted == [1]
        assert [d.seq for d in decided] == [1, None, 1]
        assert [(await b.world(w)).settings.fate_option for w in ("w1", "w2", "w3")] == ["pc_only", "everyone", "everyone"]
        (report,) = await b.verify("w1", None)  # the chain links (synthetic decisions do not re-derive)
        assert report.records == 1 and {p.kind for p in report.problems} <= {"rederive", "state"}

    async def test_a_lease_lost_inside_the_batch_refuses_that_world_and_commits_the_others(self, leased):
        """``b`` takes w2 while ``a`` holds it in memory: ``a``'s pipelined batch of w1, w2, w3
        fails its lease check, and is written again refusing w2's decision alone."""
        a, b, batches = leased
        assert await b.take_lease("w2", "b") == 2
        outcomes = await asyncio.gather(a.decide("w1", "e1", writes_all_tables("pc_only")),
                                        a.decide("w2", "e2", writes_all_tables("pc_only")),
                                        a.decide("w3", "e3", put_option("everyone")), return_exceptions=True)
        assert batches == [3]
        assert [d.seq for d in (outcomes[0], outcomes[2])] == [1, None]
        assert isinstance(outcomes[1], LeaseLost) and a.lease_token("w2") is None
        assert [(await b.world(w)).settings.fate_option for w in ("w1", "w2", "w3")] == ["pc_only", "off", "everyone"]
        assert (await b.decide("w2", "e2", writes_all_tables("everyone"))).seq == 1  # its event id was not consumed
        assert a._loop_session.raw is None  # ended with the failed batch: made again by the next
        await a.decide("w1", "e4", put_option("off"))
        with round_trips(a._loop_session.raw.pgconn) as counted:  # then a batch of the worlds a holds is one round trip again
            await asyncio.gather(a.decide("w1", "e6", put_option("off")), a.decide("w3", "e5", put_option("off")))
        assert counted == [1]


    async def test_a_decision_read_under_an_older_token_of_this_process_is_refused(self, leased):
        """A decision whose world this process took again after the decision read its state (a
        forwarder's claim on the writer thread while the batch was in flight on the loop) was
        decided on state since reloaded: refused, while one read under the new token is
        written. In a one-trip batch such a world fails the lease check (the batch is written
        again the careful way)."""
        a, _, _ = leased
        old = a.lease_token("w1")
        new = await a.take_lease("w1", "a again")
        stale, fresh = (types.SimpleNamespace(world_id="w1", lease=token) for token in (old, new))
        other = types.SimpleNamespace(world_id="w2", lease=a.lease_token("w2"))

        def careful(conn):
            return a._fence(conn, [stale, fresh, other])
        assert await a._run(a._transaction, careful) == {id(stale)}
        assert a.lease_token("w1") == new  # the world itself stays this process's

        def one_trip(conn):
            a._one_trip = True
            try:
                return a._fence(conn, [stale, fresh, other])
            finally:
                a._one_trip = False
        with pytest.raises(psycopg.Error) as failed:
            await a._run(a._transaction, one_trip)
        assert failed.value.sqlstate == "FBL01"

    async def test_each_statement_is_prepared_once_per_session(self, leased):
        """The batch's statements are prepared on their first use in the session and executed by
        name after (PostgreSQL plans them once): the session holds exactly the statements the
        store counts as prepared, and later batches prepare nothing more."""
        a, _, _ = leased
        session = a._loop_session  # the batches' session

        async def held() -> list[str]:
            cursor = await session.raw.execute(
                "SELECT name FROM pg_prepared_statements WHERE name LIKE 'fate_bridge%' ORDER BY name")
            return [name for (name,) in await cursor.fetchall()]

        await a.decide("w1", "e1", writes_all_tables("pc_only"))
        first = sorted(session.prepared.values())
        assert first and await held() == first
        await asyncio.gather(a.decide("w1", "e2", writes_all_tables("everyone")), a.decide("w2", "e3", put_option("off")))
        assert sorted(session.prepared.values()) == first == await held()

    async def test_a_batch_failing_before_its_statements_were_prepared_leaves_them_known_as_they_are(self, pg_url):
        """A new session's first batch fails its lease check: the lease check's PREPARE ran, the
        ones after it did not. The store learns which the session holds, so the next batch
        prepares the others (naming one never made would fail every batch after it). On the
        writer thread's session: the batches of a store used from another event loop than its
        batch session's are written there (here the loop's session is made to belong to
        another); the loop's own session is ended after a failure instead."""
        a, b = await PostgresStore.open(pg_url), await PostgresStore.open(pg_url)
        a._loop_session.loop = asyncio.new_event_loop()
        try:
            for world in ("w1", "w2"):
                await a.add_world(world, "hash")
                await a.take_lease(world, "a")
                await a.read(world, lambda state: None)  # loaded without a batch
            await b.take_lease("w1", "b")
            with pytest.raises(LeaseLost):
                await a.decide("w1", "e1", writes_all_tables("pc_only"))
            held = "SELECT name FROM pg_prepared_statements WHERE name LIKE 'fate_bridge%' ORDER BY name"
            assert [name for (name,) in a._conn.raw.execute(held)] == sorted(a._conn.prepared.values())
            assert len(a._conn.prepared) == 1  # the lease check's alone
            decided = await a.decide("w2", "e2", writes_all_tables("everyone"))
            assert decided.seq == 1 and len(a._conn.prepared) > 1
            assert [name for (name,) in a._conn.raw.execute(held)] == sorted(a._conn.prepared.values())
            assert (await b.world("w2")).settings.fate_option == "everyone"
        finally:
            a._loop_session.loop.close()
            await a.close()
            await b.close()


async def test_values_bound_into_a_one_trip_batch_come_back_as_they_were(pg_url):
    """The one-trip batch binds every value into its query text (psycopg's quoting, lists as
    ``ARRAY[...]``): quotes, backslashes, a percent sign, non-ASCII text, NULLs and bytes of
    every value come back byte for byte, on the writer thread's session and on the loop's."""
    from bridge.store.postgres import _OneTrip
    from bridge.store.schema import INSERT_EVENT

    store = await PostgresStore.open(pg_url)
    try:
        await store.add_world("w", "hash")
        rows = [("w", "e'1\\", bytes(range(256)), None), ("w", "%s ?; -- ü ☃", b"", "h\"x\x27")]
        conn = store._conn
        trip = _OneTrip(conn, psycopg.ClientCursor(conn.raw))
        trip.executemany(INSERT_EVENT, rows)
        trip.commit()
        session = store._loop_session
        trip = _OneTrip(session, await session.cursor())
        trip.executemany(INSERT_EVENT, [("w", "e3", b"'\x00\\", "")])
        await trip.commit_async()
        stored = conn.raw.execute("SELECT world_id, event_id, reply, request_hash FROM events ORDER BY event_id").fetchall()
    finally:
        await store.close()
    assert sorted(stored) == sorted([*rows, ("w", "e3", b"'\x00\\", "")])


async def test_decisions_arriving_while_the_store_closes_are_each_committed_and_acknowledged_or_refused(pg_url):
    """Batches are written from the event loop: ``close`` refuses decisions from its start and
    waits for the batches in flight, so none is committed yet answered as failed (its session
    closed under its COMMIT) or written after the chain's heads were signed."""
    store = await PostgresStore.open(pg_url, audit_key=KEY)
    await store.add_world("w", "hash")
    await store.take_lease("w", "a")
    await store.decide("w", "e0", audited("off"))
    acked: dict[str, int] = {}
    failed: list[BaseException] = []

    async def deciding(n: int) -> None:
        for i in range(10_000):
            try:
                acked[f"h{n}-{i}"] = (await store.decide("w", f"h{n}-{i}", audited("off"))).seq
            except ConfigError:  # the store is closed: refused, nothing stored
                return
            except Exception as exc:
                failed.append(exc)
            await asyncio.sleep(0)

    tasks = [asyncio.create_task(deciding(n)) for n in range(4)]
    while len(acked) < 20:
        await asyncio.sleep(0.01)
    await store.close()
    await asyncio.wait_for(asyncio.gather(*tasks), 30)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        stored = {seq for (seq,) in conn.execute("SELECT seq FROM audit WHERE world_id = 'w'")}
        (signed,) = conn.execute("SELECT max(seq) FROM checkpoints WHERE world_id = 'w'").fetchone()
    assert failed == [] and store._loop_session.raw is None
    assert stored == {1, *acked.values()}  # e0's record and every acknowledged one, nothing else
    assert signed == max(stored)  # the clean stop's checkpoint is at the chain's true end


async def test_a_flush_cancelled_with_its_loop_fails_what_it_held_and_the_store_goes_on(pg_url):
    """A batch's task cancelled (its event loop shutting down) before or while it writes: its
    decisions fail, none acknowledged, and the next decision is written (no flush left marked
    running for ever)."""
    store = await PostgresStore.open(pg_url)
    try:
        await store.add_world("w", "hash")
        await store.decide("w", "e0", put_option("off"))
        first = asyncio.create_task(store.decide("w", "e1", put_option("pc_only")))
        while store._flush_task is None or store._flush_task.done():
            await asyncio.sleep(0)
        store._flush_task.cancel()
        with pytest.raises(ConfigError, match="the store stopped"):
            await first
        assert (await asyncio.wait_for(store.decide("w", "e2", put_option("everyone")), 10)).replayed is False
        assert (await store.world("w")).settings.fate_option == "everyone"
    finally:
        await store.close()


def test_the_writers_statements_have_one_statement_forms_and_others_none():
    """``_bulk_sql``: each INSERT and world update the writer sends many rows of becomes one
    statement over arrays (the columns' types from the schema); anything else is sent row by row."""
    from bridge.store.postgres import _bulk_sql
    from bridge.store.schema import INSERT_EVENT, UPDATE_WORLD, upsert_records_sql

    assert _bulk_sql(INSERT_EVENT) == ("INSERT INTO events (world_id, event_id, reply, request_hash) SELECT * FROM"
                                       " unnest(?::text[], ?::text[], ?::bytea[], ?::text[])")
    assert _bulk_sql(upsert_records_sql("records")).endswith(
        "unnest(?::text[], ?::text[], ?::text[], ?::bytea[]) ON CONFLICT (world_id, kind, key) DO UPDATE SET value = excluded.value")
    assert "FROM unnest(?::bigint[], ?::bytea[], ?::text[]) AS u(last_seq, settings, world_id)" in _bulk_sql(UPDATE_WORLD)
    assert _bulk_sql("INSERT INTO leases (world_id, token) VALUES (?, ?)") is None  # a column it has no type for
    assert _bulk_sql("DELETE FROM events WHERE world_id = ?") is None


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
async def test_every_example_decides_as_on_sqlite_and_replays_byte_for_byte_after_a_restart(
        example, pg_url, tmp_path):
    """Each example session through the PostgreSQL store gives the replies SQLite gives; after a
    restart (nothing in memory) every event_id is answered with the same bytes, and the chain
    verifies with its key."""
    sent = await run_example(example, pg_url)
    assert sent and sent == await run_example(example, tmp_path / "b.sqlite3")
    store = await PostgresStore.open(pg_url, audit_key=MEMORY_KEY)
    try:
        await assert_replayed(store, example, sent)
        (report,) = await store.verify("w", MEMORY_KEY)
    finally:
        await store.close()
    assert report.ok and report.records > 0, report.problems


class TestSchema:
    async def test_version_recorded_and_reopen_keeps_worlds(self, pg_url):
        store = await PostgresStore.open(pg_url)
        await store.add_world("w", "h")
        await store.close()
        again = await PostgresStore.open(pg_url)
        assert [w.world_id for w in await again.worlds()] == ["w"]
        (version,) = again._conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        await again.close()
        assert version == str(SCHEMA_VERSION)

    async def test_a_newer_bridge_database_is_refused_clearly(self, pg_url):
        store = await PostgresStore.open(pg_url)
        store._conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
        await store.close()
        with pytest.raises(ConfigError, match="newer fate-bridge"):
            await PostgresStore.open(pg_url)

    def test_audit_commands_refuse_a_newer_bridges_database_instead_of_reporting_it_changed(self, pg_url, capsys):
        async def bump() -> None:
            store = await PostgresStore.open(pg_url)
            await store.add_world("w", "h")
            store._conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
            await store.close()

        asyncio.run(bump())
        for command in (["verify"], ["export", "--world", "w", "--format", "jsonl"]):
            assert main(["audit", *command, "--db", pg_url]) == 2
            out, err = capsys.readouterr()
            assert not out and "was written by a newer fate-bridge" in err and "upgrade fate-bridge" in err

    async def test_an_unreachable_server_is_a_clear_error_without_the_password(self):
        with pytest.raises(ConfigError, match=r"cannot connect to the database postgresql://fb:\*\*\*@127\.0\.0\.1:1/x"):
            await PostgresStore.open("postgresql://fb:secret@127.0.0.1:1/x?connect_timeout=2")

    def test_labels_hide_the_password(self):
        assert db_label("postgresql://u:pw@h:5432/d") == "postgresql://u:***@h:5432/d"


class TestNotices:
    async def test_a_notice_reaches_the_other_process_not_its_sender(self, pg_url):
        await (await PostgresStore.open(pg_url)).close()  # tables (notices) exist
        got_a: list[Notice] = []
        got_b: asyncio.Queue[Notice] = asyncio.Queue()
        a = await Cluster.open(pg_url, got_a.append)
        b = await Cluster.open(pg_url, got_b.put_nowait)
        try:
            big = "x" * (MAX_PAYLOAD + 100)
            a.publish("card", "w", frame='{"type":"overlay_card"}')
            a.publish("card", "w", frame=big)  # over NOTIFY's limit: through the notices table
            a.publish("lease", "w", token=7, holder="GM")
            await a.flush()
            received = [await asyncio.wait_for(got_b.get(), 30) for _ in range(3)]
            await asyncio.sleep(0.1)
        finally:
            await a.close()
            await b.close()
        assert [(n.kind, n.frame, n.token) for n in received] == [
            ("card", '{"type":"overlay_card"}', None), ("card", big, None), ("lease", None, 7)]
        assert got_a == []

    async def test_the_notices_queued_together_go_in_one_statement_and_arrive_in_order(self, pg_url):
        """Issue 28: the cards of a batch go out in one statement and transaction (one round
        trip, every listener woken once), not one each."""
        await (await PostgresStore.open(pg_url)).close()
        got: asyncio.Queue[Notice] = asyncio.Queue()
        a = await Cluster.open(pg_url)
        b = await Cluster.open(pg_url, got.put_nowait)
        try:
            with round_trips(a._send.pgconn) as counted:
                for i in range(40):
                    a.publish("card", f"w{i % 3}", frame=f'{{"n":{i}}}')
                await a.flush()
            received = [await asyncio.wait_for(got.get(), 30) for _ in range(40)]
        finally:
            await a.close()
            await b.close()
        assert counted == [1]
        assert [(n.world_id, n.frame) for n in received] == [(f"w{i % 3}", f'{{"n":{i}}}') for i in range(40)]

    async def test_a_world_counts_as_watched_elsewhere_while_another_process_has_viewers_of_it(self, pg_url):
        """Issue 28: cards go only to processes with overlay viewers of the world (watch and
        unwatch, counted per viewer; hello answered with what is watched; bye forgets the
        sender's). The first LEARN_SECONDS after opening count every world as watched: the test
        ends that window at once."""
        await (await PostgresStore.open(pg_url)).close()
        got: asyncio.Queue[Notice] = asyncio.Queue()
        a, b = await Cluster.open(pg_url, got.put_nowait), await Cluster.open(pg_url)
        c = None

        async def until(check) -> None:  # a notice's delivery: waited for, at most 5 s
            deadline = asyncio.get_running_loop().time() + 5
            while not check() and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.01)

        try:
            assert a.watched_elsewhere("w")  # learning: everything is watched
            a._learning_until = b._learning_until = 0.0
            assert not a.watched_elsewhere("w") and not b.watched_elsewhere("w")
            await b.watch("w")
            await b.watch("w")  # a second viewer: no second notice
            await until(lambda: a.watched_elsewhere("w"))
            assert a.watched_elsewhere("w") and not a.watched_elsewhere("other")
            assert not b.watched_elsewhere("w")  # its own viewers are served directly
            c = await Cluster.open(pg_url)  # asks what is watched; b answers
            c._learning_until = 0.0
            await until(lambda: c.watched_elsewhere("w"))
            assert c.watched_elsewhere("w")
            b.unwatch("w")  # one of two viewers left
            b.publish("clear", "probe")  # sent after: once a has it, a has every notice before it
            probe = await asyncio.wait_for(got.get(), 30)
            assert (probe.kind, probe.world_id) == ("clear", "probe") and got.empty()  # watch notices stay inside
            assert a.watched_elsewhere("w")
            b.unwatch("w")  # the last one
            await until(lambda: not a.watched_elsewhere("w"))
            assert not a.watched_elsewhere("w")
            await b.watch("w")
            await until(lambda: a.watched_elsewhere("w"))
            await b.close()  # says bye
            await until(lambda: not a.watched_elsewhere("w") and not c.watched_elsewhere("w"))
            assert not a.watched_elsewhere("w") and not c.watched_elsewhere("w")
        finally:
            for cluster in (a, b, c):
                if cluster is not None:
                    await cluster.close()

    async def test_a_viewers_watch_returns_once_its_notice_came_back_or_at_its_time_limit(self, pg_url, monkeypatch):
        """``watch`` (what a viewer's welcome waits for) returns when its notice has come back to
        this process's own listener: with a limit far above the test's own, it returns by the
        echo. With the listener down, it returns at HEARD_SECONDS (the welcome is not held up),
        the viewer counted all the same."""
        await (await PostgresStore.open(pg_url)).close()
        a = await Cluster.open(pg_url)
        try:
            monkeypatch.setattr(cluster_module, "HEARD_SECONDS", 60.0)
            await asyncio.wait_for(a.watch("w"), 30)  # by the echo, not the 60 s limit
            assert a._heard == {} and a._viewed == {"w": 1}
            monkeypatch.setattr(cluster_module, "HEARD_SECONDS", 0.05)  # far below the listener's reconnect
            with psycopg.connect(pg_url, autocommit=True) as conn:
                conn.execute("SELECT pg_terminate_backend(%s)", (a._listen.info.backend_pid,))
            await asyncio.wait_for(a.watch("v"), 30)
            assert a._heard == {} and a._viewed == {"w": 1, "v": 1}
        finally:
            await a.close()

    async def test_a_listener_made_again_asks_again_what_the_others_watch(self, pg_url):
        """A ``watch`` sent while a process's listening connection was down is lost for it: once
        it listens again it says ``hello`` (and opens its learning window again), and the others
        answer with what they watch."""
        await (await PostgresStore.open(pg_url)).close()
        a, b = await Cluster.open(pg_url), await Cluster.open(pg_url)
        loop = asyncio.get_running_loop()
        try:
            a._learning_until = b._learning_until = 0.0
            with psycopg.connect(pg_url, autocommit=True) as conn:
                conn.execute("SELECT pg_terminate_backend(%s)", (a._listen.info.backend_pid,))
            await b.watch("w")  # a listens on no connection now
            deadline = loop.time() + 10
            while a._learning_until == 0.0 and loop.time() < deadline:  # a listens again
                await asyncio.sleep(0.01)
            assert a._learning_until > 0.0
            a._learning_until = 0.0  # past its learning window: only what b answered counts
            while not a.watched_elsewhere("w") and loop.time() < deadline:
                await asyncio.sleep(0.01)
            assert a.watched_elsewhere("w")
        finally:
            await a.close()
            await b.close()

    async def test_a_lost_listening_connection_is_made_again(self, pg_url):
        await (await PostgresStore.open(pg_url)).close()
        got: asyncio.Queue[Notice] = asyncio.Queue()
        a = await Cluster.open(pg_url)
        b = await Cluster.open(pg_url, got.put_nowait)
        try:
            with psycopg.connect(pg_url, autocommit=True) as conn:
                (ended,) = conn.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                                        " WHERE application_name = %s", (f"fate-bridge-cluster-{b.origin}",)).fetchone()
            assert ended == 2  # its listening and its publishing connection
            deadline = asyncio.get_running_loop().time() + 30
            while got.empty() and asyncio.get_running_loop().time() < deadline:
                a.publish("clear", "w")
                await a.flush()
                await asyncio.sleep(0.2)
            notice = await asyncio.wait_for(got.get(), 1)
        finally:
            await a.close()
            await b.close()
        assert (notice.kind, notice.world_id) == ("clear", "w")

    async def test_bridges_of_another_schema_in_the_same_database_hear_nothing(self, pg_url, pg_server):
        other = pg_url.replace("fb_test_", "fb_other_")
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {other.rsplit('%3D', 1)[1]}")
        try:
            for url in (pg_url, other):
                await (await PostgresStore.open(url)).close()
            got: list[Notice] = []
            a, b = await Cluster.open(pg_url), await Cluster.open(other, got.append)
            try:
                a.publish("clear", "w")
                await a.flush()
                await asyncio.sleep(0.3)
            finally:
                await a.close()
                await b.close()
            assert got == [] and a.channel != b.channel
        finally:
            with psycopg.connect(pg_server, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {other.rsplit('%3D', 1)[1]} CASCADE")


class TestMigrate:
    def test_sqlite_to_postgresql_and_audit_verify_passes_on_the_copy(self, tmp_path, pg_url, capsys):
        db = tmp_path / "home.sqlite3"

        async def build():
            store = await replay(ROOT / "examples" / "sohl-session.jsonl", db, KEY)
            await store.add_world("second", "hash2")
            code = new_invite_code()  # issue 34: the invite codes and waiting requests go along
            await store.add_invite(Invite(code.invite_id, hash_token(code.secret), 2, None, True))
            assert await store.register_world("asked", code, "t", hash_token("secret"), "192.0.2.1") is Registration.WAITING
            await store.close()
        asyncio.run(build())
        key_file = tmp_path / "audit.key"
        key_file.write_text(KEY.hex())

        assert main(["migrate", "--from", f"sqlite:{db}", "--to", pg_url]) == 0
        out = capsys.readouterr().out
        assert "2 worlds" in out and "audit" in out
        assert main(["audit", "verify", "--db", pg_url, "--audit-key", str(key_file)]) == 0
        verified = capsys.readouterr().out
        assert main(["audit", "verify", "--db", str(db), "--audit-key", str(key_file)]) == 0
        assert verified == capsys.readouterr().out and "PASS w: " in verified and "FAIL" not in verified

        async def compare():
            a, b = await SQLiteStore.open(db), await PostgresStore.open(pg_url)
            try:
                assert await a.worlds() == await b.worlds()
                assert await a.audit_rows(AuditFilter()) == await b.audit_rows(AuditFilter())
                assert await a.invites() == await b.invites() and (await b.invites())[0].uses == 1
                assert await a.registration_requests() == await b.registration_requests() != []
                # the copy goes on: the next decision continues the chain and the audit ids
                again = await b.decide("w", "after-migrate", put_option("off"))
                assert again.replayed is False
            finally:
                await a.close()
                await b.close()
        asyncio.run(compare())

        # a replayed event_id is answered from the copied events table
        with psycopg.connect(pg_url) as conn:
            (events,) = conn.execute("SELECT count(*) FROM events").fetchone()
        assert events > 0

        # verify on PostgreSQL catches an edit too
        with psycopg.connect(pg_url) as conn:
            conn.execute("DELETE FROM audit WHERE world_id = 'w' AND seq = 2")
        assert main(["audit", "verify", "--db", pg_url, "--audit-key", str(key_file)]) == 1
        assert "FAIL w" in capsys.readouterr().out

    def test_postgresql_back_to_sqlite_verifies_and_the_copy_goes_on(self, tmp_path, pg_url, capsys):
        # the SQLite target reads audit and records through views (schema 9): the copy must go
        # into the tables themselves, and the next record's id follow on from the copied ones
        db, back = tmp_path / "home.sqlite3", tmp_path / "back.sqlite3"

        async def build():
            store = await replay(ROOT / "examples" / "sohl-session.jsonl", db, KEY)
            await store.close()
        asyncio.run(build())
        key_file = tmp_path / "audit.key"
        key_file.write_text(KEY.hex())
        assert main(["migrate", "--from", f"sqlite:{db}", "--to", pg_url]) == 0
        assert main(["migrate", "--from", pg_url, "--to", f"sqlite:{back}"]) == 0
        capsys.readouterr()
        assert main(["audit", "verify", "--db", str(back), "--audit-key", str(key_file)]) == 0
        assert "PASS w: " in capsys.readouterr().out

        async def go_on():
            a, b = await SQLiteStore.open(db), await SQLiteStore.open(back)
            try:
                assert await a.audit_rows(AuditFilter()) == await b.audit_rows(AuditFilter())
                top = (await b.audit_rows(AuditFilter(limit=1)))[0].id
                assert (await b.decide("w", "after-migrate", audited("off"))).replayed is False
                newest = (await b.audit_rows(AuditFilter(limit=2)))
                assert [row.id for row in newest] == [top + 1, top]
            finally:
                await a.close()
                await b.close()
        asyncio.run(go_on())

    def test_version_2_heads_survive_sqlite_to_postgresql_and_back(self, tmp_path, pg_url, capsys):
        """migrate copies the stored bytes as they are (issue 25): the heads sealing them verify on
        PostgreSQL and on the SQLite copy made from it, and a byte appended there is still named."""
        db, back, signing_file = tmp_path / "home.sqlite3", tmp_path / "back.sqlite3", tmp_path / "receipt.key"
        signing_key = load_signing_key(signing_file, create=True)

        async def build():
            store = await replay(ROOT / "examples" / "sohl-session.jsonl", db, KEY, signing_key)
            await store.close()
        asyncio.run(build())
        key_file = tmp_path / "audit.key"
        key_file.write_text(KEY.hex())
        assert main(["migrate", "--from", f"sqlite:{db}", "--to", pg_url]) == 0
        assert main(["migrate", "--from", pg_url, "--to", f"sqlite:{back}"]) == 0
        verify = ["audit", "verify", "--audit-key", str(key_file), "--signing-key", str(signing_file), "--db"]
        capsys.readouterr()
        for where in (pg_url, str(db), str(back)):
            assert main([*verify, where]) == 0, where
            assert "PASS w: " in capsys.readouterr().out

        def heads(path):
            conn = sqlite3.connect(path)
            rows = conn.execute("SELECT seq, stored_digest, sig FROM heads ORDER BY seq").fetchall()
            records = conn.execute("SELECT seq, record FROM audit ORDER BY seq").fetchall()
            conn.close()
            return rows, records
        assert heads(back) == heads(db) and all(digest for _, digest, _ in heads(db)[0])

        conn = sqlite3.connect(back)
        (stored,) = conn.execute("SELECT record FROM audit WHERE world_id = 'w' AND seq = 2").fetchone()
        with conn:
            conn.execute("UPDATE audit SET record = ? WHERE world_id = 'w' AND seq = 2", (stored + b"\x00",))
        conn.close()
        assert main([*verify, str(back)]) == 1
        assert "[stored] record 2's stored bytes are not what the signed head at record" in capsys.readouterr().out

    def test_into_a_database_with_a_table_already_is_refused(self, tmp_path, pg_url, capsys):
        db = tmp_path / "home.sqlite3"
        assert main(["world", "add", "w", "--db", str(db), "--token-only"]) == 0
        assert main(["world", "add", "w", "--db", pg_url, "--token-only"]) == 0
        capsys.readouterr()
        assert main(["migrate", "--from", f"sqlite:{db}", "--to", pg_url]) == 2
        assert "holds a table already: migrate into an empty database" in capsys.readouterr().err

    def test_a_missing_source_is_a_clear_error(self, tmp_path, pg_url, capsys):
        assert main(["migrate", "--from", f"sqlite:{tmp_path / 'none.sqlite3'}", "--to", pg_url]) == 2
        assert "no database at" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["backup", "/tmp/x.sqlite3"], ["restore", "/tmp/x.sqlite3"]])
def test_the_sqlite_file_tools_refuse_a_postgresql_database_saying_what_to_use(command, capsys):
    assert main([*command, "--db", "postgresql://fb:secret@db.example.org/fate"]) == 2
    err = capsys.readouterr().err
    assert "works on a SQLite file" in err and "secret" not in err and "docs/deploy.md" in err


def test_doctor_checks_a_postgresql_database_and_the_rest_as_on_sqlite(pg_url, tmp_path, capsys):
    """doctor on PostgreSQL: the database reached and its schema version, then the keys, worlds,
    origins and the module's link as on a SQLite file."""
    keys = ["--audit-key", str(tmp_path / "audit.key"), "--signing-key", str(tmp_path / "receipt.key")]
    assert main(["world", "add", "w", "--db", pg_url, "--token-only"]) == 0
    capsys.readouterr()
    assert main(["doctor", "--db", pg_url, *keys, "--port", "0"]) == 0
    out = capsys.readouterr().out
    assert f"ok    database {db_label(pg_url)}: reached, schema {SCHEMA_VERSION}" in out
    assert "ok    registered worlds: w" in out and f"WARN  no audit key at {tmp_path / 'audit.key'} yet" in out
    assert out.endswith("No problem found.\n")


def test_doctor_names_an_unreachable_postgresql_database_without_its_password(capsys):
    assert main(["doctor", "--db", "postgresql://fb:secret@127.0.0.1:1/fate?connect_timeout=2", "--port", "1"]) == 1
    out = capsys.readouterr().out
    assert "FAIL  cannot connect to the database postgresql://fb:***@127.0.0.1:1/fate" in out
    assert "pg_isready" in out and "secret" not in out
