"""``fate-bridge doctor`` (issue 14): one test per failure it explains, each through a real
socket or a real file, checking the plain-words explanation and that a fix is given."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
from pathlib import Path

import pytest
import trustme
from websockets.asyncio.client import connect

from bridge import doctor
from bridge import server as bridge_server
from bridge.cli import main
from bridge.config import load_key, load_signing_key
from bridge.dice import ScriptedDice
from bridge.session import Session, hash_token, new_token
from bridge.startup import hold_database
from bridge.store import SQLiteStore

from .test_server import archery_test_rolled, client_info, free_port

WORLD = "doctor-world"


def read_only_folder(tmp_path: Path) -> Path:
    """A folder this user cannot create files in: chmod 555 for a normal user; root ignores
    permission bits, so there a folder under /sys (where even root cannot create one)."""
    if os.geteuid() == 0:
        return Path("/sys/fate-bridge-test")
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    return folder


def the(findings: list[doctor.Finding], level: str, words: str) -> doctor.Finding:
    """The one finding of ``level`` whose text holds ``words``; it must carry a fix unless ok."""
    matching = [f for f in findings if f.level == level and words in f.what]
    assert len(matching) == 1, doctor.render(findings)
    assert matching[0].fix or level == "ok"
    return matching[0]


@pytest.fixture
async def registered(tmp_path):
    """A database with WORLD registered and a signed checkpoint; (db, key path, token)."""
    db, key_path = tmp_path / "b.sqlite3", tmp_path / "audit.key"
    store = await SQLiteStore.open(db, audit_key=load_key(key_path, create=True))
    token = new_token()
    await store.add_world(WORLD, hash_token(token))
    await store.close()
    return db, key_path, token


@pytest.fixture
async def serving(registered):
    """A running bridge on the registered database (origins: one Foundry page)."""
    db, _, _ = registered
    store = await SQLiteStore.open(db)
    server = await bridge_server.start(store, "127.0.0.1", 0, origins=["https://foundry.example.org"])
    yield server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    await store.close()


def local_worlds(db: Path):
    _, conn = doctor.check_database(db)
    try:
        return doctor.registered_worlds(conn)
    finally:
        conn.close()


class TestTheModulesConnection:
    async def test_nothing_listening(self):
        port = free_port()
        found = await doctor.check_link(f"ws://127.0.0.1:{port}", WORLD, "t", foundry_url=None,
                                        ca_file=None, worlds=None)
        assert "start `fate-bridge serve`" in the(found, "fail", f"nothing is listening at 127.0.0.1:{port}").fix

    async def test_unknown_world(self, registered, serving):
        db, _, token = registered
        found = await doctor.check_link(f"ws://127.0.0.1:{serving}", "no-such-world", token,
                                        foundry_url=None, ca_file=None, worlds=local_worlds(db))
        the(found, "ok", "WebSocket to")
        assert "fate-bridge world add no-such-world" in the(found, "fail", "is not registered").fix

    async def test_wrong_token(self, registered, serving):
        db, _, _ = registered
        found = await doctor.check_link(f"ws://127.0.0.1:{serving}", WORLD, new_token(),
                                        foundry_url=None, ca_file=None, worlds=local_worlds(db))
        fix = the(found, "fail", "registered, but the bridge refused this token").fix
        assert f"fate-bridge world rotate-token {WORLD}" in fix

    async def test_right_token_passes(self, registered, serving):
        db, _, token = registered
        found = await doctor.check_link(f"ws://127.0.0.1:{serving}", WORLD, token,
                                        foundry_url="https://foundry.example.org", ca_file=None,
                                        worlds=local_worlds(db))
        # the bridge is on this computer, the page https:// from elsewhere: not mixed content; the browser asks once
        note = the(found, "warn", f"ws://127.0.0.1:{serving} is on the GM's computer and Foundry is served over "
                                  "https:// from foundry.example.org: not mixed content")
        assert '"foundry.example.org wants to: Access other apps and services on this device"' in note.what
        assert 'set "Apps on device" to Allow and reload' in note.fix
        assert "Safari blocks ws:// to this computer" in note.fix
        assert not [f for f in found if f.level == "fail"], doctor.render(found)
        the(found, "ok", "the token is accepted")

    def test_ws_to_another_computer_from_https_is_mixed_content(self):
        for url in ("ws://192.168.1.5:8765", "ws://bridge.example.org:8765", "ws://localhost.example.org:8765"):
            found = doctor.check_page_to_bridge(url, "https://foundry.example.org")
            fix = the(found, "fail", f"browsers block ws:// to another computer from an https:// page (mixed "
                                     f"content): {url} can never connect").fix
            assert "wss://" in fix

    def test_what_the_page_asks_of_the_browser(self):
        hosted = "https://table.forge-vtt.com/game"
        for url in ("ws://127.0.0.1:8765", "ws://127.4.5.6:8765", "ws://localhost:8765", "ws://bridge.localhost:8765",
                    "ws://[::1]:8765"):
            (note,) = doctor.check_page_to_bridge(url, hosted)
            assert note.level == "warn" and "not mixed content" in note.what, url
        (secure,) = doctor.check_page_to_bridge("wss://localhost:8765", hosted)  # the same question over TLS
        assert secure.level == "warn" and "Safari connects once it trusts the bridge's certificate" in secure.fix
        # nothing to ask: a page on this computer, an http:// page, wss:// to another computer
        assert doctor.check_page_to_bridge("ws://127.0.0.1:8765", "https://localhost:30000") == []
        assert doctor.check_page_to_bridge("ws://127.0.0.1:8765", "http://192.168.1.9:30000") == []
        assert doctor.check_page_to_bridge("wss://bridge.example.org", hosted) == []

    def test_loopback_hosts(self):
        for host in ("localhost", "LOCALHOST", "localhost.", "a.b.localhost", "127.0.0.1", "127.255.1.2", "::1"):
            assert doctor.is_loopback_host(host), host
        for host in ("localhost.example.org", "mylocalhost", "192.168.1.5", "::", "foundry.example.org", ""):
            assert not doctor.is_loopback_host(host), host

    async def test_a_gm_holding_the_link_keeps_it(self, registered, serving):
        db, _, token = registered
        gm = await connect(f"ws://127.0.0.1:{serving}")
        await gm.send(json.dumps({"type": "hello", "v": 1, "world_id": WORLD, "token": token,
                                  "client": {**client_info(), "user_name": "Gwen"}}))
        assert json.loads(await gm.recv())["type"] == "welcome"
        try:
            found = await doctor.check_link(f"ws://127.0.0.1:{serving}", WORLD, token, foundry_url=None,
                                            ca_file=None, worlds=local_worlds(db))
            the(found, "ok", "Gwen holds the link now, so no hello was sent")
            wrong = await doctor.check_link(f"ws://127.0.0.1:{serving}", WORLD, new_token(),
                                            foundry_url=None, ca_file=None, worlds=local_worlds(db))
            the(wrong, "fail", "registered, but the bridge refused this token")
            await gm.send(json.dumps({"type": "ping", "v": 1}))
            assert json.loads(await gm.recv())["type"] == "pong"  # the GM's link is still open
        finally:
            await gm.close()

    async def test_origin_not_allowed(self, serving):
        found = await doctor.check_link(f"ws://127.0.0.1:{serving}", None, None,
                                        foundry_url="http://192.168.1.9:30000", ca_file=None, worlds=None)
        fix = the(found, "fail", "refuses pages from http://192.168.1.9:30000 (Origin not allowed)").fix
        assert "--origins" in fix

    async def test_tls_name_mismatch(self, registered, tmp_path):
        db, _, token = registered
        authority = trustme.CA()
        issued = authority.issue_cert("foundry.example.org")
        cert, key, ca = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
        issued.cert_chain_pems[0].write_to_path(cert)
        issued.private_key_pem.write_to_path(key)
        authority.cert_pem.write_to_path(ca)
        store = await SQLiteStore.open(db)
        server = await bridge_server.start(store, "127.0.0.1", 0, tls=bridge_server.tls_context(cert, key))
        port = server.sockets[0].getsockname()[1]
        try:
            found = await doctor.check_link(f"wss://127.0.0.1:{port}", WORLD, token, foundry_url=None,
                                            ca_file=ca, worlds=None)
            assert "certificate for 127.0.0.1" in the(found, "fail", "TLS certificate is not for 127.0.0.1").fix
            untrusted = await doctor.check_link(f"wss://127.0.0.1:{port}", WORLD, token,
                                                foundry_url=None, ca_file=None, worlds=None)
            the(untrusted, "fail", "TLS certificate is not trusted")
        finally:
            server.close()
            await server.wait_closed()
            await store.close()

    async def test_wss_to_a_plain_bridge(self, serving):
        found = await doctor.check_link(f"wss://127.0.0.1:{serving}", None, None, foundry_url=None,
                                        ca_file=None, worlds=None)
        assert "use ws://" in the(found, "fail", "the bridge speaks plain ws://").fix

    async def test_something_else_on_the_port(self):
        with socket.socket() as sock:  # answers HTTP 200 to anything, like a web server would
            sock.bind(("127.0.0.1", 0))
            sock.listen()
            port = sock.getsockname()[1]

            async def web_server():
                loop = asyncio.get_running_loop()
                sock.setblocking(False)
                conn, _ = await loop.sock_accept(sock)
                await loop.sock_recv(conn, 4096)
                await loop.sock_sendall(conn, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")
                conn.close()

            task = asyncio.create_task(web_server())
            found = await doctor.check_link(f"ws://127.0.0.1:{port}", None, None, foundry_url=None,
                                            ca_file=None, worlds=None)
            await task
        the(found, "fail", "answered HTTP 200, not a WebSocket")


class TestLocalFiles:
    def test_corrupt_database(self, tmp_path):
        db = tmp_path / "b.sqlite3"
        db.write_bytes(b"this is not SQLite at all" * 200)
        found, conn = doctor.check_database(db)
        assert conn is None
        assert "fate-bridge restore" in the(found, "fail", "cannot be read as a fate-bridge database").fix

    async def test_the_serve_holding_the_database_is_named(self, registered):
        """Issue 27: the lock ``serve`` holds beside its SQLite file, and who holds it."""
        db, _, _ = registered
        found, conn = doctor.check_database(db)
        conn.close()
        assert not [f for f in found if "is served by" in f.what]
        lock = hold_database(db)
        try:
            found, conn = doctor.check_database(db)
            conn.close()
        finally:
            os.close(lock)
        assert the(found, "ok", "is served by").what == (
            f"database {db} is served by pid {os.getpid()} on host {socket.gethostname()}: "
            "a second serve on it is refused; the other commands work beside it")

    def test_database_in_a_read_only_folder(self, tmp_path):
        folder = read_only_folder(tmp_path)
        found, _ = doctor.check_database(folder / "b.sqlite3")
        assert "--db" in the(found, "fail", "is not writable by this user").fix

    async def test_database_from_a_newer_bridge(self, registered):
        db, _, _ = registered
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
        found, conn = doctor.check_database(db)
        conn.close()
        assert "upgrade fate-bridge" in the(found, "fail", "schema 999, newer than").fix

    async def test_key_readable_by_others(self, registered):
        db, key_path, _ = registered
        key_path.chmod(0o644)
        _, conn = doctor.check_database(db)
        found = doctor.check_key(key_path, conn)
        conn.close()
        assert the(found, "fail", "can be read by others (mode 644)").fix == f"`chmod 600 {key_path}`"

    async def test_key_that_did_not_sign_the_checkpoints(self, registered, tmp_path):
        db, key_path, token = registered
        store = await SQLiteStore.open(db, audit_key=load_key(key_path, create=False))
        session = Session(store, ScriptedDice([]), trusted=True, default_world=WORLD)
        await session.receive(json.dumps(archery_test_rolled("ev-1", "msgArchery0001")))
        await store.close()  # signs the head checkpoint
        other = tmp_path / "other.key"
        load_key(other, create=True)
        _, conn = doctor.check_database(db)
        try:
            the(doctor.check_key(key_path, conn), "ok", "signed all 1 stored checkpoints")
            assert "--audit-key" in the(doctor.check_key(other, conn), "fail", "did not sign 1 of 1").fix
            key_path.unlink()
            the(doctor.check_key(key_path, conn), "fail", "is missing, but 1 checkpoints were signed")
        finally:
            conn.close()

    async def test_signing_key_is_named_and_checked_against_the_heads(self, registered, tmp_path):
        """doctor names receipt.key as it names audit.key (issue 25: the README lists both): missing
        before any head is a warning, missing or another key once heads are signed is a failure."""
        db, _, _ = registered
        key_path = tmp_path / "receipt.key"
        _, conn = doctor.check_database(db)
        try:
            assert "back it up once" in the(doctor.check_signing_key(key_path, conn), "warn",
                                            f"no signing key at {key_path} yet").fix
        finally:
            conn.close()
        key = load_signing_key(key_path, create=True)
        store = await SQLiteStore.open(db, signing_key=key)
        session = Session(store, ScriptedDice([]), trusted=True, default_world=WORLD)
        await session.receive(json.dumps(archery_test_rolled("ev-1", "msgArchery0001")))
        await store.close()  # signs the head
        other = tmp_path / "other.key"
        load_signing_key(other, create=True)
        _, conn = doctor.check_database(db)
        try:
            the(doctor.check_signing_key(key_path, conn), "ok", "owner-only, signed the audit trail's heads")
            assert "--signing-key" in the(doctor.check_signing_key(other, conn), "fail",
                                          "did not sign the audit trail's heads").fix
            key_path.chmod(0o644)
            the(doctor.check_signing_key(key_path, conn), "fail", "can be read by others (mode 644)")
            key_path.unlink()
            assert "restore receipt.key" in the(doctor.check_signing_key(key_path, conn), "fail",
                                                "is missing, but the audit trail is signed with one").fix
        finally:
            conn.close()

    async def test_no_world_registered(self, tmp_path):
        await (await SQLiteStore.open(tmp_path / "b.sqlite3")).close()
        found = doctor.check_worlds(local_worlds(tmp_path / "b.sqlite3"))
        assert "fate-bridge world add" in the(found, "fail", "no world is registered").fix

    def test_port_taken_by_another_program(self):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            sock.listen()
            port = sock.getsockname()[1]
            found = doctor.check_port("127.0.0.1", port)
        assert "--port" in the(found, "fail", f"another program listens on 127.0.0.1:{port}").fix

    async def test_port_of_a_running_bridge_is_fine(self, serving):
        found = await asyncio.to_thread(doctor.check_port, "127.0.0.1", serving)
        the(found, "ok", f"a fate-bridge answers on 127.0.0.1:{serving}")

    def test_a_free_port_warns_that_nothing_listens_yet(self):
        """The commonest reason a table does not connect: serve is not running."""
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]  # free again once closed
        found = doctor.check_port("127.0.0.1", port)
        assert the(found, "warn", f"nothing listens on 127.0.0.1:{port}").fix.startswith("start it: `fate-bridge serve`")
        the(doctor.check_port("127.0.0.1", 0), "ok", "serve can listen on 127.0.0.1 (--port 0")

    def test_bad_host(self):
        the(doctor.check_port("no-such-host.invalid", 8765), "fail", "--host no-such-host.invalid is not")

    def test_origin_written_with_a_path(self):
        found = doctor.check_origins(["https://foundry.example.org/", "http://localhost:30000"])
        assert "https://foundry.example.org" in the(found, "fail", "'https://foundry.example.org/' never matches").fix

    def test_tls_files_that_do_not_load(self, tmp_path):
        (tmp_path / "c.pem").write_text("not a certificate")
        the(doctor.check_tls(tmp_path / "c.pem", tmp_path / "c.pem"), "fail", "cannot load the TLS certificate")

    def test_memory_budget_names_the_budget_and_the_registered_worlds(self):
        """Issue 27: doctor shows the worlds serve holds in memory at most."""
        found = doctor.check_memory_budget(2, [("a", True), ("b", True), ("c", True)])
        the(found, "ok", "serve holds at most 2 worlds in memory (3 registered) (--max-worlds-in-memory)")


class TestCommand:
    @pytest.mark.parametrize(("args", "named"), [
        (["--world", "w"], "--world is"),
        (["--world", "w", "--token", "t", "--foundry-url", "https://f.example"], "--world, --token, --foundry-url are"),
    ])
    def test_connection_flags_without_url_are_refused_not_ignored(self, args, named, tmp_path, capsys):
        """`doctor --world W --token T` without --url used to run the local checks only and say
        "No problem found.", though the token was never tried."""
        code = main(["doctor", "--db", str(tmp_path / "b.sqlite3"), *args])
        out, err = capsys.readouterr()
        assert code == 2 and out == ""
        assert f"fate-bridge: {named} checked over the module's connection: give --url too" in err

    async def test_doctor_exits_1_and_prints_each_problem_with_its_fix(self, registered, serving, capsys):
        db, key_path, _ = registered
        code = await asyncio.to_thread(main, [
            "doctor", "--db", str(db), "--audit-key", str(key_path), "--url", f"ws://127.0.0.1:{serving}",
            "--world", WORLD, "--token", "wrong"])
        out = capsys.readouterr().out
        assert code == 1
        assert f"FAIL  world {WORLD} is registered, but the bridge refused this token" in out
        assert f"      fix: `fate-bridge world rotate-token {WORLD}`" in out
        assert "1 problem found." in out

    async def test_a_healthy_setup_exits_0(self, registered, serving, capsys):
        db, key_path, token = registered
        code = await asyncio.to_thread(main, [
            "doctor", "--db", str(db), "--audit-key", str(key_path), "--url", f"ws://127.0.0.1:{serving}",
            "--world", WORLD, f"--token={token}"])  # a token may begin with "-"
        out = capsys.readouterr().out
        assert code == 0, out
        assert "No problem found." in out and "FAIL" not in out

    def test_doctor_shows_the_memory_budget_serve_is_given(self, tmp_path, capsys):
        main(["doctor", "--db", str(tmp_path / "b.sqlite3"), "--max-worlds-in-memory", "50"])
        assert "serve holds at most 50 worlds" in capsys.readouterr().out

    def test_a_memory_budget_below_one_is_refused_naming_the_flag(self, tmp_path, capsys):
        with pytest.raises(SystemExit):
            main(["doctor", "--db", str(tmp_path / "b.sqlite3"), "--max-worlds-in-memory", "0"])
        assert "--max-worlds-in-memory: 0 must be above 0" in capsys.readouterr().err
