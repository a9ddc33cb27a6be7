"""Registering a world through an invite code (issue 34): the store's rules on both backends
(uses, revocation, expiry, a known world refused, the approval flow and who may collect its
token), the session's answers and its rate limits with real counts, the frames over a real
socket, and the ``world invite`` / ``world pending`` commands."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta, UTC

import pytest
import websockets
from structlog.testing import capture_logs

from bridge.cli import main
from bridge.credentials import InviteCode, hash_token, new_invite_code, parse_invite_code
from bridge.errors import ConfigError
from bridge.limits import RegistrationRates
from bridge.session import CLOSE_DONE, CLOSE_UNAUTHORIZED, REQUEST_POLL_SECONDS, Session
from bridge.dice import ScriptedDice
from bridge.store import Invite, Registration
from bridge.store import invites as invite_rows
from bridge.store.schema import utc_text

from .served import ask, started, stopped

SECRET = "a-browser-secret-of-128-bits-at-least"
OTHER_SECRET = "another-browsers-secret-also-128-bits"


async def invite(store, *, max_uses: int | None = 1, expires_at: str | None = None,
                 approval: bool = False) -> InviteCode:
    """A new code stored in ``store`` with these terms."""
    code = new_invite_code()
    await store.add_invite(Invite(code.invite_id, hash_token(code.secret), max_uses, expires_at, approval))
    return code


async def register(store, world_id: str, code: InviteCode, token_hash: str = "hash", secret: str = SECRET):
    return await store.register_world(world_id, code, token_hash, hash_token(secret), "192.0.2.7")


async def uses(store, code: InviteCode) -> int:
    return next(i.uses for i in await store.invites() if i.invite_id == code.invite_id)


class TestCodes:
    def test_a_code_reads_id_dot_secret_and_nothing_else(self):
        code = new_invite_code()
        assert parse_invite_code(f"  {code.text}\n") == code
        assert len(code.invite_id) == 8 and len(code.secret) == 32
        assert parse_invite_code(code.invite_id) is None
        assert parse_invite_code(code.text + "x") is None
        assert parse_invite_code(code.text.replace(".", ":")) is None


class TestStore:
    """Both backends (the ``store`` fixture: SQLite and PostgreSQL), the world ``w`` registered."""

    async def test_a_code_registers_a_new_world_under_the_token_given(self, store):
        code = await invite(store)
        assert await register(store, "new-world", code, hash_token("tok")) is Registration.REGISTERED
        world = await store.world("new-world")
        assert world is not None and world.token_hash == hash_token("tok")
        assert await uses(store, code) == 1

    async def test_max_uses_bounds_the_worlds_a_code_registers(self, store):
        code = await invite(store, max_uses=2)
        assert await register(store, "one", code) is Registration.REGISTERED
        assert await register(store, "two", code) is Registration.REGISTERED
        assert await register(store, "three", code) is Registration.USED_UP
        assert await store.world("three") is None and await uses(store, code) == 2

    async def test_a_revoked_code_registers_nothing(self, store):
        code = await invite(store, max_uses=None)
        assert await register(store, "before", code) is Registration.REGISTERED
        await store.revoke_invite(code.invite_id)
        assert await register(store, "after", code) is Registration.REVOKED
        assert await store.world("after") is None and await store.world("before") is not None
        with pytest.raises(ConfigError, match="no invite code 'nope'"):
            await store.revoke_invite("nope")

    async def test_an_expired_code_registers_nothing(self, store):
        old = await invite(store, expires_at="2020-01-01T00:00:00.000Z")
        assert await register(store, "late", old) is Registration.EXPIRED
        fresh = await invite(store, expires_at="2999-01-01T00:00:00.000Z")
        assert await register(store, "late", fresh) is Registration.REGISTERED
        assert await uses(store, old) == 0

    async def test_a_wrong_secret_or_unknown_id_is_no_code(self, store):
        code = await invite(store)
        wrong = InviteCode(code.invite_id, "x" * 32)
        assert await register(store, "guess", wrong) is Registration.NO_CODE
        assert await register(store, "guess", InviteCode("unknown0", code.secret)) is Registration.NO_CODE
        assert await store.world("guess") is None and await uses(store, code) == 0

    async def test_a_registered_or_removed_world_is_never_registered_again_nor_its_token_replaced(self, store):
        await store.set_token("w", hash_token("the GM's token"))
        code = await invite(store, max_uses=None)
        assert await register(store, "w", code, hash_token("attacker")) is Registration.WORLD_KNOWN
        assert (await store.world("w")).token_hash == hash_token("the GM's token")
        await store.remove_world("w")
        assert await register(store, "w", code, hash_token("attacker")) is Registration.WORLD_KNOWN
        assert await store.world("w") is None  # still removed: the host's `world add` brings it back
        assert await uses(store, code) == 0

    async def test_approval_keeps_the_request_until_the_host_decides_and_only_its_browser_collects(self, store):
        code = await invite(store, approval=True)
        assert await register(store, "asked", code) is Registration.WAITING
        assert await store.world("asked") is None and await uses(store, code) == 1
        assert await store.collect_registration("asked", SECRET, hash_token("t")) is Registration.WAITING
        assert await store.collect_registration("asked", OTHER_SECRET, hash_token("t")) is None
        other = await invite(store, approval=True)
        assert await register(store, "asked", other, secret=OTHER_SECRET) is Registration.WORLD_ASKED
        direct = await invite(store)
        assert await register(store, "asked", direct, secret=OTHER_SECRET) is Registration.WORLD_ASKED
        [request] = await store.registration_requests()
        assert (request.world_id, request.invite_id, request.address, request.state) == (
            "asked", code.invite_id, "192.0.2.7", "waiting")

        await store.decide_registration("asked", approve=True)
        world = await store.world("asked")
        assert world is not None and world.token_hash is None  # reserved; no token until collected
        assert await store.collect_registration("asked", OTHER_SECRET, hash_token("stolen")) is None
        assert await store.collect_registration("asked", SECRET, hash_token("mine")) is Registration.REGISTERED
        assert (await store.world("asked")).token_hash == hash_token("mine")
        assert await store.registration_requests() == []
        assert await store.collect_registration("asked", SECRET, hash_token("again")) is None
        assert (await store.world("asked")).token_hash == hash_token("mine")

    async def test_a_denied_request_is_told_once_and_registers_nothing(self, store):
        code = await invite(store, approval=True)
        await register(store, "no", code)
        await store.decide_registration("no", approve=False)
        assert await store.collect_registration("no", SECRET, "h") is Registration.DENIED
        assert await store.collect_registration("no", SECRET, "h") is None
        assert await store.world("no") is None
        with pytest.raises(ConfigError, match="no registration request waits for world 'no'"):
            await store.decide_registration("no", approve=True)

    async def test_a_token_the_host_gave_meanwhile_is_not_replaced_by_the_collect(self, store):
        code = await invite(store, approval=True)
        await register(store, "host-gave", code)
        await store.decide_registration("host-gave", approve=True)
        await store.set_token("host-gave", hash_token("host's"))
        assert await store.collect_registration("host-gave", SECRET, hash_token("x")) is Registration.WORLD_KNOWN
        assert (await store.world("host-gave")).token_hash == hash_token("host's")

    async def test_waiting_requests_are_bounded(self, store, monkeypatch):
        monkeypatch.setattr(invite_rows, "MAX_WAITING_REQUESTS", 2)
        code = await invite(store, max_uses=None, approval=True)
        assert [await register(store, f"r{i}", code) for i in range(3)] == [
            Registration.WAITING, Registration.WAITING, Registration.FULL]
        assert [r.world_id for r in await store.registration_requests()] == ["r0", "r1"]
        assert await uses(store, code) == 2


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def registering(store, rates: RegistrationRates, address: str = "192.0.2.7") -> Session:
    """A fresh connection's session (not trusted) from ``address``."""
    return Session(store, ScriptedDice([]), registrations=rates.gate(address))


