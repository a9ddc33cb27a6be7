"""``/status`` and ``fate-bridge status`` (issue 14): through a real connection, the bridge
reports the connected world, the GM holding its link, its last decision and its viewers, and
the worlds it holds in memory against its budget (issue 27)."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from datetime import datetime, timedelta

import pytest

from bridge import server as bridge_server
from bridge.cli import main
from bridge.dice import ScriptedDice
from bridge.session import Session, hash_token, new_token
from bridge.startup import lan_addresses
from bridge.status import Link, Presence, report
from bridge.store import AuditFilter

from .test_server import archery_test_rolled, ask, client_info, connected

GM_NAME = "Gamemaster Gwen"


def get_status(url: str, token: str | None = None) -> tuple[int, dict | str]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as refused:
        with refused:
            return refused.code, refused.read().decode()


@pytest.fixture
async def two_worlds(store):
    tokens = {world: new_token() for world in ("table-a", "table-b")}
    for world, token in tokens.items():
        await store.add_world(world, hash_token(token))
    return tokens


async def gm_link(url: str, world: str, token: str):
    ws = await connected(url)
    welcome = await ask(ws, {"type": "hello", "v": 1, "world_id": world, "token": token,
                             "client": {**client_info(), "user_name": GM_NAME}})
    assert welcome["type"] == "welcome", welcome
    return ws


class TestStatus:
    async def test_status_shows_the_connected_world_its_gm_and_last_decision(self, store, two_worlds, capsys):
        server = await bridge_server.start(store, "127.0.0.1", 0, dice=ScriptedDice([]))
        port = server.sockets[0].getsockname()[1]
        try:
            ws = await gm_link(f"ws://127.0.0.1:{port}", "table-a", two_worlds["table-a"])
            graded = await ask(ws, archery_test_rolled("ev-1", "msgArchery0001"))
            assert graded["type"] == "test_graded"
            viewer = await connected(f"ws://127.0.0.1:{port}")
            key = await store.viewer_key("table-a", new_token())
            assert (await ask(viewer, {"type": "hello", "v": 1, "world_id": "table-a",
                                       "viewer_key": key}))["type"] == "welcome"

            code, report = await asyncio.to_thread(get_status, f"http://127.0.0.1:{port}/status")
            assert code == 200
            wrong, _ = await asyncio.to_thread(get_status, f"http://127.0.0.1:{port}/status", "wrong")
            assert wrong == 401  # a token is judged by itself, even from this machine
            worlds = {w["world_id"]: w for w in report["worlds"]}
            a, b = worlds["table-a"], worlds["table-b"]
            assert a["link"]["user_name"] == GM_NAME
            assert (a["link"]["foundry_version"], a["link"]["module_version"]) == ("13.345", "0.1.0")
            assert a["decisions_last_hour"] == 1
            assert (a["last_decision"]["type"], a["last_decision"]["outcome"]) == ("test_rolled", "graded")
            assert a["last_decision"]["actor_name"] == "Basic Folk"
            assert a["overlay_viewers"] == 1
            assert (b["link"], b["decisions_last_hour"], b["last_decision"]) == (None, 0, None)
            # the memory budget (issue 27): table-a decided, so its state is held; table-b's is not
            assert (report["worlds_in_memory"], report["max_worlds_in_memory"]) == (1, store.max_worlds)

            assert await asyncio.to_thread(main, ["status", "--url", f"http://127.0.0.1:{port}"]) == 0
            printed = capsys.readouterr().out
            assert f"link: {GM_NAME} since" in printed and "Foundry 13.345, module 0.1.0" in printed
            assert "last decision:" in printed and "test_rolled -> graded, Basic Folk" in printed
            assert "overlay viewers: 1" in printed
            assert f"worlds in memory: 1 of at most {store.max_worlds} (serve --max-worlds-in-memory" in printed
            await viewer.close()

            await ws.close()

            async def link() -> dict | None:  # the server lets the link go once it has seen the close
                _, now = await asyncio.to_thread(get_status, f"http://127.0.0.1:{port}/status")
                return {w["world_id"]: w["link"] for w in now["worlds"]}["table-a"]

            deadline = asyncio.get_running_loop().time() + 30  # a bound on a hang, not a timing (issue 26)
            while (after := await link()) is not None and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.01)
            assert after is None
        finally:
            server.close()
            await server.wait_closed()

    async def test_from_another_machine_only_with_a_token_and_only_its_world(self, store, two_worlds):
        addresses = lan_addresses()
        if not addresses:
            pytest.skip("this machine has no non-loopback address to ask /status from")
        server = await bridge_server.start(store, "0.0.0.0", 0)
        port = server.sockets[0].getsockname()[1]
        url = f"http://{addresses[0]}:{port}/status"
        try:
            code, text = await asyncio.to_thread(get_status, url)
            assert code == 401 and "Authorization: Bearer WORLD_TOKEN" in text
            code, _ = await asyncio.to_thread(get_status, url, "not-a-token")
            assert code == 401
            code, report = await asyncio.to_thread(get_status, url, two_worlds["table-b"])
            assert code == 200
            assert [w["world_id"] for w in report["worlds"]] == ["table-b"]
        finally:
            server.close()
            await server.wait_closed()

    async def test_a_proxy_on_this_machine_does_not_make_a_request_local(self, store, two_worlds):
        server = await bridge_server.start(store, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            for header in ("X-Forwarded-For", "Forwarded", "X-Real-IP"):
                request = urllib.request.Request(f"http://127.0.0.1:{port}/status",
                                                 headers={header: "198.51.100.7"})
                with pytest.raises(urllib.error.HTTPError) as refused:
                    await asyncio.to_thread(urllib.request.urlopen, request, timeout=30)
                with refused.value:
                    assert refused.value.code == 401
        finally:
            server.close()
            await server.wait_closed()

    async def test_a_wrong_token_is_named_as_the_problem(self, store, two_worlds, capsys):
        """``status --token WRONG`` on the bridge's own machine (issue 25): the answer is about the
        token, not about "this machine", and says where a right one comes from."""
        server = await bridge_server.start(store, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            code = await asyncio.to_thread(main, ["status", "--url", f"http://127.0.0.1:{port}", "--token", "WRONG"])
        finally:
            server.close()
            await server.wait_closed()
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1, err
        assert "answered 401: this token is no registered world's token" in err
        assert "`fate-bridge world rotate-token WORLD_ID`" in err and "this machine," not in err

    def test_status_without_a_bridge_is_one_clear_line(self, capsys):
        from .test_server import free_port

        assert main(["status", "--url", f"http://127.0.0.1:{free_port()}"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is `fate-bridge serve` running there?" in err



def hours_later(ts: str, hours: int) -> str:
    """An audit timestamp (``YYYY-MM-DDTHH:MM:SS.mmmZ``) moved ``hours`` on, in the same format."""
    moved = datetime.fromisoformat(ts.rstrip("Z")) + timedelta(hours=hours)
    return moved.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moved.microsecond // 1000:03d}Z"


class TestLastHour:
    async def test_decisions_older_than_an_hour_are_not_counted_but_the_last_one_shows(self, store, two_worlds):
        session = Session(store, ScriptedDice([]), trusted=True, default_world="table-a")
        reply = await session.receive(json.dumps(archery_test_rolled("ev-1", "msgArchery0001")))
        assert b'"test_graded"' in reply.frames[0]
        (row,) = await store.audit_rows(AuditFilter(world_id="table-a"))
        now = row.ts
        presence = Presence(clock=lambda: now)

        (fresh,) = (await report(store, presence, lambda world: 0, "table-a")).worlds
        assert (fresh.decisions_last_hour, fresh.last_decision.ts) == (1, row.ts)
        now = hours_later(row.ts, 2)
        (later,) = (await report(store, presence, lambda world: 0, "table-a")).worlds
        assert (later.decisions_last_hour, later.last_decision.ts) == (0, row.ts)


class TestPresenceAcrossProcesses:
    """/status on a cluster: links announced by other processes (bridge.cluster notices)."""

    @staticmethod
    def link(user: str) -> Link:
        return Link(user_name=user, foundry_version=None, module_version=None, system_id=None,
                    since="2026-12-01T12:00:00.000Z")

    def test_the_old_holders_late_unlink_does_not_erase_the_new_holders_link(self):
        presence = Presence()
        presence.elsewhere("w", self.link("GM Alice"), "process-0")
        presence.elsewhere("w", self.link("GM Bob"), "process-1")  # Bob took over on another process
        presence.elsewhere("w", None, "process-0")  # Alice's process says so after Bob's did
        assert presence.link("w").user_name == "GM Bob"
        presence.elsewhere("w", None, "process-1")
        assert presence.link("w") is None

    def test_another_processes_unlink_leaves_a_link_held_here(self):
        presence = Presence()
        connection = object()
        presence.linked("w", connection, None)
        presence.elsewhere("w", None, "process-0")
        assert presence.link("w") is not None
        assert presence.unlinked("w", connection) and presence.link("w") is None
