"""``python -m bench``: the bridge against the WebSocket and durability limits, side by side in one run.

Starts, as separate processes on 127.0.0.1, three servers with the same connection settings:
the bare websockets echo server (``bench.echo``: the WebSocket limit), the minimal durable
server (``bench.durable``: decode, one chained SHA-256, one row per decision in one SQLite WAL
transaction per loop tick, reply after COMMIT: the limit for a durable, audited decision in
Python) and the real bridge (``fate-bridge serve``, SQLite in a temporary folder, audit trail
and checkpoint key on, rate limit off, sohl decisions). The same load client (``bench.load``:
raw frames on uvloop) drives each for ``--duration`` seconds per C in ``--conns``, echo,
durable, bridge, twice over (A/B/C/A/B/C, to cancel drift), with the connections split over
``--client-procs`` client processes.

It prints one table: round trips/s, p50/p99/max latency, server CPU µs per round trip (the
server process's own CPU time, bench/clients.py cpu_seconds), client CPU µs per round trip,
cores the server used, and bytes written to the database per decision (growth of the database's
used pages, WAL included, over the run, divided by the decisions). Then the speed targets,
each ``met`` or ``NOT met`` with its ratio, and the check that the client is not the bottleneck:
echo at the middle C driven by one client process and by ``--client-procs`` processes (if more
client processes do not raise echo's rate, the server is the limit). Then RSS per idle
authenticated connection (``--idle``) and the store's decisions/s alone. Everything is written
as JSON to ``--out`` as well. Loopback only; every run is bounded by its duration; the default
run takes about two and a half minutes.

``--quick`` makes every step tiny (seconds in all): the test suite uses it to check the harness,
never the timings. ``--kill-rounds N`` instead runs N kill -9 rounds of the bridge under load
(``bench.crash``) and prints what they found; ``--scale`` the scale-out table
(``bench.scale``: 1, 2, 4 processes on PostgreSQL, 1 on SQLite), and with ``--failover`` or
``--rolling`` instead kill -9 of one of three processes, or a rolling restart of all three, under
load (``bench.failover``: the seconds per world from its link's close to its next
decided reply, and what was lost or doubled); ``--race N`` N trials of two
forwarders of one world racing on two PostgreSQL processes (``bench.race``); ``--fuzz-frames N`` the fuzz
test (tests/test_fuzz.py) with N hostile frames instead of the suite's 5,000; ``--memory`` RSS of a
served bridge with 10,000 worlds, 2,000 connected and 200 deciding, against the echo server's, with
and without eviction (``bench.memory``); ``--restart`` a big world's first decision after
kill -9 and after a clean stop, and the other worlds' p99 while one loads (``bench.restart``);
``--click`` a player's wait from Spend Fate to the Fate card in every browser, hop by hop, in real
Chromium pages, beside a plain chat message (``bench.click``; ``--clicks N``, 200 by default).
``--attack`` another world's p99 under each flood (one connection pumping, token guessing and
silent connections from one address and from 240; ``bench.attack``).
``--faults`` each storage fault under load, what the tables got meanwhile and what was lost
(``bench.faults``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

from bridge import logs
from bridge.dice import SecretDice
from bridge.session import Session, hash_token, new_token
from bridge.store import SQLiteStore

from . import attack, click, crash, faults, memory, restart
from .crash import free_port
from .clients import LOAD_LIMITS, cpu_seconds, go, release_clients, rss_bytes, start_clients, wait_ready
from .load import ACTOR, TEST, percentile

DEFAULT_OUT = Path("bench-results.json")


async def register_worlds(db: Path, count: int) -> list[dict]:
    store = await SQLiteStore.open(db)
    worlds = []
    for i in range(count):
        token = new_token()
        await store.add_world(f"bench-{i:05d}", hash_token(token))
        worlds.append({"world_id": f"bench-{i:05d}", "token": token})
    await store.close()
    return worlds


def db_bytes(db: Path | None) -> int:
    """Bytes of the database's used pages as a reader sees them now (WAL frames included,
    free pages not): its growth over a run is what the run wrote to the database."""
    if db is None:
        return 0
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        page_size, pages, free = (conn.execute(f"PRAGMA {name}").fetchone()[0]
                                  for name in ("page_size", "page_count", "freelist_count"))
    finally:
        conn.close()
    return (pages - free) * page_size


def bytes_by_table(db: Path, decisions: int) -> dict[str, dict[str, float]]:
    """Where a database's bytes are, per table and index (SQLite's dbstat): pages and content
    (payload) in bytes per decision, largest first, those under 10 B left out."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT name, sum(pgsize), sum(payload) FROM dbstat GROUP BY name "
                            "ORDER BY sum(pgsize) DESC").fetchall()
    finally:
        conn.close()
    return {name: {"pages": pages / decisions, "payload": payload / decisions}
            for name, pages, payload in rows if pages / decisions >= 10}


