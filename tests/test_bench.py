"""The benchmark harness (issues 8, 17) works end to end in quick mode. It checks the harness and
the shape of its report (every server, every column, every target), never the timings: those
live in docs/performance.md."""

from __future__ import annotations

import asyncio

from .helpers import run_bench


SERVERS = ("echo", "durable", "bridge")
COLUMNS = ("rt/s", "p50 ms", "p99 ms", "max ms", "cpu µs/rt", "client µs/rt", "cores", "DB B/decision")


def test_quick_run_measures_echo_durable_and_bridge_and_prints_the_targets(tmp_path):
    result, report = run_bench("bench", "--quick", tmp_path / "bench.json", timeout=180)
    assert report["mode"] == "quick"
    assert [row["conns"] for row in report["by_conns"]] == [1, 10]
    for row in report["by_conns"]:
        for server in SERVERS:
            measured = row[server]
            assert measured["round_trips"] > 0 and measured["round_trips_per_s"] > 0
            assert 0 < measured["p50_us"] <= measured["p99_us"] <= measured["max_us"]
            assert measured["server_cpu_us_per_msg"] > 0 and measured["client_cpu_us_per_msg"] > 0
            assert measured["server_cores"] > 0
        assert row["echo"]["db_bytes_per_decision"] is None  # echo stores nothing
        # Both durable servers store at least the frame of every decision (a test_rolled is ~450 B).
        assert row["durable"]["db_bytes_per_decision"] > 100
        assert row["bridge"]["db_bytes_per_decision"] > 100

    header = next(line for line in result.stdout.splitlines() if line.lstrip().startswith("C "))
    assert all(column in header for column in COLUMNS), header
    table = [line.split() for line in result.stdout.splitlines() if line.split()[:1] in (["1"], ["10"])]
    assert [(cells[0], cells[1]) for cells in table] == [(c, s) for c in ("1", "10") for s in SERVERS]
    assert all(len(cells) == 2 + len(COLUMNS) for cells in table)
    assert "bridge/durable: throughput" in result.stdout and "bridge/echo: throughput" in result.stdout

    # Where the bytes go: the durable server's one table, the bridge's audit trail and state among
    # its tables; the reply is kept once, in the audit record, so no events row is written (issue 17).
    assert set(report["db_tables"]["durable"]) == {"decisions"}
    # The bridge's rows reach audit_tail / records_tail first and move to audit / records when a fold
    # runs (schema.fold_tail), which this short run may or may not have reached when the bytes are
    # counted: the trail and the state are in one table of each pair either way (issue 26).
    bridge_tables = set(report["db_tables"]["bridge"])
    assert bridge_tables & {"audit", "audit_tail"} and bridge_tables & {"records", "records_tail"}, bridge_tables
    # no events row: the table may still be listed, its one empty page over the few decisions of a
    # short run on a busy machine (bytes_by_table lists what takes 10 B or more per decision)
    assert report["db_tables"]["bridge"].get("events", {"payload": 0})["payload"] == 0
    assert "bridge database, bytes per decision by table or index" in result.stdout

    names = [t["target"] for t in report["targets"]]
    assert len(names) == 5
    for target in report["targets"]:
        assert target["ratio"] > 0 and target["met"] in (True, False)
        assert f"{'met' if target['met'] else 'NOT met'}  {target['target']}: " in result.stdout
    check = report["client_check"]
    assert check["conns"] == 10 and check["procs"] == 2 and check["one_client_rt_per_s"] > 0
    assert "load client check: echo at C=10" in result.stdout
    assert report["idle"]["connections"] == 20 and report["idle"]["errors"] == 0
    assert report["store"]["decisions"] == 200 and report["store"]["decisions_per_s"] > 0


