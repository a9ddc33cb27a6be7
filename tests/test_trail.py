"""An audit trail that cannot lie (issue 15): signed heads anyone can check, state derived from the
chain, verify that misses nothing it can know, exported trails, the key never silently replaced.

Every tamper is applied to a copy of one real trail (the four example sessions and a run of SoHL
Fate, written by a store signing like ``serve``), and ``audit verify`` must fail naming what it
found; the untouched copy passes."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bridge import audit
from bridge.cli import main
from bridge.config import load_key, load_signing_key
from bridge.dice import ScriptedDice
from bridge.errors import WorldStateMismatch
from bridge.heads import public_key_text, sign_head, stored_digest, stored_range
from bridge.receipts import key_id, verify_receipt
from bridge.session import Session
from bridge.store import SCHEMA_VERSION, SQLiteStore, open_store
from bridge.store.blobs import UnknownDictionary, frame_problem, unpack
from bridge.store.audit_rows import heads_of, load_trail, stored_hashes
from bridge.store.schema import read_as_one
from bridge.wire import Receipt

from .helpers import ROOT, decompress, recompress_unchanged
from .sohl_messages import actor, fate_spend, frame, rolled, sohl_test

EXAMPLES = sorted((ROOT / "examples").glob("*-session.jsonl"))
ROUNDS = 20  # SoHL tests fated in world w: 40+ records, so periodic heads at 16 and 32


async def _build(db, audit_key, signing_key) -> list[dict]:
    """The real trail: each example session in a world of its own, and ROUNDS SoHL tests each
    fated once in world ``w`` (a fresh actor each, so Fate is spent, lost or kept). Returns the
    replies of world ``w``'s Fate spends as sent."""
    store = await SQLiteStore.open(db, audit_key=audit_key, signing_key=signing_key)
    for example in EXAMPLES:
        world = "x-" + example.name.split("-")[0]
        await store.add_world(world, None)
        session = Session(store, ScriptedDice([]), trusted=True, default_world=world)
        for line in example.read_text().splitlines():
            message = json.loads(line)
            await session.receive(frame({k: v for k, v in message.items() if k != "dice"}),
                                  ScriptedDice(message.get("dice", [])))
    await store.add_world("w", None)
    session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
    replies = []
    for n in range(ROUNDS):
        who = actor(actor_id=f"actor{n:011d}")
        await session.receive(frame(rolled(f"r{n}", f"m{n}", actor_part=who, test=sohl_test(roll=88))))
        reply = await session.receive(frame(fate_spend(f"s{n}", f"m{n}")), ScriptedDice([(34, 80, 90)[n % 3]]))
        replies.append(json.loads(reply.frames[0]))
    await store.close()
    return replies


@pytest.fixture(scope="module")
def real_trail(tmp_path_factory):
    """(folder, replies): ``bridge.sqlite3``, ``audit.key`` and ``receipt.key`` built once."""
    folder = tmp_path_factory.mktemp("real-trail")
    audit_key = load_key(folder / "audit.key", create=True)
    signing_key = load_signing_key(folder / "receipt.key", create=True)
    replies = asyncio.run(_build(folder / "bridge.sqlite3", audit_key, signing_key))
    return folder, replies


@pytest.fixture
def trail(real_trail, tmp_path):
    """A fresh copy of the real trail and its keys: (db, audit key path, signing key path)."""
    folder, _ = real_trail
    for name in ("bridge.sqlite3", "audit.key", "receipt.key"):
        shutil.copy(folder / name, tmp_path / name)
    return tmp_path / "bridge.sqlite3", tmp_path / "audit.key", tmp_path / "receipt.key"


def verify(trail, capsys, *extra: str) -> tuple[int, str]:
    db, audit_key, signing_key = trail
    code = main(["audit", "verify", "--db", str(db), "--audit-key", str(audit_key),
                 "--signing-key", str(signing_key), *extra])
    return code, capsys.readouterr().out


def sql(db, *statements: str) -> None:
    """Run ``statements`` on the file, its blobs decompressed first (edits as text need JSON), the
    rows they leave as they were compressed back as they were stored (recompress_unchanged)."""
    before = decompress(db)
    conn = sqlite3.connect(db)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()
    recompress_unchanged(db, before)


def stored_hash(db, world: str, seq: int) -> str:
    """The chain hash of record ``seq`` of ``world`` in ``db``."""
    conn = sqlite3.connect(db)
    (record_hash,) = conn.execute("SELECT hash FROM audit WHERE world_id=? AND seq=?", (world, seq)).fetchone()
    conn.close()
    return record_hash


def world_lines(out: str, world: str) -> str:
    """The report of one world in verify's output (its status line and problem lines)."""
    lines, keep = [], False
    for line in out.splitlines():
        if not line.startswith(" "):
            keep = line.split(":")[0].split(" ", 1)[-1] == world
        if keep:
            lines.append(line)
    return "\n".join(lines)


