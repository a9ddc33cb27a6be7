"""Issue 19: provably fair dice (commit and reveal), physical dice and GM overrides on the record.

A dice session: the GM starts it (the bridge commits to a secret seed), every die of every
ruleset is derived from the seed, the player's ``client_seed`` and the roll's place in the chain,
the GM ends it (the seed is revealed), and the exported trail alone recomputes every die."""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import shutil
import sqlite3
import subprocess
from collections import Counter

import pytest
from structlog.testing import capture_logs
from websockets.datastructures import Headers
from websockets.http11 import Request

from bridge import audit_cli
from bridge.dice import ScriptedDice
from bridge import report
from bridge.fairness import trail
from bridge.http import Pages
from bridge.status import Presence
from bridge.fairness.provable import derive_die, fingerprint
from bridge.config import load_signing_key
from bridge.heads import sign_head
from bridge.errors import WorldNotRegistered
from bridge.session import Session
from bridge.store import AuditFilter, SQLiteStore
from bridge.store.blobs import unpack

from . import hmtw_messages as hmtw
from . import mythic_messages as mythic
from . import pool_messages as pool
from . import sohl_messages as sohl
from .helpers import ROOT, run_bridge

SEED = bytes(range(32))
GM = "gmUser000000001"


def gm(type_: str, event_id: str, **fields) -> dict:
    return {"type": type_, "v": 1, "event_id": event_id, "user_id": GM, "user_is_gm": True, **fields}


def settings(event_id: str = "ev-dice-settings", **fields) -> dict:
    return gm("dice_settings", event_id, settings=fields)


@pytest.fixture
def fair(store):
    """A trusted Session on world ``w`` whose dice sessions take the seed ``SEED``; it has no
    dice of its own (a die not derived, not physical, fails the test)."""
    return Session(store, ScriptedDice([]), trusted=True, default_world="w", new_seed=lambda n: SEED[:n])


async def frames(session: Session, message: dict) -> dict:
    reply = await session.receive(sohl.frame(message))
    assert len(reply.frames) == 1
    return json.loads(reply.frames[0])


async def ok(session: Session, message: dict) -> dict:
    reply = await frames(session, message)
    assert reply["type"] != "error", reply
    return reply


async def exported(store: SQLiteStore) -> str:
    """The world's trail as ``fate-bridge audit export --format jsonl`` writes it."""
    out = io.StringIO()
    audit_cli._export(list(reversed(await store.audit_rows(AuditFilter(world_id="w")))), "jsonl", out)
    return out.getvalue()


def revealed_seq(export: str) -> int:
    return next(json.loads(line)["seq"] for line in export.splitlines() if '"dice_session_end"' in line)


# --- the pure derivation --------------------------------------------------------------------------


class TestDerivation:
    def test_the_die_is_hmac_sha256_of_its_place_with_rejection_sampling(self):
        """Recomputed here from the documented recipe: the first 4 bytes of
        HMAC-SHA256(seed, "fate-bridge die v1\\n" world seq index faces client_seed attempt)."""
        faces = 3 * 2**30  # limit 2**32 - 2**30: a quarter of the draws are rejected
        limit = 2**32 - 2**32 % faces
        rejected_once = 0
        for index in range(40):
            prefix = f"fate-bridge die v1\nw\n7\n{index}\n{faces}\nabc\n".encode()
            attempt = 0
            while (x := int.from_bytes(hmac.new(SEED, prefix + str(attempt).encode(), hashlib.sha256).digest()[:4], "big")) >= limit:
                attempt += 1
            rejected_once += attempt > 0
            assert derive_die(SEED, "abc", "w", 7, index, faces) == x % faces + 1
        assert rejected_once > 0  # the rejection path was taken and agrees too

    def test_faces_are_equally_likely(self):
        counts = Counter(derive_die(SEED, "p", "w", seq, 0, 6) for seq in range(1, 6001))
        assert sorted(counts) == [1, 2, 3, 4, 5, 6]
        chi2 = sum((n - 1000) ** 2 / 1000 for n in counts.values())
        assert chi2 < 20.5  # p = 0.001 for 5 degrees of freedom

    def test_every_input_changes_the_die(self):
        base = [derive_die(SEED, "player", "w", 3, i, 100) for i in range(8)]
        assert base == [derive_die(SEED, "player", "w", 3, i, 100) for i in range(8)]
        for changed in ([derive_die(SEED, "player2", "w", 3, i, 100) for i in range(8)],
                        [derive_die(SEED, "player", "w2", 3, i, 100) for i in range(8)],
                        [derive_die(SEED, "player", "w", 4, i, 100) for i in range(8)],
                        [derive_die(bytes(32), "player", "w", 3, i, 100) for i in range(8)]):
            assert changed != base

    def test_the_fingerprint_is_the_commitments_head(self):
        commitment = hashlib.sha256(SEED).hexdigest()
        assert fingerprint(commitment) == " ".join(commitment[i:i + 4] for i in range(0, 16, 4))


