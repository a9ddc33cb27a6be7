"""What ``fate-bridge serve`` says as it starts (issue 14): one clear line with a fix for a
database in a read-only folder, a bad ``--host``, a taken port and a corrupt file (never a
traceback); the addresses others can use with ``--host 0.0.0.0``; the manifest URL to paste.
One serving process per SQLite file (issue 27): a second ``serve``, a ``resolve --db`` or a ``restore``
exits with one line naming the file and the holder; the other commands still work beside a running bridge."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bridge.cli import main
from bridge.errors import ConfigError
from bridge.startup import hold_database, lan_addresses, lock_holder

from .helpers import run_bridge
from .test_doctor import read_only_folder
from .test_server import free_port, http_get

TIMEOUT = 60.0  # a bound on a hang: serve answers /healthz in about a second


async def serve(tmp_path: Path, *args: str) -> tuple[int, str]:
    """``python -m bridge serve ARGS`` expected to exit by itself: (exit code, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge", "serve", "--audit-key", str(tmp_path / "audit.key"), *args,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    async with asyncio.timeout(TIMEOUT):
        _, err = await proc.communicate()
    return proc.returncode, err.decode()


def assert_one_clear_line(err: str, *words: str) -> None:
    assert "Traceback" not in err, err
    assert err.count("\n") == 1 and err.startswith("fate-bridge: "), err
    for word in words:
        assert word in err, err


class TestOneClearLine:
    async def test_database_in_a_read_only_folder(self, tmp_path):
        db = read_only_folder(tmp_path) / "bridge.sqlite3"
        code, err = await serve(tmp_path, "--port", "0", "--db", str(db))
        assert code == 2
        assert_one_clear_line(err, f"cannot write the database {db}", "give --db a path in a folder you own")

    @pytest.mark.parametrize("command", [["world", "list"], ["world", "add", "my-world"], ["audit", "verify"],
                                         ["backup", "night.sqlite3"], ["doctor"], ["serve", "--port", "0"]])
    def test_a_folder_given_as_the_database_is_named_so(self, tmp_path, command, capsys):
        """``--db /tmp`` (issue 25): "is a folder", with a file path to give instead; not SQLite's
        "unable to open" read as a read-only folder (with `chmod u+w /` as the fix)."""
        with pytest.raises(SystemExit) as usage:
            main([*command, "--db", str(tmp_path)])
        err = capsys.readouterr().err
        assert usage.value.code == 2
        assert (f"argument --db: {tmp_path} is a folder, not a database file: give the file's path, e.g. "
                f"{tmp_path / 'bridge.sqlite3'}\n") in err and "chmod" not in err

    def test_a_folder_in_the_environment_is_named_so(self, tmp_path, monkeypatch, capsys):
        monkeypatch.setenv("FATE_BRIDGE_DB", str(tmp_path))
        assert main(["world", "list"]) == 2
        assert capsys.readouterr().err == (f"fate-bridge: {tmp_path} is a folder, not a database file: give the "
                                           f"file's path, e.g. {tmp_path / 'bridge.sqlite3'}\n")

    async def test_corrupt_database_file(self, tmp_path):
        db = tmp_path / "bridge.sqlite3"
        db.write_bytes(b"\x00garbage, not SQLite" * 300)
        code, err = await serve(tmp_path, "--port", "0", "--db", str(db))
        assert code == 2
        assert_one_clear_line(err, "is not a readable fate-bridge database", "fate-bridge restore BACKUP_FILE")

    @pytest.mark.parametrize("host", ["no-such-host.invalid", "203.0.113.77"])
    async def test_bad_host(self, tmp_path, host):
        code, err = await serve(tmp_path, "--host", host, "--port", "0", "--db", str(tmp_path / "b.sqlite3"))
        assert code == 2
        assert_one_clear_line(err, f"--host {host} is not an address of this machine", "0.0.0.0")

    async def test_port_taken(self, tmp_path):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            sock.listen()
            port = sock.getsockname()[1]
            code, err = await serve(tmp_path, "--port", str(port), "--db", str(tmp_path / "b.sqlite3"))
        assert code == 2
        assert_one_clear_line(err, f"port {port} on 127.0.0.1 is taken", "another --port")


@contextlib.asynccontextmanager
async def serving(tmp_path: Path, *args: str, db: Path | None = None,
                  log: Path | None = None) -> AsyncIterator[tuple[asyncio.subprocess.Process, int]]:
    """``python -m bridge serve`` on ``db`` (default ``b.sqlite3`` in ``tmp_path``) and a free
    port, output to ``log``: (process, port) once ``/healthz`` answers 200; stopped with SIGTERM
    after (exit 0) unless the test ended it itself."""
    port = free_port()
    log = log or tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bridge", "serve", "--port", str(port), "--db",
            str(db or tmp_path / "b.sqlite3"), "--audit-key", str(tmp_path / "audit.key"), *args,
            stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out)
    try:
        async with asyncio.timeout(TIMEOUT):
            while True:
                try:
                    if (await asyncio.to_thread(http_get, port, "/healthz"))[0] == 200:
                        break
                except OSError:
                    assert proc.returncode is None, log.read_text()
                    await asyncio.sleep(0.05)
        yield proc, port
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            async with asyncio.timeout(TIMEOUT):
                assert await proc.wait() == 0


