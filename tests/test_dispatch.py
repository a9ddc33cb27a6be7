"""The decision core through a Session on an in-memory store (the path ``resolve`` runs).

Each class pins the rulings (DECISIONS.md S1-S12) as the wire shows them, and that a refusal
leaves charges and rows untouched.
"""

from __future__ import annotations

import asyncio

import pytest

from bridge.dice import ScriptedDice
from bridge.session import Session

from .helpers import send
from .sohl_messages import (BLADE, GM, LUCKY_STAR, PLAYER, STRANGER, actor, fate_choice, fate_spend, point,
                            rolled, sohl_test)


async def graded(session: Session, **kwargs) -> dict:
    reply = await send(session, rolled(**kwargs))
    assert reply["type"] == "test_graded", reply
    return reply


class TestGradingOnTheWire:
    """S1-S3 as test_graded reports them."""

    async def test_sample_archery_card_is_a_marginal_failure_with_fate_offered(self, session):
        reply = await graded(session)
        assert reply["level"] == 0 and reply["label"] == "MF"
        assert reply["success"] is False and reply["critical"] is False
        assert reply["fate"] == {"eligible": True, "reasons": [], "fate_ml": 77, "points": [LUCKY_STAR]}
        assert reply["mismatch"] is None

    async def test_level_mod_is_added_after_grading(self, session):
        reply = await graded(session, test=sohl_test(roll=35, level_mod=1, reported_level=None))
        assert (reply["level"], reply["label"], reply["critical"]) == (3, "CS+1", True)

    async def test_basic_test_reads_success_or_failure(self, session):
        reply = await graded(session, test=sohl_test(roll=5, basic=True))
        assert (reply["level"], reply["label"]) == (2, "Success")

    async def test_reported_level_mismatch_is_recorded_and_ours_stands(self, session):
        """S1: SoHL said CS; the roll 88 vs 55 is MF."""
        reply = await graded(session, test=sohl_test(reported_level=2))
        assert reply["level"] == 0
        assert reply["mismatch"] == {"reported": 2, "graded": 0}

    async def test_eml_is_not_clamped(self, session):
        """S1: an EML above 95 stays: roll 97 vs 110 succeeds."""
        reply = await graded(session, test=sohl_test(eml=110, roll=97, reported_level=None))
        assert reply["level"] == 1


class TestS5WithheldReasons:
    """S5 in the wire's order, with S6 basis derived from the formula."""

    async def test_all_reasons_in_order(self, session):
        await send(session, {"type": "settings", "v": 1, "fate_option": "pc_only"})
        reply = await graded(
            session,
            actor_part=actor(player_owned=False, aura=None, aural_shock=True,
                             fate_points=[point(LUCKY_STAR, "Lucky Star", None, 0)]),
            test=sohl_test(kind="skill", code="mysense", skill_base_formula="sb(attr.aur, attr.wil)"),
        )
        assert reply["fate"] == {"eligible": False, "fate_ml": None, "points": [],
                                 "reasons": ["not_pc", "no_aura", "aural_shock", "aura_governed", "no_points"]}

    async def test_fate_off_world(self, session):
        await send(session, {"type": "settings", "v": 1, "fate_option": "off"})
        assert (await graded(session))["fate"]["reasons"] == ["fate_off"]

    async def test_aura_only_adjusting_the_skill_base_is_not_governing(self, session):
        """S6: ``sb(attr.str, attr.dex) + attr.aur / 10`` is fatable."""
        reply = await graded(session, test=sohl_test(code="swrd", skill_base_formula="sb(attr.str, attr.dex) + attr.aur / 10"))
        assert reply["fate"]["eligible"] is True

    async def test_basis_is_used_when_no_formula_is_sent(self, session):
        reply = await graded(session, test=sohl_test(skill_base_formula=None, basis=["aur", "wil"]))
        assert reply["fate"]["reasons"] == ["aura_governed"]

    async def test_aura_attribute_mystical_and_fate_tests(self, session):
        aura = await graded(session, event_id="r1", message_id="m-aur", test=sohl_test(kind="attribute", code="aur", skill_base_formula=None))
        mystical = await graded(session, event_id="r2", message_id="m-mys", test=sohl_test(kind="mystical", code="sprt", skill_base_formula=None))
        fate = await graded(session, event_id="r3", message_id="m-fate", test=sohl_test(kind="fate", code="fate", skill_base_formula=None))
        assert aura["fate"]["reasons"] == ["aura_governed"]
        assert mystical["fate"]["reasons"] == ["mystical"]
        assert fate["fate"]["reasons"] == ["fate_test"]

    async def test_disabled_or_zero_aura(self, session):
        disabled = await graded(session, event_id="r1", message_id="m1", actor_part=actor(aura={"eml": 55, "disabled": True}))
        zero = await graded(session, event_id="r2", message_id="m2", actor_part=actor(aura={"eml": 0, "disabled": False}))
        assert disabled["fate"]["reasons"] == zero["fate"]["reasons"] == ["no_aura"]
        assert disabled["fate"]["fate_ml"] is None


