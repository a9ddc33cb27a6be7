"""``python -m bench --restart``: what a restart costs a world with a long history and the worlds
beside it, after ``kill -9`` with decisions in flight and after a clean stop.

For each size in ``--sizes`` (default 2,000, 30,000 and 100,000 audit records; the first is the
reference) a fresh SQLite database is built in this process through the store (:func:`build`,
with bench/build.py: the keys ``serve`` then uses, many flows at once): two big worlds of that
many records (:data:`BIG` and :data:`SECOND`) and :data:`OTHERS` small worlds of
:data:`OTHER_RECORDS` records each. Then, as separate processes (``fate-bridge serve``, one at a
time, on that file; the load from this process, raw frames as ``bench.load`` sends them; a world
has one forwarder connection, a newer one supersedes it):

1. serve: each small world's forwarder decides at a steady pace (:data:`OTHER_INTERVAL` between
   its decisions), both big worlds' forwarders as fast as they are answered; once both have been
   answered for :data:`STOP_AFTER` seconds, the bridge is killed (SIGKILL) with decisions in
   flight in every world.
2. serve again. From its first ``/healthz`` answer (polled every 20 ms: "listening") every small
   world's forwarder reconnects and decides again, and the big world :data:`BIG` is sent one
   decision: printed, the seconds from listening to its reply (and from sending it), and the
   slowest small world's own first decision (it loads that world: a load waiting behind the big
   one's shows there). Once every world has answered, the small worlds' p99 over ``before``
   seconds (*before*), then the other big world :data:`SECOND` is sent one decision: its seconds,
   and the small worlds' p99 over the decisions they sent until it was answered (*while* it
   loads), with the ratio to before (one process, so the ratio holds on a shared machine). Then
   both big worlds decide as in 1 and the bridge is stopped cleanly (SIGTERM) with decisions in
   flight.
3. serve again, measured as in 2 (after the clean stop), then stopped.

Correctness is counted, never assumed: every decision acknowledged in the rounds must be in the
file's audit trail at the end (``lost``), and no reply may be an ``error``. The restart targets,
from the restart after kill -9 (the big world's first reply within 1 s of listening at 30,000
and 100,000 records and within 3x the reference world's; the small worlds' p99 while a big world
loads within 2x of before), are printed as ``met`` / ``NOT met`` with their ratios. The machine
may be shared: compare the ratios of one run, and rerun before concluding.

``--quick``: tiny sizes and short phases (seconds), for the test suite (the report's shape and
its correctness counts, never its times).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bridge import logs
from bridge.session import hash_token, new_token
from bridge.store.schema import read_as_one

from .build import fill, open_for_serve
from .clients import LOAD_LIMITS, rss_bytes
from .crash import free_port, start_bridge
from .load import ASKS_CHOICE, CHOICE, ROLLED, SPEND, RawConnection, client_frame, hello, open_raw, percentile

SIZES = (2_000, 30_000, 100_000)
QUICK_SIZES = (40, 120)
OTHERS = 8  # small worlds deciding beside the big ones
OTHER_RECORDS = 30  # records of each small world when built
OTHER_INTERVAL = 0.01  # seconds between a small world's decisions: 100/s each, far from saturating the bridge
BUILD_FLOWS = 32  # in-process sessions building a world at once (group commit: ~4,000 records/s)
STOP_AFTER = 0.5  # seconds of the big world's answered load before it is killed / stopped
BEFORE = 2.0  # seconds of the small worlds' load measured before
BIG = "big-first"  # its first decision is sent at listening
SECOND = "big-second"  # its first decision is sent once every other world answered
ERROR = b'"type":"error"'
TARGET_SECONDS = 1.0
TARGET_VS_REFERENCE = 3.0
TARGET_P99_RATIO = 2.0


@dataclass
class Built:
    """A database :func:`build` made: the file, its audit key, every world's token, the records
    of the big world :data:`BIG` (:data:`SECOND` has as many, give or take a flow's 2)."""

    db: Path
    key: Path
    tokens: dict[str, str]
    records: int


async def build(folder: Path, records: int, others: int, other_records: int) -> Built:
    """A database in ``folder`` holding the big worlds :data:`BIG` and :data:`SECOND` with about
    ``records`` audit records each (the exact count is in the result) and ``others`` small worlds
    of ``other_records``, written in this process through the store with the keys ``serve`` will
    use (bench/build.py), closed cleanly."""
    db, key = folder / "bridge.sqlite3", folder / "audit.key"
    store = await open_for_serve(db, key)
    tokens: dict[str, str] = {}
    try:
        for world, count in [(BIG, records), (SECOND, records)] + [(f"other-{i}", other_records)
                                                                    for i in range(others)]:
            tokens[world] = new_token()
            await store.add_world(world, hash_token(tokens[world]))
            await fill(store, world, count, BUILD_FLOWS if count > 100 else 1)
    finally:
        await store.close()
    return Built(db, key, tokens, _audit_count(db, BIG))


def _audit_count(db: Path, world: str) -> int:
    conn = sqlite3.connect(db)
    try:
        read_as_one(conn)
        return conn.execute("SELECT count(*) FROM audit WHERE world_id = ?", (world,)).fetchone()[0]
    finally:
        conn.close()


@dataclass
class Sample:
    """One decision a load connection made: its world, when it was sent (perf_counter seconds),
    its round trip in µs, whether it was the connection's first and whether it was refused."""

    world: str
    sent: float
    latency_us: float
    first: bool
    error: bool


@dataclass
class Load:
    """What the load connections of one bridge process saw: their samples, the event ids
    acknowledged (world, event_id), and how many of their requests await a reply now."""

    samples: list[Sample] = field(default_factory=list)
    acked: list[tuple[str, str]] = field(default_factory=list)
    in_flight: dict[str, int] = field(default_factory=dict)


async def _connect(url: str, world: str, token: str) -> RawConnection:
    conn = await open_raw(url)
    welcome = await conn.round_trip(client_frame(hello({"world_id": world, "token": token}).encode()))
    if b'"type":"welcome"' not in welcome:
        conn.close()
        raise RuntimeError(f"hello for {world} refused: {welcome[:300]!r}")
    return conn


async def _drive(url: str, world: str, token: str, tag: str, interval: float, stop: asyncio.Event,
                 load: Load) -> None:
    """Decide flows in ``world`` on one connection until ``stop`` is set or the bridge goes away,
    one decision every ``interval`` seconds at most (0: as fast as answered)."""
    try:
        conn = await _connect(url, world, token)
    except (ConnectionError, OSError):
        return  # stopped before it could connect
    first, n, clock = True, 0, time.perf_counter
    try:
        while not stop.is_set():
            ids = (f"{tag}-{n}".encode(),) * 2
            frames = [(b"r", ROLLED), (b"s", SPEND)]
            while frames and not stop.is_set():
                prefix, template = frames.pop(0)
                load.in_flight[world] = load.in_flight.get(world, 0) + 1
                sent = clock()
                try:
                    reply = await conn.round_trip(client_frame(template % ids))
                finally:
                    load.in_flight[world] -= 1
                done = clock()
                load.samples.append(Sample(world, sent, (done - sent) * 1e6, first, ERROR in reply))
                load.acked.append((world, (prefix + ids[0]).decode()))
                first = False
                if template is SPEND and ASKS_CHOICE in reply:
                    frames.append((b"c", CHOICE))
                if interval:
                    await asyncio.sleep(max(0.0, sent + interval - clock()))
            n += 1
    except (ConnectionError, OSError):
        pass  # killed or stopped under it: a stopping bridge waits for the close frame answering its own
    conn.close()


def _start(built: Built, port: int) -> subprocess.Popen:
    return start_bridge(built.db, built.key, port, *LOAD_LIMITS)


BIGS = (BIG, SECOND)


def _others(built: Built) -> list[str]:
    return [world for world in built.tokens if world not in BIGS]


def _p99(samples: list[Sample]) -> dict:
    ordered = sorted(s.latency_us for s in samples)
    return {"p99_us": percentile(ordered, 0.99), "max_us": ordered[-1] if ordered else 0.0, "samples": len(ordered)}


async def _until(condition, process: subprocess.Popen, what: str) -> None:
    while not condition():
        if process.poll() is not None:
            raise RuntimeError(f"the bridge exited with {process.returncode} while waiting for {what}")
        await asyncio.sleep(0.005)


async def _stop_under_load(process: subprocess.Popen, url: str, built: Built, stop: asyncio.Event, load: Load,
                           tasks: list[asyncio.Task], how: signal.Signals, tag: str) -> dict:
    """Put both big worlds' forwarders to deciding as fast as answered beside the running
    ``tasks``; once both have been answered for :data:`STOP_AFTER` s, send ``how`` (SIGKILL or
    SIGTERM) and wait for the process to end. Returns the requests in flight when it was sent."""
    answered = {world: sum(s.world == world for s in load.samples) for world in BIGS}
    tasks += [asyncio.create_task(_drive(url, world, built.tokens[world], f"{tag}{world}", 0.0, stop, load))
              for world in BIGS]
    await _until(lambda: all(sum(s.world == w for s in load.samples) > answered[w] for w in BIGS), process,
                 "the big worlds' first replies")
    await asyncio.sleep(STOP_AFTER)
    in_flight = {"big": sum(load.in_flight.get(world, 0) for world in BIGS),
                 "others": sum(n for world, n in load.in_flight.items() if world not in BIGS)}
    process.send_signal(how)
    await asyncio.to_thread(process.wait, 60)
    stop.set()
    await asyncio.gather(*tasks)
    return in_flight


async def _killed_under_load(built: Built, tag: str) -> tuple[dict, Load]:
    """Serve 1: every world deciding, then kill -9 (see the module docstring). Returns the
    requests in flight at the kill and the load."""
    port = free_port()
    url = f"ws://127.0.0.1:{port}"
    process = await asyncio.to_thread(_start, built, port)
    load, stop = Load(), asyncio.Event()
    try:
        tasks = [asyncio.create_task(_drive(url, w, built.tokens[w], f"{tag}{w}", OTHER_INTERVAL, stop, load))
                 for w in _others(built)]
        in_flight = await _stop_under_load(process, url, built, stop, load, tasks, signal.SIGKILL, tag)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return in_flight, load


async def _first_decision(url: str, built: Built, world: str, tag: str, load: Load) -> tuple[float, float, bool]:
    """Connect ``world``'s forwarder and send it one decision: (perf_counter when sent, when
    answered, whether the reply is a decision)."""
    conn = await _connect(url, world, built.tokens[world])
    ids = (f"{tag}first".encode(),) * 2
    sent = time.perf_counter()
    reply = await conn.round_trip(client_frame(ROLLED % ids))
    answered = time.perf_counter()
    conn.close()
    load.acked.append((world, f"r{tag}first"))
    return sent, answered, b'"type":"test_graded"' in reply


async def _restart(built: Built, tag: str, before_seconds: float, then: signal.Signals | None) -> tuple[dict, Load]:
    """Serve again and measure (step 2 of the module docstring); then, with ``then``, both big
    worlds under load and that signal sent (the in-flight counts in the result), else a clean stop
    with nothing running."""
    port = free_port()
    url = f"ws://127.0.0.1:{port}"
    process = await asyncio.to_thread(_start, built, port)
    listening = time.perf_counter()
    load, stop = Load(), asyncio.Event()
    others = _others(built)
    try:
        tasks = [asyncio.create_task(_drive(url, w, built.tokens[w], f"{tag}{w}", OTHER_INTERVAL, stop, load))
                 for w in others]
        sent, answered, first_ok = await _first_decision(url, built, BIG, tag, load)
        await _until(lambda: {s.world for s in load.samples} >= set(others), process, "every small world's reply")
        began = time.perf_counter()
        await asyncio.sleep(before_seconds)
        second_sent, second_answered, second_ok = await _first_decision(url, built, SECOND, tag, load)
        rss = rss_bytes(process.pid)
        figures = {"first_reply_s": answered - listening, "decision_s": answered - sent,
                   "second_s": second_answered - second_sent, "first_reply_ok": first_ok and second_ok,
                   "before": _p99([s for s in load.samples if began <= s.sent < second_sent]),
                   "while": _p99([s for s in load.samples if second_sent <= s.sent < second_answered]),
                   "others_first_max_us": max((s.latency_us for s in load.samples if s.first), default=0.0),
                   "rss_bytes": rss}
        if then is None:
            stop.set()
            await asyncio.gather(*tasks)
            process.send_signal(signal.SIGTERM)
            await asyncio.to_thread(process.wait, 60)
        else:
            figures["stop_in_flight"] = await _stop_under_load(process, url, built, stop, load, tasks, then, tag)
        figures["exit_code"] = process.returncode
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return figures, load


def _lost(db: Path, acked: list[tuple[str, str]]) -> int:
    """How many acknowledged decisions the file's audit trail lacks (its tails included)."""
    conn = sqlite3.connect(db)
    try:
        read_as_one(conn)
        stored = set(conn.execute("SELECT world_id, event_id FROM audit WHERE event_id IS NOT NULL"))
    finally:
        conn.close()
    return sum(1 for pair in acked if pair not in stored)


async def run_case(folder: Path, records: int, others: int, other_records: int, before_seconds: float) -> dict:
    """One size: build, then the three bridge processes of the module docstring; the figures."""
    print(f"building two worlds of {records} records and {others} small ones ...", file=sys.stderr)
    began = time.perf_counter()
    built = await build(folder, records, others, other_records)
    build_s = time.perf_counter() - began
    print(f"{built.records} records: serving, then kill -9 under load ...", file=sys.stderr)
    killed_in_flight, first = await _killed_under_load(built, "a")
    print("restarting after kill -9 ...", file=sys.stderr)
    after_kill, second = await _restart(built, "b", before_seconds, signal.SIGTERM)
    after_kill["in_flight"] = killed_in_flight
    print("restarting after the clean stop ...", file=sys.stderr)
    after_stop, third = await _restart(built, "c", before_seconds, None)
    after_stop["in_flight"] = after_kill.pop("stop_in_flight")
    loads = (first, second, third)
    return {"records": built.records, "build_s": build_s, "others": others, "other_records": other_records,
            "after_kill": after_kill, "after_stop": after_stop,
            "acked": sum(len(load.acked) for load in loads),
            "errors": sum(s.error for load in loads for s in load.samples) + sum(
                not r["first_reply_ok"] for r in (after_kill, after_stop)),
            "lost": _lost(built.db, [pair for load in loads for pair in load.acked])}


def targets(cases: list[dict]) -> list[dict]:
    """The restart targets, from the restart after kill -9: each with its value, limit,
    ratio (value / limit) and whether it is met (None when it could not be measured). The first
    case is the reference world (2,000 records)."""
    reference = cases[0]["after_kill"]["first_reply_s"]
    found = []
    for case in cases[1:]:
        kill = case["after_kill"]
        n = case["records"]
        found.append((f"first reply within {TARGET_SECONDS:g} s of listening ({n} records)",
                      kill["first_reply_s"], TARGET_SECONDS))
        found.append((f"first reply within {TARGET_VS_REFERENCE:g}x the {cases[0]['records']}-record "
                      f"world's ({n} records)", kill["first_reply_s"] / max(reference, 1e-9), TARGET_VS_REFERENCE))
    for case in cases:
        found.append((f"the small worlds' p99 while a {case['records']}-record world loads within "
                      f"{TARGET_P99_RATIO:g}x of before", p99_ratio(case["after_kill"]), TARGET_P99_RATIO))
    return [{"target": name, "value": value, "limit": limit, "ratio": None if value is None else value / limit,
             "met": None if value is None else value <= limit} for name, value, limit in found]


def p99_ratio(restarted: dict) -> float | None:
    """The small worlds' p99 while the second big world loaded over their p99 before, in one
    restarted process; None when none of their decisions was sent while it loaded."""
    if not restarted["while"]["samples"]:
        return None
    return restarted["while"]["p99_us"] / max(1.0, restarted["before"]["p99_us"])


def print_report(report: dict) -> None:
    """The table and the targets of :func:`main`'s report."""
    cases = report["cases"]
    print(f"\nrestart: two big worlds and {cases[0]['others']} small ones deciding "
          f"{1 / OTHER_INTERVAL:.0f}/s each; ratios within this run ({report['cpus']} cores, maybe shared)")
    print(f"{'records':>8} {'after':>11} {'in flight':>9} {'first reply s':>13} {'vs ref':>6} {'decision s':>10} "
          f"{'own first ms':>12} {'second s':>8} {'p99 before ms':>13} {'while ms':>8} {'ratio':>5} {'max ms':>7} "
          f"{'n':>6} {'RSS MiB':>7}")
    for when, label in (("after_kill", "kill -9"), ("after_stop", "clean stop")):
        reference = cases[0][when]["first_reply_s"]
        for case in cases:
            r = case[when]
            ratio = p99_ratio(r)
            print(f"{case['records']:>8} {label:>11} {r['in_flight']['big']:>4}+{r['in_flight']['others']:<4} "
                  f"{r['first_reply_s']:>13.3f} {r['first_reply_s'] / max(reference, 1e-9):>6.1f} "
                  f"{r['decision_s']:>10.3f} {r['others_first_max_us'] / 1000:>12.1f} {r['second_s']:>8.3f} "
                  f"{r['before']['p99_us'] / 1000:>13.1f} {r['while']['p99_us'] / 1000:>8.1f} "
                  f"{'-' if ratio is None else f'{ratio:.1f}':>5} {r['while']['max_us'] / 1000:>7.1f} "
                  f"{r['while']['samples']:>6} {r['rss_bytes'] / 2**20:>7.0f}")
    print("in flight: the big worlds' requests + the small ones' awaiting a reply at the kill / stop before it;\n"
          "first reply: from the first /healthz answer to the first big world's reply (decision: from sending it);\n"
          "own first: the slowest small world's first decision after the restart (it loads that world);\n"
          "second: the other big world's first decision, sent once every world had answered; p99 before: the small\n"
          "worlds' over the seconds before it, while: over their decisions sent until it was answered (n of them,\n"
          "-: none), ratio: while / before; RSS: the bridge's once both big worlds were loaded")
    print("correctness: " + ", ".join(f"{case['records']} records: {case['acked']} acknowledged, {case['lost']} "
                                     f"lost, {case['errors']} errors" for case in cases))
    print("\ntargets, after kill -9:")
    for t in report["targets"]:
        if t["met"] is None:
            print(f"  {'n/a':>7}  {t['target']}: none of their decisions was sent while it loaded")
            continue
        print(f"  {'met' if t['met'] else 'NOT met':>7}  {t['target']}: {t['value']:.2f} "
              f"(ratio to the limit {t['ratio']:.2f})")


def main(sizes: list[int], out: Path, quick: bool = False) -> int:
    """Run every size (the first is the reference), print the report, write it as JSON to ``out``;
    exit 1 when a decision was lost or refused."""
    logs.configure("json", level="warning")  # the in-process build logs no decision lines
    before = 0.3 if quick else BEFORE
    others = 2 if quick else OTHERS
    other_records = 6 if quick else OTHER_RECORDS
    cases = []
    with tempfile.TemporaryDirectory(prefix="fate-bridge-restart-") as tmp:
        for records in sizes:
            folder = Path(tmp) / str(records)
            folder.mkdir()
            cases.append(asyncio.run(run_case(folder, records, others, other_records, before)))
    report = {"mode": "quick" if quick else "full", "cases": cases, "targets": targets(cases), "cpus": os.cpu_count(),
              "python": sys.version.split()[0]}
    out.write_text(json.dumps(report, indent=2) + "\n")
    print_report(report)
    print(f"\nresults written to {out}")
    return 0 if all(case["lost"] == 0 and case["errors"] == 0 for case in cases) else 1