def measure(server: subprocess.Popen, db: Path | None, url: str, worlds_file: Path, conns: int, procs: int,
            duration: float, tag: str) -> dict:
    """One run: the clients' round trips and latencies merged, and the server's CPU and
    database bytes over exactly the loaded time."""
    procs = max(1, min(procs, conns))
    clients = start_clients([url], worlds_file, conns, procs, duration, tag)
    cpu_before, bytes_before, began = cpu_seconds(server.pid), db_bytes(db), time.perf_counter()
    go(clients)
    results = release_clients(clients, worlds_file, duration)
    wall = time.perf_counter() - began
    server_cpu = cpu_seconds(server.pid) - cpu_before
    written = db_bytes(db) - bytes_before
    latencies = sorted(v for r in results for v in r.pop("latencies_us"))
    trips = len(latencies)
    seconds = max(r["seconds"] for r in results)
    return {"round_trips": trips, "seconds": seconds, "latencies_us": latencies,
            "server_cpu_s": server_cpu, "client_cpu_s": sum(r["client_cpu_s"] for r in results),
            "wall_s": wall, "db_bytes": written if db is not None else None, "client_procs": procs}


def combine(runs: list[dict]) -> dict:
    """Runs of one server at one C merged: rates over the summed time, percentiles over every
    latency, CPU and bytes per round trip over every round trip."""
    trips = sum(r["round_trips"] for r in runs)
    seconds = sum(r["seconds"] for r in runs)
    ordered = sorted(v for r in runs for v in r["latencies_us"])
    per_trip = 1e6 / max(1, trips)
    written = None if runs[0]["db_bytes"] is None else sum(r["db_bytes"] for r in runs) / max(1, trips)
    return {
        "round_trips_per_s": trips / seconds,
        "p50_us": percentile(ordered, 0.50), "p99_us": percentile(ordered, 0.99),
        "max_us": ordered[-1] if ordered else 0.0,
        "server_cpu_us_per_msg": sum(r["server_cpu_s"] for r in runs) * per_trip,
        "client_cpu_us_per_msg": sum(r["client_cpu_s"] for r in runs) * per_trip,
        "server_cores": sum(r["server_cpu_s"] for r in runs) / sum(r["wall_s"] for r in runs),
        "db_bytes_per_decision": written,
        "round_trips": trips,
        "client_procs": runs[0]["client_procs"],
    }


def client_check(server: subprocess.Popen, url: str, worlds_file: Path, conns: int, procs: int,
                 duration: float, reps: int) -> dict:
    """Is the echo run limited by the server? Echo at ``conns`` driven by 1 client process and
    by ``procs``, interleaved ``reps`` times: if the rate does not rise by more than 15 %, more
    client capacity does not help, and when a round trip also costs the client less CPU than the
    server, the server is the limit."""
    runs: dict[int, list[dict]] = {1: [], procs: []}
    for rep in range(reps):
        for n in (1, procs):
            runs[n].append(measure(server, None, url, worlds_file, conns, n, duration, f"k{n}c{conns}x{rep}-"))
    one, more = combine(runs[1]), combine(runs[procs])
    gain = more["round_trips_per_s"] / one["round_trips_per_s"]
    return {"conns": conns, "procs": procs, "one_client_rt_per_s": one["round_trips_per_s"],
            "more_clients_rt_per_s": more["round_trips_per_s"], "gain": gain,
            "server_cores": more["server_cores"], "client_cpu_us_per_msg": more["client_cpu_us_per_msg"],
            "server_cpu_us_per_msg": more["server_cpu_us_per_msg"],
            "server_limited": gain <= 1.15 and more["client_cpu_us_per_msg"] < more["server_cpu_us_per_msg"]}


