"""Issue 36: keys, tokens and worlds changed by the routine commands, beside a running bridge.

- A token change takes effect on links already open: ``world rotate-token``, ``world remove`` and
  ``world viewer-key --rotate``, run as commands against the database a bridge serves (either
  backend), close the links the old credential opened with 4001 and a reason in the link's
  language (bridge/link_guard.py); the new credential opens a link at once.
- ``audit new-key`` and ``audit repair`` beside a running ``serve`` (a real process, both backends)
  are refused with one line naming it, the key files untouched, and the bridge goes on deciding.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
from pathlib import Path

import pytest
from bench.scale import schema_url
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from bridge import link_guard, logs
from bridge import server as bridge_server
from bridge.cli import main
from bridge.config import load_key, load_signing_key
from bridge.dice import ScriptedDice
from bridge.i18n import using
from bridge.i18n import gettext as translated
from bridge.session import hash_token, new_token
from bridge.errors import ConfigError
from bridge.startup import _WHEN_HELD
from bridge.store import backend_of
from bridge.store import open_store

from .helpers import ROOT, replay
from .served import TIMEOUT, ask
from .sohl_messages import fate_spend, rolled
from .test_startup import assert_one_clear_line, serving

WORLD = "keys-world"


def hello(token: str, language: str = "en") -> dict:
    return {"type": "hello", "v": 1, "world_id": WORLD, "token": token,
            "client": {"module_version": "0.1.0", "foundry_version": "13.345", "system_id": "sohl",
                       "system_version": "0.8.2", "user_name": "GM Alice", "language": language}}


def reason(key: str, language: str = "en") -> str:
    with using(language):
        return translated(link_guard.REASONS[key])


async def closed_by_bridge(ws) -> tuple[int, str]:
    """The code and reason the bridge closed ``ws`` with (fails after TIMEOUT if it stays open)."""
    with pytest.raises(ConnectionClosed) as closed:
        await asyncio.wait_for(ws.recv(), TIMEOUT)
    assert closed.value.rcvd is not None, "closed without a close frame from the bridge"
    return closed.value.rcvd.code, closed.value.rcvd.reason


@pytest.fixture
async def bridge(db_url, monkeypatch):
    """A bridge serving ``db_url`` (both backends) in this process, checking its links every 20 ms;
    (its URL, the world's token). Commands run against ``db_url`` as a GM runs them."""
    monkeypatch.setattr(link_guard, "CHECK_SECONDS", 0.02)
    store = await open_store(db_url)
    token = new_token()
    await store.add_world(WORLD, hash_token(token))
    server = await bridge_server.start(store, "127.0.0.1", 0, dice=ScriptedDice([34] * 20))
    yield f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}", token
    server.close()
    await server.wait_closed()
    await store.close()


async def command(db_url: str, *args: str) -> None:
    """``fate-bridge WORLD_COMMAND ... --db db_url`` in another thread, as from another terminal."""
    assert await asyncio.to_thread(main, ["world", *args, "--db", db_url]) == 0


