"""The verify benchmark (issue 15) works end to end in smoke mode: it builds a signed trail,
verifies it as `audit verify` does and reports records per second. Timings are never checked here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_smoke_run_verifies_a_built_trail_and_reports_records_per_second(tmp_path):
    out = tmp_path / "verify.json"
    result = subprocess.run([sys.executable, "-m", "bench.verify", "--smoke", "--out", str(out)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["mode"] == "smoke" and report["passed"] is True
    assert report["records"] >= 150 and report["worlds"] >= 2
    assert report["records_per_s"] > 0 and report["us_per_record"] > 0
    assert "records/s" in result.stdout and "all passed" in result.stdout