def register_frame(world_id: str, code: str, secret: str = SECRET, language: str | None = None) -> str:
    client = {"module_version": "1", "foundry_version": "13", "system_id": "sohl", "system_version": "1",
              "language": language}
    return json.dumps({"type": "register", "v": 1, "world_id": world_id, "invite_code": code,
                       "request_secret": secret, "client": client})


async def answer(session: Session, frame: str) -> tuple[dict, int | None]:
    reply = await session.receive(frame)
    [out] = reply.frames
    return json.loads(out), reply.close_code


class TestSession:
    async def test_register_gives_the_token_then_hello_with_it_is_welcomed(self, store):
        rates = RegistrationRates(Clock())
        code = await invite(store)
        with capture_logs() as logs:
            reply, close = await answer(registering(store, rates), register_frame("tablet-world", code.text))
        assert reply["type"] == "registered" and reply["world_id"] == "tablet-world" and close == CLOSE_DONE
        token = reply["token"]
        assert (await store.world("tablet-world")).token_hash == hash_token(token)
        assert [e for e in logs if e["event"] == "registration"] == [{
            "event": "registration", "log_level": "info", "world_id": "tablet-world", "outcome": "registered",
            "address": "192.0.2.7", "invite_id": code.invite_id}]  # never the token nor the code's secret
        hello = {"type": "hello", "v": 1, "world_id": "tablet-world", "token": token}
        forwarder = registering(store, rates)
        welcome, close = await answer(forwarder, json.dumps(hello))
        assert welcome["type"] == "welcome" and welcome["world_id"] == "tablet-world" and close is None
        settings = {"type": "settings", "v": 1, "event_id": "e1", "fate_option": "pc_only"}
        applied, _ = await answer(forwarder, json.dumps(settings))  # the world decides like any other
        assert applied["type"] == "settings_applied" and applied["settings"] == {"fate_option": "pc_only"}
        assert (await store.world("tablet-world")).settings.fate_option == "pc_only"

    async def test_a_known_world_is_refused_by_name_and_keeps_its_token(self, store):
        await store.set_token("w", hash_token("kept"))
        code = await invite(store)
        reply, close = await answer(registering(store, RegistrationRates(Clock())), register_frame("w", code.text))
        assert (reply["code"], reply["field"], close) == ("forbidden", "world_id", CLOSE_DONE)
        assert reply["message"].startswith("world w is registered on this bridge already: an invite code "
                                           "cannot register it again or replace its token")
        assert (await store.world("w")).token_hash == hash_token("kept")

    @pytest.mark.parametrize("outcome, text", [
        ("garbage", "this invite code is not valid on this bridge"),
        ("revoked", "this invite code was revoked"),
        ("expired", "this invite code has expired"),
        ("used", "this invite code has been used as often as it may"),
    ])
    async def test_a_refused_code_is_unauthorized_naming_the_field_and_closes_4001(self, store, outcome, text):
        code = await invite(store, expires_at="2020-01-01T00:00:00.000Z" if outcome == "expired" else None)
        if outcome == "revoked":
            await store.revoke_invite(code.invite_id)
        if outcome == "used":
            await register(store, "first", code)
        sent = "not-a-code" if outcome == "garbage" else code.text
        reply, close = await answer(registering(store, RegistrationRates(Clock())), register_frame("x", sent))
        assert (reply["code"], reply["field"], close) == ("unauthorized", "invite_code", CLOSE_UNAUTHORIZED)
        assert reply["message"].startswith(text)

    async def test_the_refusal_comes_in_the_registering_browsers_language(self, store):
        reply, _ = await answer(registering(store, RegistrationRates(Clock())),
                                register_frame("x", "not-a-code", language="de"))
        assert reply["code"] == "unauthorized" and "Einladungscode" in reply["message"]

    async def test_tries_are_limited_per_address_and_in_total_with_real_counts(self, store):
        clock = Clock()
        rates = RegistrationRates(clock, per_address=(1 / 60, 5), total=(1 / 6, 8))
        codes = []
        for _ in range(5):  # the address's burst: five tries, each answered (bad code here)
            reply, _ = await answer(registering(store, rates, "192.0.2.1"), register_frame("x", "bad"))
            codes.append(reply["code"])
        assert codes == ["unauthorized"] * 5
        reply, close = await answer(registering(store, rates, "192.0.2.1"), register_frame("x", "bad"))
        assert (reply["code"], reply["message"], close) == (
            "rate_limited", "too many registrations just now: try again in 60 s", CLOSE_DONE)
        code = await invite(store, max_uses=None)
        answers = [(await answer(registering(store, rates, "192.0.2.2"), register_frame(f"b{i}", code.text)))[0]["type"]
                   for i in range(4)]
        assert answers == ["registered", "registered", "registered", "error"]  # the total's 8th was the last
        assert await store.world("b3") is None
        clock.now += 6  # one try in total again; the first address still waits for its own
        reply, _ = await answer(registering(store, rates, "192.0.2.1"), register_frame("y", code.text))
        assert reply["code"] == "rate_limited" and reply["message"].endswith("in 54 s")
        reply, _ = await answer(registering(store, rates, "192.0.2.2"), register_frame("b3", code.text))
        assert reply["type"] == "registered"

    async def test_approval_polls_take_no_try_and_only_the_asking_browser_collects(self, store):
        clock = Clock()
        rates = RegistrationRates(clock, per_address=(1 / 60, 1), total=(1 / 60, 2))
        code = await invite(store, approval=True)
        mine = register_frame("waiting-world", code.text)
        reply, close = await answer(registering(store, rates), mine)
        assert reply == {"type": "registration_pending", "v": 1, "world_id": "waiting-world",
                         "retry_seconds": REQUEST_POLL_SECONDS} and close == CLOSE_DONE
        for _ in range(3):  # asking again costs no try: the address's single one is spent already
            assert (await answer(registering(store, rates), mine))[0]["type"] == "registration_pending"
        theirs = register_frame("waiting-world", code.text, secret=OTHER_SECRET)
        reply, _ = await answer(registering(store, rates, "198.51.100.9"), theirs)
        assert (reply["code"], reply["field"]) == ("forbidden", "world_id")
        assert "waits for the host's approval already" in reply["message"]
        await store.decide_registration("waiting-world", approve=True)
        reply, _ = await answer(registering(store, rates, "198.51.100.9"), theirs)
        assert reply["code"] == "rate_limited"  # not a poll of theirs: a try, and none is left
        reply, _ = await answer(registering(store, rates), mine)
        assert reply["type"] == "registered"
        assert (await store.world("waiting-world")).token_hash == hash_token(reply["token"])

    async def test_a_denied_request_hears_so(self, store):
        code = await invite(store, approval=True)
        rates = RegistrationRates(Clock())
        await answer(registering(store, rates), register_frame("denied-world", code.text))
        await store.decide_registration("denied-world", approve=False)
        reply, close = await answer(registering(store, rates), register_frame("denied-world", code.text))
        assert (reply["code"], reply["message"], close) == (
            "forbidden", "the bridge's host denied the registration of world denied-world", CLOSE_DONE)

    async def test_register_is_refused_where_no_registrations_are_taken_and_after_hello(self, store, session):
        lone = Session(store, ScriptedDice([]))
        reply, _ = await answer(lone, register_frame("x", "bad"))
        assert (reply["code"], reply["field"]) == ("not_found", "type")
        reply, close = await answer(session, register_frame("x", "bad"))  # trusted: open already
        assert (reply["code"], close) == ("bad_message", None)

    @pytest.mark.parametrize("field, value", [("world_id", "a/b"), ("world_id", ""), ("request_secret", "short")])
    async def test_a_bad_field_is_named(self, store, field, value):
        message = json.loads(register_frame("ok", "code"))
        message[field] = value
        reply, close = await answer(registering(store, RegistrationRates(Clock())), json.dumps(message))
        assert (reply["code"], reply["field"], close) == ("bad_message", field, CLOSE_UNAUTHORIZED)


