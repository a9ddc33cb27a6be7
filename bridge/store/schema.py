"""The SQLite file's layout and conventions.

- the migrations that build it;
- how it is opened for writing (:func:`connect`);
- how values are stored. JSON blobs are read and written by :mod:`bridge.store.codecs`; the big
  ones are zstd frames (:mod:`bridge.store.blobs`). UTC times are sortable text.
- the one way a change is committed;
- which of its errors are storage failing (:func:`storage_fault`).

It imports no msgspec and no wire message: the ``world`` commands open the file through it.
Every backend module (``sqlite``, ``worlds``, ``audit_rows``) reads and writes through these.
"""

from __future__ import annotations

import datetime
import errno
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ..errors import ConfigError
from ..startup import database_problem

T = TypeVar("T")

# The invite tables, the same text in both backends' migrations (types both read alike).
INVITE_TABLES = """
CREATE TABLE invites (
    invite_id   TEXT PRIMARY KEY,
    secret_hash TEXT NOT NULL,
    max_uses    INTEGER,
    uses        INTEGER NOT NULL DEFAULT 0,
    expires_at  TEXT,
    approval    INTEGER NOT NULL DEFAULT 0,
    created_at  TEXT NOT NULL,
    revoked_at  TEXT
);
CREATE TABLE registrations (
    world_id     TEXT PRIMARY KEY,
    invite_id    TEXT NOT NULL,
    secret_hash  TEXT NOT NULL,
    address      TEXT NOT NULL,
    requested_at TEXT NOT NULL,
    state        TEXT NOT NULL DEFAULT 'waiting'
)
"""

