"""What a world costs in memory and what leaving memory costs it.

``python -m bench.memory``: the store alone (no sockets, no sessions), SQLite on a temporary
file, no audit key: registers ``--worlds`` worlds, makes ``--decisions`` decisions in each
(distinct event ids, one record each) with ``--max-worlds-in-memory`` as ``serve`` takes it, and
prints the process's RSS before and after, per world; then, for each ``--history``, the time of a
world's first decision after it left memory (its load: event ids, record keys, the chain check).
Run it once with a budget above ``--worlds`` (every world held) and once below to see what
eviction frees.

``python -m bench --memory`` (:func:`serve_figures`): real server processes, one after the other,
on one database of 10,000 registered worlds with a short history each (built in this process,
bench/build.py): the bare echo server (``bench.echo``, the reference), then ``fate-bridge serve``
holding every world, then ``serve`` under its default budget (below the worlds used). Each gets
2,000 authenticated forwarder connections, 200 of them deciding as fast as answered; then every
other world's forwarder connects, decides once and leaves; then everything closes. Printed: the
server's RSS at each stage, its ratio to the echo server's, RSS per connection and per world used,
and the worlds in memory (``/metrics``).

Python's allocator keeps freed memory for reuse, so RSS after eviction shows the growth avoided,
not memory handed back. Figures vary with the machine and what else runs: compare runs of one
invocation.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bridge import logs, record, wire
from bridge.session import hash_token, new_token
from bridge.store import Decision, open_store
from bridge.store.writer import MAX_WORLDS_IN_MEMORY

from . import crash
from .build import fill, open_for_serve
from .clients import rss_bytes, wait_ready
from .load import ASKS_CHOICE, CHOICE, ROLLED, SPEND, RawConnection, client_frame, hello, open_raw
from .scale import LOAD_LIMITS  # bench.clients' with the hellos of a new address all taken at once


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
            before = rss_bytes(os.getpid())
            for w in range(worlds):
                for i in range(decisions):
                    await store.decide(f"w{w}", f"w{w}-e{i}", note(f"k{i}", f"w{w}-e{i}"))
            gc.collect()
            after = rss_bytes(os.getpid())
            in_memory = store.worlds_in_memory()
            reload_ms = {}
            for history in histories:
                world = f"h{history}"
                await store.add_world(world, None)
                for i in range(history):
                    await store.decide(world, f"{world}-e{i}", note("k", f"{world}-e{i}"))
                if not store.unload(world):  # nothing of it is pending after its awaits
                    raise RuntimeError(f"{world} was not unloaded")
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


# --- a real ``fate-bridge serve`` process: ``python -m bench --memory`` ---------------------

SERVE_WORLDS = 10_000  # registered, each with a short history
SERVE_HISTORY = 3  # audit records of each
CONNECTED = 2_000  # forwarders connected at once
DECIDING = 200  # of them deciding, as fast as answered
DECIDING_SECONDS = 5.0
EVICTING_BUDGET = MAX_WORLDS_IN_MEMORY  # serve's default, below the worlds touched
CHUNK = 100  # connections opened (or worlds touched) at once


async def build_worlds(folder: Path, worlds: int, history: int) -> tuple[Path, Path, list[dict]]:
    """A database in ``folder`` with ``worlds`` registered worlds of about ``history`` records each,
    written in this process (bench/build.py); returns (database, audit key, [{world_id, token}])."""
    db, key = folder / "bridge.sqlite3", folder / "audit.key"
    store = await open_for_serve(db, key)
    tokens = [{"world_id": f"mem-{i:05d}", "token": new_token()} for i in range(worlds)]
    try:
        for world in tokens:
            await store.add_world(world["world_id"], hash_token(world["token"]))
        for first in range(0, worlds, CHUNK):
            await asyncio.gather(*(fill(store, w["world_id"], history) for w in tokens[first:first + CHUNK]))
    finally:
        await store.close()
    return db, key, tokens


async def _hold(url: str, world: dict, bridge: bool) -> RawConnection:
    """An authenticated forwarder connection of ``world`` (the echo server answers the hello with
    itself: any reply will do there)."""
    conn = await open_raw(url)
    reply = await conn.round_trip(client_frame(hello(world).encode()))
    if bridge and b'"type":"welcome"' not in reply:
        raise RuntimeError(f"hello for {world['world_id']} refused: {reply[:300]!r}")
    return conn


async def _decide(conn: RawConnection, tag: str, until: float) -> int:
    """``bench.load``'s flows on ``conn`` until ``until`` (perf_counter); the round trips made."""
    n = trips = 0
    while time.perf_counter() < until:
        ids = (f"{tag}-{n}".encode(),) * 2
        await conn.round_trip(client_frame(ROLLED % ids))
        reply = await conn.round_trip(client_frame(SPEND % ids))
        trips += 2
        if ASKS_CHOICE in reply:
            await conn.round_trip(client_frame(CHOICE % ids))
            trips += 1
        n += 1
    return trips


