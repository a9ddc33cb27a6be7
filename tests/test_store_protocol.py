"""The Store protocol lists every method the shell calls, and each backend (SQLite, PostgreSQL)
implements each one with the same signature; likewise the ``world`` commands' WorldAdmin."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from bridge import wire
from bridge.store import Store, SQLiteStore, WorldAdmin
from bridge.store.admin import Admin
from bridge.store.codecs import _encode
from bridge.store.postgres import PostgresStore
from bridge.store.schema import KIND_TYPES, TABLES
from bridge.store.worlds import NEW_SETTINGS

BRIDGE = Path(__file__).resolve().parent.parent / "bridge"
SHELL = ["session.py", "server.py", "connection.py", "links.py", "cli.py", "audit_cli.py"]


def _protocol_methods() -> set[str]:
    return {name for name in dir(Store) if inspect.iscoroutinefunction(getattr(Store, name))}


def _called_on_store(path: Path, variable: str = "store") -> set[str]:
    """Every ``store.<name>(...)`` / ``self.store.<name>(...)`` call in ``path`` (``variable``
    for ``store``)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if (isinstance(owner, ast.Name) and owner.id == variable) or (
                    isinstance(owner, ast.Attribute) and owner.attr == variable):
                names.add(node.func.attr)
    return names


def test_every_method_the_shell_calls_is_in_the_protocol():
    called = set().union(*(_called_on_store(BRIDGE / name) for name in SHELL))
    assert {"audit_page", "audit_rows", "audit_row", "repair", "new_key", "decide", "read"} <= called
    assert called - {"open"} <= _protocol_methods(), called - _protocol_methods()


@pytest.mark.parametrize("backend", [SQLiteStore, PostgresStore])
def test_each_backend_implements_the_protocol_with_the_same_signatures(backend):
    for name in _protocol_methods():
        ours = getattr(backend, name)
        assert inspect.iscoroutinefunction(ours), name
        assert inspect.signature(ours) == inspect.signature(getattr(Store, name)), name


def _admin_methods() -> set[str]:
    return {name for name in dir(WorldAdmin) if not name.startswith("_") and callable(getattr(WorldAdmin, name))}


def test_the_world_commands_call_only_world_admin_which_is_the_stores_methods_of_the_same_names():
    """``_world`` (bridge/cli.py) calls its ``admin`` only through WorldAdmin, whose methods are
    the Store's of the same names and parameters, synchronous; Admin gives each of them."""
    called = _called_on_store(BRIDGE / "cli.py", "admin")
    assert {"add_world", "set_token", "remove_world", "worlds", "close"} <= called
    assert called <= _admin_methods(), called - _admin_methods()
    for name in _admin_methods():
        assert inspect.signature(getattr(Admin, name)) == inspect.signature(getattr(WorldAdmin, name)), name
        if name != "close":
            assert inspect.signature(getattr(WorldAdmin, name)) == inspect.signature(getattr(Store, name)), name
            assert not inspect.iscoroutinefunction(getattr(Admin, name)), name


def test_a_new_worlds_settings_are_the_encoded_default_settings():
    """``NEW_SETTINGS`` (bridge/store/worlds.py), written out so that ``world add`` imports no
    msgspec, is what encoding ``wire.WorldSettings()`` gives."""
    assert NEW_SETTINGS == _encode(wire.WorldSettings())


def test_the_backends_share_one_batch_writer_and_neither_derives_from_the_other():
    """Issue 26: the batch, the group commit, the world caches and the lease refusal are written
    once (bridge/store/writer.py); each backend adds only its own part."""
    from bridge.store.writer import BatchWriter

    assert issubclass(SQLiteStore, BatchWriter) and issubclass(PostgresStore, BatchWriter)
    assert not issubclass(PostgresStore, SQLiteStore) and not issubclass(SQLiteStore, PostgresStore)
    shared = {"decide", "read", "close", "_flush_sync", "_write_batch", "_decide_in_memory", "_read_world",
              "_load_world_sync", "_replay_sync", "_start_flush"}
    assert shared <= set(vars(BatchWriter))
    for backend in (SQLiteStore, PostgresStore):
        assert not shared & set(vars(backend)), (backend.__name__, shared & set(vars(backend)))
    # the tails (and their folds) are SQLite's alone, the leases PostgreSQL's
    assert {"_batch_written", "_batch_committed", "_fold_sync", "_check_heads"} <= set(vars(SQLiteStore))
    assert not {"_batch_written", "_batch_committed", "_fold_sync", "_check_heads"} & set(vars(PostgresStore))
    assert "_fence" in vars(PostgresStore) and "_fence" not in vars(SQLiteStore)


def _sqlite_columns(conn) -> dict[str, dict[str, str]]:
    return {table: {name: kind for _, name, kind, *_ in conn.execute(f"PRAGMA main.table_info({table})")}
            for table in TABLES}


async def test_the_sqlite_migrations_build_the_declared_tables_and_types():
    """The column types are declared once (schema.TABLES, KIND_TYPES); the SQLite file's
    migrations arrive at exactly them, column for column, in order."""
    store = await SQLiteStore.open(":memory:")
    try:
        found = await store._run(lambda: _sqlite_columns(store._conn))
    finally:
        await store.close()
    assert found == {table: {column: KIND_TYPES[kind][0] for column, kind in columns.items()}
                     for table, columns in TABLES.items()}