# --- a session of every ruleset, revealed, recomputed from the export ---------------------------------


async def play_every_ruleset(session: Session) -> list[dict]:
    """One decision of each ruleset that rolls the bridge's dice, each with a player value."""
    await ok(session, pool.configure())
    await ok(session, pool.character())
    await ok(session, pool.gm("pool_session_start", "ev-pool-start"))
    await ok(session, sohl.rolled())
    return [
        await ok(session, sohl.fate_spend(client_seed="sohl-player-1")),
        await ok(session, hmtw.fate_test("ev-hmtw", "t1", score=4, client_seed="hmtw-player")),
        await ok(session, mythic.question("ev-mythic", client_seed="mythic-player")),
        await ok(session, pool.check("ev-pool", fate=1, client_seed="pool-player")),
    ]


class TestCommitAndReveal:
    async def test_a_revealed_session_of_every_ruleset_recomputes_from_the_export_alone(self, fair, store):
        await ok(fair, settings(provable=True))
        reply = await fair.receive(sohl.frame(gm("dice_session_start", "ev-start")))
        started = json.loads(reply.frames[0])
        assert started["commitment"] == hashlib.sha256(SEED).hexdigest()
        assert started["fingerprint"] in started["card"]["html"]
        assert started["fingerprint"] in json.loads(reply.overlay_card)["card"]["html"]  # the overlay shows it
        replies = await play_every_ruleset(fair)
        rolled = [r for reply in replies for r in reply["rolls"]]
        assert {r["source"] for r in rolled} == {"fair"} and len(rolled) >= 4
        assert {r["faces"] for r in rolled} >= {100, 57, 6}  # d100 (sohl, mythic), a card of 57, d6s
        revealed = await ok(fair, gm("dice_session_end", "ev-end"))
        assert revealed["seed"] == SEED.hex() and revealed["commitment"] == started["commitment"]

        text = await exported(store)
        check = trail.check_dice(trail.records_of_export(text))
        assert check.problems == [] and check.verified_dice == len(rolled)
        assert check.notes == [f"dice session {started['session_id']} (records 2..{revealed_seq(text)}): "
                               f"{len(rolled)} fair dice recomputed from its revealed seed"]
        (session,) = check.sessions.values()
        assert (session.fair, session.commitment) == (len(rolled), started["commitment"])
        (report,) = await store.verify("w", None)
        assert report.ok, report.problems

    async def test_a_changed_die_or_commitment_fails_naming_the_record(self, fair, store):
        await ok(fair, gm("dice_session_start", "ev-start"))
        await play_every_ruleset(fair)
        await ok(fair, gm("dice_session_end", "ev-end"))
        lines = [json.loads(line) for line in (await exported(store)).splitlines()]
        mythic_line = next(line for line in lines if line["record"]["type"] == "chart_question")
        start_line = next(line for line in lines if line["record"]["type"] == "dice_session_start")

        die = mythic_line["record"]["dice"][0]
        mythic_line["record"]["dice"][0] = die % 100 + 1
        check = trail.check_dice(trail.records_of_export("\n".join(json.dumps(line) for line in lines)))
        seq = mythic_line["seq"]
        assert [s for s, _ in check.problems] == [seq]
        assert f"record {seq}: die 1 (d100) recorded {die % 100 + 1}" in check.problems[0][1]
        mythic_line["record"]["dice"][0] = die

        mythic_line["record"]["draws"][0]["source"] = "secret"
        check = trail.check_dice(trail.records_of_export("\n".join(json.dumps(line) for line in lines)))
        assert [p for _, p in check.problems] == [f"record {seq}: die 1 is marked secret inside dice session "
                                                  f"{mythic_line['record']['dice_session']}, where every die is derived"]
        mythic_line["record"]["draws"][0]["source"] = "fair"

        start_line["record"]["reply"]["commitment"] = hashlib.sha256(b"another seed").hexdigest()
        check = trail.check_dice(trail.records_of_export("\n".join(json.dumps(line) for line in lines)))
        assert start_line["seq"] in [s for s, _ in check.problems]
        assert any(f"record {start_line['seq']}: the commitment" in p for _, p in check.problems)

    async def test_audit_verify_recomputes_the_dice_of_the_database(self, fair, store):
        await ok(fair, gm("dice_session_start", "ev-start"))
        await ok(fair, mythic.question("ev-q1", client_seed="x"))
        (report,) = await store.verify("w", None)
        assert report.ok and any("wait for its reveal" in n for n in report.notes)
        await ok(fair, gm("dice_session_end", "ev-end"))
        conn = store._conn
        row = conn.execute("SELECT seq, record FROM audit WHERE type = 'chart_question'").fetchone()
        record = json.loads(unpack(row[1]))
        record["dice"] = [record["dice"][0] % 100 + 1]
        # wherever the record is stored: SQLite's audit or audit_tail (schema migration 9)
        for table in ("main.audit", "audit_tail") if store._tail else ("audit",):
            conn.execute(f"UPDATE {table} SET record = ? WHERE seq = ?", (json.dumps(record).encode(), row[0]))
        (report,) = await store.verify("w", None)
        assert [(p.seq, p.kind) for p in report.problems if p.kind == "dice"] == [(row[0], "dice")]

    async def test_same_request_and_player_value_same_die_other_value_other_die(self):
        """Three bridges committed to the same seed get the same request at the same place in the
        chain: the same player value gives the same dice, another value other dice."""
        dice, commitments = [], set()
        for player in ("alpha", "alpha", "beta"):
            store = await SQLiteStore.open(":memory:")
            await store.add_world("w", None)
            session = Session(store, ScriptedDice([]), trusted=True, default_world="w",
                              new_seed=lambda n: SEED[:n])
            commitments.add((await ok(session, gm("dice_session_start", "ev-start")))["commitment"])
            await ok(session, pool.configure())
            await ok(session, pool.character())
            await ok(session, pool.gm("pool_session_start", "ev-pool-start"))
            reply = await ok(session, pool.check("ev-pool", fate=1, client_seed=player))
            dice.append([r["value"] for r in reply["rolls"]])
            await store.close()
        assert commitments == {hashlib.sha256(SEED).hexdigest()}  # the commitment fixed
        assert dice[0] == dice[1] and dice[0] != dice[2]
        assert dice[0] == [derive_die(SEED, "alpha", "w", 5, i, 6) for i in range(len(dice[0]))]

    async def test_rolls_before_the_commitment_are_refused(self, fair, store):
        await ok(fair, settings(provable=True))
        refused = await frames(fair, mythic.question("ev-early", client_seed="x"))
        assert (refused["type"], refused["code"], refused["field"]) == ("error", "forbidden", "dice_session")
        assert "no dice session is open" in refused["message"]
        await ok(fair, mythic.chart_settings("ev-chart"))  # a decision without dice is not refused
        await ok(fair, gm("dice_session_start", "ev-start"))
        assert (await ok(fair, mythic.question("ev-late", client_seed="x")))["rolls"][0]["source"] == "fair"
        await ok(fair, gm("dice_session_end", "ev-end"))
        refused = await frames(fair, mythic.question("ev-after", client_seed="x"))
        assert refused["code"] == "forbidden"

    async def test_only_a_gm_starts_or_ends_and_one_session_at_a_time(self, fair):
        refused = await frames(fair, {**gm("dice_session_start", "ev-p"), "user_is_gm": False})
        assert (refused["code"], refused["field"]) == ("forbidden", "user_id")
        refused = await frames(fair, gm("dice_session_end", "ev-none"))
        assert refused["code"] == "not_found"
        await ok(fair, gm("dice_session_start", "ev-start"))
        refused = await frames(fair, gm("dice_session_start", "ev-again"))
        assert refused["code"] == "not_eligible" and fingerprint(hashlib.sha256(SEED).hexdigest()) in refused["message"]

    async def test_the_seed_stays_in_the_bridge_until_the_reveal(self, fair, store):
        await ok(fair, gm("dice_session_start", "ev-start"))
        replies = await play_every_ruleset(fair)
        status = await ok(fair, {"type": "dice_status", "v": 1, "query_id": "q1"})
        assert status["fingerprint"] == fingerprint(hashlib.sha256(SEED).hexdigest())
        before = await exported(store)
        assert SEED.hex() not in before and SEED.hex() not in json.dumps([replies, status])
        await ok(fair, gm("dice_session_end", "ev-end"))
        holding = [line for line in (await exported(store)).splitlines() if SEED.hex() in line]
        assert [json.loads(line)["record"]["type"] for line in holding] == ["dice_session_end"]


