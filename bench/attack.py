"""``python -m bench --attack`` (``python -m bench.attack``): one bridge flooded while another world keeps deciding.

Starts the real bridge (``fate-bridge serve``, default limits, SQLite in a temporary folder) as
its own process on 127.0.0.1, with two worlds registered: ``table`` (the victim: a GM's browser
making a steady ``--rate`` of test_rolled decisions, each a round trip, from 127.0.0.1) and
``attacker`` (a world whose token the attacker holds). Then, for ``--duration`` seconds each,
the table plays alone (``none``) and under each flood, every flood run by its own process from
loopback addresses of its own (127.0.0.2 ..., or ``--addresses`` of them, 127.0.N.1 ...), so the
bridge sees separate attacker addresses:

- ``bad_hello``: ``--clients`` loops each connecting and sending a ``hello`` for ``table`` with a
  wrong token, as fast as the bridge answers (token guessing), from one address;
- ``bad_hello_many``: the same spread over ``--addresses`` addresses (each connection from the
  next one: a botnet, or one host with many addresses);
- ``reconnect``: ``--clients`` loops each connecting with the attacker world's real token, sending
  100 decisions and reconnecting (to refill a per-connection rate limit);
- ``pump``: one connection with the attacker world's real token sending decisions without
  waiting for any answer, as fast as its socket takes them;
- ``connection``: ``--clients`` loops each opening connections that never say ``hello``, as many as
  the bridge accepts, and holding them (raw TCP and WebSocket handshakes alike), from one address;
- ``connection_many``: the same spread over ``--addresses`` addresses.

Phases alternate none / flood / none / flood ... and the ``none`` phases are pooled. Prints,
per phase, the table's decisions, p50 and p99 latency (ms), p99 / p99 without a flood (the goal:
within 2x), and what the attacker got (attempts, accepted, refused). ``--out`` writes it as JSON.
``--only`` runs some floods; ``--smoke`` makes every phase half a second long (the test suite
checks the harness, never timings).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from websockets.asyncio.client import connect
from websockets.protocol import State
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, WebSocketException

from bridge.session import hash_token, new_token
from bridge.store import SQLiteStore

from .load import ACTOR, TEST

ATTACKS = ("bad_hello", "bad_hello_many", "reconnect", "pump", "connection", "connection_many")
MANY = ("bad_hello_many", "connection_many")  # spread over --addresses addresses
ADDRESSES = 240
START_TIMEOUT = 20.0
GOAL = 2.0  # the table's p99 under a flood within this many times its p99 without


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _rolled(tag: str, n: int) -> str:
    mid = f"{tag}-{n}"
    return json.dumps({"type": "test_rolled", "v": 1, "event_id": f"r{mid}", "ruleset": "sohl",
                       "message_id": mid, "actor": ACTOR, "test": TEST, "visibility": "gm"})


def _hello(world: str, token: str) -> str:
    return json.dumps({"type": "hello", "v": 1, "world_id": world, "token": token})


async def table(url: str, token: str, rate: float, duration: float, tag: str) -> list[float]:
    """The victim: one connection deciding ``rate`` times a second; each round trip's ms."""
    latencies: list[float] = []
    async with connect(url, compression=None) as ws:
        await ws.send(_hello("table", token))
        assert json.loads(await ws.recv())["type"] == "welcome"
        start = time.perf_counter()
        n = 0
        while time.perf_counter() < start + duration:
            sent = time.perf_counter()
            await ws.send(_rolled(tag, n))
            reply = json.loads(await ws.recv())
            latencies.append((time.perf_counter() - sent) * 1000)
            assert reply["type"] == "test_graded", reply
            n += 1
            await asyncio.sleep(max(0.0, start + n / rate - time.perf_counter()))
    return latencies


# --- the attacker process -----------------------------------------------------------------------

def _count(stats: dict, key: str) -> None:
    stats[key] = stats.get(key, 0) + 1


Sources = Callable[[], str]  # the address the next connection comes from


