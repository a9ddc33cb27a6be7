"""``python -m bench.verify``: how fast ``fate-bridge audit verify`` checks a trail.

Builds a trail in a temporary SQLite file through the real session and store, signed as
``serve`` signs it: the four example sessions replayed into many worlds (every ruleset) and one
long SoHL world (a fresh actor per test, each fated once), about ``--records`` records in all.
Then verifies it as the CLI does (read-only connection, every check: chain, heads, re-derivation,
state derived from the chain) and prints records per second, CPU microseconds per record and the
ratio to the target (100 us per record: a million records in under two minutes). CPU time of
this process is measured, not wall time: the machine is shared. ``--smoke`` makes it tiny (the
test suite checks the harness, never the timing).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

import structlog

from bridge import logs
from bridge.config import load_key, load_signing_key
from bridge.dice import ScriptedDice
from bridge.session import Session
from bridge.store import SQLiteStore
from bridge.store.audit_rows import verify_database
from bridge.store.sqlite_file import connect_readonly as open_readonly

ROOT = Path(__file__).resolve().parent.parent
TARGET_US_PER_RECORD = 100.0  # 1M records in about 101 s


def _lines() -> list[dict]:
    return [json.loads(line) for path in sorted((ROOT / "examples").glob("*-session.jsonl"))
            for line in path.read_text().splitlines()]


async def build(db: Path, records: int, folder: Path) -> None:
    """About ``records`` audit records in ``db``: half from the examples (one world per replay),
    half in one SoHL world."""
    from tests.sohl_messages import actor, fate_spend, frame, rolled, sohl_test

    store = await SQLiteStore.open(db, audit_key=load_key(folder / "audit.key", create=True),
                                   signing_key=load_signing_key(folder / "receipt.key", create=True))
    lines = _lines()
    written = 0
    n = 0
    while written < records // 2:
        world = f"example-{n}"
        await store.add_world(world, None)
        session = Session(store, ScriptedDice([]), trusted=True, default_world=world)
        for message in lines:
            await session.receive(json.dumps({k: v for k, v in message.items() if k != "dice"}).encode(),
                                  ScriptedDice(message.get("dice", [])))
        written += len(lines)
        n += 1
    await store.add_world("long", None)
    session = Session(store, ScriptedDice([]), trusted=True, default_world="long")
    for n in range((records - written) // 2):
        who = actor(actor_id=f"actor{n:011d}")
        await session.receive(frame(rolled(f"r{n}", f"m{n}", actor_part=who, test=sohl_test(roll=88))))
        await session.receive(frame(fate_spend(f"s{n}", f"m{n}")), ScriptedDice([(34, 80, 90)[n % 3]]))
    await store.close()


def measure(db: Path, folder: Path) -> dict:
    """Verify ``db`` as ``audit verify`` does; the CPU time it took and what it found."""
    conn = open_readonly(db)
    signing_key = load_signing_key(folder / "receipt.key", create=False)
    assert signing_key is not None  # build() made it
    public = signing_key.public_key()
    started_cpu, started = time.process_time(), time.perf_counter()
    reports = verify_database(conn, None, load_key(folder / "audit.key", create=False), public)
    cpu, wall = time.process_time() - started_cpu, time.perf_counter() - started
    conn.close()
    count = sum(r.records for r in reports)
    return {"records": count, "worlds": len(reports), "passed": all(r.ok for r in reports),
            "cpu_s": cpu, "wall_s": wall, "records_per_s": count / cpu,
            "us_per_record": cpu / count * 1e6, "target_ratio": TARGET_US_PER_RECORD / (cpu / count * 1e6)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.verify", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20000, help="records to build (default 20000)")
    parser.add_argument("--smoke", action="store_true", help="a tiny run (checks the harness only)")
    parser.add_argument("--out", type=Path, help="also write the result as JSON here")
    args = parser.parse_args(argv)
    logs.configure("console", level="warning")
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    records = 200 if args.smoke else args.records
    with tempfile.TemporaryDirectory(prefix="fate-bridge-bench-verify-") as tmp:
        folder = Path(tmp)
        db = folder / "bridge.sqlite3"
        asyncio.run(build(db, records, folder))
        result = measure(db, folder)
    result["mode"] = "smoke" if args.smoke else "full"
    print(f"audit verify: {result['records']} records in {result['worlds']} worlds, "
          f"{'all passed' if result['passed'] else 'SOME FAILED'}")
    print(f"  {result['records_per_s']:,.0f} records/s, {result['us_per_record']:.0f} us CPU per record "
          f"({result['wall_s']:.2f} s wall); target {TARGET_US_PER_RECORD:.0f} us/record: "
          f"x{result['target_ratio']:.2f} of it")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
