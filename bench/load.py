"""The load client: C connections (one world each) drive realistic Fate flows for a fixed time.

``python -m bench.load --url ws://127.0.0.1:P --worlds worlds.json --conns C --duration S``
prints one JSON object: round trips, seconds, latency percentiles (µs). Each connection sends
``hello``, then loops test_rolled -> fate_spend (-> fate_choice keep when the bridge asks),
awaiting every reply (a round trip). Against the echo server the same frames come back; its
flows never branch, so both servers see the same message mix but for the rare choice.

``--idle`` instead opens C authenticated connections and holds them (for RSS per connection),
printing ``ready`` once all are open; it exits on stdin EOF.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time

from websockets.asyncio.client import connect

ACTOR = {
    "actor_id": "benchActor000001", "name": "Basic Folk", "player_owned": True,
    "owner_user_ids": ["benchPlayer00001", "benchGM000000001"], "aura": {"eml": 55, "disabled": False},
    "aural_shock": False,
    "fate_points": [{"point_id": "wellspring000001", "name": "Wellspring", "skill_code": None, "charges": None},
                    {"point_id": "luckystar0000001", "name": "Lucky Star", "skill_code": None, "charges": 3}],
}
TEST = {"kind": "skill", "code": "archery", "name": "Archery Test", "eml": 55, "roll": 88, "level_mod": 0,
        "basis": [], "skill_base_formula": "sb(attr.per, attr.dex)", "basic": False, "reported_level": 0,
        "item_id": "PLACEHOLDERarc01"}


def hello(world: dict) -> str:
    return json.dumps({"type": "hello", "v": 1, "world_id": world["world_id"], "token": world["token"]})


async def _round_trip(ws, frame: str, latencies: list[int]) -> str:
    start = time.perf_counter_ns()
    await ws.send(frame)
    reply = await ws.recv()
    latencies.append(time.perf_counter_ns() - start)
    return reply


async def _drive(url: str, world: dict, tag: str, start: asyncio.Event, deadline: list[float],
                 latencies: list[int], opened: asyncio.Semaphore) -> None:
    async with connect(url, compression=None, max_size=None) as ws:
        await ws.send(hello(world))
        await ws.recv()
        opened.release()
        await start.wait()
        n = 0
        while time.perf_counter() < deadline[0]:
            mid = f"{tag}-{n}"
            rolled = {"type": "test_rolled", "v": 1, "event_id": f"r{mid}", "ruleset": "sohl", "message_id": mid,
                      "actor": ACTOR, "test": TEST, "visibility": "public"}
            await _round_trip(ws, json.dumps(rolled), latencies)
            spend = {"type": "fate_spend", "v": 1, "event_id": f"s{mid}", "message_id": mid,
                     "point_id": "wellspring000001", "user_id": "benchPlayer00001"}
            reply = await _round_trip(ws, json.dumps(spend), latencies)
            if '"outcome":"choice"' in reply:
                choice = {"type": "fate_choice", "v": 1, "event_id": f"c{mid}", "message_id": mid,
                          "choice": "keep", "user_id": "benchPlayer00001"}
                await _round_trip(ws, json.dumps(choice), latencies)
            n += 1


def _percentile(sorted_values: list[int], q: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))] / 1000


async def run(url: str, worlds: list[dict], conns: int, duration: float, tag: str) -> dict:
    """Drive ``conns`` connections for ``duration`` seconds; returns the measurements."""
    start, deadline, latencies = asyncio.Event(), [0.0], []
    opened = asyncio.Semaphore(0)
    tasks = [asyncio.create_task(_drive(url, worlds[i], f"{tag}{i}", start, deadline, latencies, opened))
             for i in range(conns)]
    for _ in range(conns):
        await opened.acquire()
    began = time.perf_counter()
    deadline[0] = began + duration
    start.set()
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - began
    ordered = sorted(latencies)
    return {"conns": conns, "round_trips": len(ordered), "seconds": elapsed,
            "round_trips_per_s": len(ordered) / elapsed,
            "p50_us": _percentile(ordered, 0.50), "p99_us": _percentile(ordered, 0.99),
            "max_us": ordered[-1] / 1000 if ordered else 0.0}


async def idle(url: str, worlds: list[dict], conns: int) -> None:
    """Open ``conns`` authenticated connections, say ``ready``, hold them until stdin closes."""
    sockets = []
    for i in range(conns):
        ws = await connect(url, compression=None)
        await ws.send(hello(worlds[i]))
        reply = json.loads(await ws.recv())
        if reply["type"] != "welcome":
            raise SystemExit(f"connection {i} refused: {reply}")
        sockets.append(ws)
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    for ws in sockets:
        await ws.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--worlds", required=True, help="JSON file: [{world_id, token}, ...]")
    parser.add_argument("--conns", type=int, required=True)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--tag", default="b", help="prefix making message ids unique per run")
    parser.add_argument("--idle", action="store_true")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with open(args.worlds) as file:
        worlds = json.load(file)
    try:
        import uvloop
        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    if args.idle:
        runner(idle(args.url, worlds, args.conns))
    else:
        print(json.dumps(runner(run(args.url, worlds, args.conns, args.duration, args.tag))))


if __name__ == "__main__":
    main()