async def _connecting(url: str, sources: Sources, stats: dict, stop: float, visit) -> None:
    """Until ``stop``: connect from the next of ``sources``, ``await visit(ws)``, disconnect,
    again; each try counted in ``stats`` (attempts; a 503, a close code or a failure when it
    goes wrong)."""
    while time.perf_counter() < stop:
        stats["attempts"] += 1
        try:
            async with connect(url, compression=None, open_timeout=5, local_addr=(sources(), 0)) as ws:
                await visit(ws)
        except InvalidStatus:
            stats["http_503"] += 1
        except ConnectionClosed as closed:  # 4003: another of its loops took the world over
            _count(stats, f"closed_{closed.rcvd.code if closed.rcvd else 'abruptly'}")
        except (OSError, WebSocketException, InvalidHandshake, TimeoutError):
            stats["failed"] += 1


async def _bad_hello(url: str, sources: Sources, stats: dict, stop: float) -> None:
    async def guess(ws) -> None:
        await ws.send(_hello("table", new_token()))
        reply = json.loads(await ws.recv())
        _count(stats, reply.get("code", reply["type"]))

    await _connecting(url, sources, stats, stop, guess)


async def _reconnect(url: str, sources: Sources, token: str, stats: dict, stop: float, tag: str) -> None:
    n = 0

    async def burst(ws) -> None:
        nonlocal n
        await ws.send(_hello("attacker", token))
        if json.loads(await ws.recv())["type"] != "welcome":
            stats["refused_hello"] += 1
            return
        for _ in range(100):
            await ws.send(_rolled(tag, n))
            n += 1
        for _ in range(100):
            reply = json.loads(await ws.recv())
            key = "decided" if reply["type"] == "test_graded" else reply.get("code", reply["type"])
            _count(stats, key)

    await _connecting(url, sources, stats, stop, burst)


async def _pump(url: str, sources: Sources, token: str, stats: dict, stop: float) -> None:
    """One connection of the attacker world sending decisions without waiting for answers (its
    socket's backpressure is the only brake) until ``stop``; every answer counted by type or code."""
    stats["attempts"] += 1
    async with connect(url, compression=None, open_timeout=5, local_addr=(sources(), 0)) as ws:
        await ws.send(_hello("attacker", token))
        if json.loads(await ws.recv())["type"] != "welcome":
            stats["refused_hello"] += 1
            return

        async def answers() -> None:
            with contextlib.suppress(ConnectionClosed):
                async for reply in ws:
                    decoded = json.loads(reply)
                    _count(stats, "decided" if decoded["type"] == "test_graded" else decoded.get("code", decoded["type"]))

        reader = asyncio.create_task(answers())
        n = 0
        with contextlib.suppress(ConnectionClosed, TimeoutError):  # TimeoutError: a send held past stop
            while time.perf_counter() < stop:
                await asyncio.wait_for(ws.send(_rolled("p", n)), max(0.01, stop - time.perf_counter()))
                n += 1
        stats["sent"] = n
        reader.cancel()
        ws.transport.abort()


async def _hold(url: str, sources: Sources, stats: dict, stop: float, held: list) -> None:
    """Open silent connections (WebSocket handshakes, then raw TCP) and keep them."""
    host, port = url.removeprefix("ws://").split(":")
    raw = False
    while time.perf_counter() < stop:
        stats["attempts"] += 1
        raw = not raw
        try:
            if raw:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(host, int(port), local_addr=(sources(), 0)), 5)
                try:  # a refused one is answered 503 (within the 1 s tarpit); a held one hears nothing
                    await asyncio.wait_for(reader.read(1), 1.5)
                    stats["tcp_503"] += 1
                    writer.transport.abort()
                except TimeoutError:
                    held.append((reader, writer))
                    stats["tcp_held"] += 1
            else:
                ws = await connect(url, compression=None, open_timeout=5, local_addr=(sources(), 0))
                held.append((None, ws))
                stats["ws_open"] += 1
        except InvalidStatus:
            stats["http_503"] += 1
            await asyncio.sleep(0.01)
        except (OSError, WebSocketException, InvalidHandshake, TimeoutError):
            stats["failed"] += 1
            await asyncio.sleep(0.01)