def targets(rows: list[dict]) -> list[dict]:
    """The speed targets, from the C=10 and C=1 rows (the nearest C when those were not run):
    each with the measured value, the limit and the ratio value/limit."""
    by_c = {row["conns"]: row for row in rows}
    ten = by_c.get(10) or rows[-1]
    one = by_c.get(1) or rows[0]
    bridge, durable = ten["bridge"], ten["durable"]
    bytes_per = bridge["db_bytes_per_decision"] or 0.0
    found = [
        (f"decisions/s at C={ten['conns']} >= 50% of minimal durable", bridge["round_trips_per_s"] /
         durable["round_trips_per_s"], 0.5, ">="),
        (f"CPU per decision <= 100 us (C={ten['conns']})", bridge["server_cpu_us_per_msg"], 100.0, "<="),
        (f"p99 at C={ten['conns']} within 3x of minimal durable's", bridge["p99_us"] / max(1.0, durable["p99_us"]),
         3.0, "<="),
        (f"p99 at C={one['conns']} < 1 ms", one["bridge"]["p99_us"] / 1000, 1.0, "<"),
        ("a sohl decision writes <= 1 KB to the database", bytes_per, 1024.0, "<="),
    ]
    out = []
    for name, value, limit, op in found:
        met = value >= limit if op == ">=" else value <= limit if op == "<=" else value < limit
        out.append({"target": name, "value": value, "limit": limit, "ratio": value / limit, "met": met})
    return out


