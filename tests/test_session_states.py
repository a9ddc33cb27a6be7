"""The session's state machine (``SessionState`` and its tables, in the manner of h11's
``_state.py``): what each state accepts, how the rest is refused, and that a refusal leaves the
state where it was."""

from __future__ import annotations

import json

import pytest

from bridge import core, registry
from bridge.dice import ScriptedDice
from bridge.session import ACCEPTS, CLOSE_UNAUTHORIZED, REFUSED, Session, SessionState, hash_token, new_token
from bridge.store import SQLiteStore

TOKEN = new_token()
MESSAGES = {  # one message of each family
    "hello": {"type": "hello", "v": 1, "world_id": "w", "token": TOKEN},
    "ping": {"type": "ping", "v": 1},
    "query": {"type": "audit_query", "v": 1, "query_id": "q-1"},
    "request": {"type": "chart_settings", "v": 1, "event_id": "ev-1", "user_id": "gm", "user_is_gm": True,
                "odds_questions": True, "chaos_factor": 5},
}

# (state, message) -> accepted? ; a refused one gets REFUSED[state]'s code (and close code)
EXPECTED = {
    SessionState.NEW: {"hello"},
    SessionState.FORWARDER: {"ping", "query", "request"},  # a second hello is refused (not trusted)
    SessionState.VIEWER: {"ping"},
}


@pytest.fixture
async def keyed_store():
    store = await SQLiteStore.open(":memory:")
    await store.add_world("w", hash_token(TOKEN))
    yield store
    await store.close()


async def _session_in(state: SessionState, store: SQLiteStore) -> Session:
    session = Session(store, ScriptedDice([]))
    if state is SessionState.FORWARDER:
        await session.receive(json.dumps(MESSAGES["hello"]))
    elif state is SessionState.VIEWER:
        key = await store.viewer_key("w", new_token())
        await session.receive(json.dumps({"type": "hello", "v": 1, "world_id": "w", "viewer_key": key}))
    assert session.state is state
    return session


def test_the_table_names_every_state():
    assert set(ACCEPTS) == set(REFUSED) == set(SessionState)


@pytest.mark.parametrize("state", list(SessionState), ids=lambda s: s.value)
@pytest.mark.parametrize("kind", list(MESSAGES))
async def test_each_state_accepts_its_messages_and_refuses_the_rest_untouched(state, kind, keyed_store):
    session = await _session_in(state, keyed_store)
    reply = await session.receive(json.dumps(MESSAGES[kind]))
    (frame,) = reply.frames
    answer = json.loads(frame)
    if kind in EXPECTED[state]:
        assert answer["type"] != "error", answer
        assert reply.close_code is None
        return
    refusal, _text, close = REFUSED[state]
    assert answer["type"] == "error" and answer["code"] == refusal.code
    assert reply.close_code == close
    assert session.state is state  # refused means untouched
    if state is SessionState.NEW:
        assert close == CLOSE_UNAUTHORIZED


async def test_a_good_hello_moves_new_to_forwarder_and_a_viewer_key_to_viewer(keyed_store):
    assert (await _session_in(SessionState.FORWARDER, keyed_store)).viewer is False
    assert (await _session_in(SessionState.VIEWER, keyed_store)).viewer is True


def test_one_route_table_answers_every_message_some_state_accepts():
    """``core.routes()`` is the one table: every message of the wire union has exactly one route,
    every route's message is accepted in some state, and every shared message is the shell's."""
    client_types = set(registry.protocol().client_types)
    table = core.routes()
    assert set(table) == client_types
    assert all(any(issubclass(kind, ACCEPTS[state]) for state in SessionState) for kind in table)
    assert {kind for kind, route in table.items() if isinstance(route, core.Serves)} == set(core.SHARED)
