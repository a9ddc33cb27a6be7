"""``python -m bench --restart``: what a restart costs a world with a long history and the worlds
beside it (issue 27), after ``kill -9`` with decisions in flight and after a clean stop.

For each size in ``--sizes`` (default 2,000, 30,000 and 100,000 audit records) a fresh SQLite
database is built in this process through the store (:func:`build`, with bench/build.py: the
keys ``serve`` then uses, many flows at once): one big world of that many records and :data:`OTHERS` small worlds of
:data:`OTHER_RECORDS` records each. Then, as separate processes (``fate-bridge serve``, one at a
time, on that file; load from this process, raw frames as ``bench.load`` sends them):

1. serve: the small worlds' forwarders decide at a steady pace (:data:`OTHER_INTERVAL` between
   a connection's decisions) for ``before`` seconds, the big world idle: their latency *before*.
   Then the big world's forwarder decides as fast as it is answered (one connection: a world has
   one forwarder, a newer one supersedes it), and once it has been answered for
   :data:`STOP_AFTER` seconds the bridge is killed (SIGKILL), decisions in flight in the big
   world and the others.
2. serve again: from the first ``/healthz`` answer (polled every 20 ms: "listening"), the small
   worlds' forwarders start again and one forwarder sends the big world a decision. Printed: the
   seconds from listening to its reply (and from sending it), and the small worlds' p99 over
   the decisions they sent meanwhile (*while* it loads; each connection's first decision after the
   restart is left out, printed apart: it loads that small world, whatever the big one does).
   Then the big world is loaded as in 1 and the bridge is stopped cleanly (SIGTERM) with
   decisions in flight.
3. serve again, measured as in 2 (after the clean stop), then stopped.

Correctness is counted, never assumed: every decision acknowledged in the rounds must be in the
file's audit trail at the end (``lost``), and no reply may be an ``error``. The targets of issue
27 (after kill -9: the big world's first reply within 1 s of listening at 30,000 and 100,000
records and within 3x the 2,000-record world's; the others' p99 while it loads within 2x of
before) are printed as ``met`` / ``NOT met`` with their ratios, from one run. The machine may be
shared: compare the ratios, not the absolute figures, and rerun before concluding.

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
OTHERS = 8  # small worlds deciding beside the big one
OTHER_RECORDS = 30  # records of each small world when built
OTHER_INTERVAL = 0.01  # seconds between a small world's decisions: 100/s each, far from saturating the bridge
BUILD_FLOWS = 32  # in-process sessions building a world at once (group commit: ~4,000 records/s)
STOP_AFTER = 0.5  # seconds of the big world's answered load before it is killed / stopped
BEFORE = 2.0  # seconds of the small worlds' load measured before
BIG = "restart-big"
ERROR = b'"type":"error"'
TARGET_SECONDS = 1.0
TARGET_VS_REFERENCE = 3.0
TARGET_P99_RATIO = 2.0


@dataclass
class Built:
    """A database :func:`build` made: the file, its audit key, every world's token, the big
    world's records."""

    db: Path
    key: Path
    tokens: dict[str, str]
    records: int


async def build(folder: Path, records: int, others: int, other_records: int) -> Built:
    """A database in ``folder`` holding the big world :data:`BIG` with about ``records`` audit
    records (the exact count is in the result) and ``others`` small worlds of ``other_records``,
    written in this process through the store with the keys ``serve`` will use (the audit key,
    and the signing key beside it), closed cleanly."""
    db, key = folder / "bridge.sqlite3", folder / "audit.key"
    store = await open_for_serve(db, key)
    tokens: dict[str, str] = {}
    try:
        for world, count in [(BIG, records)] + [(f"other-{i}", other_records) for i in range(others)]:
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
        return  # killed or stopped under it
    conn.close()


def _start(built: Built, port: int) -> subprocess.Popen:
    return start_bridge(built.db, built.key, port, *LOAD_LIMITS)


def _others(built: Built) -> list[str]:
    return [world for world in built.tokens if world != BIG]