class TestOneServePerFile:
    """Issue 27: one serving process per SQLite file (a second one would answer from stale state)."""

    async def test_a_second_serve_exits_at_once_naming_the_file_and_the_holder(self, tmp_path):
        db = tmp_path / "b.sqlite3"
        async with serving(tmp_path, db=db) as (holder, _):
            code, err = await serve(tmp_path, "--port", "0", "--db", str(db))
            assert code == 2
            assert_one_clear_line(err, f"the database {db} is already served by pid {holder.pid} on host "
                                  f"{socket.gethostname()}: ", "give --db another file")
            assert lock_holder(db) == f"pid {holder.pid} on host {socket.gethostname()}"
        assert lock_holder(db) is None  # a clean stop released it
        async with serving(tmp_path, db=db):  # and the next serve takes it
            pass

    async def test_the_other_commands_work_beside_a_running_bridge(self, tmp_path):
        db, key = tmp_path / "b.sqlite3", tmp_path / "audit.key"
        async with serving(tmp_path, db=db):
            added = await asyncio.to_thread(run_bridge, "world", "add", "beside", "--db", str(db))
            assert added.returncode == 0, added.stderr
            verified = await asyncio.to_thread(run_bridge, "audit", "verify", "--db", str(db), "--audit-key", str(key))
            assert verified.returncode == 0, verified.stderr
            backup = tmp_path / "night.sqlite3"
            copied = await asyncio.to_thread(run_bridge, "backup", str(backup), "--db", str(db))
            assert copied.returncode == 0, copied.stderr
            assert backup.is_file()

    async def test_resolve_db_and_restore_exit_at_once_beside_a_running_bridge(self, tmp_path):
        """They write the file as its only user, as serve does: beside a serve, each exits at once
        with one line naming the file, the holder and what to do; the file is left alone."""
        db = tmp_path / "b.sqlite3"
        backup = tmp_path / "night.sqlite3"
        async with serving(tmp_path, db=db) as (holder, _):
            copied = await asyncio.to_thread(run_bridge, "backup", str(backup), "--db", str(db))
            assert copied.returncode == 0, copied.stderr
            named = f"the database {db} is already served by pid {holder.pid} on host {socket.gethostname()}: "
            resolved = await asyncio.to_thread(run_bridge, "resolve", "--db", str(db), "--audit-key",
                                               str(tmp_path / "audit.key"), stdin='{"type":"ping","v":1}\n')
            assert resolved.returncode == 2 and resolved.stdout == ""
            assert_one_clear_line(resolved.stderr, named, "stop that bridge first, or give --db another file")
            restored = await asyncio.to_thread(run_bridge, "restore", str(backup), "--db", str(db))
            assert restored.returncode == 2
            assert_one_clear_line(restored.stderr, named, "stop that bridge (Ctrl+C), then run restore again")
            assert not list(tmp_path.glob("b.sqlite3.before-restore-*"))
        restored = await asyncio.to_thread(run_bridge, "restore", str(backup), "--db", str(db))
        assert restored.returncode == 0, restored.stderr  # stopped: the restore takes the lock and runs
        assert lock_holder(db) is None  # and released it

    async def test_a_killed_holders_lock_does_not_block_the_next_start(self, tmp_path):
        db = tmp_path / "b.sqlite3"
        async with serving(tmp_path, db=db) as (holder, _):
            holder.kill()  # SIGKILL: no cleanup ran; the OS released the flock
            await holder.wait()
        assert lock_holder(db) is None
        async with serving(tmp_path, db=db, log=tmp_path / "second.log") as (second, _):
            assert lock_holder(db) == f"pid {second.pid} on host {socket.gethostname()}"

    def test_the_lock_is_exclusive_and_released_when_closed(self, tmp_path):
        db = tmp_path / "new" / "b.sqlite3"  # its folder is made, as the store makes it
        fd = hold_database(db)
        try:
            assert db.is_file() and db.stat().st_mode & 0o777 == 0o600
            with pytest.raises(ConfigError, match=rf"already served by pid {os.getpid()} on host"):
                hold_database(db)  # flock: a second open file description conflicts in one process too
        finally:
            os.close(fd)
        os.close(hold_database(db))

    def test_the_lock_is_the_files_whatever_path_reaches_it(self, tmp_path):
        """Issue 35: a hard link and a symlink under other names reach the same file, so the same
        lock: refused, naming the holder; a copy is another file, free."""
        db = tmp_path / "b.sqlite3"
        fd = hold_database(db)
        try:
            (tmp_path / "other").mkdir()
            os.link(db, tmp_path / "other" / "hard.sqlite3")
            (tmp_path / "soft.sqlite3").symlink_to(db)
            for alias in (tmp_path / "other" / "hard.sqlite3", tmp_path / "soft.sqlite3"):
                with pytest.raises(ConfigError, match=rf"^the database {alias} is already served by pid "
                                                      rf"{os.getpid()} on host .*: only one bridge may serve"):
                    hold_database(alias)
                assert lock_holder(alias) == lock_holder(db) == f"pid {os.getpid()} on host {socket.gethostname()}"
            copy = tmp_path / "copy.sqlite3"
            copy.write_bytes(db.read_bytes())
            os.close(hold_database(copy))
        finally:
            os.close(fd)

    def test_a_file_no_process_holds_names_nobody(self, tmp_path):
        db = tmp_path / "b.sqlite3"
        assert lock_holder(db) is None  # no file
        db.write_bytes(b"")
        assert lock_holder(db) is None
        with db.open() as held:
            fcntl.flock(held, fcntl.LOCK_SH)  # a shared lock (a probe) is no serve's
            assert lock_holder(db) is None
            fcntl.flock(held, fcntl.LOCK_EX)
            assert lock_holder(db) == f"pid {os.getpid()} on host {socket.gethostname()}"


