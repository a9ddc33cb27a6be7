"""Where a decision's CPU goes, without the network: ``python -m bench.parts``.

Runs the decision path in this process (``Session`` + the SQLite store on a temporary file, with
an audit key and a receipt signing key, JSON log lines to a null stream), ``--conns`` flows at
once (one world each; each flow sends ``test_rolled``, then ``fate_spend``, then ``fate_choice``
when asked, as ``bench.load`` does), and prints CPU µs per decision:

- once with everything on, then once with each part switched off in turn (``log``: the decision's
  log line; ``card``: chat card rendering; ``receipt``: receipts and signed heads; ``metrics``:
  the ``/metrics`` counters, latency and batch histograms, :mod:`bridge.metrics`), so the
  difference is what the part costs;
- with ``--parts``, the time inside a few functions of the path (exclusive of the others
  listed), from timers wrapped around them: the rules and cards (``core.rule``), the batch
  write and COMMIT, the decision in memory, sealing the audit record, decoding the frame.

The load client's own work (making the frames) is counted too: compare runs of one invocation,
not absolute numbers. CPU is the process's (``time.process_time``); the machine may be shared.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from .load import ACTOR, TEST

if TYPE_CHECKING:
    from structlog.typing import EventDict, WrappedLogger

PARTS = ("log", "card", "receipt", "metrics")


def _frames(flow: int, n: int) -> tuple[bytes, bytes, bytes]:
    ids = f"{flow}-{n}"
    rolled = json.dumps({"type": "test_rolled", "v": 1, "event_id": f"r{ids}", "ruleset": "sohl",
                         "message_id": f"m{ids}", "actor": ACTOR, "test": TEST, "visibility": "public"})
    spend = json.dumps({"type": "fate_spend", "v": 1, "event_id": f"s{ids}", "message_id": f"m{ids}",
                        "point_id": "wellspring000001", "user_id": "benchPlayer00001"})
    choice = json.dumps({"type": "fate_choice", "v": 1, "event_id": f"c{ids}", "message_id": f"m{ids}",
                         "choice": "keep", "user_id": "benchPlayer00001"})
    return rolled.encode(), spend.encode(), choice.encode()


async def _flow(session, flow: int, rounds: int, first: int) -> int:
    decided = 0
    for n in range(first, first + rounds):
        rolled, spend, choice = _frames(flow, n)
        await session.receive(rolled)
        reply = await session.receive(spend)
        decided += 2
        if b'"outcome":"choice"' in reply.frames[0]:
            await session.receive(choice)
            decided += 1
    return decided


async def run(off: frozenset[str], conns: int, decisions: int) -> dict:
    """One run with the parts in ``off`` switched off: CPU µs and wall µs per decision."""
    import structlog

    from bridge.session import Session, hash_token  # first: bridge.cards alone is a circular import
    from bridge import cards, logs
    from bridge.dice import SecretDice
    from bridge.metrics import Metrics
    from bridge.store.sqlite import SQLiteStore

    logs.configure("json")
    if "log" in off:
        structlog.configure(processors=[_drop], cache_logger_on_first_use=True)
    rendering = cards._RENDERING.set("card" not in off)
    with tempfile.TemporaryDirectory() as tmp:
        signing = None if "receipt" in off else Ed25519PrivateKey.generate()
        store = await SQLiteStore.open(Path(tmp) / "parts.sqlite3", audit_key=secrets.token_bytes(32),
                                       signing_key=signing)
        metrics = None if "metrics" in off else Metrics(time.perf_counter)
        if metrics is not None:
            metrics.watch(store)
        sessions = []
        for flow in range(conns):
            token = secrets.token_urlsafe(16)
            await store.add_world(f"parts-{flow}", hash_token(token))
            session = Session(store, SecretDice(), metrics=metrics)
            await session.receive(json.dumps({"type": "hello", "v": 1, "world_id": f"parts-{flow}",
                                              "token": token}).encode())
            sessions.append(session)
        await asyncio.gather(*(_flow(s, i, 10, 0) for i, s in enumerate(sessions)))  # worlds loaded, warm
        rounds = max(1, decisions // (2 * conns))
        cpu, wall = time.process_time(), time.perf_counter()
        done = await asyncio.gather(*(_flow(s, i, rounds, 10) for i, s in enumerate(sessions)))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        await store.close()
    cards._RENDERING.reset(rendering)
    total = sum(done)
    return {"off": sorted(off), "decisions": total, "cpu_us": cpu / total * 1e6, "wall_us": wall / total * 1e6}


def _drop(_logger: WrappedLogger, _name: str, _event: EventDict) -> EventDict:
    import structlog

    raise structlog.DropEvent


@contextlib.contextmanager
def timed_parts() -> Iterator[collections.Counter[str]]:
    """Wrap the path's main functions with timers; yields seconds spent in each (exclusive of
    the other wrapped ones it calls), restored on exit."""
    from bridge import session
    from bridge.store import audit_rows, sqlite

    spent: collections.Counter[str] = collections.Counter()
    nested: list[float] = []
    targets: list[tuple[object, str, str]] = [
        (session.core, "rule", "rules and cards (core.rule)"),
        (sqlite.SQLiteStore, "_flush_sync", "batch write and COMMIT (SQLiteStore._flush_sync)"),
        (sqlite.SQLiteStore, "_decide_in_memory", "the decision in memory, its audit entry (rest)"),
        (audit_rows.AuditRows, "_seal", "sealing the audit record (AuditRows._seal)"),
        (session.registry, "decode_client", "decoding the frame (registry.decode_client)"),
        (session.Session, "_with_receipt", "the receipt on the reply (Session._with_receipt)"),
    ]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in targets]

    def wrap(fn: Callable, label: str) -> Callable:
        def timed(*args, **kwargs):
            began = time.perf_counter()
            nested.append(0.0)
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - began
                inner = nested.pop()
                spent[label] += elapsed - inner
                if nested:
                    nested[-1] += elapsed
        return timed

    for (owner, name, label), (_, _, fn) in zip(targets, saved):
        setattr(owner, name, wrap(fn, label))
    try:
        yield spent
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.parts``: the runs of the module docstring, printed; returns 0."""
    parser = argparse.ArgumentParser(prog="python -m bench.parts", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conns", type=int, default=10, help="flows at once (default 10)")
    parser.add_argument("--decisions", type=int, default=3000, help="decisions per run (default 3000)")
    parser.add_argument("--parts", action="store_true", help="also time the functions listed above")
    args = parser.parse_args(argv)
    sys.stderr.flush()
    real_stderr, sys.stderr = sys.stderr, open(os.devnull, "w")  # the log lines go nowhere
    try:
        runs = [asyncio.run(run(frozenset(), args.conns, args.decisions))]
        runs += [asyncio.run(run(frozenset({part}), args.conns, args.decisions)) for part in PARTS]
        runs.append(asyncio.run(run(frozenset(PARTS), args.conns, args.decisions)))
        timed = None
        if args.parts:
            with timed_parts() as spent:
                timed = asyncio.run(run(frozenset(), args.conns, args.decisions))
    finally:
        sys.stderr.close()
        sys.stderr = real_stderr
    base = runs[0]["cpu_us"]
    print(f"decision path without the network, {args.conns} flows at once, CPU µs per decision:")
    for r in runs:
        label = "everything on" if not r["off"] else "without " + ", ".join(r["off"])
        saved = "" if not r["off"] else f"  ({base - r['cpu_us']:+.1f} µs: what it costs)"
        print(f"  {label:<34} {r['cpu_us']:7.1f}{saved}")
    if timed is not None:
        print(f"inside the path (everything on, {timed['cpu_us']:.1f} µs per decision in that run):")
        for label, seconds in spent.most_common():
            print(f"  {seconds / timed['decisions'] * 1e6:7.1f} µs  {label}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