async def attacker(kind: str, url: str, sources: list[str], token: str, clients: int, duration: float) -> dict:
    """Run one flood for ``duration`` s with ``clients`` concurrent loops, each connection from
    the next address of ``sources`` in turn; its counters."""
    stats: dict[str, float] = {"attempts": 0, "http_503": 0, "failed": 0, "tcp_503": 0, "tcp_held": 0, "ws_open": 0,
             "refused_hello": 0}
    stop = time.perf_counter() + duration
    held: list = []
    turn = itertools.cycle(sources)
    nexts: Sources = turn.__next__
    if kind.startswith("bad_hello"):
        loops = [_bad_hello(url, nexts, stats, stop) for _ in range(clients)]
    elif kind == "reconnect":
        loops = [_reconnect(url, nexts, token, stats, stop, f"a{c}") for c in range(clients)]
    elif kind == "pump":
        loops = [_pump(url, nexts, token, stats, stop)]
    else:
        loops = [_hold(url, nexts, stats, stop, held) for _ in range(clients)]
    await asyncio.gather(*loops)
    # the bridge closes silent connections after its timeouts: how many it still holds
    stats["still_open_at_end"] = sum(not reader.at_eof() if reader else conn.state is State.OPEN
                                     for reader, conn in held)
    for _, conn in held:
        conn.transport.abort()
    stats["per_s"] = round(stats["attempts"] / duration, 1)
    for key in ("decided", "rate_limited", "sent"):
        if key in stats:
            stats[f"{key}_per_s"] = round(stats[key] / duration, 1)
    stats["addresses"] = len(sources)
    return {key: value for key, value in stats.items() if value}


# --- the orchestration --------------------------------------------------------------------------

async def _register(db: Path) -> dict[str, str]:
    store = await SQLiteStore.open(db)
    tokens = {world: new_token() for world in ("table", "attacker")}
    for world, token in tokens.items():
        await store.add_world(world, hash_token(token))
    await store.close()
    return tokens


def _start_bridge(folder: Path, port: int) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-m", "bridge", "serve", "--port", str(port), "--db", str(folder / "b.sqlite3"),
         "--audit-key", str(folder / "audit.key"), "--log-format", "json"],
        stdout=subprocess.DEVNULL, stderr=open(folder / "bridge.log", "wb"))
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit(f"the bridge did not start in {START_TIMEOUT:g} s; see {folder / 'bridge.log'}")


def _sources(kind: str, n: int, addresses: int) -> list[str]:
    """The loopback addresses flood ``n`` (of kind ``kind``) connects from: one, 127.0.0.(2+n), or
    for a flood over many addresses ``addresses`` of them, 127.(1+n).x.y (every 127/8 address is
    the loopback interface on Linux, no setup)."""
    if kind not in MANY:
        return [f"127.0.0.{2 + n}"]
    return [f"127.{1 + n}.{1 + a // 250}.{1 + a % 250}" for a in range(addresses)]


async def _phase(url: str, tokens: dict, kind: str, n: int, args: argparse.Namespace) -> dict:
    attack = None
    if kind != "none":
        lead = min(1.0, args.duration / 5)  # the flood is under way before the table is measured
        attack = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.attack", "--attacker", kind, "--url", url,
            "--sources", ",".join(_sources(kind, n, args.addresses)),
            "--token", tokens["attacker"], "--clients", str(args.clients),
            "--duration", str(args.duration + 2 * lead), stdout=asyncio.subprocess.PIPE)
        assert await attack.stdout.readline() == b"ready\n"  # type: ignore[union-attr]
        await asyncio.sleep(lead)
    latencies = await table(url, tokens["table"], args.rate, args.duration, f"{kind}{n}")
    result: dict = {"phase": kind, "decisions": len(latencies), "latencies": latencies}
    if attack is not None:
        out, _ = await attack.communicate()
        result["attacker"] = json.loads(out)
    return result


def _summary(latencies: list[float]) -> dict:
    return {"decisions": len(latencies), "p50_ms": round(_percentile(latencies, 0.50), 2),
            "p99_ms": round(_percentile(latencies, 0.99), 2), "max_ms": round(max(latencies), 2)}


async def orchestrate(args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="fate-bridge-attack-") as tmp:
        folder = Path(tmp)
        tokens = await _register(folder / "b.sqlite3")
        port = _free_port()
        bridge = _start_bridge(folder, port)
        url = f"ws://127.0.0.1:{port}"
        try:
            await table(url, tokens["table"], args.rate, min(1.0, args.duration), "warmup")
            phases = []
            for n, kind in enumerate(args.only):
                phases.append(await _phase(url, tokens, "none", n, args))
                phases.append(await _phase(url, tokens, kind, n, args))
            phases.append(await _phase(url, tokens, "none", len(args.only), args))
        finally:
            bridge.terminate()
            bridge.wait(timeout=30)
    baseline = _summary([ms for p in phases if p["phase"] == "none" for ms in p["latencies"]])
    report: dict = {"mode": "smoke" if args.smoke else "full", "rate": args.rate, "duration_s": args.duration,
                    "clients": args.clients, "addresses": args.addresses, "goal": GOAL, "none": baseline,
                    "attacks": {}}
    for p in phases:
        if p["phase"] != "none":
            row = _summary(p["latencies"])
            row["p99_ratio"] = round(row["p99_ms"] / baseline["p99_ms"], 2)
            row["attacker"] = p["attacker"]
            report["attacks"][p["phase"]] = row
    return report