# Each step upgrades the file from the previous version; a file records its version in ``meta``.
# Never edit a released step: add the next one.
MIGRATIONS: dict[int, str] = {
    1: """
CREATE TABLE IF NOT EXISTS worlds (
    world_id   TEXT PRIMARY KEY,
    token_hash TEXT,
    settings   BLOB NOT NULL,
    last_seq   INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);
CREATE TABLE IF NOT EXISTS events (
    world_id TEXT NOT NULL, event_id TEXT NOT NULL, reply BLOB NOT NULL,
    PRIMARY KEY (world_id, event_id)
);
CREATE TABLE IF NOT EXISTS records (
    world_id TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,
    PRIMARY KEY (world_id, kind, key)
);
""",
    2: """
CREATE TABLE audit (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    world_id   TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    ts         TEXT NOT NULL,
    type       TEXT NOT NULL,
    event_id   TEXT,
    user_id    TEXT,
    ruleset    TEXT,
    actor_id   TEXT,
    outcome    TEXT NOT NULL,
    summary    BLOB NOT NULL,
    record     BLOB NOT NULL,
    prev_hash  TEXT NOT NULL,
    hash       TEXT NOT NULL,
    UNIQUE (world_id, seq)
);
CREATE INDEX audit_by_actor ON audit (world_id, actor_id, seq);
CREATE INDEX audit_by_ts ON audit (ts);
CREATE TABLE checkpoints (
    world_id TEXT NOT NULL, seq INTEGER NOT NULL, hash TEXT NOT NULL, mac TEXT NOT NULL,
    ts TEXT NOT NULL,
    PRIMARY KEY (world_id, seq)
);
""",
    # The world's read-only overlay viewer key, kept in clear text: the overlay URL carries it and
    # the GM's module shows it (see docs/security.md).
    3: """
ALTER TABLE worlds ADD COLUMN viewer_key TEXT;
""",
    4: """
ALTER TABLE events ADD COLUMN request_hash TEXT;
""",
    5: """
ALTER TABLE worlds ADD COLUMN removed_at TEXT;
""",
    # A reply is kept once, in its audit record; a world's event ids (to answer a repeat
    # from memory) are read from this index alone when the world is loaded.
    6: """
CREATE INDEX audit_by_event ON audit (world_id, event_id, seq) WHERE event_id IS NOT NULL;
""",
    # Ed25519-signed heads (bridge/heads.py): the chain's head and the state's digest,
    # verifiable with the public key alone.
    7: """
CREATE TABLE heads (
    world_id TEXT NOT NULL, seq INTEGER NOT NULL, hash TEXT NOT NULL, state_digest TEXT,
    public_key TEXT NOT NULL, sig TEXT NOT NULL, ts TEXT NOT NULL,
    PRIMARY KEY (world_id, seq)
);
""",
    # The records live in their primary key's b-tree (WITHOUT ROWID), not in a table
    # plus an index repeating (world_id, kind, key): ~50 bytes less per decision. The same rows
    # and columns (PostgreSQL's table needs no such step).
    8: """
CREATE TABLE records_by_key (
    world_id TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,
    PRIMARY KEY (world_id, kind, key)
) WITHOUT ROWID;
INSERT INTO records_by_key (world_id, kind, key, value) SELECT world_id, kind, key, value FROM records;
DROP TABLE records;
ALTER TABLE records_by_key RENAME TO records;
""",
    # A batch's audit rows and state rows go to small tables of their own, whose few
    # pages are shared by every world of the batch (a COMMIT writes each page it changed to the
    # WAL: ~10 pages a batch of 10 worlds instead of ~60, one per world in each of audit's
    # indexes and in records), and are moved into ``audit`` and ``records`` a few hundred records
    # at a time (:func:`fold_tail`). Every connection reads each pair as one (:func:`read_as_one`).
    9: """
CREATE TABLE audit_tail (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    world_id   TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    ts         TEXT NOT NULL,
    type       TEXT NOT NULL,
    event_id   TEXT,
    user_id    TEXT,
    ruleset    TEXT,
    actor_id   TEXT,
    outcome    TEXT NOT NULL,
    summary    BLOB NOT NULL,
    record     BLOB NOT NULL,
    prev_hash  TEXT NOT NULL,
    hash       TEXT NOT NULL,
    UNIQUE (world_id, seq)
);
INSERT INTO sqlite_sequence (name, seq) SELECT 'audit_tail', max(coalesce(max(id), 0), coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'audit'), 0)) FROM audit;
CREATE TABLE records_tail (
    world_id TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,
    PRIMARY KEY (world_id, kind, key)
) WITHOUT ROWID;
""",
    # The world's language, as its forwarder's last hello set it (bridge.i18n), for what
    # is made without a connection (``audit report``). NULL: no hello since.
    10: """
ALTER TABLE worlds ADD COLUMN language TEXT;
""",
    # Version 2 heads seal the stored bytes of their records too (bridge/heads.py);
    # NULL: a version 1 head
    11: """
ALTER TABLE heads ADD COLUMN stored_digest TEXT;
""",
    # Each batch seals the state of the worlds it wrote (bridge/store/seal.py), so a
    # world's load after a crash checks its rows without deriving its chain. NULL: not sealed yet.
    12: """
ALTER TABLE worlds ADD COLUMN state_seal TEXT;
""",
    # Invite codes (bridge/credentials.py; the secret's SHA-256 only) and the requests
    # made with an approval code, waiting for the host (bridge/store/invites.py).
    13: INVITE_TABLES,
}
SCHEMA_VERSION = max(MIGRATIONS)


