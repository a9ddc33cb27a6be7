"""Test-wide setup: decision log lines go to stderr (as ``fate-bridge serve`` sends them), so
tests reading a command's stdout see only its output.

Store fixtures run on both backends: ``store`` (and every fixture built on it, such as
``session``) is parametrized ``sqlite`` / ``postgresql``. The PostgreSQL server comes from
``$FATE_BRIDGE_TEST_PG`` (default ``postgresql://postgres@127.0.0.1:5432/test``, trust auth); each
test gets a fresh schema, dropped after it. Where no server answers, the PostgreSQL variants are
skipped saying so; with ``FATE_BRIDGE_REQUIRE_SERVICES=1`` (set by ``.ci/run``) they fail instead.
Tests needing a tmpfs (a full disk; root only) are skipped or failed the same way (``tmpfs_mountable``).
"""

from __future__ import annotations

import os
import secrets

import pytest

from bench.outage import tmpfs_problem
from bench.scale import schema_url
from bridge import logs
from bridge.dice import ScriptedDice
from bridge.session import Session
from bridge.store import open_store

logs.configure("console", level="info")

PG_URL = os.environ.get("FATE_BRIDGE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
REQUIRE_SERVICES = os.environ.get("FATE_BRIDGE_REQUIRE_SERVICES") == "1"
BACKENDS = ["sqlite", "postgresql"]


def _pg_connect():
    import psycopg

    return psycopg.connect(PG_URL, autocommit=True, connect_timeout=3)


@pytest.fixture(scope="session")
def pg_server() -> str:
    """``PG_URL`` when a PostgreSQL server answers there; else the test is skipped (or fails
    with ``FATE_BRIDGE_REQUIRE_SERVICES=1``)."""
    try:
        _pg_connect().close()
    except Exception as exc:  # psycopg missing, refused, bad URL: all mean "no server to test on"
        message = (f"PostgreSQL not reachable at {PG_URL} ({type(exc).__name__}: {exc}); set "
                   "FATE_BRIDGE_TEST_PG to a server's URL to run the PostgreSQL variants")
        if REQUIRE_SERVICES:
            pytest.fail(message + " (required: FATE_BRIDGE_REQUIRE_SERVICES=1)")
        pytest.skip(message)
    return PG_URL


@pytest.fixture
def tmpfs_mountable() -> None:
    """Skips the test saying why where no tmpfs can be mounted (bench/outage.py ``tmpfs``: root
    only; a full disk is a small one), or fails it with ``FATE_BRIDGE_REQUIRE_SERVICES=1``."""
    problem = tmpfs_problem()
    if problem is not None:
        if REQUIRE_SERVICES:
            pytest.fail(problem + " (required: FATE_BRIDGE_REQUIRE_SERVICES=1)")
        pytest.skip(problem)


@pytest.fixture
def pg_url(pg_server):
    """A URL of a fresh, empty PostgreSQL schema of its own, dropped after the test."""
    schema = f"fb_test_{secrets.token_hex(6)}"
    with _pg_connect() as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    yield schema_url(pg_server, schema)
    with _pg_connect() as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(params=BACKENDS)
def db_url(request, tmp_path) -> str:
    """A fresh database on each backend: a SQLite file path, or a PostgreSQL schema's URL."""
    if request.param == "sqlite":
        return str(tmp_path / "bridge.sqlite3")
    return request.getfixturevalue("pg_url")


@pytest.fixture(params=BACKENDS)
async def store(request):
    """A store with the world ``w``, on each backend (SQLite in memory, PostgreSQL in a fresh
    schema); test modules with their own ``store`` override it."""
    db = ":memory:" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    store = await open_store(db)
    await store.add_world("w", None)
    yield store
    await store.close()


@pytest.fixture
def session(store):
    """A trusted Session on ``store`` for the world ``w``, rolling scripted dice (none unless a
    message brings its own, see ``helpers.send``)."""
    return Session(store, ScriptedDice([]), trusted=True, default_world="w")
