"""The audit trail (issue 3): recorded inputs, hash chain, signed checkpoints, re-derivation,
tamper detection, the GM's commands and the module's audit_query."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest

from bridge import audit, core
from bridge.cli import main
from bridge.dice import ScriptedDice
from bridge.session import Session
from bridge.store import SCHEMA_VERSION, SQLiteStore
from bridge.store.audit_rows import PREV_HASH
from bridge.store.blobs import unpack

from .helpers import ROOT, as_old_bridge, decompress, old_schema_file, replay
from .sohl_messages import GM, PLAYER, fate_choice, fate_spend, frame, rolled, sohl_test

KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))


async def play(store: SQLiteStore, rounds: int) -> None:
    """``rounds`` tests each fated once (dice cycle through spent, lost, kept, choice->keep)."""
    session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
    for n in range(rounds):
        mid = f"m{n}"
        await session.receive(frame(rolled(f"r{n}", mid, test=sohl_test(roll=88))))
        die = (34, 80, 88, 45)[n % 4]
        await session.receive(frame(fate_spend(f"s{n}", mid)), ScriptedDice([die]))
        if die == 45:
            await session.receive(frame(fate_choice("keep", f"c{n}", mid)))


@pytest.fixture
def db(tmp_path):
    return tmp_path / "audit.sqlite3"


async def build(db, rounds: int, key: bytes | None = KEY) -> None:
    store = await SQLiteStore.open(db, audit_key=key)
    await store.add_world("w", None)
    await play(store, rounds)
    await store.close()


async def verify(db, key: bytes | None = KEY) -> audit.WorldReport:
    store = await SQLiteStore.open(db)
    (report,) = await store.verify("w", key)
    await store.close()
    return report


def rows(db) -> list[tuple]:
    """World w's (seq, record JSON, prev_hash, hash), whatever the rows' encoding."""
    conn = sqlite3.connect(db)
    return [(seq, unpack(record), prev_hash, record_hash) for seq, record, prev_hash, record_hash in conn.execute(
        f"SELECT seq, record, {PREV_HASH}, hash FROM audit WHERE world_id='w' ORDER BY seq")]


def rechain(db, key: bytes | None = None, edit=lambda seq, record: record) -> None:
    """Rewrite the whole chain consistently (as someone with write access to the file would),
    applying ``edit`` to each record's canonical bytes and keeping the listed columns in step;
    re-sign the checkpoints when ``key``."""
    conn = sqlite3.connect(db)
    prev = audit.GENESIS_HASH
    hashes = {}
    for seq, record, _, _ in rows(db):
        record = edit(seq, bytes(record))
        record_hash = audit.chain_hash(prev, record)
        summary = json.loads(record)["summary"]
        conn.execute("UPDATE audit SET record=?, prev_hash=?, hash=?, outcome=?, summary=? WHERE world_id='w' AND seq=?",
                     (record, prev, record_hash, summary["outcome"], json.dumps(summary, separators=(",", ":")).encode(), seq))
        hashes[seq] = prev = record_hash
    for (seq,) in conn.execute("SELECT seq FROM checkpoints WHERE world_id='w'").fetchall():
        mac = audit.checkpoint_mac(key, "w", seq, hashes[seq]) if key else "0" * 64
        conn.execute("UPDATE checkpoints SET hash=?, mac=? WHERE world_id='w' AND seq=?", (hashes[seq], mac, seq))
    conn.commit()


def replace_in(seq_to_edit: int, old: bytes, new: bytes):
    def edit(seq, record):
        if seq != seq_to_edit:
            return record
        assert old in record
        return record.replace(old, new)
    return edit


class TestRecords:
    async def test_a_fate_record_holds_inputs_dice_outputs_user_and_version(self, db):
        await build(db, 1)
        record = json.loads(rows(db)[1][1])
        assert record["type"] == "fate_spend" and record["seq"] == 2 and record["world_id"] == "w"
        assert record["dice"] == [34]
        assert record["user_id"] == PLAYER and record["bridge_version"] and record["ts"].endswith("Z")
        graded = next(r for r in record["reads"] if r["args"][:1] == ["sohl.graded"])["result"]
        assert graded["actor"]["aura"] == {"eml": 55, "disabled": False}
        assert graded["test"]["roll"] == 88
        assert any(r["op"] == "settings" for r in record["reads"])
        assert record["reply"]["outcome"] == "spent" and record["reply"]["level_after"] == 1

    async def test_canonical_bytes_have_sorted_keys(self, db):
        await build(db, 1)
        record = rows(db)[0][1]
        assert record == json.dumps(json.loads(record), sort_keys=True, separators=(",", ":")).encode()

    async def test_refusals_are_recorded_too(self, db):
        store = await SQLiteStore.open(db, audit_key=KEY)
        await store.add_world("w", None)
        session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
        await session.receive(frame(fate_spend("s1", "never")))
        await store.close()
        record = json.loads(rows(db)[0][1])
        assert (record["ok"], record["reply"]["code"]) == (False, "not_found")

    async def test_replayed_event_ids_add_no_record(self, db):
        store = await SQLiteStore.open(db)
        await store.add_world("w", None)
        session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
        await session.receive(frame(rolled("r1", "m1")))
        await session.receive(frame(rolled("r1", "m1")))
        await store.close()
        assert len(rows(db)) == 1


SPENDS = ("get", "sohl.spends", "d1cddnpaqRl0a0Q8/luckystar1item0")
SINGLE_MESSAGE_READS = [
    # the reads every record of single-message tests made before ``test_of`` existed (issue 13):
    # a trail recorded then re-derives only if the same requests still read exactly these
    ("test_rolled", [("get", "sohl.graded", "m1"), ("next_seq",), ("settings",), SPENDS]),
    ("fate_spend", [("get", "sohl.graded", "m1"), ("get", "sohl.fate", "m1"), SPENDS, ("settings",),
                    ("next_seq",), ("next_seq",), SPENDS]),
    ("fate_spend", [("get", "sohl.graded", "m1"), ("get", "sohl.fate", "m1")]),
    ("test_rolled", [("get", "sohl.graded", "m1"), ("get", "sohl.fate", "m1"), ("settings",), SPENDS]),
    ("test_rolled", [("get", "sohl.graded", "m2"), ("next_seq",), ("settings",), SPENDS]),
    ("fate_spend", [("get", "sohl.graded", "m2"), ("get", "sohl.fate", "m2"), SPENDS, ("settings",), ("next_seq",)]),
    ("fate_choice", [("get", "sohl.fate", "m2"), ("get", "sohl.graded", "m2"), SPENDS]),
    ("fate_choice", [("get", "sohl.fate", "m1")]),
    ("fate_spend", [("get", "sohl.graded", "m9")]),
]


class TestOldTrails:
    """Issue 13's ``test_of`` changes nothing for requests without it, so trails recorded before
    it still re-derive: the same reads, in the same order, and the same stored records."""

    async def test_requests_without_test_of_read_what_they_always_read(self, db):
        store = await SQLiteStore.open(db, audit_key=KEY)
        await store.add_world("w", None)
        session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
        steps = [(rolled("r1", "m1"), None), (fate_spend("s1", "m1"), [34]), (fate_spend("s2", "m1"), [34]),
                 (rolled("r2", "m1", test=sohl_test(roll=5)), None), (rolled("r3", "m2"), None),
                 (fate_spend("s3", "m2"), [45]), (fate_choice("keep", "c1", "m2"), None),
                 (fate_choice("keep", "c2", "m1"), None), (fate_spend("s4", "m9"), [1])]
        for message, dice in steps:
            await session.receive(frame(message), None if dice is None else ScriptedDice(dice))
        await store.close()
        records = [json.loads(row[1]) for row in rows(db)]
        assert [(r["type"], [(read["op"], *read["args"]) for read in r["reads"]]) for r in records] == SINGLE_MESSAGE_READS
        graded = next(r for r in records[1]["reads"] if r["args"][:1] == ["sohl.graded"])["result"]
        assert "test_of" not in graded and "fated_by" not in graded
        assert (await verify(db)).ok

    async def test_a_trail_with_reposts_re_derives(self, db):
        store = await SQLiteStore.open(db, audit_key=KEY)
        await store.add_world("w", None)
        session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
        for message, dice in [(rolled("r1", "orig"), None), (rolled("r2", "repost", test_of="orig"), None),
                              (fate_spend("s1", "repost"), [45]), (fate_choice("spend", "c1", "repost"), None),
                              (fate_spend("s2", "orig"), [34]), (rolled("r3", "again", test_of="orig"), None)]:
            await session.receive(frame(message), None if dice is None else ScriptedDice(dice))
        await store.close()
        records = [json.loads(row[1]) for row in rows(db)]
        assert [r["summary"]["outcome"] for r in records] == ["graded", "graded", "choice", "spent", "already_fated", "graded"]
        assert records[-1]["reply"]["fate"]["reasons"] == ["already_fated"]
        report = await verify(db)
        assert report.ok, report.problems


    async def test_a_trail_with_a_chain_of_edits_re_derives(self, db):
        """S11, issue 36: edits naming the edit before them, one Fate for the whole test."""
        store = await SQLiteStore.open(db, audit_key=KEY)
        await store.add_world("w", None)
        session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
        for message, dice in [(rolled("r1", "orig"), None), (rolled("r2", "edit1", test_of="orig"), None),
                              (rolled("r3", "edit2", test_of="edit1"), None), (rolled("r4", "edit3", test_of="edit2"), None),
                              (fate_spend("s1", "orig"), [34]), (fate_spend("s2", "edit3"), [34])]:
            await session.receive(frame(message), None if dice is None else ScriptedDice(dice))
        await store.close()
        records = [json.loads(row[1]) for row in rows(db)]
        assert [r["summary"]["outcome"] for r in records] == ["graded"] * 4 + ["spent", "already_fated"]
        graded = next(read["result"] for read in records[5]["reads"] if read["args"] == ["sohl.graded", "edit3"])
        assert graded["test_of"] == "orig"  # the third edit was kept as a message of the first's test
        report = await verify(db)
        assert report.ok, report.problems

class TestVerifyPasses:
    async def test_clean_chain_with_checkpoints(self, db):
        await build(db, 10)  # 10 tests, 10 spends, 2 choices = 22 records: checkpoint at 16, head at 22
        report = await verify(db)
        assert report.ok, report.problems
        assert (report.records, report.last_checkpoint, report.notes) == (22, 22, [])

    async def test_records_after_the_last_checkpoint_are_a_note_not_a_failure(self, db):
        store = await SQLiteStore.open(db, audit_key=KEY)
        await store.add_world("w", None)
        await play(store, 3)
        store._closed = True  # a crash: no checkpoint at close
        store._close_sync()
        report = await verify(db)
        assert report.ok
        assert report.notes == ["records 1..6 are chained but not yet covered by a signed checkpoint"]


class TestTampering:
    """Each tampering is caught, with the record named (shared habit: assert the problem)."""

    async def test_edited_record(self, db):
        await build(db, 3)
        conn = sqlite3.connect(db)
        record = unpack(conn.execute("SELECT record FROM audit WHERE seq=4").fetchone()[0])
        conn.execute("UPDATE audit SET record=? WHERE seq=4", (record.replace(b'"dice":[80]', b'"dice":[34]'),))
        conn.commit()
        report = await verify(db)
        assert not report.ok
        assert report.problems[0].seq == 4 and report.problems[0].kind == "hash"

    async def test_record_turned_into_text_by_a_sql_edit(self, db):
        """sqlite's replace() returns TEXT: verify still reads it and names the record (on plain
        JSON: a row of a bridge before issue 17, or one decompressed)."""
        await build(db, 3)
        decompress(db)
        conn = sqlite3.connect(db)
        conn.execute("UPDATE audit SET record = replace(record, '\"dice\":[80]', '\"dice\":[34]') WHERE seq=4")
        conn.commit()
        assert conn.execute("SELECT typeof(record) FROM audit WHERE seq=4").fetchone()[0] == "text"
        report = await verify(db)
        assert (report.problems[0].seq, report.problems[0].kind) == (4, "hash")

    @pytest.mark.parametrize(("column", "value"), [
        ("user_id", "GMx"), ("ts", "2020-01-01T00:00:00.000Z"), ("outcome", "lost"), ("actor_id", "someone"),
        ("summary", b'{"outcome":"lost"}'),
    ])
    async def test_edited_listed_column(self, db, column, value):
        """Newcomer review: the columns `audit list` and export show are signed with the record."""
        await build(db, 3)
        conn = sqlite3.connect(db)
        conn.execute(f"UPDATE audit SET {column} = ? WHERE seq = 3", (value,))
        conn.commit()
        report = await verify(db)
        assert [(p.seq, p.kind) for p in report.problems] == [(3, "columns")]
        assert "edited after it was written" in report.problems[0].detail

    async def test_deleted_record(self, db):
        await build(db, 3)
        conn = sqlite3.connect(db)
        conn.execute("DELETE FROM audit WHERE seq=3")
        conn.commit()
        report = await verify(db)
        kinds = {(p.seq, p.kind) for p in report.problems}
        assert (4, "gap") in kinds and (4, "link") in kinds
        assert "records 3..3 are missing before record 4" in report.problems[0].detail

    @pytest.mark.parametrize(("old_rows", "caught"), [(False, {"hash", "record"}), (True, {"link", "record"})])
    async def test_reordered_records(self, db, old_rows, caught):
        """Rows swapped whole: today's rows store no prev_hash (each links to the row before it),
        so the swapped record's hash no longer follows; an older bridge's stored links break."""
        await build(db, 3)
        if old_rows:
            as_old_bridge(db)
        conn = sqlite3.connect(db)
        a = conn.execute("SELECT record, prev_hash, hash FROM audit WHERE seq=3").fetchone()
        b = conn.execute("SELECT record, prev_hash, hash FROM audit WHERE seq=4").fetchone()
        conn.execute("UPDATE audit SET record=?, prev_hash=?, hash=? WHERE seq=3", b)
        conn.execute("UPDATE audit SET record=?, prev_hash=?, hash=? WHERE seq=4", a)
        conn.commit()
        report = await verify(db)
        assert report.problems[0].seq == 3
        assert caught <= {p.kind for p in report.problems if p.seq == 3}

    async def test_whole_chain_rewritten_without_the_key(self, db):
        """The forger changes record 4's dice and outcome consistently and re-chains everything;
        without the key the checkpoints no longer match."""
        await build(db, 10)
        edit = replace_in(4, b'"dice":[80]', b'"dice":[34]')

        def forge(seq, record):
            record = edit(seq, record)
            if seq == 4:
                record = (record.replace(b'"outcome":"lost"', b'"outcome":"spent"')
                          .replace(b'"gain":0', b'"gain":1').replace(b'"level_after":0', b'"level_after":1'))
            return record
        rechain(db, key=None, edit=forge)
        report = await verify(db)
        checkpoint_problems = [p for p in report.problems if p.kind == "checkpoint"]
        assert [p.seq for p in checkpoint_problems] == [16, 22]
        assert "not signed by this bridge's key" in checkpoint_problems[0].detail

    async def test_rewritten_chain_with_checkpoints_deleted(self, db):
        await build(db, 10)
        rechain(db)
        conn = sqlite3.connect(db)
        conn.execute("DELETE FROM checkpoints")
        conn.commit()
        report = await verify(db)
        assert [(p.seq, p.kind) for p in report.problems] == [(16, "checkpoint")]

    async def test_wrong_key(self, db):
        await build(db, 10)
        report = await verify(db, key=OTHER_KEY)
        assert [p.seq for p in report.problems] == [16, 22]


class TestRederivation:
    async def test_outcome_altered_consistently_with_its_hash_is_caught(self, db):
        """Even re-chained and re-signed with the real key: the dice 80 vs Fate ML 77 are a CF
        (point lost), so a recorded "kept" does not follow."""
        await build(db, 3)
        rechain(db, key=KEY, edit=replace_in(4, b'"outcome":"lost"', b'"outcome":"kept"'))
        report = await verify(db)
        assert [(p.seq, p.kind) for p in report.problems] == [(4, "rederive")]
        assert "outcome recorded 'kept', re-derived 'lost'" in report.problems[0].detail

    async def test_inputs_altered_are_caught(self, db):
        """The recorded Aura changed: Fate ML would be 52, and 34 is still a success, but the
        recorded fate_ml 77 no longer follows."""
        await build(db, 1)
        rechain(db, key=KEY, edit=replace_in(2, b'"aura":{"disabled":false,"eml":55}',
                                              b'"aura":{"disabled":false,"eml":5}'))
        report = await verify(db)
        assert [(p.seq, p.kind) for p in report.problems if p.kind != "state"] == [(2, "rederive")]
        assert "fate_ml recorded 77, re-derived 52" in report.problems[0].detail
        # the edited read no longer matches the state record 1 left (issue 15: state from the chain)
        assert any(p.kind == "state" and "record 2 read sohl.graded 'm0'" in p.detail for p in report.problems)

    @pytest.mark.parametrize("example", sorted((ROOT / "examples").glob("*.jsonl")), ids=lambda p: p.stem)
    async def test_verify_re_derives_each_record_through_core_decide(self, example, tmp_path, monkeypatch):
        """Issue 26: ``audit verify`` re-derives through the one call a live decision makes,
        ``core.decide``, once per record, with the record's dice as its dice table."""
        store = await replay(example, tmp_path / "trail.sqlite3", KEY)
        await store.close()
        calls: list[tuple[str, list[int], str | None, bool]] = []
        live = core.decide

        def counting(message, state, dice, **kwargs):
            made = []
            replay_table = kwargs["dice_table"]
            kwargs["dice_table"] = lambda state: made.append(replay_table(state)) or made[-1]
            decision = live(message, state, dice, **kwargs)
            (table, session), = made
            assert isinstance(table, audit.ReplayTable)
            assert len(table.draws) == len(decision.audit.dice)  # every die rolled through the table
            calls.append((decision.audit.type, decision.audit.dice, session, decision.ok))
            return decision

        monkeypatch.setattr(core, "decide", counting)
        report = await verify(tmp_path / "trail.sqlite3")
        assert report.ok, report.problems
        recorded = [json.loads(record) for _, record, _, _ in rows(tmp_path / "trail.sqlite3")]
        assert report.records == len(recorded) == len(calls) > 5
        assert calls == [(r["type"], r["dice"], r["dice_session"], r["ok"]) for r in recorded]
        assert any(dice for _, dice, _, _ in calls) and not all(ok for *_, ok in calls)  # dice and refusals

    async def test_card_text_changes_are_not_failures(self):
        record_reply = b'{"type":"error","v":1,"code":"not_found","message":"old wording","ref":"e","field":"message_id"}'
        assert audit.verdict(record_reply) == {"type": "error", "v": 1, "code": "not_found", "ref": "e",
                                               "field": "message_id"}


