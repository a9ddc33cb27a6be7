"""The verify benchmark (issue 15) works end to end in smoke mode: it builds a signed trail,
verifies it as `audit verify` does and reports records per second. Timings are never checked here."""

from __future__ import annotations

from .helpers import run_bench


def test_smoke_run_verifies_a_built_trail_and_reports_records_per_second(tmp_path):
    result, report = run_bench("bench.verify", "--smoke", tmp_path / "verify.json", timeout=120)
    assert report["mode"] == "smoke" and report["passed"] is True
    assert report["records"] >= 150 and report["worlds"] >= 2
    assert report["records_per_s"] > 0 and report["us_per_record"] > 0
    assert "records/s" in result.stdout and "all passed" in result.stdout
