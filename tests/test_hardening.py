"""Issue 16: the decode guard (bridge/wire/guard.py), the limits per world and per address
(bridge/limits.py) and how the server applies them (bridge/server.py, bridge/connection.py), and
``resolve`` going on after a bad line. The fuzz test (test_fuzz.py) sends thousands of frames;
these pin each rule."""

from __future__ import annotations

import asyncio
import json

import pytest
from structlog.testing import capture_logs
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from bridge import connection, registry, server as bridge_server
from bridge import wire
from bridge.errors import BadMessage, UnknownMessage
from bridge.limits import Admission, Limits, WorldRates
from bridge.session import hash_token, new_token
from bridge.wire.guard import MAX_DEPTH, MAX_FRAME_BYTES, check

from .helpers import eventually, run_bridge
from .served import TIMEOUT, ask, started, stopped, store, token  # noqa: F401 (store, token: fixtures)
from .sohl_messages import rolled

WORLD = "hard-world"


def refusal(frame: bytes | str) -> BadMessage:
    with pytest.raises(BadMessage) as refused:
        registry.decode_client(frame)
    return refused.value


class TestDecodeGuard:
    def test_deep_nesting_is_refused_naming_the_top_level_field(self):
        frame = '{"type":"hello","v":1,"event_id":' + "[" * 1000 + "]" * 1000 + "}"
        refused = refusal(frame)
        assert (refused.field, refused.message) == ("event_id", f"objects and arrays nested more than {MAX_DEPTH} deep in `event_id`")

    def test_nesting_at_the_bound_goes_on_to_validation(self):
        frame = '{"type":"ping","v":1,"x":' + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "}"
        assert refusal(frame).field == "x"  # unknown field, not too deep

    def test_brackets_inside_strings_do_not_count(self):
        message = {**rolled("e1", "m1"), "message_id": "[" * 5000}
        assert refusal(json.dumps(message)).field == "message_id"  # too long (128), not too deep

    def test_unbalanced_brackets_are_refused_without_a_field(self):
        assert refusal("[" * 50_000).field is None

    def test_oversize_is_refused_before_decoding(self):
        assert "over the limit of 65536 bytes" in refusal(b" " * (MAX_FRAME_BYTES + 1)).message

    @pytest.mark.parametrize(("frame", "field"), [
        (rb'{"type":"hello","v":1,"world_id":"\ud800x"}', "world_id"),
        (rb'{"type":"hello","v":1,"world_id":"w","token":"\udfff"}', "token"),
        (rb'{"type":"hello","v":1,"wor\udc00ld":"w"}', "wor\\udc00ld"),
        (b'{"type":"hello","v":1,"world_id":"w","client":{"module_version":"\xff"}}', "client.module_version"),
        (b'{"type":"hello","v":1,"world_id":NaN}', "world_id"),
        (b'{"type":"hello","v":1,"world_id":"w" "x"}', "world_id"),
        (b'{"type":"hello","v":1,"world_id":"w"', None),  # truncated: nothing to blame
    ])
    def test_undecodable_frames_name_their_field(self, frame, field):
        assert refusal(frame).field == field

    def test_a_surrogate_pair_and_an_escaped_backslash_are_fine(self):
        assert registry.decode_client(rb'{"type":"hello","v":1,"world_id":"\ud83c\udfb2"}').world_id == "\U0001f3b2"
        assert registry.decode_client(rb'{"type":"hello","v":1,"world_id":"\\ud800"}').world_id == "\\ud800"

    def test_ref_of_survives_what_the_decoder_refuses(self):
        assert wire.ref_of('{"event_id":"e1","x":' + "[" * 5000 + "}") is None
        assert wire.ref_of(rb'{"event_id":"e1","x":"\ud800"}') is None
        assert wire.ref_of('{"event_id":"e1","type":"nope"}') == "e1"
        with pytest.raises(UnknownMessage):
            registry.decode_client('{"event_id":"e1","type":"nope"}')

    def test_check_passes_every_real_message(self):
        assert check(json.dumps(rolled("e1", "m1"))) is None


