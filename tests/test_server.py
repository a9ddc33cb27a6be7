"""The bridge through a real WebSocket on 127.0.0.1 (``bridge/server.py`` and the session, store
and dispatch behind it), against ``docs/protocol.md``.

Every test starts ``bridge.server.start`` in-process on port 0 with a SQLite file in ``tmp_path``
and :class:`~bridge.dice.ScriptedDice`, so every Fate Test roll is known. The default dice hold no
value: a roll nobody expected is answered ``bad_message`` (field ``dice``) and the test fails.
One test runs ``python -m bridge`` as real processes to check a restart after SIGTERM.

Nothing sleeps to order events: every wait is on a reply or a close, bounded by
``REPLY_TIMEOUT``. The values are the Archery card of ``examples/sohl-session.jsonl``: Archery EML
55 rolled 88 is MF (0); Aura EML 55 gives Fate ML 50 + 55 // 2 = 77, so a Fate Test of 34 is MS,
45 CS, 78 MF and 80 CF (S1, S4).
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import sys
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs
from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import Server

import bridge

from bridge import links, registry, server as bridge_server, wire
from bridge.dice import ScriptedDice
from bridge.session import hash_token, new_token
from bridge.store import SQLiteStore

from .sohl_messages import sohl_test

# --- limits of the tests themselves ------------------------------------------------------------

REPLY_TIMEOUT = 30.0  # a bound on a hang: a reply or a close from an in-process bridge comes in milliseconds
PROCESS_TIMEOUT = 60.0  # a bound on a hang: a `python -m bridge` process starts / stops in about a second
HEALTH_POLL_INTERVAL = 0.05  # between GET /healthz tries while a process starts
SHORT_HELLO_TIMEOUT = 0.2  # the server's hello timeout in the 4002 test

# --- the Archery card of examples/sohl-session.jsonl -------------------------------------------

WORLD_ID = "sohl-test-world"
OWNER = "PLACEHOLDERusr01"  # the player owning Basic Folk
GM = "gmUser000000001"  # the GM: an owner too, as in Foundry
STRANGER = "otherPlayer0001"  # owns nothing
ACTOR_ID = "d1cddnpaqRl0a0Q8"
LUCKY_STAR = "luckystar1item0"  # general, limited: the point every spend uses
ARCHERS_EYE = "archerseye0item"  # specific to archery, 1 charge: suggested first
BLADE_OF_DESTINY = "bladedestinyitm"  # specific to melee, unlimited: never applies to Archery
AURA_EML = 55
FATE_ML = 77  # S4: 50 + 55 // 2
CHARGES_PATH = "system.charges.value"

# Fate Test d100 values against Fate ML 77 (S1): <= 77 succeeds, units 0/5 are critical.
FATE_MS = 34
FATE_CS = 45
FATE_MF = 78
FATE_CF = 80


@dataclass(frozen=True)
class World:
    """A registered world and its clear token (only the hash is stored)."""

    world_id: str
    token: str


def client_info() -> dict[str, str]:
    return {
        "module_version": "0.1.0",
        "foundry_version": "13.345",
        "system_id": "sohl",
        "system_version": "0.9.0",
    }


def hello(world_id: str, token: str | None) -> dict[str, Any]:
    message: dict[str, Any] = {"type": "hello", "v": 1, "world_id": world_id,
                               "client": client_info()}
    if token is not None:
        message["token"] = token
    return message


def ping() -> dict[str, Any]:
    return {"type": "ping", "v": 1}


def archery_test_rolled(
    event_id: str,
    message_id: str,
    charges: int = 2,
    *,
    actor_name: str = "Basic Folk",
    roll: int = 88,
) -> dict[str, Any]:
    """Basic Folk's Archery test (EML 55, ``roll``), with Lucky Star at ``charges``."""
    return {
        "type": "test_rolled",
        "v": 1,
        "event_id": event_id,
        "ruleset": "sohl",
        "message_id": message_id,
        "visibility": "public",
        "actor": {
            "actor_id": ACTOR_ID,
            "name": actor_name,
            "player_owned": True,
            "owner_user_ids": [OWNER, GM],
            "aura": {"eml": AURA_EML, "disabled": False},
            "aural_shock": False,
            "fate_points": [
                {"point_id": LUCKY_STAR, "name": "Lucky Star", "skill_code": None,
                 "charges": charges},
                {"point_id": BLADE_OF_DESTINY, "name": "Blade of Destiny",
                 "skill_code": "melee", "charges": None},
                {"point_id": ARCHERS_EYE, "name": "Archer's Eye", "skill_code": "archery",
                 "charges": 1},
            ],
        },
        "test": sohl_test(roll=roll),
    }


def fate_spend(
    event_id: str,
    message_id: str,
    point_id: str = LUCKY_STAR,
    user_id: str = OWNER,
    *,
    user_name: str = "Player One",
) -> dict[str, Any]:
    return {"type": "fate_spend", "v": 1, "event_id": event_id, "message_id": message_id,
            "point_id": point_id, "user_id": user_id, "user_name": user_name}


def fate_choice(
    event_id: str, message_id: str, choice: str, user_id: str = OWNER, user_is_gm: bool = False
) -> dict[str, Any]:
    return {"type": "fate_choice", "v": 1, "event_id": event_id, "message_id": message_id,
            "choice": choice, "user_id": user_id, "user_name": "Player One", "user_is_gm": user_is_gm}


def settings(event_id: str, fate_option: str) -> dict[str, Any]:
    return {"type": "settings", "v": 1, "event_id": event_id, "fate_option": fate_option}


def fated_flag(message_id: str, outcome: str, level_after: int | None, event_id: str) -> dict:
    """The ``flag_message`` effect marking ``message_id`` fated."""
    return {"kind": "flag_message", "message_id": message_id, "key": "fated",
            "value": {"outcome": outcome, "pending": outcome == "choice",
                      "level_after": level_after, "event_id": event_id}}


