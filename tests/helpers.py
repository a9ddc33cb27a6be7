"""Helpers shared by the Python tests (the in-memory ``store`` and ``session`` fixtures live in
``conftest.py``; the wire message builders in ``*_messages.py``):

- ``send``: one wire message to a ``Session`` (the path ``resolve`` runs), and its one reply;
- ``replay``: an example session file played into an audit-keyed store, for ``verify``;
- ``run_bridge``: the ``python -m bridge`` CLI run as a user would, from the repository root;
- ``eventually``: wait for a condition the code promises (a log line written, a connection
  released after its close), never for a fixed time (issue 26);
- ``sign_v1``: a v1 receipt (one signature per record), as bridges before issue 17 issued them;
- ``old_schema_file``: a database file left at an older schema version, to upgrade;
- ``decompress`` (``recompress_unchanged``), ``as_old_bridge``: a database's rows rewritten as plain JSON (to edit them with
  SQL as text), or in the whole layout bridges before issue 17 wrote;
- ``FIXTURES``, ``sample``: the fixtures copied into the repository (``tests/fixtures/``, its README
  gives each file's provenance and licence), read by the node tests too.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bridge import receipts, wire
from bridge.dice import ScriptedDice
from bridge.session import Session
from bridge.store import MIGRATIONS, SQLiteStore
from bridge.store.audit_rows import PREV_HASH
from bridge.store.blobs import unpack

from .sohl_messages import frame

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


def sample(relative: str):
    """The parsed JSON sample at ``tests/fixtures/samples/<relative>`` (e.g. ``"sohl/07-....json"``).
    Fails the test, naming the path expected, when the file is absent."""
    path = FIXTURES / "samples" / relative
    if not path.exists():
        pytest.fail(f"sample {relative} not found: expected {path} (tests/fixtures/samples/ in the repository)")
    return json.loads(path.read_text())


async def send(session: Session, message: dict, dice: list[int] | None = None) -> dict:
    """The one reply (decoded) to ``message``; ``dice`` script the rolls, else the session's own."""
    reply = await session.receive(frame(message), None if dice is None else ScriptedDice(dice))
    assert len(reply.frames) == 1 and reply.close_code is None
    return json.loads(reply.frames[0])


async def replay(example: Path, db: Path, key: bytes, signing_key: Ed25519PrivateKey | None = None) -> SQLiteStore:
    """Open ``db`` with the audit ``key`` (and the Ed25519 ``signing_key``: signed heads), add the
    world ``w`` and send it every line of ``example`` through a trusted Session, each with its
    recorded ``dice`` scripted (the replies unread). Returns the store, still open: the caller
    closes it."""
    store = await SQLiteStore.open(db, audit_key=key, signing_key=signing_key)
    await store.add_world("w", None)
    session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
    for line in example.read_text().splitlines():
        message = json.loads(line)
        await session.receive(frame({k: v for k, v in message.items() if k != "dice"}),
                              ScriptedDice(message.get("dice", [])))
    return store


def sign_v1(key, world_id: str, seq: int, record_hash: str) -> wire.Receipt:
    """The v1 receipt of a record (docs/protocol.md, Receipts): ``key`` (Ed25519) signs
    :func:`bridge.receipts.receipt_bytes` alone, as players' old ChatMessages hold them."""
    return wire.Receipt(world_id=world_id, seq=seq, record_hash=record_hash, key_id=receipts.key_id(key.public_key()),
                        sig=receipts.b64url(key.sign(receipts.receipt_bytes(world_id, seq, record_hash))))


