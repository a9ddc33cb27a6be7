"""The scale-out bench's harness (``python -m bench --scale``, bench/scale.py): one tiny run of every
setup prints the table with real numbers. It checks the harness, never the timings (those are the
bench's, docs/deploy.md). Needs PostgreSQL like every PostgreSQL test (conftest.py)."""

from __future__ import annotations

import json

from bench import scale


def test_a_tiny_run_prints_every_setup_with_decisions_and_cpu(pg_server, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(scale, "PG_URL", pg_server)
    out = tmp_path / "scale.json"
    assert scale.main(conns=2, duration=1.0, out=out) == 0  # long enough for a CPU tick on a busy machine
    printed = capsys.readouterr().out
    written = json.loads(out.read_text())
    rows = written["rows"]
    assert [(r["backend"], r["processes"], r["conns"]) for r in rows] == [
        *((backend, processes, 2) for backend, processes in scale.SETUPS), ("postgresql", 4, scale.FILLED * 2)]
    for row in rows:
        assert row["decisions"] > 0 and row["bridge_cpu_us_per_decision"] > 0, row
        assert row["cpu_us_per_decision"] >= row["bridge_cpu_us_per_decision"] and row["decisions_per_batch"] >= 1, row
        assert f"{row['backend']} x{row['processes']}" in printed
    assert f"postgresql x4 C={scale.FILLED * 2}" in printed
    assert all(r["postgres_cpu_us_per_decision"] >= 0 for r in rows)
    assert "decisions/s" in printed and "vs SQLite" in printed
    # issue 28's two ratios, from this run's rows, printed under the table
    ratios = written["targets"]
    assert ratios == scale.targets(rows) and ratios["pg_vs_sqlite"] > 0 and ratios["cpu_4_vs_1"] > 0
    assert f"PostgreSQL x1 / SQLite x1 decisions/s = {ratios['pg_vs_sqlite']:.2f}" in printed
    assert f"x4 / x1 = {ratios['cpu_4_vs_1']:.2f}" in printed
    assert f"as many per process as x1's, x4 / x1 = {ratios['cpu_4_filled_vs_1']:.2f}" in printed


def test_the_targets_are_the_ratios_of_one_runs_rows():
    rows = [{"backend": "sqlite", "processes": 1, "conns": 10, "decisions_per_s": 4000.0, "cpu_us_per_decision": 250.0},
            {"backend": "postgresql", "processes": 1, "conns": 10, "decisions_per_s": 2400.0, "cpu_us_per_decision": 500.0},
            {"backend": "postgresql", "processes": 2, "conns": 10, "decisions_per_s": 2000.0, "cpu_us_per_decision": 550.0},
            {"backend": "postgresql", "processes": 4, "conns": 10, "decisions_per_s": 1800.0, "cpu_us_per_decision": 650.0},
            {"backend": "postgresql", "processes": 4, "conns": 40, "decisions_per_s": 3000.0, "cpu_us_per_decision": 550.0}]
    assert scale.targets(rows) == {"pg_vs_sqlite": 0.6, "cpu_4_vs_1": 1.3, "cpu_4_filled_vs_1": 1.1}


def test_postgres_cpu_counts_what_each_live_process_spent_and_never_goes_negative(monkeypatch):
    """A backend that exits during the run (another client's, on a shared server) would make a plain
    difference of sums negative (issue 26); each live process counts only its own increase."""
    before = {10: 5.0, 11: 2.0, 12: 7.0}            # 12 exits during the run
    monkeypatch.setattr(scale, "postgres_cpu", lambda: {10: 5.5, 11: 2.25, 13: 0.5})  # 13 is new
    assert scale.postgres_cpu_since(before) == 0.5 + 0.25 + 0.5
    monkeypatch.setattr(scale, "postgres_cpu", lambda: {10: 1.0})  # pid 10 reused by a younger process
    assert scale.postgres_cpu_since(before) == 0.0
