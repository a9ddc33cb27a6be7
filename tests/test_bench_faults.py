"""The storage-fault bench (``python -m bench --faults``, bench/faults.py; issue 35) works end to end
in quick mode: each fault made under a live bridge with a tiny load, a table row per fault,
nothing acknowledged lost, every trail verified, and the log lines each fault wrote. It checks the
harness and the counts, never the seconds (docs/deploy.md, *Storage faults*, has a run's). The
full disk needs root and the PostgreSQL faults a server: skipped saying so elsewhere (failed under
FATE_BRIDGE_REQUIRE_SERVICES=1), as tests/test_storage_faults.py is."""

from __future__ import annotations

import json

from bench import faults


def run_faults(names: list[str], tmp_path, capsys) -> tuple[int, dict[str, dict]]:
    """``python -m bench --faults NAMES --quick``: its exit code and its findings by fault, after
    checking the printed table has one row per fault, in order, each with every column."""
    out = tmp_path / "faults.json"
    code = faults.main(names, quick=True, out=out)
    printed = capsys.readouterr().out
    findings = json.loads(out.read_text())["findings"]
    assert [f["fault"] for f in findings] == names
    rows = [line for line in printed.splitlines() if line.startswith("| ") and not line.startswith("| fault |")]
    assert [row.split(" | ")[0][2:] for row in rows] == [f["title"] for f in findings]
    for row, finding in zip(rows, findings):
        cells = row.strip("| ").split(" | ")
        assert cells[1:] == [", ".join(f"{kind} {n}" for kind, n in finding["answers"].items()),
                             str(finding["acked"]), str(finding["lost"]), str(finding["extra_records"]),
                             f"{finding['back_s']:.2f}", str(len(finding["lines"])), str(finding["tracebacks"]),
                             "PASS" if finding["verify_ok"] else "FAIL"], row
    return code, {f["fault"]: f for f in findings}


def assert_nothing_lost(finding: dict) -> None:
    """Decisions were made and acknowledged around the fault; none of them lost, none decided
    twice (the trail holds exactly the acknowledged decisions); the trail verifies."""
    assert finding["skipped"] is None
    assert finding["acked"] > 0 and (finding["lost"], finding["extra_records"]) == (0, 0), finding
    assert finding["answers"].get("fate_resolved", 0) > 0, finding["answers"]
    assert finding["back_s"] >= 0
    assert finding["verify_ok"], finding["verify_output"]


def test_the_sqlite_faults_lose_nothing_and_say_so_in_a_line(tmp_path, capsys):
    names = ["hard-link", "symlink", "sigterm", "file-deleted", "invalid-settings"]
    code, found = run_faults(names, tmp_path, capsys)
    assert code == 0
    for name in names:
        assert_nothing_lost(found[name])
        assert found[name]["tracebacks"] == 0
    for name in ("hard-link", "symlink"):  # refused at once, in one line; the first bridge never stopped
        second = found[name]
        assert "the second serve exited 2 after" in second["note"] and "with 1 line: `fate-bridge: the database" \
            in second["note"] and "is already served by pid" in second["note"], second["note"]
        assert second["lines"] == [] and "unavailable" not in second["answers"]
    assert "exited 0 after" in found["sigterm"]["note"] and found["sigterm"]["lines"] == []
    deleted = found["file-deleted"]
    assert deleted["answers"]["unavailable"] > 0
    assert deleted["note"].startswith("refused, /healthz answering `503 storage unavailable: database_file_gone`"
                                      " after the deletion"), deleted["note"]
    assert deleted["lines"][0] == "storage_unavailable reason=database_file_gone", deleted["lines"]
    invalid = found["invalid-settings"]
    assert [line.split(" (")[0] for line in invalid["lines"]] == [
        f"world '{faults.BAD_WORLD}' has invalid stored settings"]
    assert "hello answered unauthorized, closed 4001" in invalid["note"] and "`audit repair` (exit 0" in invalid["note"]


def test_a_full_disk_is_refused_and_loses_nothing(tmp_path, capsys, tmpfs_mountable):
    """One outage, one pair of lines: its start and its end. The probe may commit where a batch
    cannot yet (space the log file holds already); a batch failing then continues the same outage
    (bridge/store/health.py CONFIRM_SECONDS), so the full disk never flaps into a second pair."""
    code, found = run_faults(["disk-full"], tmp_path, capsys)
    assert code == 0
    full = found["disk-full"]
    assert_nothing_lost(full)
    assert full["answers"]["unavailable"] > 0 and full["tracebacks"] == 0
    assert full["lines"] == ["storage_unavailable reason=disk_full", "storage_available reason=disk_full"], full["lines"]


def test_the_postgresql_faults_lose_nothing(pg_server, tmp_path, capsys, monkeypatch):
    """Through the bench's proxy, on a schema of its own: nothing lost, no traceback, and the
    outage's start and end logged once each (the cluster's LISTEN/NOTIFY connections add a line
    each of their own, without a traceback: a lost LISTEN, a NOTIFY that failed)."""
    monkeypatch.setattr(faults, "PG_URL", pg_server)
    names = ["pg-sessions-cut", "pg-unreachable", "pg-failover"]
    code, found = run_faults(names, tmp_path, capsys)
    assert code == 0
    for name in names:
        assert_nothing_lost(found[name])
        assert found[name]["tracebacks"] == 0, found[name]["lines"]
    unreachable = found["pg-unreachable"]
    assert unreachable["answers"]["unavailable"] > 0
    assert unreachable["note"].startswith("refused, /healthz answering `503 storage unavailable: unreachable`")
    storage_lines = [line for line in unreachable["lines"] if line.startswith("storage_")]
    assert storage_lines == ["storage_unavailable reason=unreachable", "storage_available reason=unreachable"], unreachable["lines"]
    assert "unavailable" not in found["pg-failover"]["answers"] and "internal" not in found["pg-failover"]["answers"]
    assert "acknowledged requests again" in found["pg-failover"]["note"]
