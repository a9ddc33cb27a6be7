"""``python -m bench``: the bridge against the bare WebSocket limit, side by side in one run.

Starts, as separate processes on 127.0.0.1: a bare websockets echo server (``bench.echo``) and
the real bridge (SQLite in a temporary folder, worlds registered, rate limit off), then a load
client process (``bench.load``) for each measurement. For each C in ``--conns`` it runs
echo, bridge, echo, bridge (A/B/A/B, to cancel drift) for ``--duration`` seconds each and prints
round trips/s, p50/p99/max latency, server CPU µs per message (from /proc) and the bridge/echo
ratios; then RSS per idle authenticated connection (``--idle`` connections) and the store's
decisions/s alone. Everything is written as JSON to ``--out`` as well. Loopback only; every run
is bounded by its duration; the whole default run takes about two minutes.

``--smoke`` makes every step tiny (seconds in all): the test suite uses it to check the harness,
never the timings.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bridge import logs
from bridge.dice import SecretDice
from bridge.session import Session, hash_token, new_token
from bridge.store import SQLiteStore

from .load import ACTOR, TEST

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
START_TIMEOUT = 20.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_bytes(pid: int) -> int:
    """Resident set size of a process, from /proc/PID/statm."""
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_SIZE


def wait_ready(process: subprocess.Popen, port: int, health: bool) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"a server exited early with {process.returncode}")
        try:
            if health:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).close()
            else:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"no server on port {port} after {START_TIMEOUT} s")


async def register_worlds(db: Path, count: int) -> list[dict]:
    store = await SQLiteStore.open(db)
    worlds = []
    for i in range(count):
        token = new_token()
        await store.add_world(f"bench-{i:05d}", hash_token(token))
        worlds.append({"world_id": f"bench-{i:05d}", "token": token})
    await store.close()
    return worlds


def load(url: str, worlds_file: Path, conns: int, duration: float, tag: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "bench.load", "--url", url, "--worlds", str(worlds_file), "--conns", str(conns),
         "--duration", str(duration), "--tag", tag],
        capture_output=True, text=True, timeout=duration + 120)
    if out.returncode != 0:
        raise SystemExit(f"load client failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout)


def measure(server: subprocess.Popen, url: str, worlds_file: Path, conns: int, duration: float, tag: str) -> dict:
    before = cpu_seconds(server.pid)
    result = load(url, worlds_file, conns, duration, tag)
    result["server_cpu_us_per_msg"] = (cpu_seconds(server.pid) - before) * 1e6 / max(1, result["round_trips"])
    return result


def combine(runs: list[dict]) -> dict:
    trips = sum(r["round_trips"] for r in runs)
    seconds = sum(r["seconds"] for r in runs)
    return {
        "round_trips_per_s": trips / seconds,
        "p50_us": sum(r["p50_us"] for r in runs) / len(runs),
        "p99_us": max(r["p99_us"] for r in runs),
        "max_us": max(r["max_us"] for r in runs),
        "server_cpu_us_per_msg": sum(r["server_cpu_us_per_msg"] * r["round_trips"] for r in runs) / max(1, trips),
        "round_trips": trips,
    }


def idle_rss(server: subprocess.Popen, url: str, worlds_file: Path, conns: int) -> dict:
    before = rss_bytes(server.pid)
    client = subprocess.Popen(
        [sys.executable, "-m", "bench.load", "--url", url, "--worlds", str(worlds_file), "--conns", str(conns),
         "--idle"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = client.stdout.readline().strip()
    if line != "ready":
        client.kill()
        raise SystemExit(f"idle client failed: {line} {client.stderr.read()[-2000:]}")
    time.sleep(0.5)  # let the server settle its buffers before reading RSS
    after = rss_bytes(server.pid)
    client.stdin.close()
    client.wait(timeout=60)
    return {"connections": conns, "rss_before_bytes": before, "rss_after_bytes": after,
            "rss_per_connection_bytes": (after - before) / conns, "errors": client.returncode}


async def store_alone(db: Path, decisions: int) -> dict:
    """The decision path without the network: Session + SQLite store, decisions/s."""
    store = await SQLiteStore.open(db, audit_key=secrets.token_bytes(32))
    await store.add_world("store-bench", None)
    session = Session(store, SecretDice(), trusted=True, default_world="store-bench")
    frames = []
    for n in range(decisions // 2):
        frames.append(json.dumps({"type": "test_rolled", "v": 1, "event_id": f"r{n}", "ruleset": "sohl",
                                  "message_id": f"m{n}", "actor": ACTOR, "test": TEST}).encode())
        frames.append(json.dumps({"type": "fate_spend", "v": 1, "event_id": f"s{n}", "message_id": f"m{n}",
                                  "point_id": "wellspring000001", "user_id": "benchPlayer00001"}).encode())
    began = time.perf_counter()
    for frame in frames:
        await session.receive(frame)
    elapsed = time.perf_counter() - began
    await store.close()
    return {"decisions": len(frames), "seconds": elapsed, "decisions_per_s": len(frames) / elapsed}


def print_report(report: dict) -> None:
    print(f"\nfate-bridge benchmark ({report['mode']}; {report['duration_s']} s per run, A/B/A/B)")
    print(f"{'C':>4} {'server':>7} {'rt/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'cpu µs/msg':>11}")
    for row in report["by_conns"]:
        for name in ("echo", "bridge"):
            m = row[name]
            print(f"{row['conns']:>4} {name:>7} {m['round_trips_per_s']:>9.0f} {m['p50_us'] / 1000:>8.2f} "
                  f"{m['p99_us'] / 1000:>8.2f} {m['max_us'] / 1000:>8.2f} {m['server_cpu_us_per_msg']:>11.1f}")
        print(f"{'':>4} {'ratio':>7} {row['throughput_ratio']:>9.2f} {'':>8} {row['p99_ratio']:>8.2f}   (bridge/echo)")
    idle = report["idle"]
    print(f"idle: {idle['connections']} authenticated connections, "
          f"{idle['rss_per_connection_bytes'] / 1024:.1f} KiB RSS each (exit {idle['errors']})")
    print(f"store alone: {report['store']['decisions_per_s']:.0f} decisions/s "
          f"({report['store']['decisions']} decisions)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conns", default="1,10,100", help="connection counts (default 1,10,100)")
    parser.add_argument("--duration", type=float, default=6.0, help="seconds per run (default 6)")
    parser.add_argument("--idle", type=int, default=2000, help="idle connections for RSS (default 2000)")
    parser.add_argument("--store-decisions", type=int, default=20000, help="decisions for the store alone")
    parser.add_argument("--out", type=Path, default=Path("bench-results.json"), help="JSON results file")
    parser.add_argument("--smoke", action="store_true", help="tiny run checking the harness (seconds)")
    args = parser.parse_args(argv)
    logs.configure("json", level="warning")  # the in-process store run logs no decision lines
    if args.smoke:
        args.conns, args.duration, args.idle, args.store_decisions = "1,2", 0.3, 20, 200
    conns = [int(c) for c in args.conns.split(",")]
    worlds_needed = max(max(conns), args.idle)
    with tempfile.TemporaryDirectory(prefix="fate-bridge-bench-") as tmp:
        tmp_path = Path(tmp)
        db = tmp_path / "bridge.sqlite3"
        print(f"registering {worlds_needed} worlds ...", file=sys.stderr)
        worlds = asyncio.run(register_worlds(db, worlds_needed))
        worlds_file = tmp_path / "worlds.json"
        worlds_file.write_text(json.dumps(worlds))
        echo_port, bridge_port = free_port(), free_port()
        echo = subprocess.Popen([sys.executable, "-m", "bench.echo", "--port", str(echo_port)],
                                stdout=subprocess.DEVNULL)
        log = open(tmp_path / "bridge.log", "w")
        bridge = subprocess.Popen(
            [sys.executable, "-m", "bridge", "serve", "--port", str(bridge_port), "--db", str(db), "--audit-key",
             str(tmp_path / "audit.key"), "--rate-limit", "0", "--log-format", "json"],
            stdout=subprocess.DEVNULL, stderr=log)
        try:
            wait_ready(echo, echo_port, health=False)
            wait_ready(bridge, bridge_port, health=True)
            urls = {"echo": f"ws://127.0.0.1:{echo_port}", "bridge": f"ws://127.0.0.1:{bridge_port}"}
            servers = {"echo": echo, "bridge": bridge}
            rows = []
            for c in conns:
                runs: dict[str, list[dict]] = {"echo": [], "bridge": []}
                for rep in range(2):
                    for name in ("echo", "bridge"):
                        print(f"C={c} {name} run {rep + 1}/2 ...", file=sys.stderr)
                        runs[name].append(measure(servers[name], urls[name], worlds_file, c, args.duration,
                                                  f"{name[0]}{c}x{rep}-"))
                row = {"conns": c, "echo": combine(runs["echo"]), "bridge": combine(runs["bridge"])}
                row["throughput_ratio"] = row["bridge"]["round_trips_per_s"] / row["echo"]["round_trips_per_s"]
                row["p99_ratio"] = row["bridge"]["p99_us"] / max(1e-9, row["echo"]["p99_us"])
                rows.append(row)
            print(f"holding {args.idle} idle connections ...", file=sys.stderr)
            idle = idle_rss(bridge, urls["bridge"], worlds_file, args.idle)
        finally:
            for process in (echo, bridge):
                process.terminate()
                process.wait(timeout=30)
            log.close()
        print("store alone ...", file=sys.stderr)
        store = asyncio.run(store_alone(tmp_path / "store-only.sqlite3", args.store_decisions))
    report = {"mode": "smoke" if args.smoke else "full", "duration_s": args.duration, "by_conns": rows,
              "idle": idle, "store": store, "python": sys.version.split()[0], "cpus": os.cpu_count()}
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print_report(report)
    print(f"\nresults written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
