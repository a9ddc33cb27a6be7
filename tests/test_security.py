"""Issue 4: hard to cheat, hard to break.

One forwarder per world (4003), the rate limit, the Origin allowlist, TLS, and property tests
(hypothesis): no byte string or JSON value crashes the connection handler, and the rules'
invariants hold for all inputs.
"""

from __future__ import annotations

import asyncio
import json
import ssl

import pytest
import trustme
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.asyncio.client import connect
from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed, InvalidStatus

from bridge import links, server as bridge_server
from bridge.dice import ScriptedDice
from bridge.limits import RateLimit
from bridge.rulesets.sohl import rules as sohl
from bridge.session import Session, hash_token, new_token
from bridge.store import AuditFilter, SQLiteStore

from .served import TIMEOUT, ask, started, stopped, store, token  # noqa: F401 (store, token: fixtures)
from .sohl_messages import actor, fate_choice, fate_spend, frame, point, rolled, sohl_test

WORLD = "security-world"


def handler(store: SQLiteStore):
    """The bridge's connection handler on ``store`` with scripted dice, for ``serve`` with settings
    of a test's own."""
    return bridge_server.make_handler(bridge_server.server_context(store, dice=ScriptedDice([]), hello_timeout=10.0))


def hello(token: str, user_name: str = "GM Alice") -> str:
    return json.dumps({"type": "hello", "v": 1, "world_id": WORLD, "token": token,
                       "client": {"module_version": "0.1.0", "foundry_version": "14.359", "system_id": "sohl",
                                  "system_version": "0.8.2", "user_name": user_name}})


class RawPeer:
    """A WebSocket client written by hand (RFC 6455), so a test decides what it never does: after
    the handshake it answers nothing (no close frame, no pong), like a peer behind a half-open link."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def connect(cls, port: int) -> RawPeer:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                     "Sec-WebSocket-Version: 13\r\n\r\n".encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), TIMEOUT)
        assert head.startswith(b"HTTP/1.1 101 "), head
        return cls(reader, writer)

    async def ask(self, text: str) -> dict:
        """Send ``text`` as one masked text frame; the next text frame's JSON."""
        data, mask = text.encode(), b"\x00\x00\x00\x00"  # a zero mask: the payload as it is (RFC 6455 5.3)
        size = bytes([0x80 | len(data)]) if len(data) < 126 else bytes([0x80 | 126]) + len(data).to_bytes(2, "big")
        self.writer.write(b"\x81" + size + mask + data)
        opcode, payload = await self.frame()
        assert opcode == 0x1, (opcode, payload)
        return json.loads(payload)

    async def frame(self) -> tuple[int, bytes]:
        """The next frame from the server (unmasked, unfragmented): (opcode, payload)."""
        async with asyncio.timeout(TIMEOUT):
            first, second = await self.reader.readexactly(2)
            size = second & 0x7F
            if size == 126:
                size = int.from_bytes(await self.reader.readexactly(2), "big")
            elif size == 127:
                size = int.from_bytes(await self.reader.readexactly(8), "big")
            return first & 0x0F, await self.reader.readexactly(size)

    async def close_frame(self) -> tuple[int, str]:
        """The next frame, which must be a close frame: (code, reason)."""
        opcode, payload = await self.frame()
        assert opcode == 0x8, (opcode, payload)
        return int.from_bytes(payload[:2], "big"), payload[2:].decode()


CLOSE_4003_FRAME = b"\x88\x27" + (4003).to_bytes(2, "big") + b"superseded by GM Bob (Foundry 14.359)"


