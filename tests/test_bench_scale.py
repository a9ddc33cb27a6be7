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
    rows = json.loads(out.read_text())["rows"]
    assert [(r["backend"], r["processes"]) for r in rows] == scale.SETUPS
    for row in rows:
        assert row["decisions"] > 0 and row["bridge_cpu_us_per_decision"] > 0, row
        assert f"{row['backend']} x{row['processes']}" in printed
    assert all(r["postgres_cpu_us_per_decision"] >= 0 for r in rows)
    assert "decisions/s" in printed and "vs SQLite" in printed
