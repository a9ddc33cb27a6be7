"""Ctrl+C (issue 25): every command ends with one line, ``fate-bridge: interrupted``, and exit
code 130, never a traceback (bridge/__main__.py). Each test runs ``python -m bridge`` as a real
process and sends it SIGINT at a point the test knows it has reached: after a line it printed, or
while it waits on a named pipe nobody writes to or reads from (so it cannot finish first)."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys

import pytest

from bridge.store import sqlite_file as backup  # the SQLite backend's backup
from bridge.__main__ import INTERRUPTED

from .helpers import ROOT

EXAMPLE = ROOT / "examples" / "sohl-session.jsonl"
WAIT = 60  # seconds a process is given to end after SIGINT (it ends at once; a hang fails the test)


@pytest.fixture
def env(tmp_path):
    """The environment of a user whose keys and database live in ``tmp_path``."""
    return {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "FATE_BRIDGE_DB": str(tmp_path / "bridge.sqlite3")}


def bridge(env, *args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bridge", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **kwargs)


def interrupted(proc: subprocess.Popen) -> tuple[bytes, bytes]:
    """SIGINT to ``proc``; its stdout and stderr once it ended, after checking it ended as
    interrupted: exit 130 and one line on stderr."""
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=WAIT)
    assert (proc.returncode, err) == (INTERRUPTED, b"fate-bridge: interrupted\n"), err.decode()
    return out, err


def test_resolve_waiting_for_its_next_line_stops_at_the_first_ctrl_c(env, tmp_path):
    """``resolve`` blocked on stdin (a terminal, a pipe) stopped by one Ctrl+C, not two; what it
    had answered stays answered and its --db still verifies."""
    db = tmp_path / "resolve.sqlite3"
    proc = bridge(env, "resolve", "--db", str(db), stdin=subprocess.PIPE)
    proc.stdin.write(EXAMPLE.read_bytes().splitlines(keepends=True)[0])
    proc.stdin.flush()
    first = proc.stdout.readline()  # answered: now it waits for the next line, which never comes
    assert b'"settings_applied"' in first
    interrupted(proc)
    proc.stdin.close()
    verified = subprocess.run([sys.executable, "-m", "bridge", "audit", "verify", "--db", str(db)], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=WAIT)
    assert verified.returncode == 0 and "PASS offline: 1 records" in verified.stdout, verified.stdout


def test_audit_verify_stops_while_reading(env, tmp_path):
    """``audit verify FILE`` stopped while it reads: the file is a named pipe the test holds
    open and never writes to."""
    trail = tmp_path / "trail.json"
    os.mkfifo(trail)
    proc = bridge(env, "audit", "verify", str(trail))
    with open(trail, "wb"):  # returns once verify has opened it: it is reading now
        out, _ = interrupted(proc)
    assert out == b""


def test_audit_report_stops_while_drawing_or_writing(env, tmp_path):
    """``audit report`` stopped after its first line (the note on an empty world): it is drawing,
    or writing --out, a named pipe no one reads, so it cannot have finished."""
    registered = subprocess.run([sys.executable, "-m", "bridge", "world", "add", "my-world"], cwd=ROOT, env=env,
                                capture_output=True, timeout=WAIT)
    assert registered.returncode == 0, registered.stderr
    page = tmp_path / "report.html"
    os.mkfifo(page)
    proc = bridge(env, "audit", "report", "--world", "my-world", "--out", str(page))
    note = proc.stderr.readline()
    assert note.startswith(b"note: world 'my-world' has no audit records")
    interrupted(proc)


STOP_AS_CLI_LOADS = """
import os, signal, sys

class CtrlC:  # a module finder: Ctrl+C just as bridge.cli starts loading
    def find_spec(self, name, path, target=None):
        if name == "bridge.cli":
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, CtrlC())
sys.argv = ["fate-bridge", "--version"]
from bridge.__main__ import run
sys.exit(run())
"""


def test_ctrl_c_while_the_commands_load_is_one_line_too(env):
    """Ctrl+C in the first half second, while the command's modules are still imported: the same
    one line and exit code (the console script and ``python -m bridge`` both start at ``run``)."""
    proc = subprocess.Popen([sys.executable, "-c", STOP_AS_CLI_LOADS], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate(timeout=WAIT)
    assert (proc.returncode, err, out) == (INTERRUPTED, b"fate-bridge: interrupted\n", b"")


def test_a_backup_interrupted_while_copying_leaves_no_file(tmp_path, monkeypatch):
    """Ctrl+C while the pages are copied: neither PATH nor its ``.partial`` is left behind (a
    half-written copy under any name could be taken for a backup). The copy is the one sqlite3
    makes; the interrupt comes after its first pages are written."""
    db, dest = tmp_path / "bridge.sqlite3", tmp_path / "night.sqlite3"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (x BLOB)")
        conn.executemany("INSERT INTO t VALUES (?)", [(os.urandom(4000),) for _ in range(200)])
    conn.close()
    real_open = backup._open_ro

    class Source:
        """The read-only source, whose copy stops after some pages as a Ctrl+C would stop it."""

        def __init__(self, path):
            self.conn = real_open(path)

        def backup(self, target, **_):
            def after_step(status, remaining, total):
                raise KeyboardInterrupt

            self.conn.backup(target, pages=8, progress=after_step)

        def close(self):
            self.conn.close()

    monkeypatch.setattr(backup, "_open_ro", Source)
    with pytest.raises(KeyboardInterrupt):
        backup.backup(db, dest)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bridge.sqlite3"]


async def test_serve_still_shuts_down_gracefully_on_ctrl_c(tmp_path):
    """``serve`` keeps its own Ctrl+C: once it answers /healthz its handler is installed
    (``stop_on_signals`` runs before it listens), so SIGINT closes connections and the store and
    exits 0, logging ``shutting_down``, not ``interrupted``."""
    from .test_server import bridge_serving

    async with bridge_serving(tmp_path / "bridge.sqlite3", tmp_path / "serve.log") as serving:
        serving.proc.send_signal(signal.SIGINT)
        async with asyncio.timeout(WAIT):
            code = await serving.proc.wait()
    log = serving.log_text()
    assert code == 0, log
    assert "shutting_down" in log and "interrupted" not in log and "Traceback" not in log