class TestOverTheSocket:
    async def test_the_token_goes_to_the_asking_connection_which_then_says_hello(self, store):
        server, url = await started(store)
        try:
            code = await invite(store)
            async with websockets.connect(url) as ws:
                reply = await ask(ws, json.loads(register_frame("socket-world", code.text)))
                await ws.wait_closed()
            assert reply["type"] == "registered" and ws.close_code == CLOSE_DONE
            async with websockets.connect(url) as ws:
                hello = {"type": "hello", "v": 1, "world_id": "socket-world", "token": reply["token"]}
                assert (await ask(ws, hello))["type"] == "welcome"
            async with websockets.connect(url) as ws:
                refused = await ask(ws, json.loads(register_frame("socket-world", code.text)))
                await ws.wait_closed()
            assert (refused["code"], refused["field"], ws.close_code) == ("forbidden", "world_id", CLOSE_DONE)
        finally:
            await stopped(server)


class TestCommands:
    def test_invite_list_revoke_and_pending_approve(self, tmp_path, capsys):
        db = str(tmp_path / "bridge.sqlite3")
        assert main(["world", "invite", "--max-uses", "3", "--expires", "2d", "--approve", "--db", db]) == 0
        out = capsys.readouterr().out
        code = parse_invite_code(out.splitlines()[1])
        assert code is not None and "registers 3 worlds, until 20" in out and "world pending" in out
        assert main(["world", "invite", "list", "--db", db]) == 0
        [line] = capsys.readouterr().out.splitlines()
        assert line.startswith(f"{code.invite_id}\tactive\tuses 0/3\texpires 20") and line.endswith("\tapproval")
        assert code.secret not in line

        async def ask_once():
            from bridge.store import open_store
            store = await open_store(db)
            try:
                return await register(store, "cli-world", code)
            finally:
                await store.close()

        assert asyncio.run(ask_once()) is Registration.WAITING
        assert main(["world", "pending", "--db", db]) == 0
        assert capsys.readouterr().out.startswith("cli-world\twaiting\tfrom 192.0.2.7\tat ")
        assert main(["world", "pending", "approve", "cli-world", "--db", db]) == 0
        assert "approved" in capsys.readouterr().out
        assert main(["world", "list", "--db", db]) == 0
        assert "cli-world" in capsys.readouterr().out
        assert main(["world", "invite", "revoke", code.text, "--db", db]) == 0  # the whole code works too
        capsys.readouterr()
        assert main(["world", "invite", "list", "--db", db]) == 0
        assert capsys.readouterr().out.startswith(f"{code.invite_id}\trevoked\tuses 1/3")
        assert main(["world", "pending", "deny", "cli-world", "--db", db]) == 2
        assert "no registration request waits for world 'cli-world'" in capsys.readouterr().err

    def test_the_defaults_are_one_use_for_a_week_and_never_means_never(self, tmp_path, capsys):
        db = str(tmp_path / "bridge.sqlite3")
        assert main(["world", "invite", "--db", db]) == 0
        assert "registers 1 world, until " in capsys.readouterr().out
        assert main(["world", "invite", "--max-uses", "0", "--expires", "never", "--code-only", "--db", db]) == 0
        assert parse_invite_code(capsys.readouterr().out) is not None
        assert main(["world", "invite", "list", "--db", db]) == 0
        rows = sorted(line.split("\t")[2:4] for line in capsys.readouterr().out.splitlines())
        assert [uses for uses, _ in rows] == ["uses 0/1", "uses 0/any"] and rows[1][1] == "expires never"
        week = datetime.now(UTC) + timedelta(days=7)
        assert utc_text(week - timedelta(minutes=5)) < rows[0][1].removeprefix("expires ") <= utc_text(week)