class TestS8SuggestedPoints:
    async def test_specific_unlimited_point_first_then_general(self, session):
        """S8: on a melee test Blade of Destiny (specific, unlimited) comes before Lucky Star."""
        reply = await graded(session, test=sohl_test(code="melee", skill_base_formula="sb(attr.str, attr.dex)"))
        assert reply["fate"]["points"] == [BLADE, LUCKY_STAR]


class TestS9FateTestOutcomes:
    """S9/S10 through fate_spend with the bridge's d100 fixed."""

    @pytest.mark.parametrize(
        ("die", "fate_level", "outcome", "gain", "level_after", "label_after", "charges_after"),
        [
            (34, 1, "spent", 1, 1, "MS", 1),
            (80, -1, "lost", 0, 0, "MF", 1),
            (88, 0, "kept", 0, 0, "MF", 2),
            (78, 0, "kept", 0, 0, "MF", 2),
            (100, -1, "lost", 0, 0, "MF", 1),
            (77, 1, "spent", 1, 1, "MS", 1),
            (1, 1, "spent", 1, 1, "MS", 1),
        ],
    )
    async def test_outcome_table(self, session, die, fate_level, outcome, gain, level_after, label_after, charges_after):
        await graded(session)
        reply = await send(session, fate_spend(), dice=[die])
        assert reply["type"] == "fate_resolved"
        assert (reply["fate_roll"], reply["fate_ml"], reply["fate_level"]) == (die, 77, fate_level)
        assert (reply["outcome"], reply["gain"]) == (outcome, gain)
        assert (reply["level_before"], reply["level_after"], reply["label_after"]) == (0, level_after, label_after)
        assert reply["point"] == {"point_id": LUCKY_STAR, "name": "Lucky Star", "charges_after": charges_after}
        updates = [e for e in reply["effects"] if e["kind"] == "update_item"]
        if charges_after == 2:
            assert updates == []
        else:
            assert updates == [{"kind": "update_item", "actor_id": "d1cddnpaqRl0a0Q8", "item_id": LUCKY_STAR,
                                "path": "system.charges.value", "value": charges_after, "spend_seq": 3}]
        assert reply["effects"][-1] == {"kind": "flag_message", "message_id": "msg1", "key": "fated",
                                        "value": {"outcome": outcome, "pending": False,
                                                  "level_after": level_after, "event_id": "ev-spend"}}

    async def test_critical_success_waits_for_the_choice(self, session):
        await graded(session)
        pending = await send(session, fate_spend(), dice=[45])
        assert (pending["outcome"], pending["level_after"], pending["gain"]) == ("choice", None, None)
        assert pending["point"]["charges_after"] == 2
        assert pending["choice_by"] == [PLAYER]
        assert 'data-fate-bridge-choice="spend"' in pending["card"]["html"]

    async def test_choice_spend_gives_two_levels_and_consumes_a_charge(self, session):
        """S10: MF + 2 = CS; MS + 2 = CS+1 (uncapped)."""
        await graded(session, test=sohl_test(roll=32, reported_level=1))
        await send(session, fate_spend(), dice=[45])
        reply = await send(session, fate_choice("spend"))
        assert (reply["outcome"], reply["gain"], reply["level_after"], reply["label_after"]) == ("spent", 2, 3, "CS+1")
        assert reply["point"]["charges_after"] == 1
        assert 'data-fate-bridge-choice' not in reply["card"]["html"]

    async def test_choice_keep_gives_one_level_for_free(self, session):
        await graded(session)
        await send(session, fate_spend(), dice=[45])
        reply = await send(session, fate_choice("keep", user_id=GM, user_is_gm=True))
        assert (reply["outcome"], reply["gain"], reply["level_after"]) == ("kept", 1, 1)
        assert reply["point"]["charges_after"] == 2
        assert [e["kind"] for e in reply["effects"]] == ["flag_message"]

    async def test_choice_cannot_be_made_twice(self, session):
        await graded(session)
        await send(session, fate_spend(), dice=[45])
        await send(session, fate_choice("keep"))
        again = await send(session, fate_choice("spend", event_id="ev-choice-2"))
        assert again["code"] == "not_found"

    async def test_unlimited_point_is_never_used_up(self, session):
        await graded(session, test=sohl_test(code="melee"))
        reply = await send(session, fate_spend(point_id=BLADE), dice=[80])
        assert (reply["outcome"], reply["point"]["charges_after"]) == ("lost", None)
        assert [e["kind"] for e in reply["effects"]] == ["flag_message"]


