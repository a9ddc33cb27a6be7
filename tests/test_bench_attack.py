"""The attack benchmark works end to end in smoke mode. It checks the harness and the
shape of its report, never the timings (those live in docs/security.md, "Under attack")."""

from __future__ import annotations

from .helpers import run_bench


def test_smoke_run_measures_the_table_alone_and_under_each_attack(tmp_path):
    result, report = run_bench("bench.attack", "--smoke", tmp_path / "attack.json", timeout=180)
    assert report["mode"] == "smoke"
    assert report["none"]["decisions"] > 0
    assert 0 < report["none"]["p50_ms"] <= report["none"]["p99_ms"] <= report["none"]["max_ms"]
    assert set(report["attacks"]) == {"bad_hello", "bad_hello_many", "reconnect", "pump", "connection",
                                      "connection_many"}
    for kind, row in report["attacks"].items():
        assert row["decisions"] > 0 and row["p99_ratio"] > 0, kind
        assert row["attacker"]["attempts"] > 0, kind
    attacks = report["attacks"]
    assert attacks["bad_hello_many"]["attacker"]["addresses"] == report["addresses"] == 20
    assert attacks["bad_hello"]["attacker"]["addresses"] == 1
    pump = attacks["pump"]["attacker"]
    # the pump is paced: past its world's burst it gets a refusal per token, not one per frame sent
    assert pump["sent"] > pump.get("decided", 0) + pump.get("rate_limited", 0)
    assert "table world" in result.stdout and "p99 x" in result.stdout and "goal: p99 within 2x" in result.stdout


def test_python_m_bench_attack_runs_only_the_floods_named(tmp_path):
    result, report = run_bench("bench", "--quick", tmp_path / "attack.json", timeout=120, extra=("--attack", "pump"))
    assert list(report["attacks"]) == ["pump"]
    assert "pump" in result.stdout