class TestMigrations:
    async def test_a_version_1_file_is_upgraded_in_place_and_keeps_its_data(self, db):
        conn = old_schema_file(db, 1)
        conn.commit()
        conn.close()
        # a v1 bridge's state: the world with a fated result
        store = await SQLiteStore.open(db)
        await store.add_world("w", None)
        session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
        await session.receive(frame(rolled("r1", "m1")))
        await session.receive(frame(fate_spend("s1", "m1")), ScriptedDice([34]))
        again = json.loads((await session.receive(frame(fate_spend("s2", "m1")))).frames[0])
        await store.close()
        version = sqlite3.connect(db).execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
        assert int(version) == SCHEMA_VERSION == 13
        assert again["code"] == "already_fated"

    async def test_upgrade_from_1_starts_the_chain_at_1(self, db):
        conn = old_schema_file(db, 1)
        conn.execute("INSERT INTO worlds (world_id, token_hash, settings) VALUES ('w', NULL, '{\"fate_option\":\"everyone\"}')")
        conn.commit()
        conn.close()
        store = await SQLiteStore.open(db, audit_key=KEY)
        await play(store, 1)
        await store.close()
        assert [r[0] for r in rows(db)] == [1, 2]
        assert (await verify(db)).ok


class TestAuditCommands:
    def test_list_show_export_verify(self, db, tmp_path, capsys):
        asyncio.run(build(db, 4))
        key_file = tmp_path / "audit.key"
        key_file.write_text(KEY.hex())
        assert main(["audit", "list", "--db", str(db), "--outcome", "spent"]) == 0
        listing = capsys.readouterr().out.splitlines()
        assert listing[0].split()[:4] == ["ID", "TIME", "(UTC)", "WORLD"]
        assert len(listing) == 2 and "MF -> MS" in listing[1] and "Lucky Star" in listing[1]

        assert main(["audit", "show", "2", "--db", str(db)]) == 0
        shown = json.loads(capsys.readouterr().out)
        assert shown["record"]["dice"] == [34] and shown["seq"] == 2

        assert main(["audit", "export", "--db", str(db), "--format", "csv", "--actor", "d1cddnpaqRl0a0Q8"]) == 0
        csv_lines = capsys.readouterr().out.splitlines()
        assert csv_lines[0].startswith("id,world_id,seq,ts,type")
        assert len(csv_lines) == 1 + 9  # 4 graded, 4 spends, 1 choice

        out = tmp_path / "trail.jsonl"
        assert main(["audit", "export", "--db", str(db), "--out", str(out)]) == 0
        exported = [json.loads(line) for line in out.read_text().splitlines()]
        assert [e["seq"] for e in exported] == list(range(1, 10))

        assert main(["audit", "verify", "--db", str(db), "--audit-key", str(key_file)]) == 0
        assert "PASS w: 9 records, signed up to record 9" in capsys.readouterr().out

        conn = sqlite3.connect(db)
        conn.execute("DELETE FROM audit WHERE seq=5")
        conn.commit()
        assert main(["audit", "verify", "--db", str(db), "--audit-key", str(key_file)]) == 1
        failed = capsys.readouterr().out
        assert "FAIL w" in failed and "first bad record: 6" in failed

    def test_list_shows_the_user_name_beside_the_id(self, db, capsys):
        """USER is the name the recorded message gave beside its user id; the id alone when the
        message named nobody; empty for a record no user asked for (a graded test)."""
        async def session_with_names() -> None:
            store = await SQLiteStore.open(db, audit_key=KEY)
            await store.add_world("w", None)
            session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
            await session.receive(frame(rolled("r1", "m1", test=sohl_test(roll=88))))
            await session.receive(frame(fate_spend("s1", "m1", user_name="Player One")), ScriptedDice([34]))
            await session.receive(frame(rolled("r2", "m2", test=sohl_test(roll=88))))
            await session.receive(frame(fate_spend("s2", "m2", user_id=GM)), ScriptedDice([80]))
            await store.close()

        asyncio.run(session_with_names())
        assert main(["audit", "list", "--db", str(db)]) == 0
        listing = capsys.readouterr().out.splitlines()
        assert listing[0].split()[-1] == "USER"
        user_column = listing[0].index("USER")
        rows = [(line.split()[5], line[user_column:]) for line in listing[1:]]  # (TYPE, USER), newest first
        assert rows == [("fate_spend", GM), ("test_rolled", ""), ("fate_spend", f"Player One ({PLAYER})"),
                        ("test_rolled", "")]

    def test_time_filters(self, db, capsys):
        asyncio.run(build(db, 1))
        assert main(["audit", "list", "--db", str(db), "--since", "2999-01-01"]) == 0
        assert capsys.readouterr().out.strip() == "no audit records match"
        assert main(["audit", "list", "--db", str(db), "--until", "2999-01-01", "--since", "2000-01-01"]) == 0
        assert len(capsys.readouterr().out.splitlines()) == 3

    def test_missing_database_is_a_clear_error(self, tmp_path, capsys):
        assert main(["audit", "list", "--db", str(tmp_path / "none.sqlite3")]) == 2
        assert "no database at" in capsys.readouterr().err

    def test_show_unknown_id(self, db, capsys):
        sqlite3.connect(db).close()
        assert main(["audit", "show", "99", "--db", str(db)]) == 1