class TestRefusalsChangeNothing:
    """Refusals answer with the contract's code and leave charges and rows as they were."""

    async def test_never_graded(self, session):
        reply = await send(session, fate_spend(message_id="nope"))
        assert (reply["code"], reply["field"], reply["ref"]) == ("not_found", "message_id", "ev-spend")

    async def test_choice_with_nothing_pending(self, session):
        await graded(session)
        assert (await send(session, fate_choice("spend")))["code"] == "not_found"

    async def test_stranger_is_forbidden_and_charges_stay(self, session):
        await graded(session)
        refused = await send(session, fate_spend(user_id=STRANGER), dice=[34])
        assert (refused["code"], refused["field"]) == ("forbidden", "user_id")
        ok = await send(session, fate_spend(event_id="ev-2"), dice=[34])
        assert ok["point"]["charges_after"] == 1  # 2 - 1: the refusal spent nothing

    async def test_withheld_fate_is_not_eligible(self, session):
        await graded(session, actor_part=actor(aural_shock=True))
        reply = await send(session, fate_spend(), dice=[34])
        assert reply["code"] == "not_eligible" and reply["message"] == "Fate is withheld: Aural Shock"  # S5 in words; codes in machine fields

    async def test_point_for_another_skill(self, session):
        await graded(session)
        reply = await send(session, fate_spend(point_id=BLADE), dice=[34])
        assert (reply["code"], reply["field"]) == ("not_eligible", "point_id")

    async def test_point_not_held(self, session):
        await graded(session)
        reply = await send(session, fate_spend(point_id="someoneelse"), dice=[34])
        assert (reply["code"], reply["field"]) == ("not_eligible", "point_id")

    async def test_empty_point(self, session):
        await graded(session, actor_part=actor(fate_points=[point(LUCKY_STAR, "Lucky Star", None, 0),
                                                            point("other", "Other", None, 1)]))
        reply = await send(session, fate_spend(), dice=[34])
        assert (reply["code"], reply["field"]) == ("no_charges", "point_id")

    async def test_refusal_is_replayed_for_its_event_id_and_a_new_event_still_works(self, session):
        await graded(session)
        first = await send(session, fate_spend(user_id=STRANGER))
        again = await send(session, fate_spend(user_id=STRANGER))
        assert first == again and first["code"] == "forbidden"
        assert (await send(session, fate_spend(event_id="ev-new"), dice=[34]))["outcome"] == "spent"


