"""Issue 27: a ceiling on memory. Beyond ``max_worlds`` (``serve --max-worlds-in-memory``) the
least recently used idle world leaves memory and is loaded again from the store on its next use;
nothing it decided is lost or decided twice (a repeated event_id gets its stored reply, a spent
charge stays spent), on both backends."""

from __future__ import annotations

import asyncio

from bridge import record, wire
from bridge.store import Decision, memory, open_store, writer
from bridge.store.memory import EventFilter


def spend(event_id: str, calls: list[str]):
    """A decision spending the world's one charge (the record ("test.charge", "c")): refused
    when it is spent already, as a Fate Point spend is (rulings S9 and S11: a charge consumed once, a result fated once).
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


def test_an_event_filter_holds_every_id_added_and_few_others():
    """The Bloom filter a world's older event ids go into: never a false "no" (a repeat would be
    decided again), and at its capacity ~1.2% false "maybe" (each costs one indexed look-up)."""
    older = EventFilter(2000)
    for i in range(2000):
        older.add(f"old-{i}")
    assert all(f"old-{i}" in older for i in range(2000))
    maybe = sum(f"new-{i}" in older for i in range(10000))
    assert maybe < 300  # ~1.2% expected (10 bits an id, 4 probes); 3% would be a broken filter


async def test_older_event_ids_leave_the_dict_and_their_repeats_are_found_in_the_store(db_url, monkeypatch):
    """A loaded world keeps its recent event ids only (RECENT_EVENTS; 4 here); a repeat of an
    older one gets its stored reply from the store and decides nothing, at load and after the
    ids of a running world were retired."""
    monkeypatch.setattr(memory, "RECENT_EVENTS", 4)
    monkeypatch.setattr(writer, "RECENT_EVENTS", 4)
    store = await open_store(db_url)
    try:
        await store.add_world("w", None)
        calls: list[str] = []
        first = [await store.decide("w", f"e{i}", spend(f"e{i}", calls)) for i in range(12)]
        cache = store._worlds["w"]
        assert len(cache.events) <= 8 and cache.retired >= 4 and "e0" not in cache.events
        for i in (0, 1, 11):
            repeat = await store.decide("w", f"e{i}", spend(f"e{i}", calls))
            assert repeat.replayed and (repeat.seq, repeat.record_hash) == (i + 1, first[i].record_hash)
        assert len(calls) == 12  # no repeat ran its decision
        del store._worlds["w"]  # as eviction drops it: the reload keeps the last 4, filters the rest
        again = await store.decide("w", "e2", spend("e2", calls))
        assert again.replayed and again.seq == 3 and len(calls) == 12
        assert list(store._worlds["w"].events) == ["e8", "e9", "e10", "e11"]
        new = await store.decide("w", "e12", spend("e12", calls))
        assert not new.replayed and new.reply == b"refused" and calls[-1] == "e12"
    finally:
        await store.close()