async def _stop_under_load(process: subprocess.Popen, url: str, built: Built, stop: asyncio.Event, load: Load,
                           tasks: list[asyncio.Task], how: signal.Signals, tag: str) -> dict:
    """Put the big world's forwarder to deciding as fast as answered beside the running ``tasks``;
    once the big world has answered for :data:`STOP_AFTER` s, send ``how`` (SIGKILL or SIGTERM)
    and wait for the process to end. Returns the requests in flight when it was sent."""
    answered = len([s for s in load.samples if s.world == BIG])
    tasks.append(asyncio.create_task(_drive(url, BIG, built.tokens[BIG], f"{tag}big", 0.0, stop, load)))
    while len([s for s in load.samples if s.world == BIG]) == answered:
        if process.poll() is not None:
            raise RuntimeError(f"the bridge exited with {process.returncode} under load")
        await asyncio.sleep(0.01)
    await asyncio.sleep(STOP_AFTER)
    in_flight = {"big": load.in_flight.get(BIG, 0),
                 "others": sum(n for world, n in load.in_flight.items() if world != BIG)}
    process.send_signal(how)
    await asyncio.to_thread(process.wait, 60)
    stop.set()
    await asyncio.gather(*tasks)
    return in_flight


async def _before(built: Built, seconds: float, tag: str) -> tuple[dict, dict, Load]:
    """Serve 1: the small worlds' latency before (the big world idle), then a kill -9 with the big
    world under load. Returns the before figures, the requests in flight at the kill and the load."""
    port = free_port()
    url = f"ws://127.0.0.1:{port}"
    process = await asyncio.to_thread(_start, built, port)
    load, stop = Load(), asyncio.Event()
    try:
        tasks = [asyncio.create_task(_drive(url, w, built.tokens[w], f"{tag}{w}", OTHER_INTERVAL, stop, load))
                 for w in _others(built)]
        began = time.perf_counter()
        await asyncio.sleep(seconds)
        ended = time.perf_counter()
        measured = sorted(s.latency_us for s in load.samples if not s.first and began <= s.sent < ended)
        before = {"p99_us": percentile(measured, 0.99), "p50_us": percentile(measured, 0.50), "samples": len(measured)}
        in_flight = await _stop_under_load(process, url, built, stop, load, tasks, signal.SIGKILL, tag)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return before, in_flight, load


async def _restart(built: Built, tag: str, then: signal.Signals | None) -> tuple[dict, Load]:
    """Serve again: the big world's first decision sent at listening, the small worlds deciding
    meanwhile (see the module docstring); then, with ``then``, the big world under load and that
    signal sent (the in-flight counts in the result), else a clean stop with nothing running."""
    port = free_port()
    url = f"ws://127.0.0.1:{port}"
    process = await asyncio.to_thread(_start, built, port)
    listening = time.perf_counter()
    load, stop = Load(), asyncio.Event()
    try:
        tasks = [asyncio.create_task(_drive(url, w, built.tokens[w], f"{tag}{w}", OTHER_INTERVAL, stop, load))
                 for w in _others(built)]
        conn = await _connect(url, BIG, built.tokens[BIG])
        ids = (f"{tag}first".encode(),) * 2
        sent = time.perf_counter()
        reply = await conn.round_trip(client_frame(ROLLED % ids))
        answered = time.perf_counter()
        conn.close()
        load.acked.append((BIG, f"r{tag}first"))
        rss = rss_bytes(process.pid)
        during = [s for s in load.samples if listening <= s.sent < answered]
        measured = sorted(s.latency_us for s in during if not s.first)
        figures = {"first_reply_s": answered - listening, "decision_s": answered - sent,
                   "first_reply_ok": b'"type":"test_graded"' in reply,
                   "while_p99_us": percentile(measured, 0.99), "while_max_us": measured[-1] if measured else 0.0,
                   "while_samples": len(measured), "rss_bytes": rss}
        if then is None:
            stop.set()
            await asyncio.gather(*tasks)
            process.send_signal(signal.SIGTERM)
            await asyncio.to_thread(process.wait, 60)
        else:
            figures["stop_in_flight"] = await _stop_under_load(process, url, built, stop, load, tasks, then, tag)
        figures["exit_code"] = process.returncode
        # each small world's first decision after the restart loads it, beside the big world's load
        figures["others_first_max_us"] = max((s.latency_us for s in load.samples if s.first and s.world != BIG),
                                             default=0.0)
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
    print(f"building a world of {records} records and {others} small ones ...", file=sys.stderr)
    began = time.perf_counter()
    built = await build(folder, records, others, other_records)
    build_s = time.perf_counter() - began
    print(f"{built.records} records: serving, then kill -9 under load ...", file=sys.stderr)
    before, killed_in_flight, first = await _before(built, before_seconds, "a")
    print("restarting after kill -9 ...", file=sys.stderr)
    after_kill, second = await _restart(built, "b", signal.SIGTERM)
    after_kill["in_flight"] = killed_in_flight
    print("restarting after the clean stop ...", file=sys.stderr)
    after_stop, third = await _restart(built, "c", None)
    after_stop["in_flight"] = after_kill.pop("stop_in_flight")
    loads = (first, second, third)
    return {"records": built.records, "build_s": build_s, "others": others, "other_records": other_records,
            "before": before, "after_kill": after_kill, "after_stop": after_stop,
            "acked": sum(len(load.acked) for load in loads),
            "errors": sum(s.error for load in loads for s in load.samples) + sum(
                not r["first_reply_ok"] for r in (after_kill, after_stop)),
            "lost": _lost(built.db, [pair for load in loads for pair in load.acked])}


