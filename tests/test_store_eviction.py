"""Issue 27: a ceiling on memory. Beyond ``max_worlds`` (``serve --max-worlds-in-memory``) the
least recently used idle world leaves memory and is loaded again from the store on its next use;
nothing it decided is lost or decided twice (a repeated event_id gets its stored reply, a spent
charge stays spent), on both backends."""

from __future__ import annotations

import asyncio

from bridge import record, wire
from bridge.store import Decision, open_store


def spend(event_id: str, calls: list[str]):
    """A decision spending the world's one charge (the record ("test.charge", "c")): refused
    when it is spent already, as a Fate Point spend is (ruling S1: a charge is spent once).
    Appends ``event_id`` to ``calls`` when it runs."""
    def decision(state):
        calls.append(event_id)
        spent = state.get("test.charge", "c", wire.WorldSettings) is not None
        if not spent:
            state.put("test.charge", "c", wire.WorldSettings(fate_option="off"))
            state.next_seq()
        return Decision(b"spent" if not spent else b"refused", not spent, record.AuditEntry(
            type="spend", event_id=event_id, user_id=None, message=b"{}", reads=[], dice=[],
            reply=b'{"type":"pong","v":1}', ok=not spent, summary=wire.AuditColumns(outcome="spent" if not spent else "refused")))
    return decision


async def test_only_the_budget_of_worlds_stays_in_memory_and_an_evicted_one_forgets_nothing(db_url):
    store = await open_store(db_url, max_worlds=2)
    try:
        worlds = [f"w{i}" for i in range(5)]
        for world in worlds:
            await store.add_world(world, None)
        calls: list[str] = []
        first = {}
        for world in worlds:
            first[world] = await store.decide(world, f"{world}-e1", spend(f"{world}-e1", calls))
            assert first[world].seq == 1 and not first[world].replayed
        assert list(store._worlds) == ["w3", "w4"]  # the two used last; w0..w2 left memory
        assert store._pending == {}

        # a repeat in memory and the same repeat after its world left: the stored reply, byte for byte
        in_memory = await store.decide("w4", "w4-e1", spend("w4-e1", calls))
        evicted = await store.decide("w0", "w0-e1", spend("w0-e1", calls))
        assert in_memory.replayed and evicted.replayed
        assert evicted.reply == in_memory.reply  # the same stored reply (the worlds decided alike)
        assert (evicted.seq, evicted.record_hash) == (1, first["w0"].record_hash)
        assert calls == [f"{w}-e1" for w in worlds]  # neither repeat ran its decision again
        assert "w0" in store._worlds and len(store._worlds) == 2  # reloaded, another left

        # a new spend in a world that left memory sees its charge spent: no double spend
        again = await store.decide("w1", "w1-e2", spend("w1-e2", calls))
        assert calls[-1] == "w1-e2" and again.reply == b"refused" and again.seq == 2
        assert len(store._worlds) == 2
    finally:
        await store.close()


async def test_a_world_with_a_decision_in_its_batch_never_leaves(db_url):
    """Decisions of four worlds in one tick with a budget of one: all four are held until their
    batch is through (evicting one would reload it from a store behind its cache), then the
    budget holds again."""
    store = await open_store(db_url, max_worlds=1)
    try:
        worlds = [f"w{i}" for i in range(4)]
        for world in worlds:
            await store.add_world(world, None)
            await store.decide(world, f"{world}-warm", spend(f"{world}-warm", []))
        calls: list[str] = []
        decided = await asyncio.gather(*(store.decide(w, f"{w}-e2", spend(f"{w}-e2", calls)) for w in worlds))
        assert [d.reply for d in decided] == [b"refused"] * 4  # each saw its spent charge
        assert len(store._worlds) == 1 and store._pending == {}
        for world in worlds:  # every decision is in the store: a reload sees both records
            repeat = await store.decide(world, f"{world}-e2", spend(f"{world}-e2", calls))
            assert repeat.replayed and repeat.seq == 2
        assert len(calls) == 4
    finally:
        await store.close()
