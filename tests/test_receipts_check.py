"""The receipts check (issue 15): receipts kept outside the bridge (chat messages) checked against
a real database's audit rows, by the ``receipts_check`` query and by ``audit verify --receipts``;
deleting the records behind some receipts, or rewriting one, is named record by record."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bridge import receipts, wire
from bridge.config import load_signing_key
from bridge.cli import main
from bridge.dice import ScriptedDice
from bridge.session import Session
from bridge.store import SQLiteStore
from bridge.store.blobs import unpack
from bridge.store.schema import read_as_one

from .helpers import ROOT, eventually, replay, sign_v1
from .sohl_messages import frame

AUDIT_KEY = bytes(range(32))


@pytest.fixture
def trail(tmp_path):
    """A real trail (the SoHL example session) in a database file, and the receipt key file."""
    return tmp_path / "bridge.sqlite3", tmp_path / "receipt.key"


async def build(db, key_path) -> list[wire.Receipt]:
    """Play the SoHL example into ``db``; returns a receipt for every record, signed with the key
    at ``key_path`` (made here), as a chat log holds them: records 1..3 with v1 receipts (one
    signature each, from a bridge before issue 17), the others with v2 ones signed in batches of 4
    (the last batch shorter)."""
    store = await replay(ROOT / "examples" / "sohl-session.jsonl", db, AUDIT_KEY)
    await store.close()
    key = load_signing_key(key_path, create=True)
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT seq, hash FROM audit WHERE world_id = 'w' ORDER BY seq").fetchall()
    conn.close()
    assert len(rows) >= 8
    old = [sign_v1(key, "w", seq, record_hash) for seq, record_hash in rows[:3]]
    leaves = [("w", seq, record_hash) for seq, record_hash in rows[3:]]
    return old + [r for start in range(0, len(leaves), 4) for r in receipts.sign_batch(key, leaves[start:start + 4])]


def tamper(db) -> None:
    """Delete records 3 and 5; rewrite record 7 (its reply and its hash, as a forger would)."""
    conn = sqlite3.connect(db)
    conn.execute("DELETE FROM audit WHERE world_id = 'w' AND seq IN (3, 5)")
    record = conn.execute("SELECT record FROM audit WHERE world_id = 'w' AND seq = 7").fetchone()[0]
    forged = unpack(record).replace(b'"ok":true', b'"ok":false')
    assert forged != unpack(record)
    conn.execute("UPDATE audit SET record = ?, hash = ? WHERE world_id = 'w' AND seq = 7",
                 (forged, hashlib.sha256(forged).hexdigest()))
    conn.commit()
    conn.close()


async def check(db, key_path, sent: list[wire.Receipt]) -> dict:
    key = load_signing_key(key_path, create=False)
    store = await SQLiteStore.open(db, signing_key=key)
    session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
    before = sqlite3.connect(db).execute("SELECT count(*) FROM audit").fetchone()[0]
    query = {"type": "receipts_check", "v": 1, "query_id": "q1",
             "receipts": [msgspec.to_builtins(r) for r in sent]}
    reply = json.loads((await session.receive(frame(query))).frames[0])
    await store.close()
    after = sqlite3.connect(db).execute("SELECT count(*) FROM audit").fetchone()[0]
    assert after == before  # a query: nothing recorded
    return reply


async def test_the_query_answers_ok_for_an_untouched_trail(trail):
    db, key_path = trail
    sent = await build(db, key_path)
    reply = await check(db, key_path, sent)
    assert reply["type"] == "receipts_checked" and reply["query_id"] == "q1"
    assert [(r["seq"], r["status"]) for r in reply["results"]] == [(r.seq, "ok") for r in sent]


async def test_the_query_names_each_deleted_and_rewritten_record(trail):
    db, key_path = trail
    sent = await build(db, key_path)
    tamper(db)
    edited = msgspec.structs.replace(sent[1], record_hash=sent[0].record_hash)  # edited in the chat log
    reply = await check(db, key_path, [*sent, edited])
    statuses = {r["seq"]: r["status"] for r in reply["results"][:-1]}
    assert {seq for seq, s in statuses.items() if s == "missing"} == {3, 5}
    assert {seq for seq, s in statuses.items() if s == "changed"} == {7}
    assert all(s == "ok" for seq, s in statuses.items() if seq not in (3, 5, 7))
    assert reply["results"][-1] == {"seq": 2, "status": "changed", "record_hash": sent[0].record_hash}


async def test_the_query_needs_the_key_and_bounds_its_size(trail):
    db, key_path = trail
    sent = await build(db, key_path)
    store = await SQLiteStore.open(db)  # no signing key
    session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
    query = {"type": "receipts_check", "v": 1, "query_id": "q2", "receipts": [msgspec.to_builtins(sent[0])]}
    reply = json.loads((await session.receive(frame(query))).frames[0])
    assert (reply["type"], reply["code"], reply["field"], reply["ref"]) == ("error", "not_found", "receipts", "q2")
    many = {**query, "receipts": [msgspec.to_builtins(sent[0])] * (wire.MAX_RECEIPTS_PER_CHECK + 1)}
    reply = json.loads((await session.receive(frame(many))).frames[0])
    assert (reply["code"], reply["field"]) == ("bad_message", "receipts")
    await store.close()


def export_file(tmp_path, sent: list[wire.Receipt]):
    path = tmp_path / "receipts.json"
    path.write_text(json.dumps({"world_id": "w", "receipts": [msgspec.to_builtins(r) for r in sent]}))
    return path


def test_verify_receipts_passes_an_untouched_trail(trail, tmp_path, capsys):
    db, key_path = trail
    sent = asyncio.run(build(db, key_path))
    code = main(["audit", "verify", "--db", str(db), "--signing-key", str(key_path),
                 "--receipts", str(export_file(tmp_path, sent))])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith(f"PASS w: {len(sent)} receipts, {len(sent)} ok, 0 missing, 0 changed")


def test_verify_receipts_names_each_missing_and_changed_record(trail, tmp_path, capsys):
    db, key_path = trail
    sent = asyncio.run(build(db, key_path))
    tamper(db)
    code = main(["audit", "verify", "--db", str(db), "--signing-key", str(key_path),
                 "--receipts", str(export_file(tmp_path, sent))])
    out = capsys.readouterr().out
    assert code == 1
    assert out.splitlines()[0] == f"FAIL w: {len(sent)} receipts, {len(sent) - 3} ok, 2 missing, 1 changed"
    assert "[missing] record 3 " in out and "[missing] record 5 " in out and "[changed] record 7 " in out
    assert len([line for line in out.splitlines() if line.startswith("  - ")]) == 3


def test_verify_receipts_with_another_key_calls_every_receipt_changed(trail, tmp_path, capsys):
    db, key_path = trail
    sent = asyncio.run(build(db, key_path))
    other = tmp_path / "other.key"
    load_signing_key(other, create=True)
    code = main(["audit", "verify", "--db", str(db), "--signing-key", str(other),
                 "--receipts", str(export_file(tmp_path, sent))])
    assert code == 1
    assert f"0 ok, 0 missing, {len(sent)} changed" in capsys.readouterr().out


def test_verify_receipts_explains_a_bad_file_or_missing_key(trail, tmp_path, capsys):
    db, key_path = trail
    asyncio.run(build(db, key_path))
    bad = tmp_path / "bad.json"
    bad.write_text('{"world": "w"}')
    assert main(["audit", "verify", "--db", str(db), "--signing-key", str(key_path), "--receipts", str(bad)]) == 2
    assert "is not a receipts export" in capsys.readouterr().err
    good = export_file(tmp_path, [])
    assert main(["audit", "verify", "--db", str(db), "--signing-key", str(tmp_path / "none.key"),
                 "--receipts", str(good)]) == 2
    assert "no receipt signing key at" in capsys.readouterr().err


async def test_serve_makes_the_receipt_key_beside_the_audit_key_and_checks_with_it(tmp_path, monkeypatch):
    """A real `fate-bridge serve`: the key it makes (owner-only, beside the audit key) is the one
    its receipts_check verifies with, over the wire."""
    from .test_server import World, ask, bridge_cli, bridge_serving, graded, opened

    audit_key = tmp_path / "config" / "audit.key"
    monkeypatch.setenv("FATE_BRIDGE_AUDIT_KEY", str(audit_key))
    monkeypatch.delenv("FATE_BRIDGE_SIGNING_KEY", raising=False)
    db = tmp_path / "bridge.sqlite3"
    code, out, err = await bridge_cli("world", "add", "W", "--db", str(db), "--token-only")
    assert code == 0, err
    async with bridge_serving(db, tmp_path / "serve.log") as served:
        ws = await opened(served.url, World("W", out.strip()))
        sent = await graded(ws, "msgArchery0001")
        key_file = audit_key.with_name("receipt.key")
        assert oct(key_file.stat().st_mode & 0o777) == "0o600"
        key = load_signing_key(key_file, create=False)
        reader = sqlite3.connect(db)
        read_as_one(reader)  # serve has not folded its audit_tail yet
        (record_hash,) = reader.execute("SELECT hash FROM audit WHERE world_id = 'W' AND seq = 1").fetchone()
        reader.close()
        good = wire.Receipt(**sent["receipt"])  # the reply's own, signed with its batch
        assert (good.world_id, good.seq, good.record_hash, good.batch_size) == ("W", 1, record_hash, 1)
        gone = receipts.sign_batch(key, [("W", 1, record_hash), ("W", 2, record_hash)])[1]
        other = receipts.sign_batch(Ed25519PrivateKey.generate(), [("W", 1, record_hash)])[0]
        reply = await ask(ws, {"type": "receipts_check", "v": 1, "query_id": "q",
                               "receipts": [msgspec.to_builtins(r) for r in (good, gone, other)]})
        assert [r["status"] for r in reply["results"]] == ["ok", "missing", "changed"]
        assert await served.terminated() == 0, served.log_text()


async def test_a_committed_batch_is_signed_once_and_each_reply_carries_a_receipt_that_checks(db_url):
    """Through the real store, on each backend: decisions committed in one batch (a replay of an
    earlier one among them) cost ONE Ed25519 signature; each reply's receipt names its own
    record, verifies, and ``receipts_check`` answers it ``ok``."""
    from bridge.store import open_store

    from .sohl_messages import rolled
    from .test_receipts import CountingKey

    key = CountingKey(Ed25519PrivateKey.generate())
    store = await open_store(db_url, signing_key=key)
    await store.add_world("w", None)
    session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
    first = json.loads((await session.receive(frame(rolled("r0", "m0")))).frames[0])
    assert key.signed == [receipts.batch_bytes(receipts.leaf_hash("w", 1, first["receipt"]["record_hash"]), 1)]
    key.signed.clear()

    n = 9
    # r0 again (a replay) and 8 new decisions, sent in one tick: one committed batch, once the
    # writer is idle (a writer thread still looping after r0's batch takes the queue as it finds
    # it, maybe while this tick is filling it)
    await eventually(lambda: not store._flushing, "the writer idle after r0's batch")
    replies = await asyncio.gather(*(session.receive(frame(rolled(f"r{i}", f"m{i}"))) for i in range(n)))
    sent = [json.loads(reply.frames[0]) for reply in replies]
    assert len(key.signed) == 1 and key.signed[0].startswith(receipts.BATCH_DOMAIN)
    got = [wire.Receipt(**reply.pop("receipt")) for reply in sent]
    assert [(r.seq, r.batch_size, r.batch_index) for r in got] == [(1, n, 0)] + [(i + 1, n, i) for i in range(1, n)]
    assert got[0].record_hash == first["receipt"]["record_hash"]  # the replay: the same record, its own batch
    assert sent[0] == {k: v for k, v in first.items() if k != "receipt"}  # the same reply
    hashes = await store.audit_hashes("w", list(range(1, n + 1)), registered=True)
    assert len(hashes) == n
    assert all(r.record_hash == hashes[r.seq] and receipts.verify_receipt(key.public_key(), r) for r in got)
    assert len({r.sig for r in got}) == 1

    query = {"type": "receipts_check", "v": 1, "query_id": "q", "receipts": [first["receipt"], *map(msgspec.to_builtins, got)]}
    reply = json.loads((await session.receive(frame(query))).frames[0])
    assert [(r["seq"], r["status"]) for r in reply["results"]] == [(1, "ok")] + [(r.seq, "ok") for r in got]
    await store.close()