# Every table the backends share, as the migrations leave it at SCHEMA_VERSION: each column (in
# table order) and its kind, the one place each backend's column types come from (KIND_TYPES):
# PostgreSQL's bulk writes cast to them, ``fate-bridge migrate`` copies by them, and
# tests/test_store_protocol.py checks that both backends' migrations build exactly these. The
# migrations are history (never edited); a new column goes into a new step of each and here.
TABLES: dict[str, dict[str, str]] = {
    "worlds": {"world_id": "text", "token_hash": "text", "settings": "bytes", "last_seq": "bigint",
               "created_at": "text", "viewer_key": "text", "removed_at": "text", "language": "text",
               "state_seal": "text"},
    "records": {"world_id": "text", "kind": "text", "key": "text", "value": "bytes"},
    "events": {"world_id": "text", "event_id": "text", "reply": "bytes", "request_hash": "text"},
    "audit": {"id": "bigint", "world_id": "text", "seq": "bigint", "ts": "text", "type": "text",
              "event_id": "text", "user_id": "text", "ruleset": "text", "actor_id": "text", "outcome": "text",
              "summary": "bytes", "record": "bytes", "prev_hash": "text", "hash": "text"},
    "checkpoints": {"world_id": "text", "seq": "bigint", "hash": "text", "mac": "text", "ts": "text"},
    "heads": {"world_id": "text", "seq": "bigint", "hash": "text", "state_digest": "text", "public_key": "text",
              "sig": "text", "ts": "text", "stored_digest": "text"},
    "invites": {"invite_id": "text", "secret_hash": "text", "max_uses": "integer", "uses": "integer",
                "expires_at": "text", "approval": "integer", "created_at": "text", "revoked_at": "text"},
    "registrations": {"world_id": "text", "invite_id": "text", "secret_hash": "text", "address": "text",
                      "requested_at": "text", "state": "text"},
}
# A kind's column type in each backend: (SQLite's declared type, PostgreSQL's type name).
KIND_TYPES: dict[str, tuple[str, str]] = {
    "text": ("TEXT", "text"), "bigint": ("INTEGER", "bigint"), "integer": ("INTEGER", "integer"),
    "bytes": ("BLOB", "bytea"),
}
AUDIT_COLUMNS = ", ".join(column for column in TABLES["audit"] if column != "id")  # the columns a record writes
# Folding the tails (bridge/store/sqlite.py): from FOLD_ROWS rows in audit_tail on, the writer
# thread folds the oldest FOLD_CHUNK rows a transaction until half as many are left, waiting
# FOLD_WAIT_MS at most for the write lock each time (the batches come first). A fold writes a
# leaf of each of audit's indexes and of records per world it touches, so the more rows of a
# world one fold moves, the less it costs per row (measured at C=10: ~33 µs of CPU per record
# folding 64 rows at a time, ~24 at 128, ~21 at 256), and a batch meeting its write lock waits
# for it (~1-2 ms for 128 rows). Should the tail reach FOLD_BACKSTOP rows all the same (the
# batches keep the lock nearly all the time under load: 20,000 rows after 6 s at C=100 with the
# writer thread alone), each batch folds FOLD_CHUNK rows itself, in its own transaction.
FOLD_ROWS = 512
FOLD_CHUNK = 128
FOLD_WAIT_MS = 5
FOLD_BACKSTOP = 4 * FOLD_ROWS
# The largest id audit has given: its rows' and its AUTOINCREMENT counter's (a deleted top row's
# id is never given again). audit_tail's ids follow on from it.
_TOP_AUDIT_ID = ("max((SELECT coalesce(max(id), 0) FROM main.audit),"
                 " (SELECT coalesce(max(seq), 0) FROM main.sqlite_sequence WHERE name = 'audit'))")


# A batch's writes to ``worlds`` and ``events`` (bridge/store/writer.py), one row each per
# ``executemany`` row; named here so that PostgreSQL's one-statement form (bridge/store/postgres.py
# ``_bulk_sql``) is keyed by the very strings the writer sends.
UPDATE_WORLD_SEALED = "UPDATE worlds SET last_seq = ?, settings = coalesce(?, settings), state_seal = ? WHERE world_id = ?"
UPDATE_WORLD = "UPDATE worlds SET last_seq = ?, settings = coalesce(?, settings) WHERE world_id = ?"
INSERT_EVENT = "INSERT INTO events (world_id, event_id, reply, request_hash) VALUES (?, ?, ?, ?)"


def insert_audit_sql(table: str) -> str:
    """The statement appending one audit row to ``table``: SQLite's ``audit_tail``, PostgreSQL's ``audit``.

    Columns are :data:`AUDIT_COLUMNS`, with ``?`` placeholders.
    """
    return f"INSERT INTO {table} ({AUDIT_COLUMNS}) VALUES ({', '.join('?' for _ in AUDIT_COLUMNS.split(','))})"


def upsert_records_sql(table: str) -> str:
    """The statement writing one state row (world_id, kind, key, value) into ``table``.

    It overwrites the older value of its key. ``table`` is SQLite's ``records_tail``, PostgreSQL's
    ``records``.
    """
    return (f"INSERT INTO {table} (world_id, kind, key, value) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (world_id, kind, key) DO UPDATE SET value = excluded.value")