def idle_rss(server: subprocess.Popen, url: str, worlds_file: Path, conns: int) -> dict:
    before = rss_bytes(server.pid)
    client = subprocess.Popen(
        [sys.executable, "-m", "bench.load", "--url", url, "--worlds", str(worlds_file), "--conns", str(conns),
         "--idle"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert client.stdin is not None and client.stdout is not None and client.stderr is not None  # all PIPE
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


SERVERS = ("echo", "durable", "bridge")
def print_report(report: dict) -> None:
    print(f"\nfate-bridge benchmark ({report['mode']}; {report['duration_s']} s per run, "
          f"{report['reps']} run(s) per server and C, interleaved; load client: raw frames on uvloop, "
          f"up to {report['client_procs']} processes)")
    print(f"{'C':>4} {'server':>8} {'rt/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'cpu µs/rt':>9} "
          f"{'client µs/rt':>12} {'cores':>5} {'DB B/decision':>13}")
    for row in report["by_conns"]:
        for name in SERVERS:
            m = row[name]
            written = "-" if m["db_bytes_per_decision"] is None else f"{m['db_bytes_per_decision']:.0f}"
            print(f"{row['conns']:>4} {name:>8} {m['round_trips_per_s']:>8.0f} {m['p50_us'] / 1000:>7.2f} "
                  f"{m['p99_us'] / 1000:>7.2f} {m['max_us'] / 1000:>7.2f} {m['server_cpu_us_per_msg']:>9.1f} "
                  f"{m['client_cpu_us_per_msg']:>12.1f} {m['server_cores']:>5.2f} {written:>13}")
        for ref in ("durable", "echo"):
            print(f"{'':>4} {'bridge/' + ref:>15}: throughput {row['bridge']['round_trips_per_s'] / row[ref]['round_trips_per_s']:.2f}, "
                  f"p99 {row['bridge']['p99_us'] / max(1.0, row[ref]['p99_us']):.1f}x, "
                  f"CPU {row['bridge']['server_cpu_us_per_msg'] / max(1e-9, row[ref]['server_cpu_us_per_msg']):.1f}x")
    for name, tables in report["db_tables"].items():
        print(f"{name} database, bytes per decision by table or index (pages / content): " + ", ".join(
            f"{table} {b['pages']:.0f} / {b['payload']:.0f}" for table, b in tables.items()))
    print("\ntargets, the bridge:")
    for t in report["targets"]:
        print(f"  {'met' if t['met'] else 'NOT met':>7}  {t['target']}: {t['value']:.2f} "
              f"(ratio to the limit {t['ratio']:.2f})")
    check = report["client_check"]
    verdict = (f"more client processes do not raise echo's rate and a round trip costs the client less CPU than the "
               f"server: the echo run is limited by the server (its share of the CPU: {check['server_cores']:.2f} cores)"
               if check["server_limited"] else "WARNING: the echo run may be limited by the client")
    print(f"\nload client check: echo at C={check['conns']}: {check['one_client_rt_per_s']:.0f} rt/s with 1 client "
          f"process, {check['more_clients_rt_per_s']:.0f} with {check['procs']} ({check['gain']:.2f}x); the server "
          f"{check['server_cpu_us_per_msg']:.1f} µs/rt against the client's {check['client_cpu_us_per_msg']:.1f}: "
          f"{verdict}")
    idle = report["idle"]
    print(f"idle: {idle['connections']} authenticated connections, "
          f"{idle['rss_per_connection_bytes'] / 1024:.1f} KiB RSS each (exit {idle['errors']})")
    print(f"store alone: {report['store']['decisions_per_s']:.0f} decisions/s "
          f"({report['store']['decisions']} decisions)")


def start_servers(tmp_path: Path, db: Path) -> tuple[dict[str, subprocess.Popen], dict[str, str], dict, IO[str]]:
    """Echo, minimal durable and bridge processes, each answering on its own port."""
    ports = {name: free_port() for name in SERVERS}
    log = open(tmp_path / "bridge.log", "w")
    servers = {
        "echo": subprocess.Popen([sys.executable, "-m", "bench.echo", "--port", str(ports["echo"])],
                                 stdout=subprocess.DEVNULL),
        "durable": subprocess.Popen([sys.executable, "-m", "bench.durable", "--port", str(ports["durable"]),
                                     "--db", str(tmp_path / "durable.sqlite3")], stdout=subprocess.DEVNULL),
        "bridge": subprocess.Popen(
            [sys.executable, "-m", "bridge", "serve", "--port", str(ports["bridge"]), "--db", str(db),
             "--audit-key", str(tmp_path / "audit.key"), "--rate-limit", "0", "--log-format", "json",
             *LOAD_LIMITS],
            stdout=subprocess.DEVNULL, stderr=log),
    }
    dbs = {"echo": None, "durable": tmp_path / "durable.sqlite3", "bridge": db}
    for name, process in servers.items():
        wait_ready(process, ports[name], health=name == "bridge")
    return servers, {name: f"ws://127.0.0.1:{port}" for name, port in ports.items()}, dbs, log


def fuzz(frames: int) -> int:
    """Run tests/test_fuzz.py (pytest, from the repository) with ``frames`` frames; its exit status."""
    root = Path(__file__).resolve().parent.parent
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_fuzz.py"],
                          cwd=root, env={**os.environ, "FATE_BRIDGE_FUZZ_FRAMES": str(frames)}).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conns", default="1,10,100", help="connection counts (default 1,10,100)")
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per run (default 5)")
    parser.add_argument("--reps", type=int, default=2, help="runs per server and C, interleaved (default 2)")
    parser.add_argument("--client-procs", type=int, default=2,
                        help="load client processes sharing the connections (default 2)")
    parser.add_argument("--idle", type=int, default=2000, help="idle connections for RSS (default 2000)")
    parser.add_argument("--store-decisions", type=int, default=20000, help="decisions for the store alone")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="JSON results file (default %(default)s; --restart: bench-restart.json, --memory: "
                        "bench-memory.json, --click: bench-click.json, --faults: bench-faults.json, --attack: bench-attack.json)")
    parser.add_argument("--quick", action="store_true", help="tiny run checking the harness (seconds)")
    parser.add_argument("--scale", action="store_true",
                        help="instead: decisions/s and CPU per decision of 1, 2 and 4 bridge processes on "
                        "PostgreSQL next to 1 on SQLite, and the target ratios (bench/scale.py; --conns N: connections, default 10)")
    parser.add_argument("--failover", action="store_true",
                        help="with --scale, instead: kill -9 of one of 3 processes under load ("
                        "bench/failover.py; --conns N: worlds, default 30)")
    parser.add_argument("--rolling", action="store_true",
                        help="with --scale, instead: a rolling restart (SIGTERM drain) of 3 processes under load "
                        "(bench/failover.py; --conns N: worlds, default 30)")
    parser.add_argument("--restart", action="store_true",
                        help="instead: a big world's first decision after kill -9 and after a clean stop, and the "
                        "other worlds' p99 while it loads (bench/restart.py; --sizes)")
    parser.add_argument("--sizes", help="--restart: audit records of the big worlds, the first the reference "
                        f"(default {','.join(map(str, restart.SIZES))}; with --quick "
                        f"{','.join(map(str, restart.QUICK_SIZES))})")
    parser.add_argument("--memory", action="store_true",
                        help="instead: RSS of the echo server and of serve with 10,000 worlds, 2,000 connected, "
                        "200 deciding, every world used, with and without eviction (bench/memory.py)")
    parser.add_argument("--click", action="store_true",
                        help="instead: from a Spend Fate click in a player's Chromium page to the Fate card in "
                        "every page, p50/p99 per hop, beside a plain chat message (bench/click.py)")
    parser.add_argument("--clicks", type=int, metavar="N",
                        help=f"--click: clicks measured (default {click.CLICKS}; with --quick {click.QUICK_CLICKS})")
    parser.add_argument("--kill-rounds", type=int, metavar="N",
                        help="instead: N kill -9 rounds of the bridge under load (30 for the full check)")
    parser.add_argument("--race", type=int, metavar="N",
                        help="instead: N trials of two forwarders of one world racing on two processes on "
                        "PostgreSQL (bench/race.py; 100 for the figure in docs/deploy.md)")
    parser.add_argument("--faults", nargs="?", const="all", metavar="NAMES",
                        help="instead: each storage fault under load (bench/faults.py): answers meanwhile, "
                        "decisions lost, seconds until service returned, log lines, audit verify; NAMES (comma-"
                        "separated) runs only those of: " + ", ".join(faults.NAMES) + " (default all; JSON: "
                        "bench-faults.json)")
    parser.add_argument("--attack", nargs="?", const=list(attack.ATTACKS), type=attack.floods, metavar="NAMES",
                        help="instead: another world's latency while one connection or address floods the bridge "
                        "(bench/attack.py: p99 under each flood against p99 without, goal 2x); NAMES (comma-"
                        "separated) runs only those of: " + ", ".join(attack.ATTACKS) + " (default all; JSON: "
                        "bench-attack.json; python -m bench.attack --help for its own options)")
    parser.add_argument("--fuzz-frames", type=int, metavar="N",
                        help="instead: the hostile-frame fuzz test (tests/test_fuzz.py) with N frames, not the "
                        "suite's 5,000 (over 20,000 for the full check: 21000)")
    args = parser.parse_args(argv)
    if args.kill_rounds is not None:
        return crash.main(args.kill_rounds)
    if args.attack is not None:
        out = args.out.with_name("bench-attack.json") if args.out == DEFAULT_OUT else args.out
        return attack.main([*(["--smoke"] if args.quick else []), "--out", str(out), "--only", ",".join(args.attack)])
    if args.faults is not None:
        return faults.main(faults.NAMES if args.faults == "all" else args.faults.split(","), args.quick,
                           args.out.with_name("bench-faults.json") if args.out == DEFAULT_OUT else args.out)
    if args.restart:
        sizes = ([int(n) for n in args.sizes.split(",")] if args.sizes
                 else list(restart.QUICK_SIZES if args.quick else restart.SIZES))
        return restart.main(sizes, args.out.with_name("bench-restart.json") if args.out == DEFAULT_OUT else args.out,
                            quick=args.quick)
    if args.click:
        clicks = args.clicks if args.clicks is not None else click.QUICK_CLICKS if args.quick else click.CLICKS
        if clicks < 1:
            parser.error("--clicks must be at least 1")
        return click.main(clicks, click.QUICK_WARMUP if args.quick else click.WARMUP,
                          args.out.with_name("bench-click.json") if args.out == DEFAULT_OUT else args.out)
    if args.memory:
        found = (memory.serve_figures(60, 2, 20, 4, 0.5, 10) if args.quick else memory.serve_figures())
        (args.out.with_name("bench-memory.json") if args.out == DEFAULT_OUT else args.out).write_text(
            json.dumps(found, indent=2) + "\n")
        memory.print_serve(found)
        return 0
    if args.fuzz_frames is not None:
        return fuzz(args.fuzz_frames)
    if args.race is not None:
        from . import race

        return race.main(args.race)
    if args.scale and (args.failover or args.rolling):
        from . import failover

        world_count = 6 if args.quick else int(args.conns) if args.conns.isdigit() else 30
        return failover.main(args.failover, args.rolling, world_count, 5 if args.quick else 20,
                             history=100 if args.quick else failover.HISTORY)
    if args.failover or args.rolling:
        parser.error("--failover and --rolling go with --scale: python -m bench --scale --failover")
    if args.scale:
        from . import scale

        conn_count = 4 if args.quick else int(args.conns) if args.conns.isdigit() else scale.CONNS
        return scale.main(conn_count, 0.5 if args.quick else args.duration, args.out.with_name("bench-scale.json"))
    logs.configure("json", level="warning")  # the in-process store run logs no decision lines
    if args.quick:
        args.conns, args.duration, args.reps, args.idle, args.store_decisions = "1,10", 0.3, 1, 20, 200
    conns = [int(c) for c in args.conns.split(",")]
    worlds_needed = max(max(conns), args.idle)
    with tempfile.TemporaryDirectory(prefix="fate-bridge-bench-") as tmp:
        tmp_path = Path(tmp)
        db = tmp_path / "bridge.sqlite3"
        print(f"registering {worlds_needed} worlds ...", file=sys.stderr)
        worlds = asyncio.run(register_worlds(db, worlds_needed))
        worlds_file = tmp_path / "worlds.json"
        worlds_file.write_text(json.dumps(worlds))
        servers, urls, dbs, log = start_servers(tmp_path, db)
        try:
            rows: list[dict] = []
            for c in conns:
                runs: dict[str, list[dict]] = {name: [] for name in SERVERS}
                for rep in range(args.reps):
                    for name in SERVERS:
                        print(f"C={c} {name} run {rep + 1}/{args.reps} ...", file=sys.stderr)
                        runs[name].append(measure(servers[name], dbs[name], urls[name], worlds_file, c,
                                                  args.client_procs, args.duration, f"{name[0]}{c}x{rep}-"))
                rows.append({"conns": c, **{name: combine(runs[name]) for name in SERVERS}})
            tables = {name: bytes_by_table(dbs[name], sum(row[name]["round_trips"] for row in rows))
                      for name in ("durable", "bridge")}
            middle = sorted(conns)[len(conns) // 2]
            print(f"client check: echo at C={middle} ...", file=sys.stderr)
            check = client_check(servers["echo"], urls["echo"], worlds_file, middle, max(2, args.client_procs),
                                 args.duration, args.reps)
            print(f"holding {args.idle} idle connections ...", file=sys.stderr)
            idle = idle_rss(servers["bridge"], urls["bridge"], worlds_file, args.idle)
        finally:
            for process in servers.values():
                process.terminate()
                process.wait(timeout=30)
            log.close()
        print("store alone ...", file=sys.stderr)
        store = asyncio.run(store_alone(tmp_path / "store-only.sqlite3", args.store_decisions))
    report = {"mode": "quick" if args.quick else "full", "duration_s": args.duration, "reps": args.reps,
              "client_procs": args.client_procs, "by_conns": rows, "targets": targets(rows),
              "client_check": check, "db_tables": tables, "idle": idle, "store": store, "python": sys.version.split()[0],
              "cpus": os.cpu_count()}
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print_report(report)
    print(f"\nresults written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