class TestAdmission:
    def admission(self, **limits) -> tuple[Admission, list[float]]:
        now = [0.0]
        return Admission(Limits(**limits), lambda: now[0]), now

    def test_connections_per_address_and_in_total(self):
        admission, _ = self.admission(connections_per_address=2, connections_total=3)
        assert [admission.connect("a", f"a{n}") for n in range(3)] == [None, None, "connections_per_address"]
        assert admission.connect("b", "b0") is None
        assert admission.connect("c", "c0") == "connections_total"
        admission.disconnect("a", "a0")
        assert admission.connect("c", "c0") is None
        assert (admission.total, admission.pending) == (3, 3)

    def test_pending_hellos_are_counted_until_hello(self):
        admission, _ = self.admission(pending_hello=2)
        assert [admission.connect(a, a) for a in "abc"] == [None, None, "pending_hello"]
        admission.said_hello("a")
        assert admission.connect("c", "c") is None
        admission.disconnect("c", "c")
        admission.disconnect("a", "a")
        assert (admission.total, admission.pending) == (1, 1)  # b, still pending

    def test_with_evict_the_oldest_pending_connection_makes_room(self):
        evicted = []
        admission = Admission(Limits(pending_hello=2), lambda: 0.0, evicted.append)
        for conn in ("a1", "a2", "a3"):
            assert admission.connect("a", conn) is None
        assert evicted == ["a1"] and admission.pending == 2
        admission.said_hello("a2")
        assert admission.connect("a", "a4") is None
        assert evicted == ["a1"]  # a room was free: a2 said hello
        admission.connect("a", "a5")
        assert evicted == ["a1", "a3"]  # a2 is past hello: never evicted
        admission.disconnect("a", "a1")  # an evicted connection closes: counted once
        assert (admission.total, admission.pending) == (4, 2)

    def test_connect_rate_per_address(self):
        admission, now = self.admission(connect_rate=1.0, connect_burst=2)
        assert [admission.connect("a", n) for n in range(3)] == [None, None, "connect_rate"]
        assert admission.connect("b", 3) is None  # another address has its own
        now[0] = 1.0
        assert admission.connect("a", 4) is None

    def test_addresses_never_seen_say_hello_share_one_connect_bucket(self):
        """A flood spread over many addresses (each under its own connect rate) is refused at the
        accept past ``new_address_burst``; an address that completed a hello is not counted."""
        admission, now = self.admission(new_address_rate=2.0, new_address_burst=3)
        assert [admission.connect(f"10.0.0.{n}", n) for n in range(4)] == [None, None, None, "new_address_rate"]
        admission.hello_succeeded("gm")
        assert [admission.connect("gm", f"gm{n}") for n in range(5)] == [None] * 5
        now[0] = 0.5  # one token back at 2 a second
        assert [admission.connect(f"10.0.1.{n}", f"b{n}") for n in range(2)] == [None, "new_address_rate"]

    def test_trusted_addresses_are_known_from_the_start(self):
        """This machine's own address (a health check, a reverse proxy beside the bridge) and the
        host's ``--trusted-address`` skip the new-address bucket and the failure budget."""
        admission, _ = self.admission(new_address_rate=1.0, new_address_burst=1, failed_hello_rate=1.0,
                                      trusted_addresses=("127.0.0.1", "::1", "10.0.0.9"))
        assert admission.connect("10.0.0.1", "a") is None
        assert admission.connect("10.0.0.2", "b") == "new_address_rate"
        assert [admission.connect(address, address) for address in ("127.0.0.1", "::1", "10.0.0.9")] == [None] * 3
        for n in range(5):
            admission.hello_failed(f"10.0.1.{n}")
        assert admission.hello_delay("10.0.0.3") == (1.0, "failed_hello_budget")
        assert admission.hello_delay("10.0.0.9") == (0.0, "")

    def test_failed_hellos_lock_the_address_out_longer_each_time(self):
        admission, now = self.admission(free_failed_hellos=2, max_hello_delay=4.0, failed_hello_rate=1000)
        waits = []
        for _ in range(6):
            assert admission.hello_delay("a")[0] == 0.0
            admission.hello_failed("a")
            waits.append(admission.hello_delay("a")[0])
            now[0] += waits[-1]
        assert waits == [0.0, 0.0, 1.0, 2.0, 4.0, 4.0]
        assert admission.hello_delay("b")[0] == 0.0  # other addresses are not affected

    def test_concurrent_hellos_cannot_overtake_the_failure_count(self):
        admission, now = self.admission(free_failed_hellos=2, failed_hello_rate=1000)
        admission.hello_begin("a")
        admission.hello_begin("a")
        assert admission.hello_delay("a")[0] == 1.0  # two in flight: both may fail, none more
        admission.hello_end("a")
        admission.hello_failed("a")
        assert admission.hello_delay("a")[0] == 1.0  # one failure + one in flight
        admission.hello_end("a")
        assert admission.hello_delay("a")[0] == 0.0
        admission.hello_succeeded("gm")
        for _ in range(20):  # a GM's overlay pages reconnecting at once
            admission.hello_begin("gm")
        assert admission.hello_delay("gm")[0] == 0.0

    def flood(self, admission: Admission, now: list[float], address: str, worlds, until: float) -> int:
        """Bad hellos from ``address`` as fast as they are let through (each world of ``worlds``
        in turn, each refused hello costing no time) until ``until``; how many were checked."""
        checked, turn = 0, 0
        while now[0] < until:
            world = worlds[turn % len(worlds)]
            if (wait := admission.hello_delay(address, world)[0]) > 0:
                now[0] = min(until, now[0] + wait)  # refused before the store: the flood waits it out
                continue
            admission.hello_begin(address, world)
            admission.hello_end(address, world)
            admission.hello_failed(address, world)
            checked, turn = checked + 1, turn + 1
        return checked

    def test_a_flood_on_one_world_keeps_its_correct_token_out_a_few_seconds_at_most(self):
        """Issue 27 measured 8 s of bad hellos keeping a correct token from the same address (a GM
        behind the attacker's NAT) out for 292 s. Now the lockout is per address and world and
        bounded (``max_hello_delay``, 5 s): after 5 free guesses, 1 s, 2 s, 4 s, 5 s."""
        admission, now = self.admission(failed_hello_rate=1000)
        assert Limits().max_hello_delay == 5.0
        assert self.flood(admission, now, "nat", ["gm-world"], until=8.0) == 9  # 5 free + at 0, 1, 3, 7 s
        assert admission.hello_delay("nat", "gm-world")[0] == 4.0  # locked at 7 s for 5 s: the GM waits 4 s
        assert admission.hello_delay("nat", "other-world")[0] == 0.0  # the address's other worlds: not locked
        assert admission.hello_delay("elsewhere", "gm-world")[0] == 0.0  # the world from other addresses: neither
        now[0] = 12.0
        assert admission.hello_delay("nat", "gm-world")[0] == 0.0  # the correct token is checked now
        admission.hello_failed("nat", "gm-world")  # the flood resumes: still never over the bound
        assert admission.hello_delay("nat", "gm-world")[0] == Limits().max_hello_delay

    def test_guessing_many_worlds_locks_the_whole_address_just_as_briefly(self):
        """Spraying world ids (each its own key) is throttled by the address's count for all
        worlds together: past ``ADDRESS_WORLDS`` x 5 failures, every world of the address waits,
        never longer than ``max_hello_delay``."""
        from bridge.limits import ADDRESS_WORLDS

        admission, now = self.admission(failed_hello_rate=1000)
        worlds = [f"guess-{n}" for n in range(100)]
        checked = self.flood(admission, now, "nat", worlds, until=8.0)
        assert checked == 5 * ADDRESS_WORLDS + 4  # 20 free, then at 0, 1, 3, 7 s
        assert admission.hello_delay("nat", "gm-world")[0] == 4.0
        assert admission.hello_delay("elsewhere", "gm-world")[0] == 0.0
        now[0] = 12.0
        assert admission.hello_delay("nat", "gm-world")[0] == 0.0

    def test_the_bridge_wide_failure_budget_spares_addresses_that_said_hello(self):
        admission, _ = self.admission(failed_hello_rate=1.0, free_failed_hellos=100)  # burst 5
        admission.hello_succeeded("gm")
        for n in range(5):
            admission.hello_failed(f"attacker{n}")
        assert admission.hello_delay("newcomer")[0] == 1.0
        assert admission.hello_delay("gm")[0] == 0.0

    def test_refused_connections_wait_in_a_bounded_tarpit(self):
        from bridge.limits import TARPIT_MAX, TARPIT_SECONDS
        admission, _ = self.admission()
        assert [admission.tarpit() for _ in range(TARPIT_MAX + 1)] == [TARPIT_SECONDS] * TARPIT_MAX + [0.0]
        admission.untarpit()
        assert admission.tarpit() == TARPIT_SECONDS

    def test_world_rates_are_one_bucket_per_world(self):
        rates = WorldRates(0.001, 2, lambda: 0.0)
        assert rates.of("w") is rates.of("w")
        assert [rates.of("w").allow() for _ in range(3)] == [True, True, False]
        assert rates.of("x").allow()