class TestOpenLinksFollowTheCredentials:
    async def test_rotate_token_closes_the_forwarder_with_4001_and_the_new_token_opens_one(self, bridge, db_url, capsys):
        url, token = bridge
        async with connect(url) as old:
            assert (await ask(old, hello(token)))["type"] == "welcome"
            await command(db_url, "rotate-token", WORLD, "--token-only")
            new = capsys.readouterr().out.strip()
            assert await closed_by_bridge(old) == (4001, "the world's token was changed (world rotate-token): "
                                                         "paste the new token into the module settings")
        async with connect(url) as again:  # the old token no longer opens a link...
            assert (await ask(again, hello(token)))["code"] == "unauthorized"
        async with connect(url) as fresh:  # ...the new one does, and stays open
            assert (await ask(fresh, hello(new)))["type"] == "welcome"
            assert await ask(fresh, {"type": "ping", "v": 1}) == {"type": "pong", "v": 1}

    async def test_remove_closes_the_forwarder_and_the_viewers_in_their_language(self, bridge, db_url):
        url, token = bridge
        await command(db_url, "viewer-key", WORLD, "--key-only")
        store = await open_store(db_url)
        key = (await store.world(WORLD)).viewer_key
        await store.close()
        async with connect(url) as forwarder, connect(url) as viewer:
            assert (await ask(forwarder, hello(token, "de")))["type"] == "welcome"
            assert (await ask(viewer, {"type": "hello", "v": 1, "world_id": WORLD, "viewer_key": key}))["type"] == "welcome"
            await command(db_url, "remove", WORLD)
            assert await closed_by_bridge(forwarder) == (4001, reason("world_removed", "de"))
            assert await closed_by_bridge(viewer) == (4001, reason("world_removed"))
        assert reason("world_removed", "de") != reason("world_removed")  # German, not English

    async def test_rotating_the_viewer_key_closes_the_viewers_only(self, bridge, db_url, capsys):
        url, token = bridge
        await command(db_url, "viewer-key", WORLD, "--key-only")
        old_key = capsys.readouterr().out.strip()
        async with connect(url) as forwarder, connect(url) as viewer:
            assert (await ask(forwarder, hello(token)))["type"] == "welcome"
            assert (await ask(viewer, {"type": "hello", "v": 1, "world_id": WORLD, "viewer_key": old_key}))["type"] == "welcome"
            await command(db_url, "viewer-key", WORLD, "--rotate", "--key-only")
            assert await closed_by_bridge(viewer) == (4001, "the overlay viewer key was changed: copy the new "
                                                            "overlay URL from the module")
            assert await ask(forwarder, {"type": "ping", "v": 1}) == {"type": "pong", "v": 1}  # its token stands

    def test_every_reason_fits_a_close_frame_in_every_language(self):
        for key in link_guard.REASONS:
            for language in ("en", "de"):
                text = reason(key, language)
                assert len(text.encode()) <= link_guard.MAX_CLOSE_REASON, (key, language, text)
                assert link_guard.close_reason(text) == text  # sent whole, never cut


class TestKeyCommandsBesideARunningBridge:
    """Issue 36: ``audit new-key`` beside ``serve`` answered the next decision ``internal`` and
    closed every later one 4001; ``audit repair`` rewrote state under it. Both are refused now."""

    async def test_new_key_and_repair_are_refused_naming_the_serve_which_goes_on_deciding(self, tmp_path, db_url,
                                                                                           capsys):
        key, receipt = tmp_path / "audit.key", tmp_path / "receipt.key"
        assert await asyncio.to_thread(main, ["world", "add", WORLD, "--token-only", "--db", db_url]) == 0
        token = capsys.readouterr().out.strip()
        async with serving(tmp_path, db=db_url) as (bridge, port):
            async with connect(f"ws://127.0.0.1:{port}") as ws:
                assert (await ask(ws, hello(token)))["type"] == "welcome"
                assert (await ask(ws, rolled("ev-1", "msg1")))["type"] == "test_graded"
                signing = receipt.read_bytes()
                holder = f"pid {bridge.pid} on host {socket.gethostname()}"
                for audit_command, what in (("new-key", "run `audit new-key` again, then start serve with the new key"),
                                            ("repair", "run `audit repair` again, then start serve")):
                    extra = ["--world", WORLD] if audit_command == "repair" else []
                    code = await asyncio.to_thread(main, ["audit", audit_command, *extra, "--db", db_url,
                                                          "--audit-key", str(key)])
                    refused = capsys.readouterr()
                    assert code == 2 and refused.out == ""
                    assert_one_clear_line(refused.err, holder, "stop it first (Ctrl+C; on a cluster, every process)",
                                          what)
                assert receipt.read_bytes() == signing  # the key files as they were
                assert sorted(p.name for p in tmp_path.glob("receipt.key*")) == ["receipt.key"]
                spent = await ask(ws, fate_spend("ev-2", "msg1"))  # and the bridge decides on, under its key
                assert spent["type"] == "fate_resolved", spent
        assert await asyncio.to_thread(main, ["audit", "new-key", "--db", db_url, "--audit-key", str(key)]) == 0
        assert f"key change recorded in 1 world(s): {WORLD}" in capsys.readouterr().out  # stopped: it goes through