class TestOneForwarderPerWorld:
    async def test_a_second_link_supersedes_the_first_with_4003_naming_the_holder(self, store, token):
        server, url = await started(store)
        async with connect(url) as first, connect(url) as second:
            assert (await ask(first, hello(token, "GM Alice")))["type"] == "welcome"
            assert (await ask(second, hello(token, "GM Bob")))["type"] == "welcome"
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(first.recv(), TIMEOUT)
            assert first.close_code == 4003
            assert first.close_reason == "superseded by GM Bob (Foundry 14.359)"
            assert (await ask(second, {"type": "ping", "v": 1}))["type"] == "pong"
        await stopped(server)

    async def test_a_half_open_old_link_never_delays_the_new_one(self, store, token, monkeypatch):
        """Issue 27: the old link's peer completed the handshake and then went silent (it never
        answers the close, as a half-open TCP link does): the new link is served while the old
        one's close is still waiting for that answer. Ordered by events, not by time: both
        close timeouts are an hour, so the old link stays half-closed for the whole test."""
        monkeypatch.setattr(links, "SUPERSEDED_CLOSE_SECONDS", 3600.0)
        async with serve(handler(store), "127.0.0.1", 0,
                         close_timeout=3600) as server:
            port = server.sockets[0].getsockname()[1]
            old = await RawPeer.connect(port)
            try:
                assert (await old.ask(hello(token, "GM Alice")))["type"] == "welcome"
                async with connect(f"ws://127.0.0.1:{port}") as new:
                    assert (await ask(new, hello(token, "GM Bob")))["type"] == "welcome"
                    code, reason = await old.close_frame()  # sent; the server now waits for the answer ...
                    assert (code, reason) == (4003, "superseded by GM Bob (Foundry 14.359)")
                    for _ in range(3):  # ... and meanwhile serves the new link
                        assert (await ask(new, {"type": "ping", "v": 1}))["type"] == "pong"
                    assert not old.reader.at_eof()  # still open: the close still waits for its answer
            finally:
                old.writer.close()  # the peer goes: the server's close ends (the test never hangs)

    async def test_a_superseded_link_that_never_answers_the_close_is_cut_off(self, store, token, monkeypatch):
        """The background close is bounded (``SUPERSEDED_CLOSE_SECONDS``, here 0): a peer that
        never answers the close frame is cut off, so the bridge keeps no half-open links."""
        monkeypatch.setattr(links, "SUPERSEDED_CLOSE_SECONDS", 0.0)
        async with serve(handler(store), "127.0.0.1", 0,
                         close_timeout=3600) as server:
            port = server.sockets[0].getsockname()[1]
            old = await RawPeer.connect(port)
            try:
                await old.ask(hello(token))
                async with connect(f"ws://127.0.0.1:{port}") as new:
                    await ask(new, hello(token, "GM Bob"))
                    assert await asyncio.wait_for(old.reader.read(), TIMEOUT) in (b"", CLOSE_4003_FRAME)  # then EOF
                    assert old.reader.at_eof()
            finally:
                old.writer.close()

    async def test_other_worlds_are_untouched(self, store, token):
        other_token = new_token()
        await store.add_world("other", hash_token(other_token))
        server, url = await started(store)
        async with connect(url) as a, connect(url) as b:
            await ask(a, hello(token))
            await ask(b, json.dumps({"type": "hello", "v": 1, "world_id": "other", "token": other_token}))
            assert (await ask(a, {"type": "ping", "v": 1}))["type"] == "pong"
            assert (await ask(b, {"type": "ping", "v": 1}))["type"] == "pong"
        await stopped(server)


class TestRateLimit:
    def test_bucket(self):
        now = [0.0]
        limit = RateLimit(rate=2, burst=3, clock=lambda: now[0])
        assert [limit.allow() for _ in range(4)] == [True, True, True, False]
        now[0] = 0.5  # one token back
        assert [limit.allow(), limit.allow()] == [True, False]
        now[0] = 100.0  # never more than the burst
        assert sum(limit.allow() for _ in range(10)) == 3

    async def test_excess_frames_are_refused_not_handled_and_the_link_stays(self, store, token):
        server, url = await started(store, rate=(0.001, 3))
        async with connect(url) as ws:
            await ask(ws, hello(token))  # 1
            await ask(ws, {"type": "ping", "v": 1})  # 2
            await ask(ws, rolled("r1", "m1"))  # 3: graded
            refused = await ask(ws, rolled("r2", "m2"))
            assert (refused["code"], refused["ref"]) == ("rate_limited", "r2")
            assert "same event_id" in refused["message"]
        assert (await store.world(WORLD)) is not None
        await stopped(server)


class TestOrigins:
    async def test_browser_from_another_site_is_refused(self, store, token):
        server, url = await started(store, origins=["http://localhost:30000"])
        with pytest.raises(InvalidStatus) as refused:
            async with connect(url, origin="https://evil.example"):
                pass
        assert refused.value.response.status_code == 403
        async with connect(url, origin="http://localhost:30000") as ws:
            assert (await ask(ws, hello(token)))["type"] == "welcome"
        async with connect(url) as ws:  # no Origin: not a browser
            assert (await ask(ws, hello(token)))["type"] == "welcome"
        await stopped(server)