def read_as_one(conn: sqlite3.Connection) -> None:
    """Make ``audit`` and ``records`` on ``conn`` read as each table and its tail together.

    They become TEMP views of those names, which SQLite resolves before ``main.audit`` and
    ``main.records``. The tail's audit rows keep their ids. Those come from audit_tail's
    AUTOINCREMENT, which follows on from audit's; folding keeps them. A state row in
    ``records_tail`` replaces its older value in ``records``.

    So every query of this package sees every committed row, wherever it is stored. So does a
    read-only ``audit verify`` while ``serve`` runs. Writes name ``main.audit``, ``main.records``
    or a tail. A file older than migration 9 is left as it is.
    """
    if conn.execute("SELECT 1 FROM main.sqlite_master WHERE name = 'audit_tail'").fetchone() is None:
        return
    conn.execute(f"CREATE TEMP VIEW IF NOT EXISTS audit AS SELECT id, {AUDIT_COLUMNS} FROM main.audit"
                 f" UNION ALL SELECT id, {AUDIT_COLUMNS} FROM main.audit_tail")
    conn.execute("CREATE TEMP VIEW IF NOT EXISTS records AS SELECT world_id, kind, key, value FROM main.records r"
                 " WHERE NOT EXISTS (SELECT 1 FROM main.records_tail t WHERE t.world_id = r.world_id"
                 " AND t.kind = r.kind AND t.key = r.key)"
                 " UNION ALL SELECT world_id, kind, key, value FROM main.records_tail")


def fold_tail(conn: sqlite3.Connection, rows: int | None = None) -> int:
    """Move the oldest ``rows`` rows of ``audit_tail`` into ``audit``; None: all.

    Each keeps its id and goes in id order, appended, so audit's pages stay full. Every row of
    ``records_tail`` goes into ``records``, replacing the older values. This runs inside the
    caller's write transaction, so a crash before its COMMIT leaves all four tables as they were.
    A whole fold then sets audit_tail's counter past audit's largest id, for rows put into
    ``audit`` by hand. Nothing is written when there is nothing to move. Returns the rows moved
    into ``audit``.
    """
    params: tuple[int, ...]
    if rows is None:
        where, params = "true", ()
    else:
        where, params = "id IN (SELECT id FROM main.audit_tail ORDER BY id LIMIT ?)", (rows,)
    conn.execute("INSERT INTO main.records (world_id, kind, key, value) SELECT world_id, kind, key, value"
                 " FROM main.records_tail WHERE true ON CONFLICT (world_id, kind, key) DO UPDATE SET value = excluded.value")
    conn.execute("DELETE FROM main.records_tail")
    conn.execute(f"INSERT INTO main.audit (id, {AUDIT_COLUMNS}) SELECT id, {AUDIT_COLUMNS}"
                 f" FROM main.audit_tail WHERE {where} ORDER BY id", params)
    moved = conn.execute(f"DELETE FROM main.audit_tail WHERE {where}", params).rowcount
    if rows is None:
        conn.execute(f"UPDATE main.sqlite_sequence SET seq = {_TOP_AUDIT_ID} WHERE name = 'audit_tail'"
                     f" AND seq < {_TOP_AUDIT_ID}")
    return moved


def utc_now() -> str:
    """The current UTC time as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (sorts as text)."""
    return utc_text(datetime.datetime.now(datetime.UTC))


def utc_text(moment: datetime.datetime) -> str:
    """An aware ``moment`` as the store writes times: ``YYYY-MM-DDTHH:MM:SS.mmmZ`` in UTC."""
    moment = moment.astimezone(datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"




def _in_transaction(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], T],
                    begin: str = "BEGIN IMMEDIATE") -> T:
    """Run ``work`` in one transaction opened with ``begin``: see :func:`_committed`.

    SQLite uses ``BEGIN IMMEDIATE``; the PostgreSQL store's connection passes ``BEGIN``.
    """
    conn.execute(begin)
    return _committed(conn, work)