def hello(token: str, world: str = WORLD) -> str:
    return json.dumps({"type": "hello", "v": 1, "world_id": world, "token": token})


async def admitted(url: str, seconds: float = 30.0):
    """A connection to ``url``, tried again while it is refused 503 (each refusal waits out the
    tarpit), for up to ``seconds``: a bound on a hang, not a timing."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        try:
            return await connect(url)
        except InvalidStatus as refused:
            if refused.response.status_code != 503 or asyncio.get_running_loop().time() > deadline:
                raise


async def closed_with(ws) -> int | None:
    with pytest.raises(ConnectionClosed):
        await asyncio.wait_for(ws.recv(), TIMEOUT)
    return ws.close_code


class TestServerFrames:
    async def test_a_binary_frame_is_refused_and_the_link_stays(self, store, token):
        server, url = await started(store)
        async with connect(url) as ws:
            await ask(ws, hello(token))
            refused = await ask(ws, json.dumps(rolled("b1", "m1")).encode())
            assert (refused["code"], refused["field"]) == ("bad_message", None)
            assert "binary frames are not accepted" in refused["message"]
            assert (await ask(ws, rolled("b1", "m1")))["type"] == "test_graded"  # not decided before
        await stopped(server)

    async def test_a_binary_hello_is_refused_and_closed_4001(self, store, token):
        server, url = await started(store)
        async with connect(url) as ws:
            with capture_logs() as logs:
                assert (await ask(ws, hello(token).encode()))["code"] == "bad_message"
                assert await closed_with(ws) == 4001
        assert {"event": "connection_refused", "reason": "binary_frame", "address": "127.0.0.1",
                "log_level": "info"} in logs
        await stopped(server)

    async def test_deep_nesting_before_hello_is_answered_not_a_crash(self, store, token):
        server, url = await started(store)
        async with connect(url) as ws:
            refused = await ask(ws, '{"type":"hello","event_id":' + "[" * 1000 + "]" * 1000 + "}")
            assert (refused["code"], refused["field"]) == ("bad_message", "event_id")
            assert await closed_with(ws) == 4001
        await stopped(server)

    async def test_an_oversize_frame_is_logged_with_its_size_and_world(self, store, token):
        server, url = await started(store)
        async with connect(url, max_size=None) as ws:
            await ask(ws, hello(token))
            with capture_logs() as logs:
                await ws.send("x" * (MAX_FRAME_BYTES + 10))
                assert await closed_with(ws) == 1009
                # the server logs once its handler has seen the close, maybe after the client has
                await eventually(lambda: any(e["event"] == "connection_refused" for e in logs), "refusal logged")
        refused = [e for e in logs if e["event"] == "connection_refused"]
        assert refused == [{"event": "connection_refused", "reason": "oversize_frame", "address": "127.0.0.1",
                            "world_id": WORLD, "size": MAX_FRAME_BYTES + 10, "limit": MAX_FRAME_BYTES,
                            "log_level": "info"}]
        await stopped(server)


class TestServerLimits:
    async def test_reconnecting_does_not_refill_the_worlds_rate(self, store, token):
        server, url = await started(store, rate=(0.001, 3))
        async with connect(url) as ws:
            await ask(ws, hello(token))  # 1
            await ask(ws, rolled("r1", "m1"))  # 2
            await ask(ws, rolled("r2", "m2"))  # 3
        async with connect(url) as ws:
            assert (await ask(ws, hello(token)))["type"] == "welcome"
            refused = await ask(ws, rolled("r3", "m3"))
            assert (refused["code"], refused["ref"]) == ("rate_limited", "r3")
        await stopped(server)

    async def test_a_connection_past_its_rate_is_read_no_further_until_the_bucket_refills(
            self, store, token, monkeypatch):
        """A forwarder that pumps frames without waiting gets one ``rate_limited`` per token the
        bucket would have, not one per frame: its further frames are not handled (past the
        receive queue they stay in its own socket buffers), so it cannot take the event loop
        from other worlds. Its close ends the wait."""
        monkeypatch.setattr(connection, "MAX_PACE_SECONDS", 3600.0)  # the bucket never refills here
        server, url = await started(store, rate=(0.001, 2))
        async with connect(url) as ws:
            await ask(ws, hello(token))  # the first token
            assert (await ask(ws, rolled("r1", "m1")))["type"] == "test_graded"  # the second
            for n in range(2, 12):  # the pump: 10 frames (within the receive queue), no waiting
                await ws.send(json.dumps(rolled(f"r{n}", f"m{n}")))
            refused = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
            assert (refused["code"], refused["ref"]) == ("rate_limited", "r2")
            assert refused["message"] == ("more than 0.001 messages a second: this one was not handled; "
                                          "send it again later with the same event_id")
            with pytest.raises(TimeoutError):  # nothing more is handled, so nothing more is answered
                await asyncio.wait_for(ws.recv(), 0.5)
        await asyncio.wait_for(stopped(server), TIMEOUT)  # the paced handler saw the close

    async def test_connections_over_the_per_address_cap_get_503_and_others_are_served(self, store, token):
        server, url = await started(store, limits=Limits(connections_per_address=2))
        async with connect(url) as gm, connect(url):
            await ask(gm, hello(token))
            with capture_logs() as logs, pytest.raises(InvalidStatus) as refused:
                async with connect(url):
                    pass
            assert refused.value.response.status_code == 503
            assert (await ask(gm, {"type": "ping", "v": 1}))["type"] == "pong"
        assert [e["reason"] for e in logs if e["event"] == "connection_refused"] == ["connections_per_address"]
        # closed connections are no longer counted once the server has seen them close (perhaps a
        # moment after the client has, issue 26): a new one is then served, not refused 503
        async with await admitted(url) as ws:
            assert (await ask(ws, hello(token)))["type"] == "welcome"
        await stopped(server)

    async def test_the_oldest_connection_without_hello_makes_room_for_a_new_one(self, store, token):
        server, url = await started(store, limits=Limits(pending_hello=1))
        async with connect(url) as silent:
            with capture_logs() as logs:
                async with connect(url) as gm:
                    assert await closed_with(silent) == 1006  # dropped: the GM's connection gets in
                    assert (await ask(gm, hello(token)))["type"] == "welcome"
                    async with connect(url) as ws:  # the GM is past hello: not dropped
                        assert (await ask(ws, {"type": "ping", "v": 1}))["code"] == "unauthorized"
                    assert (await ask(gm, {"type": "ping", "v": 1}))["type"] == "pong"
        assert {"event": "connection_dropped", "reason": "pending_hello", "address": "127.0.0.1",
                "log_level": "info"} in logs
        await stopped(server)

    async def test_failed_hellos_lock_the_world_out_for_the_address_without_reading_the_store(
            self, store, token, monkeypatch):
        other_token = new_token()
        await store.add_world("other", hash_token(other_token))
        server, url = await started(store, limits=Limits(free_failed_hellos=2))
        reads = []
        world = store.world

        async def counted(world_id):
            reads.append(world_id)
            return await world(world_id)

        monkeypatch.setattr(store, "world", counted)
        with capture_logs() as logs:
            for wrong in ("nope", WORLD, WORLD):  # per address and world: "nope" does not count for WORLD
                async with connect(url) as ws:
                    assert (await ask(ws, hello("wrong", wrong)))["code"] == "unauthorized"
                    assert await closed_with(ws) == 4001
            async with connect(url) as ws:
                assert (await ask(ws, hello("wrong")))["code"] == "unauthorized"  # WORLD's 3rd: locked 1 s after
            async with connect(url) as ws:
                refused = await ask(ws, hello(token))  # even the right token waits
                assert refused["code"] == "rate_limited" and "try again in 1 s" in refused["message"]
                assert await closed_with(ws) == 1013
            async with connect(url) as ws:  # the address's other worlds are not locked out
                assert (await ask(ws, hello(other_token, "other")))["type"] == "welcome"
        assert reads == ["nope", WORLD, WORLD, WORLD, "other"]
        events = [(e["event"], e.get("reason"), e.get("world_id")) for e in logs if "refused" in e["event"]]
        assert events == [("hello_refused", "unknown_world", "nope"), ("hello_refused", "wrong_token", WORLD),
                          ("hello_refused", "wrong_token", WORLD), ("hello_refused", "wrong_token", WORLD),
                          ("connection_refused", "failed_hellos", WORLD)]
        assert not any(token in json.dumps(e, default=str) for e in logs)
        await asyncio.sleep(1.05)
        async with connect(url) as ws:
            assert (await ask(ws, hello(token)))["type"] == "welcome"
        await stopped(server)

    async def test_a_locked_out_hello_is_refused_in_the_language_it_names(self, store, token):
        """docs/protocol.md, Languages: a refused hello is answered in the language it names;
        the lockout's refusal too (its German is in the catalog)."""
        server, url = await started(store, limits=Limits(free_failed_hellos=1))
        for _ in range(2):  # the second failure locks WORLD out for this address for 1 s
            async with connect(url) as ws:
                assert (await ask(ws, hello("wrong")))["code"] == "unauthorized"
        async with connect(url) as ws:
            german = {"type": "hello", "v": 1, "world_id": WORLD, "token": token, "client": {"language": "de"}}
            refused = await ask(ws, german)
            assert refused["code"] == "rate_limited"
            assert refused["message"] == "zu viele fehlgeschlagene hellos: versuche es in 1 s erneut"
        await stopped(server)

    async def test_correct_hellos_at_once_are_not_refused_as_failed_hellos(self, store, token, monkeypatch):
        """After a restart no address is known, so a new address may have only a few hellos
        checked at once (concurrent guesses must not overtake the failure count). The tables
        behind one reverse proxy, or a GM's overlay pages, reconnecting together pass that
        bound with correct tokens: their refusal (and its log line) must not say that hellos
        failed when none did."""
        server, url = await started(store)
        gate, world = asyncio.Event(), store.world

        async def slow(world_id):  # every hello is still being checked when the next arrives
            await gate.wait()
            return await world(world_id)

        monkeypatch.setattr(store, "world", slow)
        # from an address not yet known (127.0.0.1, this machine, is trusted), within its burst (40)
        sockets = [await connect(url, local_addr=("127.0.0.2", 0)) for _ in range(6)]
        with capture_logs() as logs:
            for ws in sockets:  # the world's free failures (5): as many may be checked at once
                await ws.send(hello(token))
            replies = [asyncio.ensure_future(ws.recv()) for ws in sockets]
            await asyncio.wait(replies, timeout=TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
            gate.set()  # one was refused without being checked; the others are checked now
            answers = [json.loads(answer) for answer in await asyncio.wait_for(asyncio.gather(*replies), TIMEOUT)]
        refused = [answer for answer in answers if answer["type"] == "error"]
        assert [answer["code"] for answer in refused] == ["rate_limited"]
        assert refused[0]["message"] == "too many hellos from this address at once: try again in 1 s"
        assert [e["reason"] for e in logs if e["event"] == "connection_refused"] == ["hellos_in_flight"]
        for ws in sockets:
            await ws.close()
        await stopped(server)

    async def test_a_foreign_origin_is_logged(self, store, token):
        server, url = await started(store, origins=["http://localhost:30000"])
        with capture_logs() as logs, pytest.raises(InvalidStatus):
            async with connect(url, origin="http://evil.example"):
                pass
        assert [(e["reason"], e["origin"]) for e in logs if e["event"] == "connection_refused"] == [
            ("origin", "http://evil.example")]
        await stopped(server)


async def test_a_flood_of_refusals_is_logged_once_each_in_few_lines(monkeypatch):
    monkeypatch.setattr(bridge_server, "REFUSAL_LOG_WINDOW_SECONDS", 0.05)
    refusals = bridge_server.RefusalLog()
    with capture_logs() as logs:
        for _ in range(1000):
            refusals.refused("connect_rate", "10.0.0.9")
        refusals.refused("connections_total", "10.0.0.8")
        await asyncio.sleep(0.1)
        refusals.refused("connect_rate", "10.0.0.9")  # a new window
    assert [(e["reason"], e["address"], e.get("repeated")) for e in logs] == [
        ("connect_rate", "10.0.0.9", None), ("connections_total", "10.0.0.8", None),
        ("connect_rate", "10.0.0.9", 999), ("connect_rate", "10.0.0.9", None)]


def test_every_limit_has_a_serve_flag_and_zero_is_refused():
    from bridge import cli
    assert {name for _, name, _, _ in cli._LIMIT_FLAGS} | {"trusted_addresses"} == set(Limits.__dataclass_fields__)
    result = run_bridge("serve", "--max-connections-per-address", "0")
    assert result.returncode == 2
    assert "argument --max-connections-per-address: 0 must be above 0" in result.stderr
    help_text = run_bridge("serve", "--help").stdout
    assert "--failed-hello-rate N" in help_text and "(default 32)" in help_text
    assert "--trusted-address IP" in help_text
    result = run_bridge("serve", "--trusted-address", "lb.example")
    assert result.returncode == 2
    assert "argument --trusted-address: 'lb.example' is not an IP address" in result.stderr


def test_every_reason_to_wait_before_a_hello_has_its_own_words():
    from typing import get_args

    from bridge.connection import HELLO_WAITS
    from bridge.limits import HelloWaitReason
    assert set(HELLO_WAITS) == set(get_args(HelloWaitReason))
    assert len({text for text, _ in HELLO_WAITS.values()}) == len({close for _, close in HELLO_WAITS.values()}) == 3
    assert "failed" not in HELLO_WAITS["hellos_in_flight"][0] + HELLO_WAITS["hellos_in_flight"][1]


@pytest.mark.parametrize(("peername", "address"), [
    (("10.0.0.5", 50000), "10.0.0.5"), (("::ffff:10.0.0.5", 50000, 0, 0), "10.0.0.5"),
    (("fd00::5", 50000, 0, 0), "fd00::5"), (None, "?")])
def test_a_peer_is_named_as_the_limits_and_trusted_addresses_write_it(peername, address):
    class Transport:
        def get_extra_info(self, name):
            return peername if name == "peername" else None

    from bridge.connection import peer_address
    assert peer_address(Transport()) == address  # type: ignore[arg-type]


def test_serve_trusts_the_loopback_addresses_and_each_trusted_address_given():
    from bridge import cli
    args = cli._parser().parse_args(["serve", "--trusted-address", "10.0.0.5", "--trusted-address", "[fd00::5]",
                                     "--new-address-rate", "7"])
    limits = cli.serve_limits(args)
    assert limits.trusted_addresses == ("127.0.0.1", "::1", "10.0.0.5", "fd00::5")
    assert limits.new_address_rate == 7.0 and limits.new_address_burst == Limits().new_address_burst


def test_resolve_answers_bad_lines_and_goes_on():
    lines = ['{"type":"ping","v":1,"event_id":' + "[" * 3000 + "]" * 3000 + "}",
             '{"type":"ping","v":1,"x":"\\ud800"}', '{"type":"ping","v":1}']
    result = run_bridge("resolve", stdin="\n".join(lines) + "\n")
    replies = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["type"], r.get("field")) for r in replies] == [("error", "event_id"), ("error", "x"), ("pong", None)]
    assert result.returncode == 0


def test_resolve_answers_a_line_that_is_not_utf8(tmp_path):
    import subprocess
    import sys
    from .helpers import ROOT
    result = subprocess.run([sys.executable, "-m", "bridge", "resolve"], input=b'{"type":"ping","v":1,"x":"\xff"}\n{"type":"ping","v":1}\n',
                            capture_output=True, cwd=ROOT, timeout=60)
    replies = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["type"], r.get("code")) for r in replies] == [("error", "bad_message"), ("pong", None)]
    assert result.returncode == 0