def rechain(db, world: str, key: Ed25519PrivateKey | None, edit=lambda seq, record: record) -> None:
    """Rewrite a world's whole chain consistently (as someone who can write the file would),
    its listed columns kept in step, and re-sign its heads with ``key`` (None: left as they were)."""
    conn = sqlite3.connect(db)
    prev, hashes = audit.GENESIS_HASH, {}
    for seq, record in conn.execute("SELECT seq, record FROM audit WHERE world_id=? ORDER BY seq", (world,)).fetchall():
        record = edit(seq, unpack(record))
        record_hash = audit.chain_hash(prev, record)
        summary = json.loads(record)["summary"]
        conn.execute("UPDATE audit SET record=?, prev_hash=?, hash=?, outcome=?, summary=? WHERE world_id=? AND seq=?",
                     (record, prev, record_hash, summary["outcome"], json.dumps(summary).encode(), world, seq))
        hashes[seq] = prev = record_hash
    if key is not None:
        for seq, digest in conn.execute("SELECT seq, state_digest FROM heads WHERE world_id=?", (world,)).fetchall():
            stored = stored_digest(stored_hashes(conn, world, stored_range(seq, audit.CHECKPOINT_EVERY)))
            head = sign_head(key, world, seq, hashes[seq], digest, stored)
            conn.execute("UPDATE heads SET hash=?, public_key=?, sig=?, stored_digest=? WHERE world_id=? AND seq=?",
                         (head.hash, head.public_key, head.sig, stored, world, seq))
        conn.execute("DELETE FROM checkpoints WHERE world_id=?", (world,))  # the HMAC key is not theirs
    conn.commit()
    conn.close()