class TestAuditQuery:
    async def test_pages_newest_first_with_filters(self, db):
        store = await SQLiteStore.open(db)
        await store.add_world("w", None)
        await play(store, 4)
        session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
        query = {"type": "audit_query", "v": 1, "query_id": "q1", "limit": 3}
        page = json.loads((await session.receive(frame(query))).frames[0])
        assert page["type"] == "audit_page" and page["query_id"] == "q1"
        assert [r["seq"] for r in page["records"]] == [9, 8, 7] and page["next_before"] == 7
        nxt = json.loads((await session.receive(frame({**query, "before_seq": 7}))).frames[0])
        assert [r["seq"] for r in nxt["records"]] == [6, 5, 4]
        lost = json.loads((await session.receive(frame({**query, "outcome": "lost"}))).frames[0])
        assert [(r["outcome"], r["fate_roll"], r["label_before"], r["label_after"], r["message_id"])
                for r in lost["records"]] == [("lost", 80, "MF", "MF", "m1")]
        assert lost["next_before"] is None
        await store.close()

    async def test_limit_is_bounded(self, db):
        store = await SQLiteStore.open(db)
        await store.add_world("w", None)
        session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
        reply = json.loads((await session.receive(frame({"type": "audit_query", "v": 1, "query_id": "q",
                                                          "limit": 500}))).frames[0])
        assert (reply["code"], reply["field"], reply["ref"]) == ("bad_message", "limit", "q")
        await store.close()