def run_bridge(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    """``python -m bridge *args`` with ``stdin``, from the repository root; output captured as text."""
    return subprocess.run([sys.executable, "-m", "bridge", *args], input=stdin, capture_output=True,
                          text=True, cwd=ROOT, timeout=60)


async def eventually(condition, what: str, seconds: float = 30.0, poll: float = 0.01) -> None:
    """Return once ``condition()`` is true; fail naming ``what`` if it is still false after
    ``seconds`` (a bound on a hang, not a timing: a busy machine takes as long as it takes)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"after {seconds} s still not: {what}")
        await asyncio.sleep(poll)


def run_bench(module: str, mode: str, out: Path, timeout: float,
              extra: tuple[str, ...] = ()) -> tuple[subprocess.CompletedProcess, dict]:
    """``python -m <module> <mode> <extra...> --out <out>`` (a benchmark, e.g. ``bench.attack
    --smoke``) from the repository root, output captured as text; checks it exited 0 (its stderr's
    end shown otherwise) and returns the run and the JSON report it wrote to ``out``."""
    result = subprocess.run([sys.executable, "-m", module, mode, *extra, "--out", str(out)], cwd=ROOT,
                            capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return result, json.loads(out.read_text())


def old_schema_file(path: Path, version: int) -> sqlite3.Connection:
    """A database at ``path`` migrated only up to schema ``version`` (and marked so), as an older
    bridge left it. Returns the connection, uncommitted: the caller adds its rows, commits, closes."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    for step in range(1, version + 1):
        for statement in MIGRATIONS[step].strip().split(";\n"):
            conn.execute(statement)
    conn.execute(f"INSERT INTO meta VALUES ('schema_version', '{version}')")
    return conn


def decompress(db: Path) -> dict[tuple, bytes]:
    """Rewrite the zstd-compressed blobs of the SQLite file ``db`` (audit records, records'
    values) as the plain JSON they hold, in place, so a test can edit them with SQL as text (as
    someone could who had decompressed them); the rows keep today's layout otherwise. Returns
    each rewritten row's stored bytes before, for :func:`recompress_unchanged`."""
    conn = sqlite3.connect(db)
    before: dict[tuple, bytes] = {}
    rows = conn.execute("SELECT id, record FROM audit").fetchall()
    before.update((("audit", row_id), value) for row_id, value in rows)
    conn.executemany("UPDATE audit SET record = ? WHERE id = ?", [(unpack(value), row_id) for row_id, value in rows])
    rows = conn.execute("SELECT world_id, kind, key, value FROM records").fetchall()
    before.update((("records", world_id, kind, key), value) for world_id, kind, key, value in rows)
    conn.executemany("UPDATE records SET value = ? WHERE world_id = ? AND kind = ? AND key = ?",
                     [(unpack(value), world_id, kind, key) for world_id, kind, key, value in rows])
    conn.commit()
    conn.close()
    return before


def recompress_unchanged(db: Path, before: dict[tuple, bytes]) -> None:
    """Put back the stored bytes :func:`decompress` rewrote, in every row whose JSON an edit left
    as it was: only the rows edited differ from what was sealed (version 2 heads seal the stored
    bytes, so a row left decompressed would read as changed too)."""
    conn = sqlite3.connect(db)
    for row_id, value in conn.execute("SELECT id, record FROM audit").fetchall():
        old = before.get(("audit", row_id))
        if old is not None and old != value and unpack(old) == value:
            conn.execute("UPDATE audit SET record = ? WHERE id = ?", (old, row_id))
    for world_id, kind, key, value in conn.execute("SELECT world_id, kind, key, value FROM records").fetchall():
        old = before.get(("records", world_id, kind, key))
        if old is not None and old != value and unpack(old) == value:
            conn.execute("UPDATE records SET value = ? WHERE world_id = ? AND kind = ? AND key = ?",
                         (old, world_id, kind, key))
    conn.commit()
    conn.close()


class _Summarized(msgspec.Struct):
    summary: wire.AuditColumns


def as_old_bridge(db: Path) -> None:
    """Rewrite the SQLite file ``db`` (closed: its audit_tail empty) as bridges before issue 17
    left it: schema 7 (``records`` a table with a rowid, no tails), every blob plain JSON, each audit row with its own ``summary`` copy (as
    that bridge encoded it) and its ``prev_hash``."""
    decompress(db)
    conn = sqlite3.connect(db)
    rows = conn.execute(f"SELECT id, record, {PREV_HASH} FROM audit").fetchall()
    conn.executemany("UPDATE audit SET summary = ?, prev_hash = ? WHERE id = ?",
                     [(msgspec.json.encode(msgspec.json.decode(record, type=_Summarized).summary), prev, row_id)
                      for row_id, record, prev in rows])
    conn.executescript("""
        CREATE TABLE records_v7 (world_id TEXT NOT NULL, kind TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,
                                 PRIMARY KEY (world_id, kind, key));
        INSERT INTO records_v7 SELECT world_id, kind, key, value FROM records;
        DROP TABLE records;
        ALTER TABLE records_v7 RENAME TO records;
        DROP TABLE audit_tail;
        DROP TABLE records_tail;
        ALTER TABLE heads DROP COLUMN stored_digest;
        ALTER TABLE worlds DROP COLUMN language;
        ALTER TABLE worlds DROP COLUMN state_seal;
        DROP TABLE invites;
        DROP TABLE registrations;
        UPDATE meta SET value = '7' WHERE key = 'schema_version';
    """)
    conn.commit()
    conn.close()