def targets(cases: list[dict]) -> list[dict]:
    """Issue 27's restart targets, from the kill -9 figures: each with its value, limit, ratio
    (value / limit) and whether it is met. The first case is the reference world (2,000 records)."""
    reference = cases[0]["after_kill"]["first_reply_s"]
    found = []
    for case in cases[1:]:
        kill = case["after_kill"]
        n = case["records"]
        found.append((f"first reply after kill -9 within {TARGET_SECONDS:g} s of listening ({n} records)",
                      kill["first_reply_s"], TARGET_SECONDS))
        found.append((f"first reply after kill -9 within {TARGET_VS_REFERENCE:g}x the {cases[0]['records']}-record "
                      f"world's ({n} records)", kill["first_reply_s"] / max(reference, 1e-9), TARGET_VS_REFERENCE))
    for case in cases:
        found.append((f"others' p99 while the {case['records']}-record world loads within {TARGET_P99_RATIO:g}x "
                      "of before", _p99_ratio(case, "after_kill"), TARGET_P99_RATIO))
    return [{"target": name, "value": value, "limit": limit, "ratio": None if value is None else value / limit,
             "met": None if value is None else value <= limit} for name, value, limit in found]


def _p99_ratio(case: dict, when: str) -> float | None:
    """The others' p99 while the big world loaded over their p99 before; None when none of their
    decisions (but their first) was sent while it loaded."""
    if not case[when]["while_samples"]:
        return None
    return case[when]["while_p99_us"] / max(1.0, case["before"]["p99_us"])


def print_report(report: dict) -> None:
    """The table and the targets of :func:`main`'s report."""
    cases = report["cases"]
    print(f"\nrestart (issue 27): one big world and {cases[0]['others']} small ones deciding "
          f"{1 / OTHER_INTERVAL:.0f}/s each; ratios within this run ({report['cpus']} cores, maybe shared)")
    print(f"{'records':>8} {'after':>11} {'in flight':>9} {'first reply s':>13} {'vs ref':>6} {'decision s':>10} "
          f"{'others p99 ms':>13} {'while ms':>8} {'ratio':>5} {'max ms':>7} {'n':>6} {'own first ms':>12} "
          f"{'RSS MiB':>7}")
    for when, label in (("after_kill", "kill -9"), ("after_stop", "clean stop")):
        reference = cases[0][when]["first_reply_s"]
        for case in cases:
            r = case[when]
            flying = f"{r['in_flight']['big']}+{r['in_flight']['others']}"
            ratio = _p99_ratio(case, when)
            print(f"{case['records']:>8} {label:>11} {flying:>9} {r['first_reply_s']:>13.3f} "
                  f"{r['first_reply_s'] / max(reference, 1e-9):>6.1f} {r['decision_s']:>10.3f} "
                  f"{case['before']['p99_us'] / 1000:>13.1f} {r['while_p99_us'] / 1000:>8.1f} "
                  f"{'-' if ratio is None else f'{ratio:.1f}':>5} {r['while_max_us'] / 1000:>7.1f} "
                  f"{r['while_samples']:>6} {r['others_first_max_us'] / 1000:>12.1f} "
                  f"{r['rss_bytes'] / 2**20:>7.0f}")
    print("(in flight: the big world's requests + the others' awaiting a reply at the kill / stop; first reply: "
          "from the first /healthz answer to the big world's reply; decision: from sending it; others p99: before, "
          "then while it loads (and the slowest), over n decisions, -: none; own first: the slowest small world's own "
          "first decision after the restart, which loads it)")
    print("correctness: " + ", ".join(f"{case['records']} records: {case['acked']} acknowledged, {case['lost']} "
                                     f"lost, {case['errors']} errors" for case in cases))
    print("\ntargets (issue 27), after kill -9:")
    for t in report["targets"]:
        if t["met"] is None:
            print(f"  {'n/a':>7}  {t['target']}: none of the others' decisions was sent while it loaded")
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

