"""``fate-bridge backup`` / ``restore`` (issue 14): a backup taken by another process while the
bridge writes restores to a database that ``audit verify`` passes."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys

import pytest

from bridge.cli import main
from bridge.config import load_key, load_signing_key
from bridge.dice import ScriptedDice
from bridge.session import Session
from bridge.store import SQLiteStore
from bridge.store.schema import read_as_one

from .test_server import archery_test_rolled

WORLD = "backup-world"


def records(db) -> int:
    """The audit records in ``db``, those a running serve had not folded yet too (schema 9)."""
    with sqlite3.connect(db) as conn:
        read_as_one(conn)
        return conn.execute("SELECT count(*) FROM audit").fetchone()[0]


async def python_m_bridge(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "bridge", *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    return proc.returncode, out.decode(), err.decode()


class TestBackupDuringWrites:
    async def test_backup_taken_under_load_restores_and_verifies(self, tmp_path, capsys):
        db, key, copy = tmp_path / "live.sqlite3", tmp_path / "audit.key", tmp_path / "backup.sqlite3"
        signing = tmp_path / "receipt.key"  # version 2 heads seal the stored bytes the backup copies (issue 25)
        store = await SQLiteStore.open(db, audit_key=load_key(key, create=True),
                                       signing_key=load_signing_key(signing, create=True))
        await store.add_world(WORLD, None)
        session = Session(store, ScriptedDice([]), trusted=True, default_world=WORLD)
        written = 0
        stop = asyncio.Event()

        async def load() -> None:
            nonlocal written
            while not stop.is_set():
                frame = json.dumps(archery_test_rolled(f"ev-{written}", f"msgArch{written:08d}"))
                reply = await session.receive(frame)
                assert b'"test_graded"' in reply.frames[0]
                written += 1

        writer = asyncio.create_task(load())

        async def until(count: int) -> None:
            while written < count and not writer.done():
                await asyncio.sleep(0.01)
            if writer.done():
                writer.result()  # the load failed: show why

        await until(50)
        code, out, err = await python_m_bridge("backup", str(copy), "--db", str(db))
        at_backup = written
        await until(at_backup + 50)  # the bridge kept writing through the backup
        stop.set()
        await writer
        await store.close()

        assert code == 0, err
        assert "Backed up 1 worlds and" in out and "The keys are not in it: keep one copy of " in out
        assert "audit.key and " in out and "receipt.key (or the --audit-key and --signing-key serve uses)" in out
        assert 50 <= records(copy) < written == records(db)
        assert f"Backed up 1 worlds and {records(copy)} audit records" in out

        restored = tmp_path / "restored" / "bridge.sqlite3"
        restored.parent.mkdir()
        assert await asyncio.to_thread(main, ["restore", str(copy), "--db", str(restored)]) == 0
        assert f"audit records into {restored}" in capsys.readouterr().out
        assert await asyncio.to_thread(main, ["audit", "verify", "--db", str(restored), "--audit-key", str(key),
                                              "--signing-key", str(signing)]) == 0
        assert "PASS" in capsys.readouterr().out
        assert records(restored) == records(copy)
        conn = sqlite3.connect(restored)
        heads = conn.execute("SELECT count(*), count(stored_digest) FROM heads").fetchone()
        conn.close()
        assert heads[0] >= 3 and heads[0] == heads[1]  # every head of version 2


class TestRestore:
    @pytest.fixture
    def db_with_world(self, tmp_path):
        db = tmp_path / "b.sqlite3"
        assert main(["world", "add", WORLD, "--db", str(db), "--token-only"]) == 0
        return db

    def test_restore_keeps_the_database_it_replaces(self, db_with_world, tmp_path, capsys):
        backup = tmp_path / "backup.sqlite3"
        assert main(["backup", str(backup), "--db", str(db_with_world)]) == 0
        assert main(["world", "add", "later-world", "--db", str(db_with_world), "--token-only"]) == 0
        capsys.readouterr()
        assert main(["restore", str(backup), "--db", str(db_with_world)]) == 0
        out = capsys.readouterr().out
        (kept,) = tmp_path.glob("b.sqlite3.before-restore-*")
        assert f"kept as {kept}" in out
        assert main(["world", "list", "--db", str(db_with_world)]) == 0
        assert capsys.readouterr().out.split() == [WORLD, "fate_option=everyone"]
        assert main(["world", "list", "--db", str(kept)]) == 0
        assert "later-world" in capsys.readouterr().out

    def test_restore_refuses_a_file_that_is_not_a_backup(self, db_with_world, tmp_path, capsys):
        junk = tmp_path / "junk.sqlite3"
        junk.write_bytes(b"not a database" * 500)
        before = db_with_world.read_bytes()
        assert main(["restore", str(junk), "--db", str(db_with_world)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is not a fate-bridge database" in err
        assert db_with_world.read_bytes() == before

    def test_backup_never_overwrites_by_accident(self, db_with_world, tmp_path, capsys):
        backup = tmp_path / "backup.sqlite3"
        backup.write_text("an older backup")
        assert main(["backup", str(backup), "--db", str(db_with_world)]) == 2
        assert "exists already" in capsys.readouterr().err
        assert backup.read_text() == "an older backup"
        assert main(["backup", str(backup), "--db", str(db_with_world), "--overwrite"]) == 0
        assert backup.stat().st_mode & 0o077 == 0  # owner-only, like the database

    async def test_restore_refuses_while_serve_holds_the_database(self, db_with_world, tmp_path, capsys):
        """README: "stop serve, then restore". A restore under a running bridge would delete the
        live -wal and swap the file under it (the bridge keeps writing to the unlinked one, so
        every decision after the restore is lost): it is refused, and the database left alone."""
        backup = tmp_path / "backup.sqlite3"
        assert main(["backup", str(backup), "--db", str(db_with_world)]) == 0
        capsys.readouterr()
        store = await SQLiteStore.open(db_with_world, audit_key=load_key(tmp_path / "k", create=True))
        try:
            await store.add_world("live-world", None)
            code = await asyncio.to_thread(main, ["restore", str(backup), "--db", str(db_with_world)])
            err = capsys.readouterr().err
            assert code == 2
            assert "in use" in err and "stop `fate-bridge serve`" in err and err.count("\n") == 1
            assert not list(tmp_path.glob("b.sqlite3.before-restore-*"))
        finally:
            await store.close()
        assert await asyncio.to_thread(main, ["world", "list", "--db", str(db_with_world)]) == 0
        assert "live-world" in capsys.readouterr().out  # nothing was swapped under the bridge
        assert await asyncio.to_thread(main, ["restore", str(backup), "--db", str(db_with_world)]) == 0
