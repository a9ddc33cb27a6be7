"""``python -m bench --scale``: decisions/s and CPU per decision for 1, 2 and 4 bridge processes on
one PostgreSQL database, next to one process on SQLite, from one run.

Each setup gets a fresh database (a SQLite file in a temporary folder; a PostgreSQL schema of its
own on ``$FATE_BRIDGE_BENCH_PG``, default ``postgresql://postgres@127.0.0.1:5432/test``, dropped
after), ``--conns`` worlds spread evenly over its processes, and one load client process
(``bench.load``) per bridge process driving that process's worlds for ``--duration`` seconds.
Decisions/s is every client's round trips over the run; CPU per decision is the bridge processes'
own CPU time (from /proc, bench/clients.py cpu_seconds) over the same time, divided by the decisions. PostgreSQL's
own CPU is printed beside it (the server's backends are other processes: ``pg_stat_activity``
cannot tell their CPU, so it is read from /proc for every ``postgres`` process of this machine,
when visible; it includes whatever else the server does meanwhile, so run it on a quiet server). On a machine with fewer cores than processes + clients the extra processes only
share the same cores: the table prints the cores next to the numbers, and the decisions per
group-commit batch (each process's ``/metrics``): the same connections spread over more
processes make smaller batches.

The scale-out targets are printed under the table as ratios within the run: one PostgreSQL
process's decisions/s over one SQLite process's (target >= 0.6 at the default 10 connections),
and the CPU per decision, bridge + PostgreSQL, of 4 processes over 1 (target <= 1.3). A last row,
4 processes with 4x the connections (as many per process as the single process has), tells what
of that ratio is the batches' size: printed beside it as the same ratio at equal connections per
process.

Also the process-level helpers the cluster test uses (``tests/test_cluster.py``): start N
bridges on one database, register worlds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

from bridge.session import hash_token, new_token
from bridge.store import open_store

from .clients import LOAD_LIMITS as BENCH_LIMITS, cpu_seconds, go, release_clients, start_clients
from .crash import free_port, start_bridge
from .load import percentile

PG_URL = os.environ.get("FATE_BRIDGE_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/test")
SETUPS = [("sqlite", 1), ("postgresql", 1), ("postgresql", 2), ("postgresql", 4)]
# the last row: 4 processes with as many connections each as one process has (FILLED x --conns)
FILLED = 4
CONNS = 10  # connections (one world each) by default: the targets are set at C=10
# The scale-out targets: PostgreSQL x1 / SQLite x1 decisions/s, and CPU per decision x4 / x1
PG_VS_SQLITE_TARGET, CPU_4_VS_1_TARGET = 0.6, 1.3


def postgres_cpu() -> dict[int, float]:
    """CPU seconds of each ``postgres`` process visible in /proc (the database's side), by pid."""
    by_pid = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "postgres":
                    by_pid[int(entry.name)] = cpu_seconds(int(entry.name))  # gone meanwhile: OSError
            except OSError:
                continue
    return by_pid


def postgres_cpu_since(before: dict[int, float]) -> float:
    """CPU seconds the ``postgres`` processes spent since ``before`` (``postgres_cpu()``), never negative:
    each process alive now counts what it spent since then (all of it if it is new); a backend that
    exited meanwhile (another client's, on a shared server) takes its CPU away from neither side."""
    return sum(max(0.0, cpu - before.get(pid, 0.0)) for pid, cpu in postgres_cpu().items())


def schema_url(base: str, schema: str) -> str:
    """``base`` with ``search_path`` set to ``schema``."""
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options={quote(f'-csearch_path={schema}')}"


class PgSchema:
    """A fresh schema on ``base`` (created on enter, dropped with its tables on exit), named
    ``prefix`` and a random suffix (other runs on the same database keep to theirs); ``url``
    names it."""

    def __init__(self, base: str | None = None, prefix: str = "fb_bench") -> None:
        self.base, self.name = base or PG_URL, f"{prefix}_{secrets.token_hex(5)}"
        self.url = schema_url(self.base, self.name)

    def __enter__(self) -> PgSchema:
        import psycopg

        with psycopg.connect(self.base, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {self.name}")
        return self

    def __exit__(self, *exc: object) -> None:
        import psycopg

        with psycopg.connect(self.base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {self.name} CASCADE")


async def register_worlds(db: str, count: int, prefix: str = "bench") -> list[dict]:
    """Register ``count`` worlds in ``db``; returns ``[{world_id, token}]``."""
    store = await open_store(db)
    worlds = []
    try:
        for i in range(count):
            token = new_token()
            await store.add_world(f"{prefix}-{i:05d}", hash_token(token))
            worlds.append({"world_id": f"{prefix}-{i:05d}", "token": token})
    finally:
        await store.close()
    return worlds


# every load connection comes from 127.0.0.1, as from a proxy: the bench's raised limits, and the
# hellos of an address not yet known taken all at once too (many processes' clients start together)
LOAD_LIMITS = (*BENCH_LIMITS, "--free-failed-hellos", "100000")


def start_bridges(db: str, key: Path, count: int, *options: str) -> list[tuple[subprocess.Popen, int]]:
    """``count`` ``fate-bridge serve`` processes on ``db`` (with ``options``), each on a free
    port of its own and answering /healthz; returns (process, port) pairs."""
    started: list[tuple[subprocess.Popen, int]] = []
    try:
        for _ in range(count):
            port = free_port()
            started.append((start_bridge(db, key, port, *options), port))
    except BaseException:
        stop_bridges(started)
        raise
    return started


def stop_bridges(started: list[tuple[subprocess.Popen, int]]) -> None:
    """Stop every process (SIGTERM, then SIGKILL after 20 s)."""
    for process, _ in started:
        if process.poll() is None:
            process.terminate()
    for process, _ in started:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def batches(port: int) -> tuple[float, float]:
    """The decisions and the batches a bridge on ``port`` has written so far (its ``/metrics``:
    ``fate_bridge_batch_decisions`` sum and count)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    found = dict(line.split() for line in text.splitlines()
                 if line.startswith(("fate_bridge_batch_decisions_sum ", "fate_bridge_batch_decisions_count ")))
    return float(found["fate_bridge_batch_decisions_sum"]), float(found["fate_bridge_batch_decisions_count"])


def run_setup(backend: str, processes: int, conns: int, duration: float, tmp: Path) -> dict:
    """One row of the table: ``processes`` bridges on a fresh ``backend`` database, ``conns``
    connections (one world each) spread over them."""
    key = tmp / "audit.key"
    if backend == "sqlite":
        return _measure(str(tmp / f"scale-{secrets.token_hex(3)}.sqlite3"), key, processes, conns, duration, tmp)
    with PgSchema() as schema:
        return _measure(schema.url, key, processes, conns, duration, tmp)


def _measure(db: str, key: Path, processes: int, conns: int, duration: float, tmp: Path) -> dict:
    worlds = asyncio.run(register_worlds(db, conns))
    worlds_file = tmp / f"worlds-{secrets.token_hex(3)}.json"
    worlds_file.write_text(json.dumps(worlds))
    bridges = start_bridges(db, key, processes, *LOAD_LIMITS)
    try:
        clients = start_clients([f"ws://127.0.0.1:{port}" for _, port in bridges], worlds_file, conns,
                                len(bridges), duration, "s")
        batched = [batches(port) for _, port in bridges]
        cpu_before = sum(cpu_seconds(p.pid) for p, _ in bridges)
        pg_before, began = postgres_cpu(), time.perf_counter()
        go(clients)
        results = release_clients(clients, worlds_file, duration)
        wall = time.perf_counter() - began
        cpu = sum(cpu_seconds(p.pid) for p, _ in bridges) - cpu_before
        pg_cpu = postgres_cpu_since(pg_before)
        batched = [(s1 - s0, c1 - c0) for (s0, c0), (s1, c1) in zip(batched, (batches(port) for _, port in bridges))]
    finally:
        stop_bridges(bridges)
    latencies = sorted(v for r in results for v in r["latencies_us"])
    decisions = len(latencies)
    seconds = max(r["seconds"] for r in results)
    return {"decisions": decisions, "decisions_per_s": decisions / seconds,
            "bridge_cpu_us_per_decision": cpu * 1e6 / max(1, decisions),
            "postgres_cpu_us_per_decision": pg_cpu * 1e6 / max(1, decisions),
            "cpu_us_per_decision": (cpu + pg_cpu) * 1e6 / max(1, decisions),
            "decisions_per_batch": sum(d for d, _ in batched) / max(1, sum(b for _, b in batched)),
            "bridge_cores": cpu / wall, "p50_us": percentile(latencies, 0.5), "p99_us": percentile(latencies, 0.99)}


def targets(rows: list[dict]) -> dict[str, float]:
    """The two target ratios from one run's ``rows`` (every setup of :data:`SETUPS`): one
    PostgreSQL process's decisions/s over one SQLite process's, and the CPU per decision (bridge +
    PostgreSQL) of 4 PostgreSQL processes over 1's."""
    by_setup = {(row["backend"], row["processes"], row["conns"]): row for row in rows}
    conns = min(row["conns"] for row in rows)
    one, four = by_setup["postgresql", 1, conns], by_setup["postgresql", 4, conns]
    ratios = {"pg_vs_sqlite": one["decisions_per_s"] / by_setup["sqlite", 1, conns]["decisions_per_s"],
              "cpu_4_vs_1": four["cpu_us_per_decision"] / one["cpu_us_per_decision"]}
    if (filled := by_setup.get(("postgresql", 4, FILLED * conns))) is not None:
        ratios["cpu_4_filled_vs_1"] = filled["cpu_us_per_decision"] / one["cpu_us_per_decision"]
    return ratios


def main(conns: int = CONNS, duration: float = 5.0, out: Path | None = None) -> int:
    """Run every setup of :data:`SETUPS` and print the table and the target ratios (and write
    JSON to ``out``)."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="fate-bridge-scale-") as tmp:
        for backend, processes, setup_conns in [*((b, p, conns) for b, p in SETUPS), ("postgresql", 4, FILLED * conns)]:
            print(f"{backend} x{processes}, {setup_conns} connections ...", file=sys.stderr)
            rows.append({"backend": backend, "processes": processes, "conns": setup_conns,
                         **run_setup(backend, processes, setup_conns, duration, Path(tmp))})
    base = rows[0]["decisions_per_s"]
    print(f"\nScale-out: {conns} connections, one world each, {duration:g} s per setup, "
          f"{os.cpu_count()} cores on this machine")
    print(f"{'setup':<22}{'decisions/s':>12}{'vs SQLite':>10}{'bridge CPU us/dec':>19}"
          f"{'PG CPU us/dec':>15}{'both us/dec':>13}{'dec/batch':>11}{'bridge cores':>13}{'p50 ms':>8}{'p99 ms':>8}")
    for row in rows:
        setup = f"{row['backend']} x{row['processes']}" + (f" C={row['conns']}" if row["conns"] != conns else "")
        print(f"{setup:<22}{row['decisions_per_s']:>12.0f}{row['decisions_per_s'] / base:>10.2f}"
              f"{row['bridge_cpu_us_per_decision']:>19.0f}{row['postgres_cpu_us_per_decision']:>15.0f}"
              f"{row['cpu_us_per_decision']:>13.0f}{row['decisions_per_batch']:>11.1f}"
              f"{row['bridge_cores']:>13.2f}{row['p50_us'] / 1000:>8.1f}{row['p99_us'] / 1000:>8.1f}")
    ratios = targets(rows)
    print(f"\nTargets, within this run: PostgreSQL x1 / SQLite x1 decisions/s = {ratios['pg_vs_sqlite']:.2f} "
          f"(target >= {PG_VS_SQLITE_TARGET}); CPU per decision, bridge + PostgreSQL, x4 / x1 = "
          f"{ratios['cpu_4_vs_1']:.2f} (target <= {CPU_4_VS_1_TARGET})")
    print(f"Beside it: with {FILLED * conns} connections, as many per process as x1's, x4 / x1 = "
          f"{ratios['cpu_4_filled_vs_1']:.2f}: the rest of the ratio is the smaller batches of fewer "
          f"connections per process")
    if out is not None:
        out.write_text(json.dumps({"conns": conns, "duration_s": duration, "cpus": os.cpu_count(),
                                   "rows": rows, "targets": ratios}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conns", type=int, default=CONNS)
    parser.add_argument("--duration", type=float, default=5.0)
    parsed = parser.parse_args()
    raise SystemExit(main(parsed.conns, parsed.duration))