async def test_the_seed_never_reaches_the_log(fair):
    """Every log event of a whole session (every key of every event, at every level) is
    searched for the seed, as hex and as bytes."""
    with capture_logs() as events:
        await ok(fair, settings(provable=True))
        await ok(fair, gm("dice_session_start", "ev-start"))
        await play_every_ruleset(fair)
        await frames(fair, gm("dice_session_start", "ev-again"))  # refused: logged too
        await ok(fair, gm("dice_session_end", "ev-end"))
    logged = repr(events)
    assert len(events) >= 9 and "dice_session_end" in logged
    assert SEED.hex() not in logged and repr(SEED) not in logged


# --- physical dice -----------------------------------------------------------------------------


class TestPhysicalDice:
    async def test_a_real_die_is_checked_and_marked_physical(self, fair, store):
        await ok(fair, settings(physical_rulesets=["mythic"], provable=True))
        await ok(fair, gm("dice_session_start", "ev-start"))
        reply = await ok(fair, mythic.question("ev-q", physical=[57]))
        assert reply["rolls"] == [{"faces": 100, "value": 57, "source": "physical"}]
        assert reply["roll"] == 57
        assert reply["card"]["html"].endswith('<p class="fate-bridge dice-physical">Physical dice: d100 57</p>')
        await ok(fair, gm("dice_session_end", "ev-end"))
        records = trail.records_of_export(await exported(store))
        question = next(r for r in records if r.type == "chart_question")
        assert (question.dice, [d.source for d in question.draws]) == ([57], ["physical"])
        assert trail.physical_per_session(records) == {question.dice_session: 1}
        assert trail.check_dice(records).problems == []
        sessions = report.collect(await store.audit_rows(AuditFilter(world_id="w"))).sessions
        assert [(s.physical, s.overrides) for s in sessions] == [(1, 0)]  # the report's column

    async def test_an_impossible_value_is_refused_naming_the_field_and_range(self, fair):
        await ok(fair, settings(physical_rulesets=["mythic", "pool"]))
        refused = await frames(fair, mythic.question("ev-q", physical=[101]))
        assert (refused["code"], refused["field"]) == ("bad_message", "physical[0]")
        assert "101 is not a possible d100 roll (allowed 1..100)" in refused["message"]
        refused = await frames(fair, mythic.question("ev-q2", physical=[5, 6]))
        assert (refused["field"], "2 physical dice given, but this roll used 1") == (
            "physical", refused["message"].split(": ", 1)[1])

    async def test_physical_dice_re_derive_as_live_and_a_changed_one_is_named(self, fair, store):
        """Issue 26: ``audit verify`` re-derives through ``core.decide`` with the record's dice
        table, so physical dice are checked as live: the refusals of a value out of range and of
        values a roll left unused re-derive (they failed when verify ran the handler alone), and a
        recorded physical die other than the request's is named."""
        await ok(fair, settings(physical_rulesets=["mythic"]))
        assert (await frames(fair, mythic.question("ev-out", physical=[101])))["field"] == "physical[0]"
        assert (await frames(fair, mythic.question("ev-unused", physical=[5, 6])))["field"] == "physical"
        await ok(fair, mythic.question("ev-q", physical=[57]))
        (report,) = await store.verify("w", None)
        assert report.ok, report.problems
        conn = store._conn
        seq, stored = conn.execute("SELECT seq, record FROM audit WHERE event_id = 'ev-q'").fetchone()
        record = json.loads(unpack(stored))
        assert (record["dice"], record["draws"]) == ([57], [{"faces": 100, "source": "physical"}])
        record["dice"] = [58]
        # wherever the record is stored: SQLite's audit or audit_tail (schema migration 9)
        for table in ("main.audit", "audit_tail") if store._tail else ("audit",):
            conn.execute(f"UPDATE {table} SET record = ? WHERE seq = ?", (json.dumps(record).encode(), seq))
        (report,) = await store.verify("w", None)
        assert [(p.seq, p.detail) for p in report.problems if p.kind == "rederive"] == [
            (seq, f"record {seq}: the decision rolled [57] where the record has [58]")]

    async def test_refusals_the_dice_settings_make_re_derive_against_the_chains_settings(self, fair, store):
        """Issue 26: the live dice table reads the world's dice settings unrecorded; ``audit
        verify`` reads them from the chain, so physical dice of a ruleset the settings do not allow
        and a die of a provable world with no dice session re-derive as the refusals they were
        (both failed verify before), and dice once the GM lifted the rules re-derive as rolled."""
        await ok(fair, settings(physical_rulesets=["pool"]))
        refused = await frames(fair, mythic.question("ev-physical", physical=[50]))
        assert (refused["code"], refused["field"]) == ("forbidden", "physical")
        await ok(fair, settings("ev-provable", provable=True))
        refused = await frames(fair, mythic.question("ev-no-session"))
        assert (refused["code"], refused["field"]) == ("forbidden", "dice_session")
        await ok(fair, settings("ev-lifted", provable=False, physical_rulesets=["mythic"]))
        await ok(fair, mythic.question("ev-q", physical=[50]))
        await ok(fair, mythic.question("ev-q2", physical=[51]))
        (report,) = await store.verify("w", None)
        assert report.ok, report.problems
        assert report.records == 7

    async def test_a_ruleset_without_physical_dice_refuses_them(self, fair):
        await ok(fair, settings(physical_rulesets=["pool"]))
        refused = await frames(fair, mythic.question("ev-q", physical=[50]))
        assert (refused["code"], refused["field"]) == ("forbidden", "physical")
        assert "does not allow physical dice for mythic (allowed for: pool)" in refused["message"]
        refused = await frames(fair, settings("ev-bad", physical_rulesets=["chess"]))
        assert (refused["field"], "unknown ruleset 'chess'" in refused["message"]) == (
            "settings.physical_rulesets[0]", True)


