"""The SQLite file's layout and conventions: the migrations that build it, how values are stored
(JSON blobs, the big ones as zstd frames: :mod:`bridge.store.blobs`; UTC times as sortable text) and the one way a change is committed.

Every backend module (``sqlite``, ``worlds``, ``audit_rows``) reads and writes through these.
"""

from __future__ import annotations

import datetime
import sqlite3
from collections.abc import Callable
from typing import TypeVar

import msgspec

from .. import wire

T = TypeVar("T")

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
    # Issue 17: a reply is kept once, in its audit record; a world's event ids (to answer a repeat
    # from memory) are read from this index alone when the world is loaded.
    6: """
CREATE INDEX audit_by_event ON audit (world_id, event_id, seq) WHERE event_id IS NOT NULL;
""",
    # Ed25519-signed heads (bridge/heads.py, issue 15): the chain's head and the state's digest,
    # verifiable with the public key alone.
    7: """
CREATE TABLE heads (
    world_id TEXT NOT NULL, seq INTEGER NOT NULL, hash TEXT NOT NULL, state_digest TEXT,
    public_key TEXT NOT NULL, sig TEXT NOT NULL, ts TEXT NOT NULL,
    PRIMARY KEY (world_id, seq)
);
""",
    # Issue 17: the records live in their primary key's b-tree (WITHOUT ROWID), not in a table
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
}
SCHEMA_VERSION = max(MIGRATIONS)


def utc_now() -> str:
    """The current UTC time as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (sorts as text)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


_settings_decoder = msgspec.json.Decoder(wire.WorldSettings)
_summary_decoder = msgspec.json.Decoder(wire.AuditColumns)
_encode = msgspec.json.Encoder().encode


def _in_transaction(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], T],
                    begin: str = "BEGIN IMMEDIATE") -> T:
    """Run ``work`` in one transaction opened with ``begin`` (SQLite's ``BEGIN IMMEDIATE``; the
    PostgreSQL store's connection passes ``BEGIN``): see :func:`_committed`."""
    conn.execute(begin)
    return _committed(conn, work)


def _committed(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    """Run ``work`` in the transaction the caller has just begun on ``conn``: committed if it
    returns, rolled back if it raises (and the exception raised on)."""
    try:
        result = work(conn)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return result