@pytest.fixture
async def signed_trail(tmp_path) -> Path:
    """A database whose world ``w`` has a trail signed by the keys in ``tmp_path / "old"``
    (``audit.key``, ``receipt.key``), as a GM's machine leaves it."""
    old = tmp_path / "old"
    key = load_key(old / "audit.key", create=True)
    signing = load_signing_key(old / "receipt.key", create=True)
    db = tmp_path / "bridge.sqlite3"
    store = await replay(ROOT / "examples" / "sohl-session.jsonl", db, key, signing)
    await store.close()
    return db


def refused_serve(db: Path, keys: Path, capsys) -> str:
    """``serve`` on ``db`` with its keys in ``keys``, expected to be refused before listening:
    its one line."""
    assert main(["serve", "--db", str(db), "--port", "0", "--audit-key", str(keys / "audit.key")]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert_one_clear_line(err)
    return err


class TestKeysOnANewMachine:
    """Issue 36: a GM restoring the database on a new machine without (or with the wrong) keys."""

    @pytest.fixture(autouse=True)
    def logs_as_the_tests_set_them(self, monkeypatch):
        """``serve`` runs in this process here: its log configuration would outlast the test."""
        monkeypatch.setattr(logs, "configure", lambda *args, **kwargs: None)

    def test_a_start_refused_for_a_missing_receipt_key_writes_no_key(self, signed_trail, tmp_path, capsys):
        new = tmp_path / "new"
        new.mkdir()
        before = signed_trail.read_bytes()
        err = refused_serve(signed_trail, new, capsys)
        assert f"there is no signing key at {new / 'receipt.key'}: restore that key from your backup" in err
        assert list(new.iterdir()) == []  # no audit.key made for a start that did not happen
        assert signed_trail.read_bytes() == before

    def test_serve_refuses_an_audit_key_that_did_not_sign_the_checkpoints(self, signed_trail, tmp_path, capsys):
        new = tmp_path / "new"
        shutil.copytree(tmp_path / "old", new)
        (new / "audit.key").unlink()
        made = load_key(new / "audit.key", create=True)  # another key, as a first start elsewhere made it
        err = refused_serve(signed_trail, new, capsys)
        assert err == (f"fate-bridge: the audit key at {new / 'audit.key'} did not sign this database's checkpoints "
                       "(it is another key): restore the audit.key serve used with this database from your backup, "
                       "or give --audit-key its path\n")
        assert load_key(new / "audit.key", create=False) == made  # left as it was

    def test_serve_refuses_a_missing_audit_key_and_makes_none(self, signed_trail, tmp_path, capsys):
        new = tmp_path / "new"
        new.mkdir()
        shutil.copy(tmp_path / "old" / "receipt.key", new / "receipt.key")
        err = refused_serve(signed_trail, new, capsys)
        assert err == (f"fate-bridge: the audit trail's checkpoints were signed with an audit key, but there is none "
                       f"at {new / 'audit.key'}: restore audit.key from your backup, or give --audit-key its path\n")
        assert sorted(p.name for p in new.iterdir()) == ["receipt.key"]

    @pytest.mark.parametrize("audit_key", ["missing", "another"])
    def test_verify_says_the_audit_key_is_missing_or_another_once_and_checks_the_worlds_without_it(
            self, signed_trail, tmp_path, capsys, audit_key):
        path = tmp_path / "new" / "audit.key"
        if audit_key == "another":
            load_key(path, create=True)
        code = main(["audit", "verify", "--db", str(signed_trail), "--audit-key", str(path),
                     "--signing-key", str(tmp_path / "old" / "receipt.key")])
        lines = capsys.readouterr().out.splitlines()
        assert code == 1  # never a silent pass
        expected = (f"FAIL audit key: the audit key at {path} did not sign this database's checkpoints"
                    if audit_key == "another" else
                    f"FAIL audit key: the audit trail's checkpoints were signed with an audit key, but there is none at {path}")
        assert lines[0].startswith(expected), lines
        assert lines[1].startswith("PASS w: 8 records, signed up to record 8"), lines  # not failed for the key
        assert len(lines) == 2

    def test_verify_with_the_right_audit_key_passes(self, signed_trail, tmp_path, capsys):
        old = tmp_path / "old"
        assert main(["audit", "verify", "--db", str(signed_trail), "--audit-key", str(old / "audit.key")]) == 0
        assert capsys.readouterr().out.startswith("PASS w: 8 records")


def test_the_readme_and_help_name_every_command_that_needs_the_bridge_stopped(capsys):
    """The commands the serve lock refuses beside a running bridge (bridge/startup.py), each in the
    README's "Beside a running bridge" table and in ``fate-bridge --help``."""
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("| needs the bridge stopped | why |"):]
    table = table[:table.index("\n\n")]
    stopped = {"new-key": "audit new-key", "repair": "audit repair", "restore": "restore", "resolve": "resolve --db"}
    assert set(_WHEN_HELD) == {"serve", *stopped}
    with pytest.raises(SystemExit):
        main(["--help"])
    helped = " ".join(capsys.readouterr().out.split())
    for name in stopped.values():
        assert f"\n| `{name}" in table, name
        assert name in helped, name