def test_parts_prints_each_part_switched_off_and_the_timed_functions():
    """``python -m bench.parts`` (docs/performance.md, where the time goes): a run with
    everything on, one without each part, and the timed functions of the path."""
    import re
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "bench.parts", "--conns", "2", "--decisions", "40", "--parts"],
                            capture_output=True, text=True, timeout=120, check=True)
    runs = dict(re.findall(r"^  (everything on|without [a-z, ]+?) +([0-9.]+)", result.stdout, re.M))
    assert set(runs) == {"everything on", "without log", "without card", "without receipt",
                         "without metrics", "without card, log, metrics, receipt"}
    assert all(float(cpu) > 0 for cpu in runs.values())
    timed = result.stdout.split("inside the path")[1]
    assert "(core.rule)" in timed and "(SQLiteStore._flush_sync)" in timed


def test_memory_bench_prints_rss_a_world_and_the_reload_time_under_its_budget():
    """``python -m bench.memory`` (docs/performance.md, a ceiling on memory; issue 27): a small run
    holds only its budget of worlds and prints RSS a world and a reload's time."""
    from bench import memory

    figures = asyncio.run(memory.measure(worlds=6, decisions=2, budget=2, histories=[5]))
    assert figures["in_memory"] == 2 and figures["worlds"] == 6
    assert figures["rss_after_bytes"] > 0 and set(figures["reload_ms"]) == {5}
    assert figures["reload_ms"][5] > 0


def test_cpu_seconds_sees_less_than_a_clock_tick_of_work_and_threads_that_ended():
    """The benches' CPU reading (bench/clients.py) counts a few milliseconds of work, which
    /proc/PID/stat's 10 ms ticks would round to nothing: a short quick run on a busy machine
    still measures its servers' CPU (issue 26); a thread's work counts after the thread ended.
    CPU time is burnt (``time.thread_time``), not wall time waited."""
    import os
    import threading
    import time

    from bench.clients import cpu_seconds

    def burn(seconds: float) -> None:
        started = time.thread_time()
        while time.thread_time() - started < seconds:
            pass

    before = cpu_seconds(os.getpid())
    burn(0.003)
    thread = threading.Thread(target=burn, args=(0.003,))
    thread.start()
    thread.join()
    spent = cpu_seconds(os.getpid()) - before
    assert 0.006 <= spent < 1.0, spent


def test_restart_bench_counts_every_acknowledged_decision_and_prints_both_restarts(tmp_path):
    """``python -m bench --restart --quick`` (issue 27): tiny databases built in-process; for each,
    a bridge killed (-9) and one stopped cleanly, each with the big worlds' decisions in flight,
    then restarted. Checks the report's shape and its correctness counts (nothing acknowledged
    lost, nothing refused, the big worlds' first replies decisions), never its times."""
    import json
    import subprocess
    import sys

    out = tmp_path / "restart.json"
    result = subprocess.run([sys.executable, "-m", "bench", "--restart", "--quick", "--sizes", "40",
                             "--out", str(out)], capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["mode"] == "quick"
    cases = report["cases"]
    assert len(cases) == 1 and cases[0]["records"] >= 40  # (one size: the suite's time is short)
    for case in cases:
        assert case["others"] == 2 and case["acked"] > 0
        assert (case["lost"], case["errors"]) == (0, 0)
        for when in ("after_kill", "after_stop"):
            restarted = case[when]
            # each big world's forwarder always awaits a reply when the signal goes (one connection
            # each: a world has one forwarder), so each restart follows a stop with decisions in flight
            assert restarted["in_flight"]["big"] == 2
            assert restarted["first_reply_ok"] and restarted["exit_code"] == 0
            assert 0 < restarted["decision_s"] <= restarted["first_reply_s"] and restarted["second_s"] > 0
            assert restarted["before"]["samples"] > 0 and restarted["before"]["p99_us"] > 0
            assert restarted["while"]["samples"] >= 0
            assert restarted["rss_bytes"] > 0 and restarted["others_first_max_us"] > 0
    assert len(report["targets"]) == 2 * (len(cases) - 1) + len(cases)
    for target in report["targets"]:
        assert target["met"] in (True, False, None)
    lines = result.stdout.splitlines()
    assert [line.split()[:2] for line in lines if line.split()[1:2] in (["kill"], ["clean"])] == [
        [str(case["records"]), label] for label in ("kill", "clean") for case in cases]
    assert f"{cases[0]['records']} records: {cases[0]['acked']} acknowledged, 0 lost, 0 errors" in result.stdout