async def test_the_postgresql_migrations_build_the_declared_tables_and_types(pg_url):
    """As above, for PostgreSQL's migrations (its own steps, the same tables)."""
    store = await PostgresStore.open(pg_url)
    try:
        rows = await store._run(lambda: store._conn.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position").fetchall())
    finally:
        await store.close()
    found: dict[str, dict[str, str]] = {}
    for table, column, kind in rows:
        if table in TABLES:
            found.setdefault(table, {})[column] = kind
    assert found == {table: {column: KIND_TYPES[kind][1] for column, kind in columns.items()}
                     for table, columns in TABLES.items()}


def test_postgresql_bulk_writes_cast_each_column_to_its_declared_type():
    from bridge.store.postgres import _bulk_sql

    sql = _bulk_sql("INSERT INTO invites (invite_id, max_uses, approval) VALUES (?, ?, ?)")
    assert sql == ("INSERT INTO invites (invite_id, max_uses, approval) SELECT * FROM"
                   " unnest(?::text[], ?::integer[], ?::integer[])")
    assert _bulk_sql("INSERT INTO checkpoints (world_id, seq, mac) VALUES (?, ?, ?)") == (
        "INSERT INTO checkpoints (world_id, seq, mac) SELECT * FROM unnest(?::text[], ?::bigint[], ?::text[])")
    assert _bulk_sql("INSERT INTO nowhere (a) VALUES (?)") is None  # a table not declared: row by row


SHELLS = ["cli.py", "audit_cli.py", "ops_cli.py", "doctor.py", "migrate.py", "server.py", "connection.py",
          "links.py", "http.py", "status.py", "session.py"]


def test_no_shell_names_a_backend():
    """The shells ask the registry (bridge/store/backends.py): none imports a database driver or a
    backend's module, nor names a backend's store class."""
    for name in SHELLS:
        tree = ast.parse((BRIDGE / name).read_text())
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {f"{node.module}.{alias.name}" if node.module else alias.name for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) for alias in node.names}
        named = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        assert not {m for m in imported if m.split(".")[0] in ("sqlite3", "psycopg")
                    or m.startswith(("store.sqlite", "store.postgres"))}, name
        assert not named & {"SQLiteStore", "PostgresStore", "is_postgres_url"}, name


def test_a_third_backend_is_one_module_and_one_registration(tmp_path, monkeypatch, capsys):
    """tests/plugin_backend.py, registered here for ``plugfile://``: every command that takes
    ``--db`` runs on it through the registry, none naming it."""
    from bridge.cli import main
    from bridge.store import backends

    monkeypatch.setattr(backends, "_MODULES", dict(backends._MODULES))
    backends.register(("plugfile",), "tests.plugin_backend")
    db = f"plugfile://{tmp_path / 'plug.sqlite3'}"
    keys = ["--audit-key", str(tmp_path / "audit.key"), "--signing-key", str(tmp_path / "receipt.key")]
    assert main(["world", "list", "--db", db]) == 2  # no database yet: the backend's `exists` says so
    assert "no database at" in capsys.readouterr().err
    assert main(["world", "add", "w", "--db", db, "--token-only"]) == 0
    assert (tmp_path / "plug.sqlite3").exists()
    line = '{"type":"settings","v":1,"fate_option":"everyone"}\n'
    monkeypatch.setattr("sys.stdin", type("In", (), {"buffer": [line.encode()]})())
    monkeypatch.setattr("bridge.logs.configure", lambda *_, **__: None)  # the suite's log capture stays
    assert main(["resolve", "--db", db, *keys[:2]]) == 0
    capsys.readouterr()
    assert main(["audit", "verify", "--db", db, *keys]) == 0
    assert capsys.readouterr().out.startswith("PASS offline: 1 records")
    assert main(["doctor", "--db", db, *keys, "--port", "0"]) == 0
    assert f"database {tmp_path / 'plug.sqlite3'}: schema" in capsys.readouterr().out
    assert main(["backup", str(tmp_path / "copy.sqlite3"), "--db", db]) == 0
    assert "Backed up 2 worlds and 1 audit records" in capsys.readouterr().out
    assert main(["world", "list", "--db", "nosuch://x"]) == 2
    assert "no backend serves nosuch://x: give a SQLite file path or a URL of" in capsys.readouterr().err


def test_a_world_command_on_a_locked_database_gets_storage_unavailable_and_nothing_is_written(tmp_path):
    """The world commands' admin (bridge/store/admin.py) reports storage failing as the store
    does (one line from the CLI, exit 2), and its transaction is rolled back."""
    import sqlite3

    from bridge.errors import StorageUnavailable
    from bridge.store import sqlite_file

    db = tmp_path / "bridge.sqlite3"
    admin = sqlite_file.open_world_admin(db)
    try:
        admin._conn.execute("PRAGMA busy_timeout = 0")  # refused at once, not after 5 s
        other = sqlite3.connect(db, isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")
        with pytest.raises(StorageUnavailable) as refused:
            admin.add_world("w", "hash")
        assert refused.value.reason == "locked"
        other.execute("ROLLBACK")
        other.close()
        assert admin.worlds() == []
        admin.add_world("w", "hash")
        assert [(w.world_id, w.token_hash, w.settings.fate_option) for w in admin.worlds()] == [("w", "hash", "everyone")]
    finally:
        admin.close()