def print_report(report: dict) -> None:
    none = report["none"]
    print(f"table world: {report['rate']:g} decisions/s, {report['duration_s']:g} s per phase, "
          f"floods: {report['clients']} concurrent loops each ({report['addresses']} addresses for "
          f"{' and '.join(MANY)}); goal: p99 within {GOAL:g}x of the p99 without a flood")
    if report["mode"] == "smoke":
        print("smoke run: checks the harness only, the timings mean nothing")
    print(f"{'phase':<16}{'decisions':>10}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'p99 x':>8}  verdict   attacker")
    print(f"{'none (pooled)':<16}{none['decisions']:>10}{none['p50_ms']:>9.2f}{none['p99_ms']:>9.2f}{none['max_ms']:>9.2f}"
          f"{1.0:>8.2f}")
    over = 0
    for kind, row in report["attacks"].items():
        verdict = "ok" if row["p99_ratio"] <= GOAL else f"OVER {GOAL:g}x"
        over += verdict != "ok"
        print(f"{kind:<16}{row['decisions']:>10}{row['p50_ms']:>9.2f}{row['p99_ms']:>9.2f}{row['max_ms']:>9.2f}"
              f"{row['p99_ratio']:>8.2f}  {verdict:<8}  {json.dumps(row['attacker'])}")
    print(f"every flood within {GOAL:g}x" if not over else f"{over} of {len(report['attacks'])} floods over {GOAL:g}x")
    print("attacker: attempts (connections tried; per_s: attempts a second), then answers by type or code")


def main(argv: list[str] | None = None) -> int:
    """The command line (``python -m bench.attack --help``); 0 when it ran (the verdicts are printed)."""
    parser = argparse.ArgumentParser(prog="python -m bench.attack", description=__doc__.split("\n\n")[0].replace("``", ""))
    parser.add_argument("--duration", type=float, default=15.0, help="seconds per phase (default 15)")
    parser.add_argument("--rate", type=float, default=15.0,
                        help="the table's decisions per second (default 15, under the 20/s world limit)")
    parser.add_argument("--clients", type=int, default=50, help="concurrent loops per flood (default 50)")
    parser.add_argument("--addresses", type=int, default=ADDRESSES,
                        help=f"addresses a flood over many addresses comes from (default {ADDRESSES})")
    parser.add_argument("--only", type=floods, default=list(ATTACKS), metavar="NAMES",
                        help="comma-separated floods to run, of: " + ", ".join(ATTACKS) + " (default all)")
    parser.add_argument("--out", type=Path, help="also write the report as JSON here")
    parser.add_argument("--smoke", action="store_true",
                        help="0.5 s phases, 5 clients, 20 addresses: checks the harness only")
    parser.add_argument("--attacker", choices=ATTACKS, help=argparse.SUPPRESS)  # the attacker process
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--sources", help=argparse.SUPPRESS)
    parser.add_argument("--token", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.attacker:
        print("ready", flush=True)  # imports done: the flood starts now
        stats = asyncio.run(attacker(args.attacker, args.url, args.sources.split(","), args.token, args.clients,
                                     args.duration))
        print(json.dumps(stats))
        return 0
    if args.smoke:
        args.duration, args.clients, args.addresses = 0.5, 5, 20
    report = asyncio.run(orchestrate(args))
    print_report(report)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


def floods(text: str) -> list[str]:
    """An argparse type: comma-separated flood names, each one of :data:`ATTACKS`."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if unknown := [name for name in names if name not in ATTACKS]:
        raise argparse.ArgumentTypeError(f"no such flood: {', '.join(unknown)} (known: {', '.join(ATTACKS)})")
    return names


if __name__ == "__main__":
    sys.exit(main())