class TestS11OnceFated:
    @pytest.mark.parametrize("die", [80, 88, 34])
    async def test_any_outcome_marks_the_result_fated(self, session, die):
        await graded(session)
        await send(session, fate_spend(), dice=[die])
        again = await send(session, fate_spend(event_id="ev-again"), dice=[34])
        assert again["code"] == "already_fated"

    async def test_regrading_a_fated_result_keeps_its_level_and_says_already_fated(self, session):
        await graded(session)
        await send(session, fate_spend(), dice=[34])
        regraded = await graded(session, event_id="ev-roll-2", test=sohl_test(roll=5))
        assert regraded["level"] == 0  # the stored grading, not the new roll's
        assert regraded["fate"]["eligible"] is False and regraded["fate"]["reasons"] == ["already_fated"]
        assert regraded["event_id"] == "ev-roll-2"

    async def test_pending_choice_counts_as_fated(self, session):
        await graded(session)
        await send(session, fate_spend(), dice=[45])
        assert (await send(session, fate_spend(event_id="ev-x"), dice=[34]))["code"] == "already_fated"


class TestChargesTheModuleHasNotApplied:
    """Two spends racing for one last charge: the bridge counts its own spends since the snapshot."""

    async def test_last_charge_spent_once(self, session):
        one_left = actor(fate_points=[point(LUCKY_STAR, "Lucky Star", None, 1)])
        await graded(session, event_id="r1", message_id="m1", actor_part=one_left)
        await graded(session, event_id="r2", message_id="m2", actor_part=one_left)
        first = await send(session, fate_spend(event_id="s1", message_id="m1"), dice=[34])
        second = await send(session, fate_spend(event_id="s2", message_id="m2"), dice=[34])
        assert first["point"]["charges_after"] == 0
        assert second["code"] == "no_charges"

    async def test_two_sessions_racing_on_one_store(self, session):
        """Two connections (one per bridge process, later) decide concurrently: the store's
        one transaction per decision lets exactly one take the last charge."""
        other = Session(session.store, ScriptedDice([]), trusted=True, default_world="w")
        one_left = actor(fate_points=[point(LUCKY_STAR, "Lucky Star", None, 1)])
        await graded(session, event_id="r1", message_id="m1", actor_part=one_left)
        await graded(other, event_id="r2", message_id="m2", actor_part=one_left)
        replies = await asyncio.gather(
            send(session, fate_spend(event_id="s1", message_id="m1"), dice=[34]),
            send(other, fate_spend(event_id="s2", message_id="m2"), dice=[34]),
        )
        assert sorted(r["type"] for r in replies) == ["error", "fate_resolved"]
        assert [r["code"] for r in replies if r["type"] == "error"] == ["no_charges"]

    async def test_a_snapshot_taken_before_the_module_applied_the_spend(self, session):
        """Newcomer review: the spend of m1 is not on the item yet (no spend_seq flag, charges
        still 1) when m2's snapshot is taken: the bridge still counts that charge as spent."""
        one_left = actor(fate_points=[point(LUCKY_STAR, "Lucky Star", None, 1)])
        await graded(session, event_id="r1", message_id="m1", actor_part=one_left)
        spent = await send(session, fate_spend(event_id="s1", message_id="m1"), dice=[34])
        (update,) = [e for e in spent["effects"] if e["kind"] == "update_item"]
        stale = await graded(session, event_id="r2", message_id="m2", actor_part=one_left)
        assert stale["fate"]["reasons"] == ["no_points"]
        refused = await send(session, fate_spend(event_id="s2", message_id="m2"), dice=[34])
        assert refused["code"] == "no_charges"
        # once the module applied it (charges 0, spend_seq set), a GM refill to 2 counts in full
        applied = actor(fate_points=[{**point(LUCKY_STAR, "Lucky Star", None, 2), "spend_seq": update["spend_seq"]}])
        await graded(session, event_id="r3", message_id="m3", actor_part=applied)
        again = await send(session, fate_spend(event_id="s3", message_id="m3"), dice=[34])
        assert again["point"]["charges_after"] == 1

    async def test_a_fresh_snapshot_after_the_spend_is_taken_as_is(self, session):
        """The module applied the update (charges 1) and the GM refilled later: snapshots win."""
        await graded(session, event_id="r1", message_id="m1")
        spent = await send(session, fate_spend(event_id="s1", message_id="m1"), dice=[34])
        (update,) = [e for e in spent["effects"] if e["kind"] == "update_item"]
        refilled = actor(fate_points=[{**point(LUCKY_STAR, "Lucky Star", None, 3), "spend_seq": update["spend_seq"]}])
        reply = await graded(session, event_id="r2", message_id="m2", actor_part=refilled)
        assert reply["fate"]["points"] == [LUCKY_STAR]
        spent = await send(session, fate_spend(event_id="s2", message_id="m2"), dice=[34])
        assert spent["point"]["charges_after"] == 2

    async def test_choice_spend_on_a_point_emptied_meanwhile_is_refused(self, session):
        one_left = actor(fate_points=[point(LUCKY_STAR, "Lucky Star", None, 1)])
        await graded(session, event_id="r1", message_id="m1", actor_part=one_left)
        await graded(session, event_id="r2", message_id="m2", actor_part=one_left)
        await send(session, fate_spend(event_id="s1", message_id="m1"), dice=[45])  # CS: pending
        await send(session, fate_spend(event_id="s2", message_id="m2"), dice=[34])  # takes the charge
        refused = await send(session, fate_choice("spend", message_id="m1"))
        assert (refused["code"], refused["field"]) == ("no_charges", "choice")
        kept = await send(session, fate_choice("keep", event_id="c2", message_id="m1"))
        assert (kept["outcome"], kept["level_after"], kept["point"]["charges_after"]) == ("kept", 1, 0)


