"""A real bridge server on a file store, for the tests that talk to it over a socket
(test_security.py, test_hardening.py).

Import the fixtures with the helpers (``from .served import ask, started, stopped, store, token``):
``store`` is a SQLiteStore in ``tmp_path``; ``token`` registers the importing module's ``WORLD`` in
it and returns the world's token. ``started`` serves that store on a free port, the dice scripted
to 34 (so decisions are fixed)."""

from __future__ import annotations

import asyncio
import json

import pytest

from bridge import server as bridge_server
from bridge.dice import ScriptedDice
from bridge.session import hash_token, new_token
from bridge.store import SQLiteStore

TIMEOUT = 30.0  # a bound on a hang, never a timing: a reply comes in milliseconds, later on a busy machine
"""Seconds a reply may take before the test fails."""


@pytest.fixture
async def store(tmp_path):
    store = await SQLiteStore.open(tmp_path / "bridge.sqlite3")
    yield store
    await store.close()


@pytest.fixture
async def token(store, request):
    token = new_token()
    await store.add_world(request.module.WORLD, hash_token(token))
    return token


async def started(store, scheme: str = "ws", **options):
    """Serve ``store`` on 127.0.0.1 (a free port) with ``options`` (bridge.server.start's);
    the server and its URL (``scheme``: ``wss`` with ``tls=``)."""
    server = await bridge_server.start(store, "127.0.0.1", 0, dice=ScriptedDice([34] * 50), **options)
    return server, f"{scheme}://127.0.0.1:{server.sockets[0].getsockname()[1]}"


async def stopped(server) -> None:
    """Close ``server`` and wait until it is closed."""
    server.close()
    await server.wait_closed()


async def ask(ws, message: str | bytes | dict) -> dict:
    """Send ``message`` (a dict is sent as JSON text, str and bytes as they are) and the next reply,
    decoded; TIMEOUT bounds the wait."""
    await ws.send(json.dumps(message) if isinstance(message, dict) else message)
    return json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