async def _touch(url: str, world: dict) -> None:
    """One forwarder of ``world`` connects, decides once and leaves."""
    conn = await _hold(url, world, True)
    await conn.round_trip(client_frame(ROLLED % ((f"touch-{world['world_id']}".encode(),) * 2)))
    conn.close()


def _settled_rss(pid: int) -> int:
    time.sleep(0.5)  # let the server finish what the last replies started before reading
    return rss_bytes(pid)


def _worlds_in_memory(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("fate_bridge_worlds_in_memory "):
                return int(float(line.split()[1]))
    raise RuntimeError("no fate_bridge_worlds_in_memory in /metrics")


async def serve_stages(pid: int, port: int, worlds: list[dict], connected: int, deciding: int, seconds: float,
                       bridge: bool) -> dict:
    """RSS (bytes) of the server ``pid`` listening on ``port`` at each stage: ``listening``;
    ``connected`` (the first ``connected`` worlds' forwarders open, the first ``deciding`` of
    them deciding for ``seconds``); for the bridge, ``touched`` (each other world's forwarder
    then connected, decided once and left, the first ``connected`` still open: every world
    used) and ``worlds_in_memory`` then; ``closed`` (every connection closed). Also the round
    trips the deciding ones made."""
    url = f"ws://127.0.0.1:{port}"
    stages = {"listening": await asyncio.to_thread(_settled_rss, pid)}
    held: list[RawConnection] = []
    for first in range(0, connected, CHUNK):
        held += await asyncio.gather(*(_hold(url, w, bridge) for w in worlds[first:min(first + CHUNK, connected)]))
    until = time.perf_counter() + seconds
    trips = await asyncio.gather(*(_decide(conn, f"d{i}", until) for i, conn in enumerate(held[:deciding])))
    stages["connected"] = await asyncio.to_thread(_settled_rss, pid)
    if bridge:
        for first in range(connected, len(worlds), CHUNK):
            await asyncio.gather(*(_touch(url, w) for w in worlds[first:first + CHUNK]))
        stages["touched"] = await asyncio.to_thread(_settled_rss, pid)
        stages["worlds_in_memory"] = await asyncio.to_thread(_worlds_in_memory, port)
    for conn in held:
        conn.close()
    stages["closed"] = await asyncio.to_thread(_settled_rss, pid)
    stages["round_trips"] = sum(trips)
    return stages


def _server(command: list[str], port: int, health: bool) -> subprocess.Popen:
    """Start a server process; returns it once it answers on ``port`` (``/healthz`` for the bridge)."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_ready(process, port, health)
    return process


def serve_figures(worlds: int = SERVE_WORLDS, history: int = SERVE_HISTORY, connected: int = CONNECTED,
                  deciding: int = DECIDING, seconds: float = DECIDING_SECONDS,
                  budget: int = EVICTING_BUDGET) -> dict:
    """The stages of :func:`serve_stages` for the bare echo server (``bench.echo``, the
    reference), a bridge holding every world (``--max-worlds-in-memory`` = ``worlds``) and one
    under ``budget`` (fewer than the worlds touched: idle ones leave), one after the other on one
    database of ``worlds`` worlds with ``history`` records each."""
    logs.configure("json", level="warning")  # the in-process build logs no decision lines
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # ``connected`` sockets in this process
    found: dict = {"worlds": worlds, "history": history, "connected": connected, "deciding": deciding,
                   "seconds": seconds}
    with tempfile.TemporaryDirectory(prefix="fate-bridge-memory-") as folder:
        print(f"building {worlds} worlds of {history} records ...", file=sys.stderr)
        db, key, tokens = asyncio.run(build_worlds(Path(folder), worlds, history))
        servers = {"echo": (["-m", "bench.echo"], False), f"bridge, budget {worlds}": (None, worlds),
                   f"bridge, budget {budget}": (None, budget)}
        for name, (module, held) in servers.items():
            port = crash.free_port()
            bridge = module is None
            command = [sys.executable, *(module or ["-m", "bridge", "serve", "--db", str(db), "--audit-key", str(key),
                                                    "--rate-limit", "0", "--log-format", "json", *LOAD_LIMITS,
                                                    "--max-worlds-in-memory", str(held)]), "--port", str(port)]
            print(f"{name}: {connected} connected, {deciding} deciding ...", file=sys.stderr)
            process = _server(command, port, health=bridge)
            try:
                found[name] = asyncio.run(serve_stages(process.pid, port, tokens, connected, deciding, seconds, bridge))
                found[name]["budget"] = held if bridge else None
            finally:
                process.terminate()
                process.wait(timeout=60)
    return found


def print_serve(found: dict) -> None:
    """:func:`serve_figures` as a table: RSS per stage and its ratio to the echo server's."""
    echo = found["echo"]
    bridges = [name for name in found if name.startswith("bridge")]
    mib = 2 ** 20
    print(f"\nmemory: {found['worlds']} registered worlds of {found['history']} records, "
          f"{found['connected']} forwarders connected, {found['deciding']} of them deciding for "
          f"{found['seconds']:g} s; RSS MiB (ratio to the bare echo server's in this run)")
    print(f"{'stage':<34}{'echo':>8}" + "".join(f"{name:>28}" for name in bridges))
    labels = {"listening": "listening", "connected": f"{found['connected']} connected, {found['deciding']} deciding",
              "touched": "+ every other world used once", "closed": "every connection closed"}
    for stage, label in labels.items():
        reference = echo.get(stage)
        cells = []
        for name in bridges:
            rss = found[name][stage]
            cells.append(f"{rss / mib:.0f}" + (f" ({rss / reference:.1f}x)" if reference else ""))
        print(f"{label:<34}{'-' if reference is None else f'{reference / mib:.0f}':>8}"
              + "".join(f"{cell:>28}" for cell in cells))
    per_conn = {name: (found[name]["connected"] - found[name]["listening"]) / found["connected"]
                for name in ["echo", *bridges]}
    print("RSS per connection (connected - listening, the deciding ones' load included; KiB): " + ", ".join(
        f"{name} {value / 1024:.1f}" for name, value in per_conn.items())
        + f" ({per_conn[bridges[0]] / max(1.0, per_conn['echo']):.1f}x echo's)")
    others = found["worlds"] - found["connected"]
    for name in bridges:
        b = found[name]
        print(f"{name}: {b['worlds_in_memory']} worlds in memory after {others + found['deciding']} were used "
              f"(the idle connected ones decided nothing); {(b['touched'] - b['connected']) / others / 1024:.1f} "
              f"KiB RSS per world used once ({others} worlds); {b['round_trips']} decisions by the deciding ones")
    print("(RSS after eviction is the growth avoided: Python keeps freed memory for reuse, so it does not "
          "fall back; the machine may be shared, so compare within one run)")