def _committed(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    """Run ``work`` in the transaction the caller has just begun on ``conn``.

    Committed if it returns; rolled back if it raises, and the exception raised on.
    """
    try:
        result = work(conn)
        conn.execute("COMMIT")
    except BaseException:
        if getattr(conn, "in_transaction", True):  # SQLite ends it itself after some errors (a full disk)
            conn.execute("ROLLBACK")
        raise
    return result


DB_FILE_MODE = 0o600  # a new database file is readable by its owner only (SQLite's -wal/-shm follow)


def connect(path: str | Path) -> sqlite3.Connection:
    """A writer's connection to the SQLite file ``path``, or ``":memory:"``.

    A missing file is made owner-only, with its folder. The connection is in autocommit; changes
    go through :func:`_in_transaction`. It waits up to 5 s for a lock held elsewhere. It uses WAL,
    ``synchronous = NORMAL`` and foreign keys. The schema is created or upgraded (:func:`migrate`).
    Raises ``ConfigError`` saying why the file cannot be opened
    (:func:`bridge.startup.database_problem`), or that a newer bridge wrote it.
    """
    path = str(path)
    conn = None
    try:
        if path != ":memory:":
            file = Path(path).expanduser()
            file.parent.mkdir(parents=True, exist_ok=True)
            if not file.exists():  # owner-only: it holds viewer keys and the table's history
                os.close(os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, DB_FILE_MODE))
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 5000")
        if path != ":memory:":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        migrate(conn, path)
    except BaseException as exc:
        if conn is not None:
            conn.close()
        if isinstance(exc, (OSError, sqlite3.DatabaseError)):
            raise ConfigError(database_problem(path, exc)) from None
        raise
    return conn


def migrate(conn: sqlite3.Connection, label: str) -> None:
    """Create or upgrade the schema on ``conn`` step by step (:data:`MIGRATIONS`), in one
    transaction. Raises ``ConfigError`` for a file a newer bridge wrote (``label``: its path)."""

    def work(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        version = int(row[0]) if row else 0
        if version > SCHEMA_VERSION:
            raise ConfigError(
                f"the database {label!r} was written by a newer fate-bridge (schema "
                f"{version}, this bridge knows {SCHEMA_VERSION}); upgrade fate-bridge or use"
                " another --db"
            )
        for step in range(version + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[step].strip().split(";\n"):
                conn.execute(statement)
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                     (str(SCHEMA_VERSION),))

    _in_transaction(conn, work)


# SQLite's result codes (``sqlite3.Error.sqlite_errorname``, extended codes included) that mean
# storage failed, not the work: the reason each is (bridge/store/health.py).
_FAULTS = (("SQLITE_FULL", "disk_full"), ("SQLITE_READONLY", "read_only"), ("SQLITE_BUSY", "locked"),
           ("SQLITE_LOCKED", "locked"), ("SQLITE_IOERR", "io_error"), ("SQLITE_CANTOPEN", "io_error"))
_OS_FAULTS = {errno.ENOSPC: "disk_full", errno.EDQUOT: "disk_full", errno.EROFS: "read_only", errno.EIO: "io_error"}


def storage_fault(exc: BaseException, path: str | None) -> str | None:
    """The reason when ``exc`` is storage failing, not the work; else None.

    A reason is one of :data:`bridge.store.health.REASONS`. It comes from an SQLite result code of
    :data:`_FAULTS`, or a system error of :data:`_OS_FAULTS`. For an I/O error on the file ``path``,
    it is ``read_only`` or ``disk_full`` when its file system says so. ``path`` None means
    ``":memory:"``.
    """
    if isinstance(exc, OSError):
        return _OS_FAULTS.get(exc.errno or 0)
    name = getattr(exc, "sqlite_errorname", None) or ""
    reason = next((reason for code, reason in _FAULTS if name.startswith(code)), None)
    if reason == "io_error" and path is not None:
        try:
            stats = os.statvfs(Path(path).expanduser().parent)
        except OSError:
            return reason
        if stats.f_flag & os.ST_RDONLY:
            return "read_only"
        if stats.f_bavail == 0:
            return "disk_full"
    return reason