HOSTED = ("A hosted Foundry (The Forge, Molten, a rented server) cannot reach that address; its Manifest URL is "
          "the release's:\n  https://github.com/fate-bridge/fate-bridge/releases/latest/download/module.json\n")


class TestWhatServePrints:
    async def run_until_healthy(self, tmp_path: Path, *args: str) -> tuple[str, int]:
        async with serving(tmp_path, *args) as (_, port):
            pass
        return (tmp_path / "serve.log").read_text(), port

    async def test_every_network_lists_the_addresses_others_use(self, tmp_path):
        text, port = await self.run_until_healthy(tmp_path, "--host", "0.0.0.0")
        addresses = lan_addresses()
        if addresses:
            assert ("Others on your network reach it at: "
                    + ", ".join(f"ws://{a}:{port}" for a in addresses)) in text
            assert (f"Manifest URL:\n  http://{addresses[0]}:{port}/module/module.json\n"
                    "  (for a Foundry on this machine or your network; ") in text
            assert HOSTED in text
        else:
            assert f"on this machine use ws://127.0.0.1:{port}" in text

    async def test_loopback_prints_the_manifest_url_and_who_can_connect(self, tmp_path):
        text, port = await self.run_until_healthy(tmp_path)
        assert f"Manifest URL:\n  http://127.0.0.1:{port}/module/module.json\n  (for a Foundry on this machine; " in text
        assert "Only this machine can connect (--host 0.0.0.0 accepts other machines)" in text
        assert HOSTED in text

    async def test_public_url_from_the_environment(self, tmp_path, monkeypatch):
        monkeypatch.setenv("FATE_BRIDGE_PUBLIC_URL", "https://foundry.example.org/fate-bridge/")
        text, _ = await self.run_until_healthy(tmp_path)
        assert "Manifest URL:\n  https://foundry.example.org/fate-bridge/module/module.json" in text