class TestCleanTrail:
    def test_a_clean_trail_passes_every_world_signed_to_its_last_record(self, trail, capsys):
        code, out = verify(trail, capsys)
        assert code == 0, out
        signing = load_signing_key(trail[2], create=False)
        assert f"PASS w: {2 * ROUNDS} records, signed up to record {2 * ROUNDS} (key {key_id(signing.public_key())})" in out
        for example in EXAMPLES:
            assert f"PASS x-{example.name.split('-')[0]}: " in out
        assert "FAIL" not in out

    def test_every_reply_carries_a_receipt_anyone_can_check(self, real_trail, trail):
        _, replies = real_trail
        public = load_signing_key(trail[2], create=False).public_key()
        conn = sqlite3.connect(trail[0])
        for n, reply in enumerate(replies):
            receipt = Receipt(**reply["receipt"])
            assert (receipt.world_id, receipt.seq) == ("w", 2 * n + 2)
            (record_hash,) = conn.execute("SELECT hash FROM audit WHERE world_id='w' AND seq=?", (receipt.seq,)).fetchone()
            assert receipt.record_hash == record_hash and verify_receipt(public, receipt)

    async def test_a_repeated_event_id_gets_a_receipt_for_the_same_record(self, tmp_path):
        key = Ed25519PrivateKey.generate()
        store = await SQLiteStore.open(tmp_path / "b.sqlite3", signing_key=key)
        await store.add_world("w", None)
        session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
        await session.receive(frame(rolled("r1", "m1")))
        first = json.loads((await session.receive(frame(fate_spend("s1", "m1")), ScriptedDice([34]))).frames[0])
        again = json.loads((await session.receive(frame(fate_spend("s1", "m1")))).frames[0])
        await store.close()
        mine, replayed = Receipt(**first.pop("receipt")), Receipt(**again.pop("receipt"))
        assert again == first  # the same reply
        assert (replayed.world_id, replayed.seq, replayed.record_hash) == (mine.world_id, mine.seq, mine.record_hash) == (
            "w", 2, stored_hash(tmp_path / "b.sqlite3", "w", 2))
        assert verify_receipt(key.public_key(), mine) and verify_receipt(key.public_key(), replayed)
        # each alone in its committed batch: the same tree of one leaf, so the same signature
        # (tests/test_receipts_check.py: a replay batched with others gets that batch's)
        assert replayed == mine


    def test_a_newer_bridges_file_is_refused_not_reported_tampered(self, trail, capsys):
        """A file of a newer schema may store rows this bridge cannot read: `audit verify`,
        `audit list` and `audit export` say to upgrade instead of reporting every row changed."""
        db, audit_key, signing_key = trail
        sqlite3.connect(db, isolation_level=None).execute(
            "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
        keys = ["--audit-key", str(audit_key), "--signing-key", str(signing_key)]
        for command in (["verify", *keys], ["list"], ["export", "--world", "w", "--out", str(db.with_name("w.json"))]):
            assert main(["audit", *command, "--db", str(db)]) == 2
            out, err = capsys.readouterr()
            assert not out
            assert f"was written by a newer fate-bridge (schema {SCHEMA_VERSION + 1}, this bridge knows " \
                   f"{SCHEMA_VERSION}); upgrade fate-bridge" in err


class TestTampers:
    """The issue's list: each tamper that used to pass, and the classic ones."""

    def test_deleting_the_last_records_with_their_signed_rows(self, trail, capsys):
        db = trail[0]
        sql(db, "DELETE FROM audit WHERE world_id='w' AND seq > 32",
            "DELETE FROM checkpoints WHERE world_id='w' AND seq > 32",
            "DELETE FROM heads WHERE world_id='w' AND seq > 32")
        code, out = verify(trail, capsys)
        report = world_lines(out, "w")
        assert code == 1 and report.startswith("FAIL w: 32 records"), out
        # what records 33..40 left behind is no record's any more
        assert "[state] state row records('sohl.graded', 'm16') was written by no record of the chain" in report
        assert f"[state] the world's decision counter (worlds.last_seq) is {3 * ROUNDS}, but record 32 left 48" in report
        assert "PASS x-sohl" in out  # the other worlds are untouched

    def test_deleting_every_audit_row_of_a_world(self, trail, capsys):
        sql(trail[0], "DELETE FROM audit WHERE world_id='w'")
        code, out = verify(trail, capsys)
        report = world_lines(out, "w")
        assert code == 1 and report.startswith("FAIL w: 0 records"), out
        assert "[head] the head signed at record 16, but the chain ends at record 0: records 1..16 were deleted" in report

    def test_deleting_every_row_of_a_world_but_its_registry_row(self, trail, capsys):
        sql(trail[0], *(f"DELETE FROM {t} WHERE world_id='w'" for t in ("audit", "checkpoints", "heads", "events")))
        code, out = verify(trail, capsys)
        report = world_lines(out, "w")
        assert code == 1 and "FAIL w: 0 records" in report, out
        assert f"[state] the world's decision counter (worlds.last_seq) is {3 * ROUNDS}, but the chain holds 0" in report
        assert "[state] state row records('sohl.fate', 'm0') was written by no record of the chain" in report

    def test_deleting_the_registry_row_too_leaves_the_world_in_the_report(self, trail, capsys):
        sql(trail[0], "DELETE FROM audit WHERE world_id='w'", "DELETE FROM worlds WHERE world_id='w'")
        code, out = verify(trail, capsys)
        assert code == 1 and "[world] world 'w' has a trail but no row in the world registry" in world_lines(out, "w")

    def test_a_database_truncated_to_zero_bytes_fails_and_nothing_is_created(self, trail, capsys):
        db = trail[0]
        db.write_bytes(b"")
        before = sorted(p.name for p in db.parent.iterdir())
        code, out = verify(trail, capsys)
        assert code == 1 and out.startswith(f"FAIL: the database {db} is empty (0 bytes)"), out
        assert db.stat().st_size == 0 and sorted(p.name for p in db.parent.iterdir()) == before

    def test_a_database_cut_short_fails(self, trail, capsys):
        db = trail[0]
        db.write_bytes(db.read_bytes()[:4096 + 100])
        code, out = verify(trail, capsys)
        assert code == 1 and out.startswith("FAIL: the database"), out
        assert "truncated" in out

    def test_a_missing_database_fails_and_is_not_created(self, trail, capsys, tmp_path):
        gone = tmp_path / "nowhere" / "bridge.sqlite3"
        code, out = verify((gone, *trail[1:]), capsys)
        assert code == 1 and out.startswith(f"FAIL: there is no database at {gone}")
        assert not gone.parent.exists()

    def test_verify_writes_nothing_to_the_file_and_creates_nothing_beside_it(self, trail, capsys):
        db = trail[0]
        before, files = db.read_bytes(), sorted(p.name for p in db.parent.iterdir())
        os.chmod(db, 0o400)  # a writer would fail; verify's read-only connection does not
        try:
            code, out = verify(trail, capsys)
        finally:
            os.chmod(db, 0o600)
        assert code == 0, out
        assert db.read_bytes() == before
        assert sorted(p.name for p in db.parent.iterdir()) == files  # no -wal, no -shm

    def test_verify_shows_progress_on_a_terminal_only(self, trail, capsys, monkeypatch):
        db, audit_key, signing_key = trail
        command = ["audit", "verify", "--db", str(db), "--audit-key", str(audit_key), "--signing-key", str(signing_key)]
        monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
        assert main(command) == 0
        assert "verifying" not in capsys.readouterr().err
        monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
        assert main(command) == 0
        err = capsys.readouterr().err
        assert f"\r  verifying w: {2 * ROUNDS} records (" in err and "/s)" in err

    def test_deleting_the_state_rows_of_a_fated_result(self, trail, capsys):
        sql(trail[0], "DELETE FROM records WHERE world_id='w' AND kind='sohl.fate' AND key='m0'")
        code, out = verify(trail, capsys)
        report = world_lines(out, "w")
        assert code == 1, out
        assert "[state] state row records('sohl.fate', 'm0'), written by record 2, is missing" in report
        assert "it was edited after the bridge stopped" in report

    def test_the_same_card_fated_again_after_its_rows_were_deleted(self, trail, capsys):
        """The issue's attack end to end, with the load check out of the way (a bridge that did not
        refuse): the second Fate spend on m0 is recorded, and verify names the read that shows it."""
        db, _, signing_path = trail
        sql(db, "DELETE FROM records WHERE world_id='w' AND kind='sohl.fate' AND key='m0'",
            "DELETE FROM heads WHERE world_id='w'",  # no head and no seal: the bridge cannot tell at load
            "UPDATE worlds SET state_seal = NULL WHERE world_id='w'")

        async def fate_again():
            store = await SQLiteStore.open(db, signing_key=load_signing_key(signing_path, create=False))
            session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
            reply = json.loads((await session.receive(frame(fate_spend("again", "m0")), ScriptedDice([34]))).frames[0])
            await store.close()
            return reply

        assert asyncio.run(fate_again())["type"] == "fate_resolved"  # fated twice
        code, out = verify(trail, capsys)
        report = world_lines(out, "w")
        assert code == 1, out
        assert "record 41 read sohl.fate 'm0' as nothing, but record 2 left {" in report

    def test_rewriting_a_stored_reply(self, trail, capsys):
        """A repeat of an event_id is answered from the reply its record holds (issue 17): editing
        it there breaks the record's hash; an ``events`` row (older bridges', which a repeat would
        get first) that says otherwise is named."""
        sql(trail[0], "UPDATE audit SET record = replace(record, '\"outcome\":\"spent\"', '\"outcome\":\"kept\"')"
                      " WHERE world_id='w' AND seq=2")
        code, out = verify(trail, capsys)
        assert code == 1 and "[hash] record 2 was changed after it was written" in world_lines(out, "w"), out

    def test_a_forged_stored_reply_row(self, trail, capsys):
        forged = json.dumps({"type": "fate_resolved", "v": 1, "event_id": "s0", "outcome": "kept"})
        sql(trail[0], f"INSERT INTO events (world_id, event_id, reply) VALUES ('w', 's0', '{forged}')")
        code, out = verify(trail, capsys)
        assert code == 1, out
        assert "[state] stored reply events('s0') differs from record 2's reply: a repeat would get" in world_lines(out, "w")

    def test_an_edited_record(self, trail, capsys):
        sql(trail[0], "UPDATE audit SET record = replace(record, '\"fate_roll\":34', '\"fate_roll\":35')"
                      " WHERE world_id='w' AND seq=2")
        code, out = verify(trail, capsys)
        report = world_lines(out, "w")
        assert code == 1 and "[hash] record 2 was changed after it was written" in report, out

    def test_reordered_records(self, trail, capsys):
        """Rows store no prev_hash (issue 17): each links to the row before it, so a record moved
        no longer hashes to its stored hash (an older bridge's rows show a broken link instead:
        tests/test_audit.py)."""
        sql(trail[0], "UPDATE audit SET seq = -1 WHERE world_id='w' AND seq = 5",
            "UPDATE audit SET seq = 5 WHERE world_id='w' AND seq = 6",
            "UPDATE audit SET seq = 6 WHERE world_id='w' AND seq = -1")
        code, out = verify(trail, capsys)
        report = world_lines(out, "w")
        assert code == 1 and "[hash] record 5 was changed after it was written" in report, out
        assert "[record] record 5 claims to be w #6" in report

    def test_an_inserted_record(self, trail, capsys):
        """A forged record appended after the last one, chained correctly but signed by nobody:
        the head sealed at the end of the chain no longer is the end, and the state differs."""
        db = trail[0]
        conn = sqlite3.connect(db)
        row = conn.execute("SELECT record, hash FROM audit WHERE world_id='w' AND seq=40").fetchone()
        record = json.loads(unpack(row[0]))
        record.update(seq=41, event_id="forged")
        canonical = json.dumps(record, sort_keys=True, separators=(",", ":")).encode()
        conn.execute("INSERT INTO audit (world_id, seq, ts, type, event_id, user_id, ruleset, actor_id, outcome,"
                     " summary, record, prev_hash, hash) SELECT world_id, 41, ts, type, 'forged', user_id, ruleset,"
                     " actor_id, outcome, summary, ?, ?, ? FROM audit WHERE world_id='w' AND seq=40",
                     (canonical, row[1], audit.chain_hash(row[1], canonical)))
        conn.commit()
        conn.close()
        code, out = verify(trail, capsys)
        report = world_lines(out, "w")
        assert code == 1, out
        assert "[state] record 41 read sohl.fate 'm19' as nothing, but record 40 left {" in report
        assert "records 41..41 are chained but not yet covered by a signed head" in report

    def test_a_deleted_middle_record(self, trail, capsys):
        sql(trail[0], "DELETE FROM audit WHERE world_id='w' AND seq = 7")
        code, out = verify(trail, capsys)
        report = world_lines(out, "w")
        assert code == 1 and "[gap] records 7..7 are missing before record 8" in report, out

    def test_a_chain_rewritten_and_re_signed_with_a_swapped_key(self, trail, capsys):
        """Someone rewrites a Fate Test's dice and re-signs every head with a key of their own."""
        theirs = Ed25519PrivateKey.generate()
        rechain(trail[0], "w", theirs, lambda seq, record: record.replace(b'"dice":[80]', b'"dice":[34]')
                if seq == 4 else record)
        code, out = verify(trail, capsys)
        report = world_lines(out, "w")
        mine = load_signing_key(trail[2], create=False).public_key()
        assert code == 1, out
        assert (f"[key] the trail is signed by key {key_id(theirs.public_key())}, not by the given key "
                f"{key_id(mine)}: a swapped key") in report
        assert "[rederive] record 4:" in report

    def test_a_forged_head_signature(self, trail, capsys):
        # another first character (an 'A' over an 'A' would change nothing)
        sql(trail[0], "UPDATE heads SET sig = (CASE WHEN substr(sig, 1, 1) = 'A' THEN 'B' ELSE 'A' END)"
                      " || substr(sig, 2) WHERE world_id='w' AND seq=16")
        code, out = verify(trail, capsys)
        assert code == 1 and "[head] the signed head at record 16 does not verify" in world_lines(out, "w"), out


class TestStoredBytesSealed:
    """Version 2 heads seal the stored bytes of their records, byte for byte (issue 25): a stored
    record changed so that it still decodes to the sealed record is named by ``audit verify``.
    World ``w`` holds 40 records, its heads at 16, 32 and 40 (the clean stop's)."""

    @staticmethod
    def edit(db, seq: int, change) -> tuple[bytes, bytes]:
        """Replace record ``seq`` of ``w``'s stored bytes with ``change(stored)``: (before, after)."""
        conn = sqlite3.connect(db)
        (before,) = conn.execute("SELECT record FROM audit WHERE world_id='w' AND seq=?", (seq,)).fetchone()
        after = change(before)
        with conn:
            conn.execute("UPDATE audit SET record=? WHERE world_id='w' AND seq=?", (after, seq))
        conn.close()
        return before, after

    @staticmethod
    def flip_decoding_equal(db, seqs: range) -> tuple[int, bytes]:
        """The first record of ``w`` in ``seqs`` and its stored bytes with one bit flipped (in seq,
        byte, bit order, past the frame header) that still decode to the same record, with sound
        header fields: (seq, changed bytes)."""
        conn = sqlite3.connect(db)
        rows = conn.execute("SELECT seq, record FROM audit WHERE world_id='w' AND seq BETWEEN ? AND ? ORDER BY seq",
                            (seqs.start, seqs.stop - 1)).fetchall()
        conn.close()

        def same(stored: bytes, changed: bytes) -> bool:
            try:
                return frame_problem(changed) is None and unpack(changed) == unpack(stored)
            except UnknownDictionary:  # a bit of the dictionary id
                return False

        for seq, stored in rows:
            for at in range(12, len(stored)):  # past magic, descriptor, window, dictionary id, size
                for bit in range(8):
                    changed = stored[:at] + bytes([stored[at] ^ 1 << bit]) + stored[at + 1:]
                    if same(stored, changed):
                        return seq, changed
        raise AssertionError(f"no bit of records {seqs.start}..{seqs.stop - 1} flips to the same record")

    def test_the_clean_trail_has_version_2_heads(self, trail):
        conn = sqlite3.connect(trail[0])
        heads = heads_of(conn, "w")
        assert [(h.seq, h.stored_digest is not None, h.signed()) for h in heads] == [
            (16, True, True), (32, True, True), (40, True, True)]
        conn.close()

    def test_a_byte_appended(self, trail, capsys):
        before, after = self.edit(trail[0], 5, lambda stored: stored + b"\x00")
        assert unpack(after) == unpack(before)
        code, out = verify(trail, capsys)
        report = world_lines(out, "w")
        assert code == 1, out
        assert report.splitlines()[2:] == [
            "  - [stored] record 5's stored bytes are not what was sealed: 1 byte follows its zstd frame",
            "  - [stored] record 5's stored bytes are not what the signed head at record 16 sealed: not the zstd "
            "frame this bridge writes for its record (changed after it was written, though it may still decode "
            "to the sealed record)"], report

    def test_the_last_byte_flipped(self, trail, capsys):
        self.edit(trail[0], 20, lambda stored: stored[:-1] + bytes([stored[-1] ^ 0xFF]))
        code, out = verify(trail, capsys)
        report = world_lines(out, "w")
        assert code == 1, out
        assert "  - [stored] record 20's stored bytes are not what the signed head at record 32 sealed" in report

    def test_a_bit_flipped_inside_a_block_that_still_decodes_equal(self, trail, capsys):
        """The first bit (in seq, byte, bit order) of ``w``'s stored records, past the frame header,
        whose flip leaves a frame that decodes to the same record and whose header fields are sound:
        a bit of a block's Huffman or FSE table description the decoder does not need. The search
        is deterministic; the trail's records hold the time they were written, so the bit found is
        not the same from run to run, but there are hundreds (281 in one run of this trail)."""
        seq, changed = self.flip_decoding_equal(trail[0], range(1, 41))
        self.edit(trail[0], seq, lambda _: changed)
        code, out = verify(trail, capsys)
        report = world_lines(out, "w")
        head = next(h for h in (16, 32, 40) if h >= seq)
        assert code == 1, out
        assert report.splitlines()[2:] == [  # nothing else: the record itself still verifies
            f"  - [stored] record {seq}'s stored bytes are not what the signed head at record {head} sealed: not "
            "the zstd frame this bridge writes for its record (changed after it was written, though it may "
            "still decode to the sealed record)"], report

    def test_the_range_is_named_when_each_record_is_what_this_zstd_writes(self, trail):
        """A frame written by another libzstd (1.5.5 and 1.5.7 differ) would not be what this one
        writes either; here every record is, as far as verify can tell: it names the head's range."""
        self.edit(trail[0], 20, lambda stored: stored + b"\x00")
        conn = sqlite3.connect(trail[0])
        read_as_one(conn)
        loaded = load_trail(conn, "w")
        loaded.written_as = lambda stored: stored  # no record differs from what "this zstd" writes
        report = audit.verify_world(loaded, None, load_signing_key(trail[2], create=False).public_key())
        conn.close()
        assert [p.detail for p in report.problems if p.kind == "stored"][1:] == [
            "the stored bytes of one of records 17..32 are not what the signed head at record 32 sealed "
            "(changed after they were written; each is the zstd frame this bridge writes for its record, "
            "so which one cannot be told)"]

    async def test_heads_seal_the_frames_of_records_written_before_a_restart(self, db_url, tmp_path, capsys):
        """A head due inside a batch seals the frames the batch just wrote without reading them
        back, and those of its range written before the world was loaded from the rows (read at
        load): three runs of 7 records on each backend, heads at 7, 14 (clean stops), 16 (1..16:
        1..14 read back) and 21 (17..21)."""
        signing_file = tmp_path / "receipt.key"
        key = load_signing_key(signing_file, create=True)
        for run in range(3):
            store = await open_store(db_url, signing_key=key)
            if run == 0:
                await store.add_world("w", None)
            session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
            for n in range(7):
                await session.receive(frame(rolled(f"r{run}-{n}", f"m{run}-{n}")))
            await store.close()
        code = await asyncio.to_thread(main, ["audit", "verify", "--db", str(db_url), "--signing-key", str(signing_file)])
        out = capsys.readouterr().out
        assert code == 0 and "PASS w: 21 records, signed up to record 21" in out, out
        store = await open_store(db_url)
        try:
            conn = store._conn  # the store's own connection (SQLite's reads audit_tail too)
            heads = heads_of(conn, "w")
            assert [(h.seq, h.stored_digest) for h in heads] == [
                (seq, stored_digest(stored_hashes(conn, "w", stored_range(seq, audit.CHECKPOINT_EVERY))))
                for seq in (7, 14, 16, 21)]
        finally:
            await store.close()

    def test_version_1_heads_keep_verifying(self, trail, capsys):
        """A trail signed before issue 25 and carried on by this bridge: its heads at 16 and 32 of
        version 1 (no stored digest), the one at 40 of version 2. It verifies; a bit flipped in a
        block of a record only a version 1 head covers is not seen (what version 2 heads add), one
        in a record the version 2 head covers is."""
        db, _, signing_path = trail
        key = load_signing_key(signing_path, create=False)
        conn = sqlite3.connect(db)
        for seq, record_hash, digest in conn.execute(
                "SELECT seq, hash, state_digest FROM heads WHERE world_id='w' AND seq < 40").fetchall():
            head = sign_head(key, "w", seq, record_hash, digest)
            conn.execute("UPDATE heads SET sig=?, stored_digest=NULL WHERE world_id='w' AND seq=?", (head.sig, seq))
        conn.commit()
        assert [h.stored_digest is None for h in heads_of(conn, "w")] == [True, True, False]
        conn.close()
        code, out = verify(trail, capsys)
        assert code == 0 and f"PASS w: {2 * ROUNDS} records, signed up to record {2 * ROUNDS}" in out, out

        seq, changed = self.flip_decoding_equal(db, range(1, 33))
        self.edit(db, seq, lambda _: changed)
        code, out = verify(trail, capsys)
        assert code == 0, out
        seq, changed = self.flip_decoding_equal(db, range(33, 41))
        self.edit(db, seq, lambda _: changed)
        code, out = verify(trail, capsys)
        assert code == 1 and f"[stored] record {seq}'s stored bytes are not what the signed head at record 40" in out, out


class TestStateDerivedFromTheChain:
    async def test_edited_state_is_named_refused_and_repaired(self, trail, capsys, tmp_path):
        db, audit_key_path, signing_path = trail
        sql(db, "UPDATE records SET value = replace(value, '\"charges_after\":1', '\"charges_after\":2')"
                " WHERE world_id='w' AND kind='sohl.fate' AND key='m0'")
        code, out = await asyncio.to_thread(verify, trail, capsys)
        report = world_lines(out, "w")
        assert code == 1
        assert "[state] state row records('sohl.fate', 'm0') holds {" in report and "but record 2 wrote {" in report

        key = load_signing_key(signing_path, create=False)
        store = await SQLiteStore.open(db, signing_key=key)
        session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
        reply = await session.receive(frame(rolled("new", "m-new")))
        error = json.loads(reply.frames[0])
        assert reply.close_code == 4001 and error["code"] == "unauthorized"
        assert "`fate-bridge audit repair --world w`" in error["message"]
        with pytest.raises(WorldStateMismatch):
            await store.read("w", lambda state: state.settings())
        await store.close()

        code = await asyncio.to_thread(main, ["audit", "repair", "--world", "w", "--db", str(db),
                                              "--audit-key", str(audit_key_path), "--signing-key", str(signing_path)])
        out = capsys.readouterr().out
        # the row, and the digest the clean stop's head sealed (the refusing bridge's own stop
        # signed nothing new: it never seals an edited state as the bridge's)
        assert code == 0 and "repaired w: state rebuilt from 40 records (2 difference(s) fixed)" in out
        assert "the stored state differs from what the head at record 40" in out
        code, out = await asyncio.to_thread(verify, trail, capsys)
        assert code == 0, out

        store = await SQLiteStore.open(db, signing_key=key)
        session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
        reply = json.loads((await session.receive(frame(rolled("new", "m-new")))).frames[0])
        await store.close()
        assert reply["type"] == "test_graded"

    def test_repair_refuses_a_broken_chain(self, trail, capsys):
        db, audit_key, signing_path = trail
        sql(db, "DELETE FROM audit WHERE world_id='w' AND seq = 7")
        code = main(["audit", "repair", "--world", "w", "--db", str(db), "--audit-key", str(audit_key),
                     "--signing-key", str(signing_path)])
        out = capsys.readouterr().out
        assert code == 1 and "the chain itself does not verify" in out and "[gap] records 7..7" in out


    def test_repair_finds_the_keys_where_verify_finds_them(self, tmp_path, monkeypatch, capsys):
        """``audit repair --db FILE`` with no key flags (issue 25) on a trail ``resolve --db`` wrote:
        it checks the HMAC checkpoints with the audit key at the default path, as ``verify`` does
        (it said the audit key was missing), and makes the signing key a trail nobody signed yet
        lacks, as serve's first start would."""
        env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_DATA_HOME": str(tmp_path / "data")}
        env.pop("FATE_BRIDGE_AUDIT_KEY", None), env.pop("FATE_BRIDGE_SIGNING_KEY", None)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        db = tmp_path / "offline.sqlite3"
        resolved = subprocess.run([sys.executable, "-m", "bridge", "resolve", "--db", str(db)], cwd=ROOT, env=env,
                                  input=(ROOT / "examples" / "sohl-session.jsonl").read_bytes(),
                                  capture_output=True, timeout=60)
        assert resolved.returncode == 0, resolved.stderr
        signing_key = tmp_path / "config" / "fate-bridge" / "receipt.key"
        assert not signing_key.exists()

        assert main(["audit", "repair", "--world", "offline", "--db", str(db)]) == 0
        out, err = capsys.readouterr()
        assert out == "repaired offline: state rebuilt from 8 records (0 difference(s) fixed)\n"
        assert f"made the signing key {signing_key}, as serve's first start would" in err
        assert load_signing_key(signing_key, create=False) is not None
        assert main(["audit", "verify", "--db", str(db)]) == 0
        assert "PASS offline: 8 records, signed up to record 8 (key " in capsys.readouterr().out


class TestExport:
    def test_an_exported_trail_verifies_in_a_fresh_process_with_only_the_public_key(self, trail, tmp_path, capsys):
        db, _, signing_path = trail
        out_file = tmp_path / "w.trail.json"
        assert main(["audit", "export", "--world", "w", "--db", str(db), "--out", str(out_file)]) == 0
        assert main(["audit", "public-key", "--signing-key", str(signing_path), "--key-only"]) == 0
        public = capsys.readouterr().out.strip()
        elsewhere = tmp_path / "elsewhere"  # no database, no key files, another HOME
        elsewhere.mkdir()
        shutil.copy(out_file, elsewhere / "w.trail.json")
        env = {"PATH": os.environ["PATH"], "HOME": str(elsewhere), "PYTHONPATH": str(ROOT)}

        def check(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "bridge", "audit", "verify", "w.trail.json", *args],
                                  cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120)

        passed = check("--public-key", public)
        assert passed.returncode == 0, passed.stdout + passed.stderr
        assert passed.stdout.startswith(f"PASS w: {2 * ROUNDS} records, signed up to record {2 * ROUNDS}")
        assert sorted(p.name for p in elsewhere.iterdir()) == ["w.trail.json"]  # nothing created

        other = public_key_text(Ed25519PrivateKey.generate().public_key())
        swapped = check("--public-key", other)
        assert swapped.returncode == 1 and "[key] the trail is signed by key" in swapped.stdout

        data = (elsewhere / "w.trail.json").read_bytes()
        (elsewhere / "w.trail.json").write_bytes(data.replace(b'"dice":[80]', b'"dice":[34]', 1))
        edited = check("--public-key", public)
        assert edited.returncode == 1 and "[hash] record 4 was changed after it was written" in edited.stdout

    def test_export_refuses_filters_and_explains(self, trail, capsys, tmp_path):
        db = trail[0]
        assert main(["audit", "export", "--world", "w", "--format", "trail", "--actor", "a", "--db", str(db)]) == 2
        assert "a trail is exported whole" in capsys.readouterr().err