class TestWhoMayAct:
    """Issue 4: owners and GMs spend; the spender or a GM answers a CS."""

    async def test_gm_may_spend_for_an_actor_listing_no_gm_owner(self, session):
        await graded(session, actor_part=actor(owner_user_ids=[PLAYER]))
        reply = await send(session, fate_spend(user_id=GM, user_is_gm=True), dice=[34])
        assert reply["outcome"] == "spent"

    async def test_another_owner_may_not_answer_the_spenders_choice(self, session):
        await graded(session, actor_part=actor(owner_user_ids=[PLAYER, STRANGER]))
        await send(session, fate_spend(), dice=[45])
        refused = await send(session, fate_choice("spend", user_id=STRANGER))
        assert (refused["code"], refused["field"]) == ("forbidden", "user_id")
        kept = await send(session, fate_choice("keep", event_id="c2"))
        assert kept["outcome"] == "kept"

    async def test_a_player_claiming_nothing_is_not_a_gm(self, session):
        await graded(session, actor_part=actor(owner_user_ids=[PLAYER]))
        reply = await send(session, fate_spend(user_id=GM), dice=[34])
        assert reply["code"] == "forbidden"


class TestScriptedDiceErrors:
    async def test_missing_dice_is_a_bad_message_naming_dice(self, session):
        await graded(session)
        reply = await send(session, fate_spend(), dice=[])
        assert (reply["code"], reply["field"]) == ("bad_message", "dice")
        # nothing was fated: a later spend works
        assert (await send(session, fate_spend(event_id="ev-2"), dice=[34]))["outcome"] == "spent"


class TestLogLines:
    """One decision line each; rulesets without their own keys log their audit columns."""

    async def test_other_rulesets_log_their_outcome_and_detail(self, session):
        from structlog.testing import capture_logs

        question = {"type": "chart_question", "v": 1, "event_id": "q1", "acting_rank": "high",
                    "difficulty_rank": "average", "user_id": PLAYER}
        with capture_logs() as logs:
            reply = await send(session, question, dice=[10])
        (line,) = [entry for entry in logs if entry["event"] == "decision"]
        assert reply["answer"] == "exceptional_yes"
        assert (line["type"], line["ruleset"], line["outcome"]) == ("chart_question", "mythic", "exceptional_yes")
        assert line["world_id"] == "w" and line["event_id"] == "q1"


