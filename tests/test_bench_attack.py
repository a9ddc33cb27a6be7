"""The attack benchmark (issue 16) works end to end in smoke mode. It checks the harness and the
shape of its report, never the timings (those live in docs/security.md, "Under attack")."""

from __future__ import annotations

from .helpers import run_bench


def test_smoke_run_measures_the_table_alone_and_under_each_attack(tmp_path):
    result, report = run_bench("bench.attack", "--smoke", tmp_path / "attack.json", timeout=180)
    assert report["mode"] == "smoke"
    assert report["none"]["decisions"] > 0
    assert 0 < report["none"]["p50_ms"] <= report["none"]["p99_ms"] <= report["none"]["max_ms"]
    assert set(report["attacks"]) == {"bad_hello", "reconnect", "connection"}
    for kind, row in report["attacks"].items():
        assert row["decisions"] > 0 and row["p99_ratio"] > 0, kind
        assert row["attacker"]["attempts"] > 0, kind
    assert "table world" in result.stdout and "p99 x" in result.stdout