class TestTheKeyIsNeverSilentlyReplaced:
    def test_serve_refuses_a_signed_trail_without_its_key(self, trail, tmp_path):
        db, audit_key, signing_path = trail
        signing_path.unlink()
        result = subprocess.run([sys.executable, "-m", "bridge", "serve", "--db", str(db), "--port", "0",
                                 "--audit-key", str(audit_key), "--signing-key", str(signing_path)],
                                cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert result.returncode == 2
        assert f"there is no signing key at {signing_path}" in result.stderr
        assert "`fate-bridge audit new-key`" in result.stderr
        assert not signing_path.exists()  # no new key made in its place

    def test_serve_refuses_another_key(self, trail, tmp_path):
        db, audit_key, _ = trail
        other = tmp_path / "other.key"
        load_signing_key(other, create=True)
        result = subprocess.run([sys.executable, "-m", "bridge", "serve", "--db", str(db), "--port", "0",
                                 "--audit-key", str(audit_key), "--signing-key", str(other)],
                                cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert result.returncode == 2 and "not by the key at" in result.stderr

    def test_new_key_while_serving_never_signs_with_the_old_key(self, trail, capsys):
        """`audit new-key` run while serve runs: the running bridge holds the old key, so from
        then on it serves that world no more (until restarted with the new key) and signs no head
        with the old key, in a decision or at close; the trail still verifies."""
        db, audit_key, signing_path = trail
        old = load_signing_key(signing_path, create=False)

        async def scenario() -> list[dict]:
            store = await SQLiteStore.open(db, audit_key=load_key(audit_key, create=False), signing_key=old)
            session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
            await session.receive(frame(rolled("before", "m-before", test=sohl_test(roll=88))))
            changed = subprocess.run([sys.executable, "-m", "bridge", "audit", "new-key", "--db", str(db),
                                      "--audit-key", str(audit_key), "--signing-key", str(signing_path)],
                                     cwd=ROOT, capture_output=True, text=True, timeout=60)
            assert changed.returncode == 0, changed.stderr
            replies = []
            for n in range(20):  # past the next periodic head (every 16 records)
                reply = await session.receive(frame(rolled(f"after{n}", f"m-after{n}", test=sohl_test(roll=88))))
                replies.append(json.loads(reply.frames[0]))
            await store.close()
            return replies

        replies = asyncio.run(scenario())
        # the first collides with the key change (another process wrote the chain); then refused
        assert [r["type"] for r in replies] == ["error"] * 20
        assert {r["code"] for r in replies[1:]} == {"unauthorized"}
        assert "audit new-key" in replies[1]["message"]
        new = load_signing_key(signing_path, create=False)
        code, out = verify(trail, capsys)
        assert code == 0, out
        assert f"(key {key_id(old.public_key())}, {key_id(new.public_key())})" in world_lines(out, "w")

    def test_new_key_is_written_into_every_chain_and_the_trail_still_verifies(self, trail, capsys):
        db, audit_key, signing_path = trail
        old = load_signing_key(signing_path, create=False)
        assert main(["audit", "new-key", "--db", str(db), "--signing-key", str(signing_path)]) == 0
        out = capsys.readouterr().out
        new = load_signing_key(signing_path, create=False)
        assert key_id(new.public_key()) != key_id(old.public_key())
        assert (signing_path.parent / f"receipt.key.{key_id(old.public_key())}.old").exists()
        assert "key change recorded in 5 world(s): w, x-hmtw, x-mythic, x-pool, x-sohl" in out
        record = json.loads(unpack(sqlite3.connect(db).execute(
            "SELECT record FROM audit WHERE world_id='w' AND seq=41").fetchone()[0]))
        assert record["type"] == "key_change"
        assert record["message"] == {"type": "key_change", "old_public_key": public_key_text(old.public_key()),
                                     "new_public_key": public_key_text(new.public_key())}
        code, out = verify(trail, capsys)
        assert code == 0, out
        assert f"PASS w: 41 records, signed up to record 41 (key {key_id(old.public_key())}, {key_id(new.public_key())})" in out
        # the old key no longer passes as the current one
        code, out = verify(trail, capsys, "--public-key", public_key_text(old.public_key()))
        assert code == 1 and "[key] the trail is signed by key" in out
