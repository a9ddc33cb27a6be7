"""The benchmark harness (issue 8) works end to end in smoke mode. It checks the harness and the
shape of its report, never the timings (those live in docs/performance.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_smoke_run_measures_both_servers_idle_connections_and_the_store(tmp_path):
    out = tmp_path / "bench.json"
    result = subprocess.run([sys.executable, "-m", "bench", "--smoke", "--out", str(out)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["mode"] == "smoke"
    assert [row["conns"] for row in report["by_conns"]] == [1, 2]
    for row in report["by_conns"]:
        for server in ("echo", "bridge"):
            measured = row[server]
            assert measured["round_trips"] > 0 and measured["round_trips_per_s"] > 0
            assert 0 < measured["p50_us"] <= measured["p99_us"] <= measured["max_us"]
            assert measured["server_cpu_us_per_msg"] >= 0
        assert row["throughput_ratio"] > 0 and row["p99_ratio"] > 0
    assert report["idle"]["connections"] == 20 and report["idle"]["errors"] == 0
    assert report["store"]["decisions"] == 200 and report["store"]["decisions_per_s"] > 0
    assert "bridge/echo" in result.stdout and "idle: 20 authenticated connections" in result.stdout
