"""The Autobahn|Testsuite fuzzing client against the bridge's WebSocket layer, through the harness
``tests/autobahn/run.py`` (what it runs and why: ``docs/conformance.md``).

Needs ``wstest`` (Python 2.7): ``$AUTOBAHN_WSTEST``, ``wstest`` on PATH, or
``/tmp/autobahn-venv/bin/wstest``; skipped when none is there. The harness runs as a child process
on 127.0.0.1 only, once for both tests (about 25 s), each wstest run bounded by
``RUN_TIMEOUT`` and the whole child by ``CHILD_TIMEOUT``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .autobahn import run as harness

HARNESS = Path(harness.__file__)
RUN_TIMEOUT = 120.0  # seconds for one wstest run (~12 s here for the ~250 selected cases)
CHILD_TIMEOUT = 2 * RUN_TIMEOUT + 60.0  # both runs, plus start-up and report parsing


@pytest.fixture(scope="module")
def summary(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    wstest = harness.find_wstest()
    if wstest is None:
        pytest.skip("wstest not installed: see docs/conformance.md")
    out = tmp_path_factory.mktemp("autobahn")
    summary_path = out / "summary.json"
    proc = subprocess.run(
        [sys.executable, str(HARNESS), "--run", "both", "--wstest", wstest,
         "--outdir", str(out / "reports"), "--json-out", str(summary_path),
         "--timeout", str(RUN_TIMEOUT)],
        capture_output=True, text=True, timeout=CHILD_TIMEOUT, stdin=subprocess.DEVNULL,
    )
    assert summary_path.exists(), (
        f"harness exited {proc.returncode} without a summary\n{proc.stdout}\n{proc.stderr}")
    print(proc.stdout)  # shown by pytest on failure: the counts and the non-OK cases
    return json.loads(summary_path.read_text())


def test_echo_run_has_no_failed_case(summary: dict[str, Any]) -> None:
    """With the bridge's serve settings and an echo handler, no case FAILED (by behavior or
    closing behavior) other than the websockets deviation 7.1.5 (close 1002 mid-fragment)."""
    echo = summary["echo"]
    assert echo["cases"] >= 200, echo["cases"]  # the selection ran, not a handful of cases
    assert echo["failed_unexpected"] == [], [
        n for n in echo["not_ok"] if n["case"] in echo["failed_unexpected"]]
    assert echo["behavior"]["UNIMPLEMENTED"] == 0  # compression cases are excluded


def test_bridge_run_always_closes_cleanly(summary: dict[str, Any]) -> None:
    """The real bridge handler: every case ends with a clean closing handshake, nothing times
    out, no handler raises or is left running, nothing is logged at error level."""
    bridge = summary["bridge"]
    assert bridge["cases"] == summary["echo"]["cases"]
    assert bridge["unclean"] == []
    assert bridge["timeouts"] == []
    assert bridge["handler_exceptions"] == []
    assert bridge["error_log_records"] == []
    assert bridge["handlers_started"] == bridge["handlers_returned"] >= bridge["cases"]
    assert bridge["passed"]
