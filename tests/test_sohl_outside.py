"""Issue 24: a SoHL Fate Test that happened outside the bridge (SoHL's own Fate, run by a client
without the module, on a message posted before it was enabled, or by a GM on purpose) is recorded
by ``fated_outside`` and fates the test: every message of it grades ``already_fated`` and a
``fate_spend`` on any of them is refused ``already_fated`` (S11). The numbers follow the captured
SoHL Fate flow (samples/sohl/captured ``fate-original-test`` / ``fate-reposted-test``): Archery
EML 55, d100 72 (MF, level 0), reposted by SoHL's Fate at level 1 on the same die."""

from __future__ import annotations

import asyncio
import json

import pytest

from bridge.cli import main
from bridge.dice import ScriptedDice
from bridge.session import Session
from bridge.store import SQLiteStore

from .helpers import send
from .sohl_messages import GM, fate_spend, frame, rolled, sohl_test
from .test_audit import KEY, rows, verify

ORIGINAL = sohl_test(eml=55, roll=72, reported_level=0)
RAISED = sohl_test(eml=55, roll=72, reported_level=1, item_id=None)


def outside(event_id: str, message_id: str, evidence: str, **extra) -> dict:
    return {"type": "fated_outside", "v": 1, "event_id": event_id, "message_id": message_id,
            "evidence": evidence, **extra}


async def graded(session: Session, event_id: str, message_id: str, test: dict, **extra) -> dict:
    reply = await send(session, rolled(event_id, message_id, test=test, **extra))
    assert reply["type"] == "test_graded", reply
    return reply


class TestRaisedLevel:
    async def test_a_repost_raised_on_the_same_roll_fates_the_test_and_every_repost(self, session):
        first = await graded(session, "r1", "orig", ORIGINAL)
        assert (first["level"], first["fate"]["eligible"]) == (0, True)
        repost = await graded(session, "r2", "repost", RAISED, test_of="orig")
        assert repost["fate"]["eligible"] is True, "grading alone decides nothing: the module reports it"
        reply = await send(session, outside("o1", "repost", "raised_level"))
        assert (reply["type"], reply["message_id"], reply["level"]) == ("test_graded", "repost", 0)
        assert reply["fate"] == {**repost["fate"], "eligible": False, "reasons": ["already_fated"]}
        for n, message_id in enumerate(["orig", "repost"]):
            refused = await send(session, fate_spend(f"s{n}", message_id), dice=[34])
            assert (refused["code"], refused["field"]) == ("already_fated", "message_id"), message_id
            assert "repost" in refused["message"], "the refusal names the message that shows the Fate"
        regraded = await graded(session, "r3", "orig", ORIGINAL)
        assert regraded["fate"]["reasons"] == ["already_fated"]
        later = await graded(session, "r4", "later", ORIGINAL, test_of="orig")  # a GM edit of it
        assert later["fate"]["reasons"] == ["already_fated"]
        refused = await send(session, fate_spend("s9", "later", user_id=GM, user_is_gm=True), dice=[34])
        assert refused["code"] == "already_fated"

    async def test_a_gm_edit_that_raises_the_eml_is_no_evidence(self, session):
        """SoHL's GM edit re-evaluates: a higher level from a higher EML is graded so by the bridge too."""
        await graded(session, "r1", "orig", ORIGINAL)
        await graded(session, "r2", "edit", sohl_test(eml=80, roll=72, reported_level=1, item_id=None), test_of="orig")
        refused = await send(session, outside("o1", "edit", "raised_level"))
        assert (refused["code"], refused["field"]) == ("not_eligible", "evidence")
        assert (await send(session, fate_spend("s1", "orig"), dice=[34]))["outcome"] == "spent"

    async def test_a_first_message_or_another_die_is_no_evidence(self, session):
        await graded(session, "r1", "orig", sohl_test(eml=55, roll=72, reported_level=1))
        assert (await send(session, outside("o1", "orig", "raised_level")))["code"] == "not_eligible"
        await graded(session, "r2", "other", sohl_test(eml=55, roll=71, reported_level=1), test_of="orig")
        assert (await send(session, outside("o2", "other", "raised_level")))["code"] == "not_eligible"

    async def test_sohls_gm_edit_that_keeps_its_level_is_no_evidence(self, session):
        """The captured GM edit (``skill-test-edit-original`` / ``-repost``): d100 37, EML 55 -> 35,
        SoHL reports level 1 on both; the bridge grades the repost lower, but its EML changed."""
        await graded(session, "r1", "orig", sohl_test(eml=55, roll=37, reported_level=1))
        await graded(session, "r2", "edit", sohl_test(eml=35, roll=37, reported_level=1, item_id=None), test_of="orig")
        assert (await send(session, outside("o1", "edit", "raised_level")))["code"] == "not_eligible"
        await graded(session, "r3", "slmod", sohl_test(eml=55, roll=37, reported_level=2, level_mod=1, item_id=None),
                     test_of="orig")
        assert (await send(session, outside("o2", "slmod", "raised_level")))["code"] == "not_eligible"