# --- GM overrides --------------------------------------------------------------------------------


def override(event_id: str, **fields) -> dict:
    defaults = dict(target_event_id="ev-q", message_id="chatMsg00000001", result="Exceptional Yes", values=[3],
                    reason="the story needs it")
    return gm("gm_override", event_id, **{**defaults, **fields})


class TestOverrides:
    async def test_an_override_is_on_the_record_and_counted_per_session(self, fair, store):
        await ok(fair, gm("dice_session_start", "ev-start"))
        await ok(fair, mythic.question("ev-q", client_seed="x"))
        applied = await ok(fair, override("ev-o1"))
        assert (applied["by_user_id"], applied["reason"], applied["marked"]) == (GM, "the story needs it", True)
        assert "GM override" in applied["card"]["html"] and "the story needs it" in applied["card"]["html"]
        await ok(fair, override("ev-o2"))
        await ok(fair, gm("dice_session_end", "ev-end"))
        await ok(fair, override("ev-o3"))
        refused = await frames(fair, {**override("ev-o4"), "user_is_gm": False})
        assert (refused["code"], refused["field"]) == ("forbidden", "user_id")

        records = trail.records_of_export(await exported(store))
        sid = applied["session_id"]
        assert trail.overrides_per_session(records) == {sid: 2, None: 1}
        rows = await store.audit_rows(AuditFilter(world_id="w"))
        assert [(s.overrides, s.physical) for s in report.collect(rows).sessions] == [(3, 0)]  # refused: not counted
        page = report.report_page(rows, world_id="w", since=None, generated="2026-12-01T10:00:00Z")
        assert "<th>GM overrides</th><th>physical dice</th>" in page
        assert "<td>3</td><td>0</td></tr>" in page
        first = next(r for r in records if r.event_id == "ev-o1")
        message = json.loads(bytes(first.message))
        assert (first.user_id, message["reason"], message["target_event_id"], first.summary.outcome) == (
            GM, "the story needs it", "ev-q", "override")
        assert first.ts  # when: the record's time
        page = await ok(fair, {"type": "audit_query", "v": 1, "query_id": "q", "outcome": "override"})
        assert [r["event_id"] for r in page["records"]] == ["ev-o3", "ev-o2", "ev-o1"]

    async def test_the_override_mark_for_players_is_a_world_setting(self, fair):
        await ok(fair, settings(override_mark="gm"))
        await ok(fair, gm("dice_session_start", "ev-start"))
        await ok(fair, mythic.question("ev-q", client_seed="x"))
        applied = await ok(fair, override("ev-o1"))
        assert applied["marked"] is False
        assert "GM override" not in applied["card"]["html"] and "Exceptional Yes" in applied["card"]["html"]
        assert "GM override" in applied["gm_card"]["html"]



