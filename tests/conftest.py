"""Test-wide setup: decision log lines go to stderr (as ``fate-bridge serve`` sends them), so
tests reading a command's stdout see only its output."""

from __future__ import annotations

import pytest

from bridge import logs
from bridge.dice import ScriptedDice
from bridge.session import Session
from bridge.store import SQLiteStore

logs.configure("console", level="info")


@pytest.fixture
async def store():
    """An in-memory store with the world ``w`` (test modules with their own ``store`` override it)."""
    store = await SQLiteStore.open(":memory:")
    await store.add_world("w", None)
    yield store
    await store.close()


@pytest.fixture
def session(store):
    """A trusted Session on ``store`` for the world ``w``, rolling scripted dice (none unless a
    message brings its own, see ``helpers.send``)."""
    return Session(store, ScriptedDice([]), trusted=True, default_world="w")