class TestFateCard:
    async def test_sohls_fate_card_fates_the_test_it_names(self, session):
        await graded(session, "r1", "orig", ORIGINAL)
        reply = await send(session, outside("o1", "orig", "fate_card", card_message_id="sohlFateCard01"))
        assert reply["fate"]["reasons"] == ["already_fated"]
        refused = await send(session, fate_spend("s1", "orig"), dice=[34])
        assert refused["code"] == "already_fated" and "sohlFateCard01" in refused["message"]
        repost = await graded(session, "r2", "repost", RAISED, test_of="orig")
        assert repost["fate"]["reasons"] == ["already_fated"]

    async def test_a_fate_card_without_its_message_or_on_an_ungraded_test_is_refused(self, session):
        await graded(session, "r1", "orig", ORIGINAL)
        refused = await send(session, outside("o1", "orig", "fate_card"))
        assert (refused["code"], refused["field"]) == ("bad_message", "card_message_id")
        refused = await send(session, outside("o2", "never", "fate_card", card_message_id="card"))
        assert (refused["code"], refused["field"]) == ("not_found", "message_id")
        assert (await send(session, fate_spend("s1", "orig"), dice=[34]))["outcome"] == "spent", "nothing was recorded"

    async def test_a_test_fated_by_the_bridge_keeps_its_fate(self, session):
        """SoHL fating it again afterwards is recorded on the trail, but changes nothing: the
        bridge's Fate Test stays the one that fated it."""
        await graded(session, "r1", "orig", ORIGINAL)
        assert (await send(session, fate_spend("s1", "orig"), dice=[34]))["outcome"] == "spent"
        reply = await send(session, outside("o1", "orig", "fate_card", card_message_id="card"))
        assert reply["fate"]["reasons"] == ["already_fated"]
        refused = await send(session, fate_spend("s2", "orig"), dice=[34])
        assert refused["code"] == "already_fated" and "card" not in refused["message"]


class TestOnTheTrail:
    async def play(self, db) -> None:
        store = await SQLiteStore.open(db, audit_key=KEY)
        await store.add_world("w", None)
        session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
        steps = [rolled("r1", "orig", test=ORIGINAL), rolled("r2", "repost", test=RAISED, test_of="orig"),
                 outside("o1", "repost", "raised_level"), fate_spend("s1", "repost"),
                 rolled("r3", "m2", test=ORIGINAL), outside("o2", "m2", "fate_card", card_message_id="card2"),
                 fate_spend("s2", "m2")]
        for message in steps:
            await session.receive(frame(message), ScriptedDice([34]))
        await store.close()

    async def test_fated_outside_is_recorded_and_the_trail_re_derives(self, db):
        await self.play(db)
        records = [json.loads(row[1]) for row in rows(db)]
        assert [(r["type"], r["summary"]["outcome"]) for r in records] == [
            ("test_rolled", "graded"), ("test_rolled", "graded"), ("fated_outside", "fated_outside"),
            ("fate_spend", "already_fated"), ("test_rolled", "graded"), ("fated_outside", "fated_outside"),
            ("fate_spend", "already_fated")]
        assert [records[i]["summary"]["detail"] for i in (2, 5)] == ["raised_level", "fate_card"]
        report = await verify(db)
        assert report.ok, report.problems

    def test_audit_verify_passes_on_it(self, db, tmp_path, capsys):
        asyncio.run(self.play(db))
        key_file = tmp_path / "audit.key"
        key_file.write_text(KEY.hex())
        assert main(["audit", "verify", "--db", str(db), "--audit-key", str(key_file)]) == 0
        assert "PASS w: 7 records" in capsys.readouterr().out


@pytest.fixture
def db(tmp_path):
    return tmp_path / "audit.sqlite3"
