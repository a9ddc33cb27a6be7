"""What ``fate-bridge serve`` says as it starts (issue 14): one clear line with a fix for a
database in a read-only folder, a bad ``--host``, a taken port and a corrupt file (never a
traceback); the addresses others can use with ``--host 0.0.0.0``; the manifest URL to paste."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from pathlib import Path

import pytest

from bridge.cli import main
from bridge.startup import lan_addresses

from .test_doctor import read_only_folder
from .test_server import free_port, http_get

TIMEOUT = 10.0


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


class TestWhatServePrints:
    async def run_until_healthy(self, tmp_path: Path, *args: str) -> tuple[str, int]:
        port = free_port()
        log = tmp_path / "serve.log"
        with log.open("wb") as out:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bridge", "serve", "--port", str(port), "--db",
                str(tmp_path / "b.sqlite3"), "--audit-key", str(tmp_path / "audit.key"), *args,
                stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out)
        try:
            async with asyncio.timeout(TIMEOUT):
                while True:
                    try:
                        if (await asyncio.to_thread(http_get, port, "/healthz"))[0] == 200:
                            break
                    except OSError:
                        await asyncio.sleep(0.05)
        finally:
            proc.send_signal(signal.SIGTERM)
            async with asyncio.timeout(TIMEOUT):
                assert await proc.wait() == 0
        return log.read_text(), port

    async def test_every_network_lists_the_addresses_others_use(self, tmp_path):
        text, port = await self.run_until_healthy(tmp_path, "--host", "0.0.0.0")
        addresses = lan_addresses()
        if addresses:
            assert ("Others on your network reach it at: "
                    + ", ".join(f"ws://{a}:{port}" for a in addresses)) in text
            assert f"Manifest URL:\n  http://{addresses[0]}:{port}/module/module.json" in text
        else:
            assert f"on this machine use ws://127.0.0.1:{port}" in text

    async def test_loopback_prints_the_manifest_url_and_who_can_connect(self, tmp_path):
        text, port = await self.run_until_healthy(tmp_path)
        assert f"Manifest URL:\n  http://127.0.0.1:{port}/module/module.json" in text
        assert "Only this machine can connect (--host 0.0.0.0 accepts other machines)" in text

    async def test_public_url_from_the_environment(self, tmp_path, monkeypatch):
        monkeypatch.setenv("FATE_BRIDGE_PUBLIC_URL", "https://foundry.example.org/fate-bridge/")
        text, _ = await self.run_until_healthy(tmp_path)
        assert "Manifest URL:\n  https://foundry.example.org/fate-bridge/module/module.json" in text
