"""What a world costs in memory and what leaving memory costs it: ``python -m bench.memory``.

Store alone (no sockets, no sessions), SQLite on a temporary file, no audit key: registers
``--worlds`` worlds, makes ``--decisions`` decisions in each (distinct event ids, one record
each) with ``--max-worlds-in-memory`` as ``serve`` takes it, and prints the process's RSS before
and after, per world; then, for each ``--history``, the time of a world's first decision after it
left memory (its load: event ids, record keys, the chain check). Run it once with a budget above
``--worlds`` (every world held) and once below to see what eviction frees. Python's allocator
keeps freed memory for reuse, so RSS after eviction shows the growth avoided, not memory handed
back. Figures vary with the machine and what else runs: compare runs of one invocation.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import tempfile
import time
from pathlib import Path

from bridge import record, wire
from bridge.store import Decision, open_store


def rss_bytes() -> int:
    """This process's resident set size (Linux: /proc/self/status VmRSS), in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status (Linux only)")


def note(key: str, event_id: str):
    """A passing decision storing the record ("bench.note", ``key``), audited under ``event_id``."""
    def decision(state):
        state.put("bench.note", key, wire.WorldSettings(fate_option="off"))
        state.next_seq()
        return Decision(b"reply", True, record.AuditEntry(
            type="note", event_id=event_id, user_id=None, message=b"{}", reads=[], dice=[],
            reply=b'{"type":"pong","v":1}', ok=True, summary=wire.AuditColumns(outcome="x")))
    return decision


async def measure(worlds: int, decisions: int, budget: int, histories: list[int]) -> dict:
    """The figures (see the module docstring) as a dict: ``rss_before_bytes``, ``rss_after_bytes``,
    ``rss_per_world_bytes``, ``in_memory`` and ``reload_ms`` by history length."""
    with tempfile.TemporaryDirectory() as folder:
        store = await open_store(Path(folder) / "bench.sqlite3", max_worlds=budget)
        try:
            for w in range(worlds):
                await store.add_world(f"w{w}", None)
            gc.collect()
            before = rss_bytes()
            for w in range(worlds):
                for i in range(decisions):
                    await store.decide(f"w{w}", f"w{w}-e{i}", note(f"k{i}", f"w{w}-e{i}"))
            gc.collect()
            after = rss_bytes()
            in_memory = len(store._worlds)
            reload_ms = {}
            for history in histories:
                world = f"h{history}"
                await store.add_world(world, None)
                for i in range(history):
                    await store.decide(world, f"{world}-e{i}", note("k", f"{world}-e{i}"))
                with store._lock:  # as _evict drops it (nothing of it is pending after its awaits)
                    del store._worlds[world]
                start = time.perf_counter()
                await store.decide(world, f"{world}-new", note("k", f"{world}-new"))
                reload_ms[history] = (time.perf_counter() - start) * 1000
        finally:
            await store.close()
    return {"worlds": worlds, "decisions": decisions, "max_worlds_in_memory": budget,
            "rss_before_bytes": before, "rss_after_bytes": after,
            "rss_per_world_bytes": (after - before) / worlds, "in_memory": in_memory, "reload_ms": reload_ms}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__.split("\n\n")[0])
    parser.add_argument("--worlds", type=int, default=2000, help="worlds registered and used (default 2000)")
    parser.add_argument("--decisions", type=int, default=3, help="decisions in each world (default 3)")
    parser.add_argument("--max-worlds-in-memory", type=int, default=100, help="the budget (default 100)")
    parser.add_argument("--history", default="200,2000", help="records of the worlds reloaded (default 200,2000)")
    args = parser.parse_args(argv)
    figures = asyncio.run(measure(args.worlds, args.decisions, args.max_worlds_in_memory,
                                  [int(n) for n in args.history.split(",") if n]))
    print(f"{figures['worlds']} worlds x {figures['decisions']} decisions, at most "
          f"{figures['max_worlds_in_memory']} in memory ({figures['in_memory']} held): RSS "
          f"{figures['rss_before_bytes'] / 2**20:.1f} -> {figures['rss_after_bytes'] / 2**20:.1f} MiB, "
          f"{figures['rss_per_world_bytes'] / 1024:.1f} KiB a world")
    for history, ms in figures["reload_ms"].items():
        print(f"first decision after leaving memory, {history} records: {ms:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