class TestOverrideTargets:
    """Issue 36: an override names a decision the world holds, by its event id or by the chat
    message showing it; anything else is refused ``not_found`` before deciding, unrecorded."""

    async def test_a_decision_is_overridden_by_its_event_id_or_its_chat_message_id(self, fair, store):
        await ok(fair, gm("dice_session_start", "ev-start"))
        await ok(fair, mythic.question("ev-q", client_seed="x"))
        await ok(fair, sohl.rolled("ev-roll", "sohlRollMsg0001"))  # sohl's own roll message: its columns link it
        by_event = await ok(fair, override("ev-o1"))
        assert (by_event["type"], by_event["target_event_id"]) == ("override_applied", "ev-q")
        by_message = await ok(fair, override("ev-o2", target_event_id="sohlRollMsg0001", message_id="sohlRollMsg0001"))
        assert (by_message["type"], by_message["target_event_id"]) == ("override_applied", "sohlRollMsg0001")
        assert [r.type for r in await store.audit_rows(AuditFilter(world_id="w"))] == [
            "gm_override", "gm_override", "test_rolled", "chart_question", "dice_session_start"]

    async def test_an_override_of_a_decision_the_world_does_not_hold_is_refused_naming_it(self, fair, store):
        await ok(fair, gm("dice_session_start", "ev-start"))
        await ok(fair, mythic.question("ev-q", client_seed="x"))
        # a refused request holds no result: neither its event id nor the chat message it names
        refused = await frames(fair, {**override("ev-not-gm", message_id="chatOfRefusal01"), "user_is_gm": False})
        assert refused["code"] == "forbidden"
        before = len(await store.audit_rows(AuditFilter(world_id="w")))
        with capture_logs() as logs:
            for target in ("ev-nowhere", "ev-not-gm", "chatOfRefusal01", "chatMsg00000001"):
                missing = await frames(fair, override(f"ev-o-{target}", target_event_id=target))
                assert (missing["type"], missing["code"], missing["field"], missing["ref"]) == (
                    "error", "not_found", "target_event_id", f"ev-o-{target}")
                assert f"'{target}'" in missing["message"], missing["message"]
        assert len(await store.audit_rows(AuditFilter(world_id="w"))) == before  # nothing recorded
        assert [(line["event"], line["code"], line["field"]) for line in logs] == [
            ("decision", "not_found", "target_event_id")] * 4
        # nothing applied: the target overridden next is the one the world holds, on a clean state
        assert (await ok(fair, override("ev-o-after")))["target_event_id"] == "ev-q"

    async def test_the_refusal_is_in_the_worlds_language(self, store):
        german = Session(store, ScriptedDice([]), trusted=True, default_world="w")
        german.language = "de"
        missing = await frames(german, override("ev-o1", target_event_id="ev-nowhere"))
        assert missing["code"] == "not_found" and "'ev-nowhere'" in missing["message"]
        assert "hält keine Entscheidung" in missing["message"], missing["message"]

    async def test_an_older_bridges_stored_reply_names_a_decision(self, fair, store):
        """Decisions of bridges older than issue 17 may be known by an ``events`` row alone."""
        from bridge.store.schema import INSERT_EVENT

        rows = [("w", "ev-old", b'{"type":"chart_answer","v":1,"event_id":"ev-old"}', None),
                ("w", "ev-old-refused", b'{"type":"error","v":1,"code":"forbidden"}', None)]
        await store._run(store._transaction, lambda conn: conn.executemany(INSERT_EVENT, rows))
        assert await store.holds_decision("w", "ev-old") is True
        assert await store.holds_decision("w", "ev-old-refused") is False
        assert (await ok(fair, override("ev-o1", target_event_id="ev-old")))["type"] == "override_applied"
        with pytest.raises(WorldNotRegistered):
            await store.holds_decision("nowhere", "ev-old")

    async def test_a_trail_with_overrides_of_unknown_targets_still_verifies(self, store):
        """Bridges before issue 36 applied an override of any target: their records replay as
        they were decided (the check is the shell's, outside the record)."""
        older_bridge = Session(store, ScriptedDice([]), trusted=True, default_world="w")

        async def without_the_check(world_id: str, target: str) -> bool:
            return True

        store.holds_decision = without_the_check  # what an older bridge did: no look-up at all
        try:
            applied = await ok(older_bridge, override("ev-o1", target_event_id="ev-never-decided"))
            assert applied["target_event_id"] == "ev-never-decided"
        finally:
            del store.holds_decision
        assert (await frames(older_bridge, override("ev-o2", target_event_id="ev-never-decided")))["code"] == "not_found"
        (report,) = await store.verify("w", None)
        assert report.records == 1 and report.ok, report.problems
        assert (await ok(older_bridge, override("ev-o1", target_event_id="ev-never-decided")))["type"] == (
            "override_applied")  # its event id repeated: the stored reply, as before the check