class TestTLS:
    async def test_wss_with_a_throwaway_certificate(self, store, token, tmp_path):
        authority = trustme.CA()
        certificate = authority.issue_cert("127.0.0.1", "localhost")
        cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
        certificate.cert_chain_pems[0].write_to_path(cert)
        certificate.private_key_pem.write_to_path(key)
        server, url = await started(store, "wss", tls=bridge_server.tls_context(cert, key))
        client_context = ssl.create_default_context()
        authority.configure_trust(client_context)
        async with connect(url, ssl=client_context) as ws:
            assert (await ask(ws, hello(token)))["type"] == "welcome"
        with pytest.raises(ssl.SSLError):  # an untrusted certificate is refused by the client
            async with connect(url, ssl=ssl.create_default_context()):
                pass
        await stopped(server)

    def test_bad_certificate_files_are_a_clear_error(self, tmp_path):
        from bridge.errors import ConfigError
        (tmp_path / "c.pem").write_text("not a certificate")
        with pytest.raises(ConfigError, match="cannot load the TLS certificate"):
            bridge_server.tls_context(tmp_path / "c.pem", tmp_path / "c.pem")


# --- property tests ----------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)
known_types = st.sampled_from(["hello", "ping", "settings", "test_rolled", "fate_spend", "fate_choice",
                               "audit_query", "welcome", "nonsense"])
messages = st.builds(lambda t, extra: {"type": t, "v": 1, **extra}, known_types,
                     st.dictionaries(st.sampled_from(["event_id", "message_id", "point_id", "user_id", "choice",
                                                       "actor", "test", "ruleset", "world_id", "token",
                                                       "fate_option", "query_id", "limit"]), json_values,
                                     max_size=8))


@pytest.fixture(scope="module")
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def open_session(loop):
    store = loop.run_until_complete(SQLiteStore.open(":memory:"))
    loop.run_until_complete(store.add_world("w", None))
    yield Session(store, ScriptedDice([]), trusted=True, default_world="w")
    loop.run_until_complete(store.close())


def one_reply(loop, session: Session, raw: bytes | str) -> dict:
    reply = loop.run_until_complete(session.receive(raw))
    assert len(reply.frames) == 1
    decoded = json.loads(reply.frames[0])
    assert decoded["v"] == 1 and isinstance(decoded["type"], str)
    if decoded["type"] == "error":
        assert decoded["code"] != "internal", decoded
    return decoded


class TestNoInputCrashesTheHandler:
    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(raw=st.binary(max_size=256))
    def test_any_bytes(self, loop, open_session, raw):
        one_reply(loop, open_session, raw)

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(value=json_values)
    def test_any_json_value(self, loop, open_session, value):
        one_reply(loop, open_session, json.dumps(value))

    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(message=messages)
    def test_message_shaped_json(self, loop, open_session, message):
        one_reply(loop, open_session, json.dumps(message))

    def test_an_unauthenticated_session_answers_and_closes(self, loop):
        store = loop.run_until_complete(SQLiteStore.open(":memory:"))
        session = Session(store, ScriptedDice([]))
        reply = loop.run_until_complete(session.receive(b"\xff\xfe"))
        assert reply.close_code == 4001 and json.loads(reply.frames[0])["code"] == "bad_message"
        loop.run_until_complete(store.close())


points = st.builds(lambda i, code, charges: point(f"p{i}", f"Point {i}", code, charges),
                   st.integers(0, 5), st.sampled_from([None, "archery", "melee", "aur"]),
                   st.none() | st.integers(0, 3))