class TestTheServeLockOfAPostgresSchema:
    """Every serve of a schema holds its lock shared; new-key and repair take it alone."""

    def test_serves_share_it_a_key_change_takes_it_alone_and_other_schemas_stay_apart(self, pg_url, pg_server):
        me = f"pid {os.getpid()} on host {socket.gethostname()}"
        with _held(pg_url, "serve"), _held(pg_url, "serve"):  # a cluster: shared
            with pytest.raises(ConfigError, match=rf"is served by fate-bridge serve {me}, fate-bridge serve {me}: "
                                                  r"a running bridge would go on signing with the old key"):
                with _held(pg_url, "new-key"):
                    pass
        with _held(pg_url, "new-key"):
            with pytest.raises(ConfigError, match=rf"is held by fate-bridge new-key {me}, which needs it alone: "
                                                  "start serve again once it has ended"):
                with _held(pg_url, "serve"):
                    pass
            other = schema_url(pg_server, "public")  # another schema of the same database: its own lock
            with _held(other, "serve"):
                pass
        with _held(pg_url, "repair"):  # released: taken again
            pass


class TestLinkGuardAlone:
    """bridge/link_guard.py with a fake read (the store's ``worlds_of``) and close."""

    async def test_it_reads_only_while_links_are_open_and_goes_on_after_a_failed_read(self, monkeypatch):
        monkeypatch.setattr(link_guard, "CHECK_SECONDS", 0)
        reads, closed = [], []
        failing = [True]

        async def read(world_ids):
            reads.append(sorted(world_ids))
            if failing[0]:
                failing[0] = False
                raise OSError("database away for a moment")
            return {}  # the world is gone

        guard = link_guard.LinkGuard(read, lambda ws, code, reason: closed.append((ws, code, reason)))
        guard.opened("forwarder", WORLD, viewer=False, credential="hash", language="en")
        await asyncio.wait_for(guard._task, TIMEOUT)  # ends with its last link
        assert reads == [[WORLD], [WORLD]]  # the failed round, then the one that closed it
        assert closed == [("forwarder", 4001, reason("world_removed"))]
        reads.clear()
        guard.opened("viewer", WORLD, viewer=True, credential="key", language="en")
        guard.closed("viewer")  # gone before the first round: nothing is read
        await asyncio.wait_for(guard._task, TIMEOUT)
        assert reads == []


def _held(db, command):
    """The database held for ``command`` as the shells hold it (its backend's ``holding``)."""
    return backend_of(db).holding(db, command)