# --- purity --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["provable.py", "decide.py", "trail.py", "wire.py", "__init__.py"])
def test_the_dice_core_reaches_no_io_clock_or_randomness(name):
    """The seed is injected (``Session(new_seed=...)``); nothing in ``bridge/fairness`` draws one,
    reads a clock or touches a file, through any import (as test_purity checks the rulesets)."""
    from .test_purity import BRIDGE, FORBIDDEN, INJECTED, _top, reachable

    for module, outside in reachable(BRIDGE / "fairness" / name).items():
        found = _top(outside) & FORBIDDEN - INJECTED.get(module.name, set())
        assert not found, (module.relative_to(BRIDGE), found)


# --- the /verify page ----------------------------------------------------------------------------

PAGE_JS = ROOT / "bridge" / "fairness" / "page" / "verify.js"


def check_in_node(export: str, tmp_path) -> dict:
    """The page's own checkTrail (WebCrypto, as in a browser) run by Node on an export."""
    trail_file = tmp_path / "trail.jsonl"
    trail_file.write_text(export)
    script = (f"import {{ checkTrail }} from {json.dumps(PAGE_JS.as_uri())};\n"
              f"import {{ readFileSync }} from 'node:fs';\n"
              f"console.log(JSON.stringify(await checkTrail(readFileSync({json.dumps(str(trail_file))}, 'utf8'))));")
    done = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed (the module's tests need it too)")
async def test_the_page_recomputes_every_die_of_an_export_as_the_bridge_does(fair, store, tmp_path):
    await ok(fair, gm("dice_session_start", "ev-start"))
    replies = await play_every_ruleset(fair)
    await ok(fair, gm("dice_session_end", "ev-end"))
    export = await exported(store)
    result = check_in_node(export, tmp_path)
    rolled = sum(len(r["rolls"]) for r in replies)
    assert (result["problems"], result["verified"]) == ([], rolled)
    assert [(s["fingerprint"], s["fair"], s["ok"]) for s in result["sessions"]] == [
        (fingerprint(hashlib.sha256(SEED).hexdigest()), rolled, True)]

    lines = [json.loads(line) for line in export.splitlines()]
    target = next(line for line in lines if line["record"]["type"] == "hmtw_test")
    die = target["record"]["dice"][0]
    target["record"]["dice"][0] = die % 57 + 1
    result = check_in_node("\n".join(json.dumps(line) for line in lines), tmp_path)
    seq = target["seq"]
    assert [p["detail"].split(":")[0].split(" (")[0] for p in result["problems"]] == [
        f"record {seq} was changed after it was written", f"record {seq}"]  # the chain, then the die
    assert result["problems"][1]["detail"].startswith(f"record {seq}: die 1 (d57) recorded")
    assert result["sessions"][0]["ok"] is False

    target["record"]["dice"][0] = die  # the die back
    target["record"]["draws"][0]["source"] = "secret"  # hidden from the check instead
    result = check_in_node("\n".join(json.dumps(line) for line in lines), tmp_path)
    assert any(f"record {seq}: die 1 is marked secret inside dice session" in p["detail"] for p in result["problems"])
    lines.pop(3)  # a record dropped from the export
    result = check_in_node("\n".join(json.dumps(line) for line in lines), tmp_path)
    assert any(p["detail"] == "records 4..4 are missing before record 5" for p in result["problems"])


async def test_the_bridge_serves_the_page_and_its_script(store):
    pages = Pages(store, Presence(), lambda world: 0, origins=None, public_url=None)
    for path, kind, text in (("/verify", "text/html; charset=utf-8", 'href="/verify/verify.css"'),
                             ("/verify/verify.js", "text/javascript; charset=utf-8", "export async function checkTrail"),
                             ("/verify/verify.css", "text/css; charset=utf-8", "font: 15px/1.5 system-ui")):
        response = await pages(None, Request(path, Headers()))
        assert (response.status_code, response.headers["Content-Type"]) == (200, kind)
        assert text in response.body.decode()
        assert "script-src 'self'" in response.headers["Content-Security-Policy"]


def test_audit_verify_on_the_command_line_names_the_changed_die(tmp_path):
    db, key = tmp_path / "r.sqlite3", tmp_path / "audit.key"
    lines = [gm("dice_session_start", "ev-start"), mythic.question("ev-q", client_seed="x"),
             gm("dice_session_end", "ev-end")]
    done = run_bridge("resolve", "--db", str(db), "--audit-key", str(key),
                      stdin="".join(json.dumps(line) + "\n" for line in lines))
    assert done.returncode == 0, done.stderr
    verified = run_bridge("audit", "verify", "--db", str(db), "--audit-key", str(key))
    assert verified.returncode == 0, verified.stdout
    assert "1 fair dice recomputed from its revealed seed" in verified.stdout

    conn = sqlite3.connect(db)
    seq, raw = conn.execute("SELECT seq, record FROM audit WHERE type = 'chart_question'").fetchone()
    record = json.loads(unpack(raw))
    record["dice"] = [record["dice"][0] % 100 + 1]
    conn.execute("UPDATE audit SET record = ? WHERE seq = ?", (json.dumps(record).encode(), seq))
    conn.commit()
    conn.close()
    verified = run_bridge("audit", "verify", "--db", str(db), "--audit-key", str(key))
    assert verified.returncode == 1
    assert f"[dice] record {seq}: die 1 (d100) recorded {record['dice'][0]}" in verified.stdout


async def test_dice_settings_refuse_unknown_fields_and_too_many_rulesets(fair):
    refused = await frames(fair, settings(provable=True, provabel=False))
    assert (refused["code"], refused["field"]) == ("bad_message", "settings.provabel")
    refused = await frames(fair, settings("ev-many", physical_rulesets=["pool"] * 17))
    assert (refused["code"], refused["field"]) == ("bad_message", "settings.physical_rulesets")


def page_check(file) -> dict:
    """The page's parseExport/checkTrail/summarize run by Node on ``file``: ``{"result", "summary"}``,
    or ``{"error"}`` with the message the page shows when it refuses the file."""
    script = (f"import {{ checkTrail, summarize }} from {json.dumps(PAGE_JS.as_uri())};\n"
              f"import {{ readFileSync }} from 'node:fs';\n"
              f"try {{ const result = await checkTrail(readFileSync({json.dumps(str(file))}, 'utf8'));\n"
              f"  console.log(JSON.stringify({{ result, summary: summarize(result) }}));\n"
              f"}} catch (error) {{ console.log(JSON.stringify({{ error: error.message }})); }}")
    done = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed (the module's tests need it too)")
def test_the_page_takes_each_export_the_readme_offers_and_says_what_it_checked(tmp_path):
    """Issue 25: the whole-trail export (`audit export --world W --out W.trail.json`, README) passes
    with its signed heads checked (Ed25519, bridge/heads.py) and the verdict names the hash chain's
    records, the heads and that there was no dice session; jsonl passes too; the CSV summary is
    refused saying why; a head whose signature was changed fails."""
    db, key = tmp_path / "r.sqlite3", tmp_path / "audit.key"
    lines = [mythic.question("ev-q1"), mythic.question("ev-q2")]  # world "offline" (resolve's)
    done = run_bridge("resolve", "--db", str(db), "--audit-key", str(key),
                      stdin="".join(json.dumps(line) + "\n" for line in lines))
    assert done.returncode == 0, done.stderr
    signed = run_bridge("audit", "new-key", "--db", str(db), "--audit-key", str(key),
                        "--signing-key", str(tmp_path / "receipt.key"))  # resolve signs no heads: a key change does
    assert signed.returncode == 0, signed.stderr
    files = {fmt: tmp_path / name for fmt, name in (("trail", "w.trail.json"), ("jsonl", "w.jsonl"), ("csv", "w.csv"))}
    for fmt, file in files.items():
        exported_ = run_bridge("audit", "export", "--db", str(db), "--world", "offline",
                               "--format", fmt, "--out", str(file))
        assert exported_.returncode == 0, exported_.stderr
    trail = json.loads(files["trail"].read_text())
    records, heads = len(trail["records"]), len(trail["heads"])
    assert records >= 2 and heads >= 1

    checked = page_check(files["trail"])
    assert checked["result"]["problems"] == [] and checked["result"]["heads"]["signed"] == heads
    verdict = checked["summary"]["verdict"]
    assert verdict.startswith(f"PASS: the hash chain of world offline: {records} records recomputed and linked; "
                              f"{heads} signed head")
    assert f"of {heads} checked against the chain (signed by key " in verdict
    assert verdict.endswith("no dice session in this trail: dice are recomputed only for rolls made inside a /dicesession.")
    assert "0 dice" not in verdict

    jsonl = page_check(files["jsonl"])
    assert jsonl["summary"]["ok"] and "no signed heads: a --format jsonl export carries none" in jsonl["summary"]["verdict"]
    assert page_check(files["csv"])["error"].startswith(
        "this is the CSV summary export (--format csv): it has no records or hashes to check; export a trail with "
        "`fate-bridge audit export --world WORLD --out WORLD.trail.json`")

    sig = trail["heads"][0]["sig"]
    trail["heads"][0]["sig"] = ("B" if sig[0] == "A" else "A") + sig[1:]
    forged = tmp_path / "forged.trail.json"
    forged.write_text(json.dumps(trail))
    failed = page_check(forged)
    assert not failed["summary"]["ok"]
    assert [p["detail"] for p in failed["result"]["problems"]] == [
        f"the signed head at record {trail['heads'][0]['seq']} does not carry a valid signature by key "
        f"{checked['result']['heads']['keys'][0]}"]
    # version 2 heads (issue 25): the stored digest is signed too; a version 1 head still checks
    assert all(isinstance(head["stored_digest"], str) for head in json.loads(files["trail"].read_text())["heads"])
    trail = json.loads(files["trail"].read_text())
    digest = trail["heads"][0]["stored_digest"]
    trail["heads"][0]["stored_digest"] = ("0" if digest[0] != "0" else "1") + digest[1:]
    forged.write_text(json.dumps(trail))
    assert [p["detail"] for p in page_check(forged)["result"]["problems"]] == [
        f"the signed head at record {trail['heads'][0]['seq']} does not carry a valid signature by key "
        f"{checked['result']['heads']['keys'][0]}"]
    head = trail["heads"][0]
    v1 = sign_head(load_signing_key(tmp_path / "receipt.key", create=False), "offline", head["seq"], head["hash"],
                   head["state_digest"])
    trail["heads"][0] = {**head, "sig": v1.sig, "stored_digest": None}
    forged.write_text(json.dumps(trail))
    assert page_check(forged)["result"]["problems"] == []
    del trail["heads"][0]["stored_digest"]  # a file of a bridge before issue 25
    forged.write_text(json.dumps(trail))
    assert page_check(forged)["result"]["problems"] == []
    other = json.loads(files["trail"].read_text())
    other["format"] = "something else"
    forged.write_text(json.dumps(other))
    assert page_check(forged)["error"].startswith('the file\'s "format" is "something else", not "fate-bridge trail v1"')