class TestRulesInvariants:
    @given(roll=st.integers(1, 100), eml=st.integers(-50, 200), mod=st.integers(-5, 5))
    def test_grade_is_the_four_levels_shifted_by_the_modifier(self, roll, eml, mod):
        level = sohl.grade(roll, eml, mod) - mod
        assert level in (-1, 0, 1, 2)
        assert (level >= 1) == (roll <= eml)
        assert (level in (-1, 2)) == (roll % 5 == 0)

    @given(level=st.integers(-20, 20), fate_roll=st.integers(1, 100), aura=st.integers(1, 200),
           choice=st.sampled_from(["spend", "keep"]), charges=st.none() | st.integers(1, 5))
    def test_levels_shift_only_as_the_outcome_says_and_charges_never_go_negative(
            self, level, fate_roll, aura, choice, charges):
        effect = sohl.fate_test_effect(sohl.grade(fate_roll, sohl.fate_ml(aura)))
        if effect.outcome == "choice":
            effect = sohl.choice_effect(choice)
        assert effect.gain in (0, 1, 2)
        assert sohl.apply_gain(level, effect.gain) - level == {"lost": 0, "kept": effect.gain, "spent": effect.gain}[effect.outcome]
        after = sohl.charges_after(charges, bool(effect.consumes_charge))
        assert after is None if charges is None else 0 <= after <= charges

    @given(pts=st.lists(points, max_size=6, unique_by=lambda p: p["point_id"]), code=st.sampled_from(["archery", "melee"]))
    def test_suggested_points_all_apply_and_specific_come_first(self, pts, code):
        from bridge.rulesets.sohl.wire import FatePoint
        objects = [FatePoint(**p) for p in pts]
        suggested = sohl.suggested_points(objects, code)
        assert all(sohl.point_applies(p, code) for p in suggested)
        specific = [bool(p.skill_code) for p in suggested]
        assert specific == sorted(specific, reverse=True)

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(dice=st.lists(st.integers(1, 100), min_size=3, max_size=3), charges=st.integers(0, 2),
           choice=st.sampled_from(["spend", "keep"]))
    def test_a_result_is_fated_at_most_once_and_charges_stay_non_negative(self, loop, dice, charges, choice):
        async def scenario() -> list[dict]:
            store = await SQLiteStore.open(":memory:")
            await store.add_world("w", None)
            session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
            one = actor(fate_points=[point("p", "P", None, charges)])
            replies = []
            for n, die in enumerate(dice):
                replies.append(await session.receive(frame(rolled(f"r{n}", "m1", actor_part=one)), ScriptedDice([])))
                replies.append(await session.receive(frame(fate_spend(f"s{n}", "m1", point_id="p")), ScriptedDice([die])))
                replies.append(await session.receive(frame(fate_choice(choice, f"c{n}", "m1")), ScriptedDice([])))
            await store.close()
            return [json.loads(r.frames[0]) for r in replies]

        replies = loop.run_until_complete(scenario())
        fate_tests = [r for r in replies if r["type"] == "fate_resolved" and r["event_id"].startswith("s")]
        assert len(fate_tests) <= 1
        for reply in replies:
            if reply["type"] == "fate_resolved":
                charges_after = reply["point"]["charges_after"]
                assert charges_after is not None and 0 <= charges_after <= charges


class TestWorldRemovedWhileConnected:
    """`fate-bridge world remove` from another process: the connected forwarder's next frame is
    refused `unauthorized` and the link closed 4001; nothing more is written for that world."""

    @pytest.mark.parametrize("message", [
        {"type": "test_rolled", "v": 1, "event_id": "r1", "ruleset": "sohl", "message_id": "m1",
         "actor": actor(), "test": sohl_test()},
        {"type": "audit_query", "v": 1, "query_id": "q1"},
        {"type": "chart_catalog_query", "v": 1, "event_id": "c1"},
    ], ids=["decision", "audit_query", "query"])
    async def test_next_frame_closes_4001(self, store, token, message):
        server, url = await started(store)
        async with connect(url) as ws:
            await ask(ws, hello(token))
            await store.remove_world(WORLD)
            reply = await ask(ws, message)
            assert (reply["code"], reply["ref"]) == ("unauthorized", message.get("event_id") or message.get("query_id"))
            assert "is not registered" in reply["message"] or "is no longer registered" in reply["message"]
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), TIMEOUT)
            assert ws.close_code == 4001
        assert await store.audit_rows(AuditFilter(world_id=WORLD)) == []
        await stopped(server)


class TestBoundedQueues:
    """Issue 4: every connection's inbound queue and frame size are bounded (then TCP pushes back)."""

    async def test_each_connection_is_bounded(self, store, token):
        server, url = await started(store)
        async with connect(url) as ws:
            await ask(ws, hello(token))
            (connection,) = server.connections
            assert connection.max_queue_high == bridge_server.MAX_QUEUE_FRAMES == 16
            assert connection.protocol.max_message_size == bridge_server.MAX_FRAME_BYTES == 64 * 1024
        await stopped(server)


class TestWorldRemovedThenAddedAgain:
    async def test_a_fated_result_stays_fated(self, store, token):
        """Newcomer review: remove + add must not let an old card be fated twice (S11)."""
        session = Session(store, ScriptedDice([]), trusted=True, default_world=WORLD)
        await session.receive(frame(rolled("r1", "m1")))
        await session.receive(frame(fate_spend("s1", "m1")), ScriptedDice([34]))
        await store.remove_world(WORLD)
        assert await store.world(WORLD) is None
        await store.add_world(WORLD, hash_token(new_token()))
        again = json.loads((await session.receive(frame(fate_spend("s2", "m1")), ScriptedDice([34]))).frames[0])
        assert again["code"] == "already_fated"
        replay = json.loads((await session.receive(frame(fate_spend("s1", "m1")))).frames[0])
        assert replay["type"] == "fate_resolved"