class TestOneTestManyMessages:
    """Issue 13, S11 across a test's chat messages: SoHL's GM edit reposts a test as a new
    message; ``test_of`` names the test's first message, and the test is fated once in total,
    whichever of its messages the Fate comes from."""

    async def test_a_repost_of_a_fated_test_grades_already_fated_and_its_spend_is_refused(self, session):
        await graded(session, event_id="r1", message_id="orig")
        assert (await send(session, fate_spend(event_id="s1", message_id="orig"), dice=[34]))["outcome"] == "spent"
        # the GM's edit: -20 to the EML, posted as a new message of the same test
        repost = await graded(session, event_id="r2", message_id="repost", test_of="orig",
                              test=sohl_test(eml=35, roll=88))
        assert repost["message_id"] == "repost" and repost["level"] == 0
        assert repost["fate"]["eligible"] is False and repost["fate"]["reasons"] == ["already_fated"]
        refused = await send(session, fate_spend(event_id="s2", message_id="repost", user_id=GM, user_is_gm=True),
                             dice=[34])
        assert (refused["code"], refused["field"]) == ("already_fated", "message_id")
        assert "orig" in refused["message"]
        # nothing was spent by the refusal: the next test still sees one charge taken, not two
        after = await graded(session, event_id="r3", message_id="next")  # the snapshot still shows 2
        spent = await send(session, fate_spend(event_id="s3", message_id="next"), dice=[34])
        assert after["fate"]["eligible"] is True and spent["point"]["charges_after"] == 0

    async def test_fated_from_the_repost_the_first_message_and_every_other_repost_are_fated(self, session):
        await graded(session, event_id="r1", message_id="orig")
        await graded(session, event_id="r2", message_id="early", test_of="orig")  # graded before the Fate
        await graded(session, event_id="r3", message_id="repost", test_of="orig")
        assert (await send(session, fate_spend(event_id="s1", message_id="repost"), dice=[34]))["outcome"] == "spent"
        for n, message_id in enumerate(["orig", "early"]):
            refused = await send(session, fate_spend(event_id=f"s-{message_id}", message_id=message_id), dice=[34])
            assert refused["code"] == "already_fated", message_id
            regraded = await graded(session, event_id=f"g{n}", message_id=message_id,
                                    **({} if message_id == "orig" else {"test_of": "orig"}))
            assert regraded["fate"]["reasons"] == ["already_fated"], message_id
        later = await graded(session, event_id="r4", message_id="later", test_of="orig")
        assert later["fate"]["reasons"] == ["already_fated"]
        assert (await send(session, fate_spend(event_id="s-later", message_id="later"), dice=[34]))["code"] == "already_fated"

    async def test_a_repost_graded_before_the_first_message_was_fated_is_refused_after(self, session):
        await graded(session, event_id="r1", message_id="orig")
        before = await graded(session, event_id="r2", message_id="repost", test_of="orig")
        assert before["fate"]["eligible"] is True  # not fated yet: offered
        await send(session, fate_spend(event_id="s1", message_id="orig"), dice=[80])  # CF: lost, still fated
        assert (await send(session, fate_spend(event_id="s2", message_id="repost"), dice=[34]))["code"] == "already_fated"

    async def test_a_pending_choice_on_the_repost_fates_the_test_and_is_answered_on_the_repost(self, session):
        await graded(session, event_id="r1", message_id="orig")
        await graded(session, event_id="r2", message_id="repost", test_of="orig")
        assert (await send(session, fate_spend(event_id="s1", message_id="repost"), dice=[45]))["outcome"] == "choice"
        assert (await send(session, fate_spend(event_id="s2", message_id="orig"), dice=[34]))["code"] == "already_fated"
        assert (await send(session, fate_choice("keep", event_id="c1", message_id="orig")))["code"] == "not_found"
        kept = await send(session, fate_choice("keep", event_id="c2", message_id="repost"))
        assert (kept["outcome"], kept["level_after"]) == ("kept", 1)

    async def test_without_test_of_two_messages_are_two_tests(self, session):
        """Records without ``test_of`` decide as before: each message is its own result."""
        await graded(session, event_id="r1", message_id="m1")
        await graded(session, event_id="r2", message_id="m2")
        await send(session, fate_spend(event_id="s1", message_id="m1"), dice=[34])
        assert (await send(session, fate_spend(event_id="s2", message_id="m2"), dice=[88]))["outcome"] == "kept"

    async def test_test_of_naming_the_message_itself_or_an_ungraded_message_links_nothing(self, session):
        own = await graded(session, event_id="r1", message_id="m1", test_of="m1")
        assert own["fate"]["eligible"] is True
        await graded(session, event_id="r2", message_id="m2", test_of="never-graded")
        assert (await send(session, fate_spend(event_id="s1", message_id="m1"), dice=[34]))["outcome"] == "spent"
        assert (await send(session, fate_spend(event_id="s2", message_id="m2"), dice=[88]))["outcome"] == "kept"

    async def test_an_edit_of_an_edit_resolves_to_the_first_message_however_many_stand_between(self, session):
        """S11, issue 36: three GM edits, each naming the edit before it as ``test_of`` (not the
        first message), all graded before the Fate: Fate spent on the first message fates every
        edit, so the spend on the third edit is refused naming the first message; one test, one
        Fate, one charge."""
        await graded(session, event_id="r0", message_id="orig")
        for n, (message_id, test_of) in enumerate((("edit1", "orig"), ("edit2", "edit1"), ("edit3", "edit2"))):
            edit = await graded(session, event_id=f"r{n + 1}", message_id=message_id, test_of=test_of,
                                test=sohl_test(eml=55 - 5 * n, roll=88))
            assert edit["fate"]["eligible"] is True, message_id  # not fated yet: offered
        assert (await send(session, fate_spend(event_id="s1", message_id="orig"), dice=[34]))["outcome"] == "spent"
        for message_id in ("edit3", "edit2", "edit1"):
            refused = await send(session, fate_spend(event_id=f"s-{message_id}", message_id=message_id), dice=[34])
            assert (refused["code"], refused["field"]) == ("already_fated", "message_id"), message_id
            assert "chat message orig" in refused["message"]
        regraded = await graded(session, event_id="g3", message_id="edit3", test_of="edit2")
        assert regraded["fate"]["reasons"] == ["already_fated"]
        after = await graded(session, event_id="r9", message_id="next")  # the snapshot still shows 2 charges
        spent = await send(session, fate_spend(event_id="s9", message_id="next"), dice=[34])
        assert after["fate"]["eligible"] is True and spent["point"]["charges_after"] == 0  # one taken, not two

    async def test_fated_on_the_third_edit_of_a_chain_the_whole_test_is_fated(self, session):
        """S11, issue 36: the Fate spent on the last edit of a chain of three marks the first
        message, so the first message, every edit and an edit graded after are fated."""
        await graded(session, event_id="r0", message_id="orig")
        await graded(session, event_id="r1", message_id="edit1", test_of="orig")
        await graded(session, event_id="r2", message_id="edit2", test_of="edit1")
        await graded(session, event_id="r3", message_id="edit3", test_of="edit2")
        assert (await send(session, fate_spend(event_id="s1", message_id="edit3"), dice=[34]))["outcome"] == "spent"
        for message_id in ("orig", "edit1", "edit2"):
            refused = await send(session, fate_spend(event_id=f"s-{message_id}", message_id=message_id), dice=[34])
            assert refused["code"] == "already_fated", message_id
        edit4 = await graded(session, event_id="r4", message_id="edit4", test_of="edit3")
        assert edit4["fate"]["reasons"] == ["already_fated"]
        assert (await send(session, fate_spend(event_id="s4", message_id="edit4"), dice=[34]))["code"] == "already_fated"

    async def test_a_message_stays_in_the_test_it_was_first_graded_as(self, session):
        await graded(session, event_id="r1", message_id="orig")
        await graded(session, event_id="r2", message_id="repost", test_of="orig")
        await send(session, fate_spend(event_id="s1", message_id="orig"), dice=[34])
        regraded = await graded(session, event_id="r3", message_id="repost")  # test_of left out this time
        assert regraded["fate"]["reasons"] == ["already_fated"]