def charges_set_to(value: int, spend_seq: int, point_id: str = LUCKY_STAR) -> dict:
    """The ``update_item`` effect writing a point's charges; ``spend_seq`` is the world's
    decision number of the spend (each test_rolled, Fate Test and spend takes one)."""
    return {"kind": "update_item", "actor_id": ACTOR_ID, "item_id": point_id,
            "path": CHARGES_PATH, "value": value, "spend_seq": spend_seq}


def with_value(message: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """``message`` (deep-copied) with the dotted ``path`` set to ``value``."""
    message = json.loads(json.dumps(message))
    *parents, last = path.split(".")
    target: Any = message
    for key in parents:
        target = target[int(key)] if isinstance(target, list) else target[key]
    target[int(last) if isinstance(target, list) else last] = value
    return message


# --- talking to a bridge -----------------------------------------------------------------------


def url_of(server: Server) -> str:
    port = server.sockets[0].getsockname()[1]
    return f"ws://127.0.0.1:{port}"


async def connected(where: Server | str) -> ClientConnection:
    """A WebSocket connection that has sent nothing yet."""
    url = where if isinstance(where, str) else url_of(where)
    return await connect(url, open_timeout=REPLY_TIMEOUT, close_timeout=REPLY_TIMEOUT)


async def send(ws: ClientConnection, message: dict[str, Any] | str) -> None:
    await ws.send(message if isinstance(message, str) else json.dumps(message))


async def next_frame(ws: ClientConnection) -> str:
    async with asyncio.timeout(REPLY_TIMEOUT):
        frame = await ws.recv()
    assert isinstance(frame, str), "the bridge sends text frames"
    return frame


async def ask_frame(ws: ClientConnection, message: dict[str, Any] | str) -> str:
    """Send one message and return the reply frame exactly as received."""
    await send(ws, message)
    return await next_frame(ws)


async def ask(ws: ClientConnection, message: dict[str, Any] | str) -> dict[str, Any]:
    return json.loads(await ask_frame(ws, message))


async def closed_with(ws: ClientConnection) -> int | None:
    """Wait for the bridge to close the connection; its close code."""
    async with asyncio.timeout(REPLY_TIMEOUT):
        await ws.wait_closed()
    return ws.close_code


async def opened(where: Server | str, world: World) -> ClientConnection:
    """A connection past ``hello``, ready for work messages."""
    ws = await connected(where)
    welcome = await ask(ws, hello(world.world_id, world.token))
    assert welcome["type"] == "welcome", welcome
    return ws


async def graded(ws: ClientConnection, message_id: str, charges: int = 2, **kw: Any) -> dict:
    """Send the Archery ``test_rolled`` for ``message_id``; the ``test_graded`` reply."""
    reply = await ask(ws, archery_test_rolled(f"rolled-{message_id}", message_id, charges, **kw))
    assert reply["type"] == "test_graded", reply
    return reply


def assert_error(reply: dict[str, Any], code: str, *, field: str | None, ref: str | None) -> None:
    assert reply["type"] == "error", reply
    assert (reply["code"], reply["field"], reply["ref"]) == (code, field, ref), reply
    assert reply["message"], "an error says what went wrong"


# --- fixtures ----------------------------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "b.sqlite3"


@pytest.fixture
async def open_store(db: Path):
    """Opens the store on ``db`` (again, for restarts); every store is closed at teardown."""
    stores: list[SQLiteStore] = []

    async def open_() -> SQLiteStore:
        store = await SQLiteStore.open(db)
        stores.append(store)
        return store

    yield open_
    for store in stores:
        await store.close()  # idempotent


@pytest.fixture
async def store(open_store) -> SQLiteStore:
    return await open_store()


@pytest.fixture
async def world(store: SQLiteStore) -> World:
    token = new_token()
    await store.add_world(WORLD_ID, hash_token(token))
    return World(WORLD_ID, token)


@pytest.fixture
async def start_bridge(open_store):
    """Starts in-process bridges on 127.0.0.1:0; all are closed (before their stores) at
    teardown. Default dice: none (an unexpected roll is refused, failing the test)."""
    servers: list[Server] = []

    async def start(
        store: SQLiteStore,
        dice: ScriptedDice | None = None,
        *,
        hello_timeout: float = bridge_server.HELLO_TIMEOUT_SECONDS,
    ) -> Server:
        server = await bridge_server.start(
            store, "127.0.0.1", 0, dice=dice or ScriptedDice([]), hello_timeout=hello_timeout
        )
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()
        await server.wait_closed()


@pytest.fixture
async def bridge_with(store: SQLiteStore, world: World, start_bridge):
    """A bridge on the registered world whose Fate Tests roll ``values``."""

    async def start(*values: int) -> Server:
        return await start_bridge(store, ScriptedDice(values))

    return start


# --- session -----------------------------------------------------------------------------------


class TestHelloWelcome:
    async def test_right_token_gets_welcome_with_world_version_rulesets_and_settings(
        self, store, world, start_bridge
    ):
        ws = await connected(await start_bridge(store))

        welcome = await ask(ws, hello(world.world_id, world.token))

        assert welcome == {
            "type": "welcome",
            "v": 1,
            "world_id": WORLD_ID,
            "bridge_version": bridge.__version__,
            "protocol_version": 1,
            "max_frame_bytes": bridge_server.MAX_FRAME_BYTES,  # the limit the server enforces (1009)
            "rulesets": registry.rulesets(),  # every ruleset with handlers
            "settings": {"fate_option": "everyone"},
        }

    async def test_ping_is_answered_pong(self, store, world, start_bridge):
        ws = await opened(await start_bridge(store), world)

        assert await ask(ws, ping()) == {"type": "pong", "v": 1}
        assert await ask(ws, ping()) == {"type": "pong", "v": 1}


class TestUnauthorizedCloses4001:
    @pytest.mark.parametrize(
        "bad_hello",
        [
            pytest.param(lambda w: hello(w.world_id, new_token()), id="wrong token"),
            pytest.param(lambda w: hello("no-such-world", w.token), id="unknown world"),
            pytest.param(lambda w: hello(w.world_id, None), id="missing token"),
            pytest.param(lambda w: hello(w.world_id, ""), id="empty token"),
        ],
    )
    async def test_bad_credentials_get_unauthorized_on_token_then_4001(
        self, store, world, start_bridge, bad_hello
    ):
        ws = await connected(await start_bridge(store))

        reply = await ask(ws, bad_hello(world))

        assert_error(reply, "unauthorized", field="token", ref=None)
        assert await closed_with(ws) == 4001

    async def test_first_message_not_hello_gets_unauthorized_then_4001(
        self, store, world, start_bridge
    ):
        ws = await connected(await start_bridge(store))

        reply = await ask(ws, ping())

        assert_error(reply, "unauthorized", field=None, ref=None)
        assert await closed_with(ws) == 4001

    async def test_work_before_hello_is_refused_with_its_event_id_then_4001(
        self, store, world, start_bridge
    ):
        ws = await connected(await start_bridge(store))

        reply = await ask(ws, archery_test_rolled("ev-early", "msgEarly"))

        assert_error(reply, "unauthorized", field=None, ref="ev-early")
        assert await closed_with(ws) == 4001

    async def test_first_frame_not_json_gets_bad_message_then_4001(
        self, store, world, start_bridge
    ):
        ws = await connected(await start_bridge(store))

        reply = await ask(ws, "hello?")

        assert_error(reply, "bad_message", field=None, ref=None)
        assert await closed_with(ws) == 4001

    async def test_refused_hello_leaves_the_world_usable_with_the_right_token(
        self, store, world, start_bridge
    ):
        server = await start_bridge(store)
        intruder = await connected(server)
        await ask(intruder, hello(WORLD_ID, new_token()))
        await closed_with(intruder)

        ws = await opened(server, world)

        assert await ask(ws, ping()) == {"type": "pong", "v": 1}


class TestHelloTimeoutCloses4002:
    async def test_silent_connection_is_closed_4002(self, store, world, start_bridge):
        ws = await connected(await start_bridge(store, hello_timeout=SHORT_HELLO_TIMEOUT))

        assert await closed_with(ws) == 4002

    async def test_hello_in_time_keeps_the_connection_past_the_timeout(
        self, store, world, start_bridge
    ):
        server = await start_bridge(store, hello_timeout=SHORT_HELLO_TIMEOUT)
        ws = await opened(server, world)
        # The timeout covers only the first frame: a second, silent connection is closed 4002
        # while this one, hello'd, still answers afterwards.
        late = await connected(server)
        assert await closed_with(late) == 4002

        assert await ask(ws, ping()) == {"type": "pong", "v": 1}


# --- bad frames --------------------------------------------------------------------------------


BAD_FRAMES = [
    pytest.param("{not json", "bad_message", None, None, id="not JSON"),
    pytest.param("[1, 2, 3]", "bad_message", None, None, id="JSON array"),
    pytest.param('"ping"', "bad_message", None, None, id="JSON string"),
    pytest.param({"type": "dance", "v": 1, "event_id": "ev-dance"},
                 "unknown_message", "type", "ev-dance", id="unknown type"),
    pytest.param({"v": 1, "event_id": "ev-untyped"}, "bad_message", "type", "ev-untyped",
                 id="no type"),
    pytest.param(with_value(archery_test_rolled("ev-eml", "msgBad"), "test.eml", "55"),
                 "bad_message", "test.eml", "ev-eml", id="test.eml a string"),
    pytest.param(with_value(archery_test_rolled("ev-chg", "msgBad"),
                            "actor.fate_points.0.charges", "two"),
                 "bad_message", "actor.fate_points[0].charges", "ev-chg", id="charges a string"),
    pytest.param(with_value(archery_test_rolled("ev-neg", "msgBad"),
                            "actor.fate_points.2.charges", -1),
                 "bad_message", "actor.fate_points[2].charges", "ev-neg", id="charges < 0"),
    pytest.param(with_value(archery_test_rolled("ev-roll", "msgBad"), "test.roll", 101),
                 "bad_message", "test.roll", "ev-roll", id="roll 101"),
    pytest.param({**fate_spend("ev-dice", "msgBad"), "dice": [34]},
                 "bad_message", "dice", "ev-dice", id="unknown field dice"),
    pytest.param(with_value(archery_test_rolled("ev-hp", "msgBad"), "actor.hp", 12),
                 "bad_message", "actor.hp", "ev-hp", id="unknown nested field"),
    pytest.param({k: v for k, v in fate_spend("ev-nopt", "msgBad").items() if k != "point_id"},
                 "bad_message", "point_id", "ev-nopt", id="missing point_id"),
    pytest.param({**fate_spend("ev-v2", "msgBad"), "v": 2}, "bad_message", "v", "ev-v2",
                 id="v 2"),
    pytest.param({**fate_spend("ev-x", "msgBad"), "event_id": 7}, "bad_message", "event_id", None,
                 id="event_id a number: no ref"),
    pytest.param(hello(WORLD_ID, "whatever"), "bad_message", "type", None, id="second hello"),
]


class TestBadFramesKeepTheConnection:
    @pytest.mark.parametrize("frame, code, field, ref", BAD_FRAMES)
    async def test_bad_frame_gets_error_and_the_same_connection_answers_ping(
        self, store, world, start_bridge, frame, code, field, ref
    ):
        ws = await opened(await start_bridge(store), world)

        reply = await ask(ws, frame)

        assert_error(reply, code, field=field, ref=ref)
        assert await ask(ws, ping()) == {"type": "pong", "v": 1}

    async def test_bad_frame_changes_nothing(self, bridge_with, world):
        ws = await opened(await bridge_with(FATE_MS), world)
        bad = with_value(archery_test_rolled("ev-bad", "msgArchery0001"), "test.eml", "55")
        assert (await ask(ws, bad))["code"] == "bad_message"

        reply = await ask(ws, fate_spend("ev-spend", "msgArchery0001"))

        assert_error(reply, "not_found", field="message_id", ref="ev-spend")

    async def test_frame_over_64_kib_closes_1009(self, store, world, start_bridge):
        ws = await opened(await start_bridge(store), world)
        huge = with_value(archery_test_rolled("ev-huge", "msgHuge"), "test.name",
                          "x" * bridge_server.MAX_FRAME_BYTES)

        await send(ws, huge)

        assert await closed_with(ws) == 1009


# --- sohl: grading and the Fate Test -----------------------------------------------------------


class TestTestGraded:
    async def test_archery_mf_is_graded_with_fate_offer_and_points_in_suggested_order(
        self, store, world, start_bridge
    ):
        ws = await opened(await start_bridge(store), world)

        reply = await ask(ws, archery_test_rolled("ev-1", "msgArchery0001"))

        assert reply == {
            "type": "test_graded",
            "v": 1,
            "event_id": "ev-1",
            "message_id": "msgArchery0001",
            "level": 0,
            "label": "MF",
            "success": False,
            "critical": False,
            "fate": {
                "eligible": True,
                "reasons": [],
                "fate_ml": FATE_ML,
                # S8: specific before general; Blade of Destiny (melee) does not apply.
                "points": [ARCHERS_EYE, LUCKY_STAR],
            },
            "mismatch": None,
        }

    async def test_level_sohl_reported_differently_is_recorded_as_mismatch(
        self, store, world, start_bridge
    ):
        ws = await opened(await start_bridge(store), world)
        message = with_value(archery_test_rolled("ev-1", "msgArchery0001", roll=35),
                             "test.reported_level", 1)

        reply = await ask(ws, message)

        assert (reply["level"], reply["label"], reply["critical"]) == (2, "CS", True)
        assert reply["mismatch"] == {"reported": 1, "graded": 2}


class TestFateTestOutcomes:
    """S9 through the socket: the Fate Test (d100 vs Fate ML 77) and what it does."""

    @pytest.mark.parametrize(
        "die, fate_level, fate_label, outcome, gain, level_after, label_after, charges_after",
        [
            pytest.param(FATE_MS, 1, "MS", "spent", 1, 1, "MS", 1, id="MS spent +1"),
            pytest.param(FATE_CF, -1, "CF", "lost", 0, 0, "MF", 1, id="CF lost"),
            pytest.param(FATE_MF, 0, "MF", "kept", 0, 0, "MF", 2, id="MF kept"),
        ],
    )
    async def test_fate_spend_resolves_by_the_fate_test_level(
        self, bridge_with, world, die, fate_level, fate_label, outcome, gain, level_after,
        label_after, charges_after,
    ):
        ws = await opened(await bridge_with(die), world)
        await graded(ws, "msgArchery0001", charges=2)

        reply = await ask(ws, fate_spend("ev-2", "msgArchery0001"))

        assert reply["type"] == "fate_resolved", reply
        assert {k: reply[k] for k in (
            "event_id", "message_id", "fate_roll", "fate_ml", "fate_level", "fate_label",
            "outcome", "gain", "level_before", "label_before", "level_after", "label_after",
            "point", "choice_by",
        )} == {
            "event_id": "ev-2",
            "message_id": "msgArchery0001",
            "fate_roll": die,
            "fate_ml": FATE_ML,
            "fate_level": fate_level,
            "fate_label": fate_label,
            "outcome": outcome,
            "gain": gain,
            "level_before": 0,
            "label_before": "MF",
            "level_after": level_after,
            "label_after": label_after,
            "point": {"point_id": LUCKY_STAR, "name": "Lucky Star",
                      "charges_after": charges_after},
            "choice_by": [],
        }
        consumed = [charges_set_to(charges_after, 3)] if charges_after != 2 else []
        assert reply["effects"] == consumed + [
            fated_flag("msgArchery0001", outcome, level_after, "ev-2")
        ]

    async def test_fate_resolved_card_is_ready_to_post(self, bridge_with, world):
        ws = await opened(await bridge_with(FATE_MS), world)
        await graded(ws, "msgArchery0001")

        card = (await ask(ws, fate_spend("ev-2", "msgArchery0001")))["card"]

        assert (card["title"], card["ruleset"], card["speaker_actor_id"],
                card["speaker_alias"]) == ("Archery Test: Fate", "sohl", ACTOR_ID, "Basic Folk")
        assert 'data-fate-bridge-message-id="msgArchery0001"' in card["html"]
        assert "MF (Marginal Failure)" in card["html"]
        assert "MS (Marginal Success)" in card["html"]
        assert "34 vs Fate ML 77" in card["html"]
        assert "Lucky Star: spent, +1 (1 charge left)" in card["html"]
        assert "data-fate-bridge-choice" not in card["html"]

    async def test_unlimited_point_keeps_charges_null_and_updates_no_item(self, bridge_with, world):
        ws = await opened(await bridge_with(FATE_MS), world)
        message = with_value(archery_test_rolled("ev-1", "msgArchery0001"),
                             "actor.fate_points.0.charges", None)
        assert (await ask(ws, message))["type"] == "test_graded"

        reply = await ask(ws, fate_spend("ev-2", "msgArchery0001"))

        assert (reply["outcome"], reply["point"]["charges_after"]) == ("spent", None)
        assert reply["effects"] == [fated_flag("msgArchery0001", "spent", 1, "ev-2")]


class TestFateChoiceOnCriticalFateTest:
    @staticmethod
    async def _pending_choice(bridge_with, world) -> tuple[ClientConnection, dict[str, Any]]:
        """Archery MF fated with a Fate Test of 45 (CS): a choice pending, Lucky Star at 2."""
        ws = await opened(await bridge_with(FATE_CS), world)
        await graded(ws, "msgArchery0001", charges=2)
        return ws, await ask(ws, fate_spend("ev-2", "msgArchery0001"))

    async def test_fate_test_cs_leaves_a_pending_choice_with_buttons(self, bridge_with, world):
        _, reply = await self._pending_choice(bridge_with, world)

        assert (reply["fate_roll"], reply["fate_level"], reply["fate_label"]) == (FATE_CS, 2, "CS")
        assert (reply["outcome"], reply["gain"], reply["level_after"], reply["label_after"]) == (
            "choice", None, None, None)
        assert reply["point"]["charges_after"] == 2
        assert reply["choice_by"] == [OWNER]
        assert reply["effects"] == [fated_flag("msgArchery0001", "choice", None, "ev-2")]
        html = reply["card"]["html"]
        assert 'data-fate-bridge-message-id="msgArchery0001"' in html
        assert '<button type="button" data-fate-bridge-choice="spend">' in html
        assert '<button type="button" data-fate-bridge-choice="keep">' in html

    async def test_keep_adds_one_and_consumes_nothing(self, bridge_with, world):
        ws, _ = await self._pending_choice(bridge_with, world)

        reply = await ask(ws, fate_choice("ev-3", "msgArchery0001", "keep"))

        assert reply["type"] == "fate_resolved", reply
        assert (reply["event_id"], reply["outcome"], reply["gain"], reply["fate_roll"]) == (
            "ev-3", "kept", 1, FATE_CS)
        assert (reply["level_before"], reply["level_after"], reply["label_after"]) == (0, 1, "MS")
        assert reply["point"]["charges_after"] == 2
        assert reply["effects"] == [fated_flag("msgArchery0001", "kept", 1, "ev-3")]
        assert "data-fate-bridge-choice" not in reply["card"]["html"]

    async def test_spend_adds_two_and_consumes_a_charge(self, bridge_with, world):
        ws, _ = await self._pending_choice(bridge_with, world)

        reply = await ask(ws, fate_choice("ev-3", "msgArchery0001", "spend", user_id=GM, user_is_gm=True))

        assert (reply["outcome"], reply["gain"], reply["level_after"], reply["label_after"]) == (
            "spent", 2, 2, "CS")
        assert reply["point"]["charges_after"] == 1
        assert reply["effects"] == [charges_set_to(1, 3),
                                    fated_flag("msgArchery0001", "spent", 2, "ev-3")]

    async def test_choice_answered_once_then_nothing_is_pending(self, bridge_with, world):
        ws, _ = await self._pending_choice(bridge_with, world)
        await ask(ws, fate_choice("ev-3", "msgArchery0001", "keep"))

        reply = await ask(ws, fate_choice("ev-4", "msgArchery0001", "spend"))

        assert_error(reply, "not_found", field="message_id", ref="ev-4")

    async def test_stranger_may_not_choose(self, bridge_with, world):
        ws, _ = await self._pending_choice(bridge_with, world)

        reply = await ask(ws, fate_choice("ev-3", "msgArchery0001", "spend", user_id=STRANGER))

        assert_error(reply, "forbidden", field="user_id", ref="ev-3")
        kept = await ask(ws, fate_choice("ev-4", "msgArchery0001", "keep"))
        assert (kept["outcome"], kept["point"]["charges_after"]) == ("kept", 2)

    async def test_spend_on_pending_choice_is_already_fated(self, bridge_with, world):
        ws, _ = await self._pending_choice(bridge_with, world)

        reply = await ask(ws, fate_spend("ev-3", "msgArchery0001"))

        assert_error(reply, "already_fated", field="message_id", ref="ev-3")


class TestFateSpendRefusals:
    async def test_second_fate_spend_on_a_fated_result_is_already_fated(self, bridge_with, world):
        ws = await opened(await bridge_with(FATE_MF), world)
        await graded(ws, "msgArchery0001")
        assert (await ask(ws, fate_spend("ev-2", "msgArchery0001")))["outcome"] == "kept"

        reply = await ask(ws, fate_spend("ev-3", "msgArchery0001"))

        assert_error(reply, "already_fated", field="message_id", ref="ev-3")

    async def test_re_sent_test_rolled_of_a_fated_result_keeps_its_grading(
        self, bridge_with, world
    ):
        ws = await opened(await bridge_with(FATE_MS), world)
        await graded(ws, "msgArchery0001")
        await ask(ws, fate_spend("ev-2", "msgArchery0001"))

        reply = await ask(ws, archery_test_rolled("ev-3", "msgArchery0001", roll=12))

        assert (reply["event_id"], reply["level"], reply["label"]) == ("ev-3", 0, "MF")
        assert (reply["fate"]["eligible"], reply["fate"]["reasons"]) == (False, ["already_fated"])

    async def test_never_graded_message_is_not_found(self, store, world, start_bridge):
        ws = await opened(await start_bridge(store), world)

        reply = await ask(ws, fate_spend("ev-2", "msgNeverSeen"))

        assert_error(reply, "not_found", field="message_id", ref="ev-2")

    async def test_point_for_another_skill_is_not_eligible(self, store, world, start_bridge):
        ws = await opened(await start_bridge(store), world)
        await graded(ws, "msgArchery0001")

        reply = await ask(ws, fate_spend("ev-2", "msgArchery0001", BLADE_OF_DESTINY))

        assert_error(reply, "not_eligible", field="point_id", ref="ev-2")
        assert "melee" in reply["message"]

    async def test_point_the_actor_does_not_hold_is_not_eligible(self, store, world, start_bridge):
        ws = await opened(await start_bridge(store), world)
        await graded(ws, "msgArchery0001")

        reply = await ask(ws, fate_spend("ev-2", "msgArchery0001", "someoneElsesPt"))

        assert_error(reply, "not_eligible", field="point_id", ref="ev-2")

    async def test_limited_point_at_zero_charges_is_no_charges(self, store, world, start_bridge):
        ws = await opened(await start_bridge(store), world)
        await graded(ws, "msgArchery0001", charges=0)

        reply = await ask(ws, fate_spend("ev-2", "msgArchery0001"))

        assert_error(reply, "no_charges", field="point_id", ref="ev-2")

    async def test_user_not_among_owners_is_forbidden_and_nothing_changes(self, bridge_with, world):
        ws = await opened(await bridge_with(FATE_MS), world)
        await graded(ws, "msgArchery0001", charges=2)

        reply = await ask(ws, fate_spend("ev-2", "msgArchery0001", user_id=STRANGER))

        assert_error(reply, "forbidden", field="user_id", ref="ev-2")
        # Refused means untouched: not fated, no charge gone, no die rolled.
        resolved = await ask(ws, fate_spend("ev-3", "msgArchery0001"))
        assert (resolved["outcome"], resolved["point"]["charges_after"]) == ("spent", 1)

    async def test_gm_owner_may_spend(self, bridge_with, world):
        ws = await opened(await bridge_with(FATE_MS), world)
        await graded(ws, "msgArchery0001")

        reply = await ask(ws, fate_spend("ev-2", "msgArchery0001", user_id=GM))

        assert reply["outcome"] == "spent"

    async def test_fate_choice_with_nothing_pending_is_not_found(self, store, world, start_bridge):
        ws = await opened(await start_bridge(store), world)
        await graded(ws, "msgArchery0001")

        reply = await ask(ws, fate_choice("ev-2", "msgArchery0001", "keep"))

        assert_error(reply, "not_found", field="message_id", ref="ev-2")

    async def test_fate_choice_after_a_spent_fate_test_is_not_found(self, bridge_with, world):
        ws = await opened(await bridge_with(FATE_MS), world)
        await graded(ws, "msgArchery0001")
        await ask(ws, fate_spend("ev-2", "msgArchery0001"))

        reply = await ask(ws, fate_choice("ev-3", "msgArchery0001", "spend"))

        assert_error(reply, "not_found", field="message_id", ref="ev-3")


class TestWorldSettingsFateOff:
    async def test_fate_off_is_applied_kept_in_welcome_and_withholds_fate(
        self, store, world, start_bridge
    ):
        server = await start_bridge(store)
        gm = await opened(server, world)

        applied = await ask(gm, settings("ev-s", "off"))

        assert applied == {"type": "settings_applied", "v": 1, "ref": "ev-s",
                           "settings": {"fate_option": "off"}}
        other = await connected(server)  # the GM reloads: the new link supersedes the old
        welcome = await ask(other, hello(world.world_id, world.token))
        assert welcome["settings"] == {"fate_option": "off"}
        offer = (await graded(other, "msgArchery0001"))["fate"]
        assert (offer["eligible"], offer["reasons"]) == (False, ["fate_off"])
        refused = await ask(other, fate_spend("ev-2", "msgArchery0001"))
        assert_error(refused, "not_eligible", field="message_id", ref="ev-2")


# --- idempotency -------------------------------------------------------------------------------


class TestRepeatedEventId:
    async def test_repeated_fate_spend_gets_the_same_bytes_and_rolls_once(
        self, store, world, start_bridge
    ):
        dice = ScriptedDice([FATE_MS])  # one value: a second roll would be refused
        ws = await opened(await start_bridge(store, dice), world)
        await graded(ws, "msgArchery0001")

        first = await ask_frame(ws, fate_spend("ev-2", "msgArchery0001"))
        again = await ask_frame(ws, fate_spend("ev-2", "msgArchery0001"))

        assert again.encode() == first.encode()
        assert json.loads(first)["outcome"] == "spent"
        assert dice.used == 1

    async def test_repeat_on_another_connection_gets_the_same_bytes(
        self, store, world, start_bridge
    ):
        dice = ScriptedDice([FATE_MS])
        server = await start_bridge(store, dice)
        ws = await opened(server, world)
        await graded(ws, "msgArchery0001")
        first = await ask_frame(ws, fate_spend("ev-2", "msgArchery0001"))
        await ws.close()

        reconnected = await opened(server, world)
        again = await ask_frame(reconnected, fate_spend("ev-2", "msgArchery0001"))

        assert again == first
        assert dice.used == 1

    async def test_repeated_refusal_gets_the_same_error_even_once_it_would_pass(
        self, bridge_with, world
    ):
        ws = await opened(await bridge_with(FATE_MS), world)
        first = await ask_frame(ws, fate_spend("ev-2", "msgArchery0001"))
        assert json.loads(first)["code"] == "not_found"
        await graded(ws, "msgArchery0001")

        again = await ask_frame(ws, fate_spend("ev-2", "msgArchery0001"))

        assert again == first
        assert (await ask(ws, fate_spend("ev-3", "msgArchery0001")))["outcome"] == "spent"

    async def test_repeated_test_rolled_gets_the_stored_grading(self, store, world, start_bridge):
        ws = await opened(await start_bridge(store), world)
        first = await ask_frame(ws, archery_test_rolled("ev-1", "msgArchery0001", roll=88))

        again = await ask_frame(ws, archery_test_rolled("ev-1", "msgArchery0001", roll=12))

        assert again == first
        assert json.loads(again)["label"] == "MF"


# --- restarts ----------------------------------------------------------------------------------


class TestFatedSurvivesRestart:
    async def test_in_process_restart_refuses_second_fate_and_replays_the_first(
        self, store, world, open_store, start_bridge
    ):
        server = await start_bridge(store, ScriptedDice([FATE_MS]))
        ws = await opened(server, world)
        await graded(ws, "msgArchery0001")
        original = await ask_frame(ws, fate_spend("ev-2", "msgArchery0001"))
        assert json.loads(original)["outcome"] == "spent"
        server.close()
        await server.wait_closed()
        await store.close()

        reopened = await open_store()
        restarted = await start_bridge(reopened, ScriptedDice([]))  # no roll may happen
        ws = await opened(restarted, world)

        refused = await ask(ws, fate_spend("ev-3", "msgArchery0001"))
        replayed = await ask_frame(ws, fate_spend("ev-2", "msgArchery0001"))

        assert_error(refused, "already_fated", field="message_id", ref="ev-3")
        assert replayed.encode() == original.encode()

    async def test_charges_consumed_before_a_restart_still_count(
        self, store, world, open_store, start_bridge
    ):
        server = await start_bridge(store, ScriptedDice([FATE_MS]))
        ws = await opened(server, world)
        await graded(ws, "msgArchery0001", charges=1)
        await graded(ws, "msgArchery0002", charges=1)  # the same snapshot: 1 charge
        assert (await ask(ws, fate_spend("ev-2", "msgArchery0001")))["outcome"] == "spent"
        server.close()
        await server.wait_closed()
        await store.close()

        restarted = await start_bridge(await open_store(), ScriptedDice([]))
        ws = await opened(restarted, world)
        reply = await ask(ws, fate_spend("ev-3", "msgArchery0002"))

        assert_error(reply, "no_charges", field="point_id", ref="ev-3")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http_get(port: int, path: str) -> tuple[int, str]:
    """A plain HTTP GET on the bridge's port: (status, body). Raises ``OSError`` when nothing
    listens there."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}",
                                    timeout=REPLY_TIMEOUT) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as refused:
        with refused:  # an open HTTPError holds the socket, and the server waits on it
            return refused.code, refused.read().decode()


async def bridge_cli(*args: str) -> tuple[int, str, str]:
    """Run ``python -m bridge ARGS`` to completion: (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bridge", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(PROCESS_TIMEOUT):
        out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@dataclass
class BridgeProcess:
    proc: asyncio.subprocess.Process
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    async def terminated(self) -> int:
        """SIGTERM the bridge and wait for it to exit; its exit code."""
        self.proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(PROCESS_TIMEOUT):
            return await self.proc.wait()


async def wait_healthy(bridge: BridgeProcess) -> None:
    """Poll ``GET /healthz`` until it answers 200, for at most ``PROCESS_TIMEOUT`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PROCESS_TIMEOUT
    while True:
        if bridge.proc.returncode is not None:
            pytest.fail(f"the bridge exited {bridge.proc.returncode}:\n{bridge.log_text()}")
        try:
            status, _ = await asyncio.to_thread(http_get, bridge.port, "/healthz")
            if status == 200:
                return
        except OSError:
            pass  # not listening yet
        if loop.time() > deadline:
            pytest.fail(f"no healthy bridge within {PROCESS_TIMEOUT} s:\n{bridge.log_text()}")
        await asyncio.sleep(HEALTH_POLL_INTERVAL)


@asynccontextmanager
async def bridge_serving(db: Path, log: Path) -> AsyncIterator[BridgeProcess]:
    """``python -m bridge serve --db DB`` on a free port, healthy; killed if still running at
    the end (tests stop it with :meth:`BridgeProcess.terminated`)."""
    port = free_port()
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bridge", "serve", "--port", str(port), "--db", str(db),
            stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out,
        )
    bridge = BridgeProcess(proc, port, log)
    try:
        await wait_healthy(bridge)
        yield bridge
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


class TestFatedSurvivesProcessRestart:
    async def test_sigterm_exits_0_and_the_restarted_bridge_refuses_a_second_fate(
        self, tmp_path
    ):
        db = tmp_path / "bridge.sqlite3"
        code, out, err = await bridge_cli("world", "add", "W", "--db", str(db), "--token-only")
        assert code == 0, err
        world = World("W", out.strip())

        async with bridge_serving(db, tmp_path / "serve-1.log") as first:
            ws = await opened(first.url, world)
            await graded(ws, "msgArchery0001")
            original = await ask_frame(ws, fate_spend("ev-2", "msgArchery0001"))
            # Real dice: any outcome fates the result (S11).
            assert json.loads(original)["outcome"] in ("lost", "kept", "spent", "choice")
            # The decision's reply proves the bridge reached serve_until (its store answers
            # in order): SIGTERM now hits the bridge's handler, not the default action.
            assert await first.terminated() == 0, first.log_text()
            assert await closed_with(ws) == 1012  # service restart: the module reconnects at once

        async with bridge_serving(db, tmp_path / "serve-2.log") as second:
            ws = await opened(second.url, world)
            refused = await ask(ws, fate_spend("ev-3", "msgArchery0001"))
            replayed = await ask_frame(ws, fate_spend("ev-2", "msgArchery0001"))
            assert await second.terminated() == 0, second.log_text()

        assert_error(refused, "already_fated", field="message_id", ref="ev-3")
        assert replayed == original


class TestSigtermDrains:
    async def test_the_decision_in_flight_is_answered_then_every_link_closed_1012_and_the_port_closed(
        self, store, world, monkeypatch, db
    ):
        """Issue 28: ``serve_until`` on SIGTERM closes the port, closes an idle forwarder 1012 at
        once, answers the decision it is deciding and then closes that link 1012; a frame
        received behind it is not handled (the module sends it again elsewhere); the store is
        closed once both links are gone."""
        other = World("drained-idle", new_token())
        await store.add_world(other.world_id, hash_token(other.token))
        drain = links.Drain()
        server = await bridge_server.start(store, "127.0.0.1", 0, dice=ScriptedDice([]), drain=drain)
        url = url_of(server)
        busy, idle = await opened(url, world), await opened(url, other)
        deciding, release = asyncio.Event(), asyncio.Event()
        decide = store.decide

        async def held(*args: Any, **kwargs: Any) -> Any:
            deciding.set()
            await release.wait()
            return await decide(*args, **kwargs)

        monkeypatch.setattr(store, "decide", held)
        await send(busy, settings("ev-in-flight", "pc_only"))
        await asyncio.wait_for(deciding.wait(), REPLY_TIMEOUT)
        await send(busy, settings("ev-behind", "off"))
        stop = asyncio.get_running_loop().create_future()
        serving = asyncio.create_task(bridge_server.serve_until(stop, server, drain, store))
        stop.set_result(None)

        assert await closed_with(idle) == 1012
        with pytest.raises(OSError):  # no new link: the load balancer sends it to another process
            await connected(url)
        assert not busy.close_code and not serving.done()
        release.set()
        answered = json.loads(await next_frame(busy))
        assert (answered["type"], answered["ref"]) == ("settings_applied", "ev-in-flight")
        assert await closed_with(busy) == 1012
        await asyncio.wait_for(serving, REPLY_TIMEOUT)
        reopened = await SQLiteStore.open(db)
        try:
            page = await reopened.audit_page(world.world_id, wire.AuditQuery(query_id="q"))
        finally:
            await reopened.close()
        assert [record.event_id for record in page.records] == ["ev-in-flight"]


# --- HTTP --------------------------------------------------------------------------------------


class TestHealthz:
    async def test_healthz_answers_200_ok(self, store, start_bridge):
        server = await start_bridge(store)
        port = server.sockets[0].getsockname()[1]

        status, body = await asyncio.to_thread(http_get, port, "/healthz")

        assert (status, body.strip()) == (200, "ok")

    async def test_other_plain_http_is_not_ok(self, store, start_bridge):
        server = await start_bridge(store)
        port = server.sockets[0].getsockname()[1]

        status, _ = await asyncio.to_thread(http_get, port, "/nothing-here")

        assert status == 426  # Upgrade Required: only the pages of bridge/http.py are plain HTTP


# --- the last charge ---------------------------------------------------------------------------


class TestLastChargeRace:
    """Two results graded on the same snapshot (Lucky Star at 1 charge) and both spent before
    the module applied any ``update_item``: the bridge counts its own spends."""

    async def test_exactly_one_spend_gets_the_last_charge(self, store, world, start_bridge):
        """Sent back to back on the world's one forwarder connection (issue 4: one forwarder
        per world; the store-level race of two sessions is in test_dispatch)."""
        dice = ScriptedDice([FATE_MS])  # one roll only: the loser must not roll
        server = await start_bridge(store, dice)
        ws = await opened(server, world)
        await graded(ws, "msgArchery0001", charges=1)
        await graded(ws, "msgArchery0002", charges=1)

        await send(ws, fate_spend("ev-a", "msgArchery0001"))
        await send(ws, fate_spend("ev-b", "msgArchery0002"))
        replies = [json.loads(await next_frame(ws)), json.loads(await next_frame(ws))]

        winners = [r for r in replies if r["type"] == "fate_resolved"]
        losers = [r for r in replies if r["type"] == "error"]
        assert len(winners) == 1 and len(losers) == 1, replies
        assert winners[0]["outcome"] == "spent"
        assert winners[0]["point"]["charges_after"] == 0
        assert charges_set_to(0, 4) in winners[0]["effects"]
        assert_error(losers[0], "no_charges", field="point_id",
                     ref="ev-b" if winners[0]["event_id"] == "ev-a" else "ev-a")
        assert dice.used == 1


# --- logs --------------------------------------------------------------------------------------


def decisions(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry["event"] == "decision"]


class TestOneLogLinePerDecision:
    async def test_test_rolled_and_fate_spend_log_one_decision_each(self, bridge_with, world):
        server = await bridge_with(FATE_MS)
        with capture_logs() as logs:
            ws = await opened(server, world)
            await graded(ws, "msgArchery0001")
            await ask(ws, fate_spend("ev-2", "msgArchery0001"))

        lines = decisions(logs)
        assert [line["event_id"] for line in lines] == ["rolled-msgArchery0001", "ev-2"]
        rolled, spent = lines
        for line in lines:
            assert line["world_id"] == WORLD_ID
            assert line["replayed"] is False
        assert (rolled["type"], rolled["message_id"], rolled["level"], rolled["eligible"]) == (
            "test_rolled", "msgArchery0001", 0, True)
        assert (spent["type"], spent["outcome"], spent["fate_roll"], spent["charges_after"]) == (
            "fate_spend", "spent", FATE_MS, 1)

    async def test_refusal_and_replay_log_one_decision_each(self, bridge_with, world):
        server = await bridge_with()
        with capture_logs() as logs:
            ws = await opened(server, world)
            await ask(ws, fate_spend("ev-2", "msgNeverSeen"))
            await ask(ws, fate_spend("ev-2", "msgNeverSeen"))

        lines = decisions(logs)
        assert [(line["event_id"], line["type"], line["replayed"]) for line in lines] == [
            ("ev-2", "fate_spend", False),
            ("ev-2", "fate_spend", True),
        ]
        assert (lines[0]["code"], lines[0]["field"]) == ("not_found", "message_id")
        assert all(line["world_id"] == WORLD_ID for line in lines)


# --- cards -------------------------------------------------------------------------------------


class TestCardEscaping:
    async def test_hostile_actor_and_user_names_are_escaped_in_card_html(self, bridge_with, world):
        hostile = "<img src=x onerror=alert(1)>"
        ws = await opened(await bridge_with(FATE_MS), world)
        await graded(ws, "msgArchery0001", actor_name=hostile)

        reply = await ask(ws, fate_spend("ev-2", "msgArchery0001",
                                         user_name="<script>alert(2)</script>"))

        html = reply["card"]["html"]
        assert "&lt;img src=x onerror=alert(1)&gt;" in html
        assert "<img" not in html
        assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html
        assert "<script" not in html
        assert reply["card"]["speaker_alias"] == hostile  # plain text for Foundry, not HTML


class TestEventIdReusedForAnotherRequest:
    async def test_the_stored_reply_comes_back_and_a_warning_is_logged(self, store, world, start_bridge):
        """The contract returns the stored reply for a repeated event_id; a different request
        under it is a client bug: logged as ``event_id_reused``, nothing decided twice."""
        ws = await opened(await start_bridge(store), world)
        first = await ask_frame(ws, archery_test_rolled("ev-1", "msgArchery0001", roll=88))
        with capture_logs() as logs:
            same = await ask_frame(ws, archery_test_rolled("ev-1", "msgArchery0001", roll=88))
            other = await ask_frame(ws, archery_test_rolled("ev-1", "msgArchery0001", roll=12))
        assert same == first == other
        assert [entry["event"] for entry in logs if entry["event"] == "event_id_reused"] == ["event_id_reused"]
