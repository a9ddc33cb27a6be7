"""mythic decisions through a Session on an in-memory store (the path ``resolve`` runs), the
example session through the CLI, and the audit trail of Fate Chart decisions.

Each class pins the rulings (DECISIONS.md M1-M7) as the wire shows them; refusals leave the world
untouched and roll no die.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bridge.dice import ScriptedDice
from bridge.session import Session
from bridge.store import AuditFilter

from .helpers import replay, run_bridge, send
from .mythic_messages import (ACTOR_ID, GM, PLAYER, catalog_query, chart_settings, named, odds_question,
                              question)
from .sohl_messages import frame

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "mythic-session.jsonl"


async def answered(session: Session, message: dict, die: int) -> dict:
    reply = await send(session, message, [die])
    assert reply["type"] == "chart_answered", reply
    return reply


class TestM1ToM5OnTheWire:
    """chart_question: ranks as written, shifts, the d100 and the answer."""

    async def test_high_against_average_plus_one_to_dr(self, session):
        reply = await answered(session, question(difficulty_shift=1, question="Is the door locked?"), 37)
        assert (reply["acting_asked"], reply["difficulty_asked"]) == ("High", "Average")
        assert (reply["acting_rank"], reply["difficulty_rank"]) == ("High", "Above Average")
        assert reply["shifts"] == [{"label": "Free shift", "target": "difficulty", "shift": 1}]
        assert (reply["chance"], reply["exceptional_yes"], reply["exceptional_no"]) == (55, 11, 92)
        assert (reply["roll"], reply["answer"], reply["outcome"]) == (37, "yes", None)
        assert (reply["question"], reply["named"], reply["odds"], reply["visibility"]) == (
            "Is the door locked?", None, None, "public")

    @pytest.mark.parametrize(("die", "answer"), [(10, "exceptional_yes"), (11, "yes"), (50, "yes"),
                                                 (51, "no"), (90, "no"), (91, "exceptional_no")])
    async def test_average_against_average_on_each_boundary(self, session, die, answer):
        reply = await answered(session, question(acting="avg", difficulty="AVERAGE"), die)
        assert (reply["chance"], reply["answer"]) == (50, answer)

    async def test_ranks_beyond_the_chart_by_name_and_by_shift(self, session):
        """M3/M4: Superhuman 3+ shifted +1 is Superhuman 4+; against High: 95 + 40 = 135, no
        exceptional no."""
        reply = await answered(session, question(acting="superhuman 3+", difficulty="high", acting_shift=1), 100)
        assert (reply["acting_rank"], reply["chance"], reply["exceptional_yes"], reply["exceptional_no"]) == (
            "Superhuman 4+", 135, 27, None)
        assert reply["answer"] == "yes"
        assert "exceptional no none" in reply["card"]["html"]

    async def test_difficulty_shifted_below_the_chart(self, session):
        reply = await answered(session, question(acting="m2+", difficulty="min", difficulty_shift=-3), 1)
        assert (reply["difficulty_rank"], reply["chance"]) == ("Miniscule 4+", 90)

    async def test_card_shows_question_ranks_thresholds_roll_and_answer_escaped(self, session):
        reply = await answered(session, question(question="<img src=x onerror=alert(1)>?", difficulty_shift=1,
                                                 actor_id=ACTOR_ID, actor_name="Brakka", user_name="Player One"), 37)
        card = reply["card"]
        assert (card["ruleset"], card["speaker_actor_id"], card["speaker_alias"]) == ("mythic", ACTOR_ID, "Brakka")
        assert card["title"] == "<img src=x onerror=alert(1)>?"
        html = card["html"]
        assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;?" in html
        for text in ("Average +1RS &rarr; Above Average", "55%", "exceptional yes &le; 11",
                     "exceptional no &ge; 92", "37 &rarr;", ">Yes</strong>", "Asked by Player One"):
            assert text in html


class TestM6OddsOnTheWire:
    """chart_odds_question: off until a GM turns it on; odds and the world's Chaos Factor."""

    async def test_off_by_default_and_refused_without_a_die(self, session):
        reply = await send(session, odds_question("likely"), dice=[50])
        assert (reply["code"], reply["field"], reply["ref"]) == ("not_eligible", "odds", "ev-odds")

    async def test_likely_at_the_default_chaos_factor_5(self, session):
        await send(session, chart_settings(odds_questions=True))
        reply = await answered(session, odds_question("Likely", question="Is the door locked?"), 16)
        assert (reply["odds"], reply["chaos_factor"], reply["acting_rank"], reply["difficulty_rank"]) == (
            "Likely", 5, "High", "Average")
        assert (reply["chance"], reply["exceptional_yes"], reply["answer"], reply["shifts"]) == (75, 15, "yes", [])
        assert "Likely, Chaos Factor 5" in reply["card"]["html"]

    async def test_the_worlds_chaos_factor_is_the_difficulty_rank(self, session):
        await send(session, chart_settings(odds_questions=True, chaos_factor=9))
        reply = await answered(session, odds_question("has to be"), 29)
        assert (reply["difficulty_rank"], reply["chance"], reply["answer"]) == ("Miniscule", 145, "exceptional_yes")

    async def test_unknown_odds(self, session):
        await send(session, chart_settings(odds_questions=True))
        reply = await send(session, odds_question("probably"), dice=[50])
        assert (reply["code"], reply["field"]) == ("bad_message", "odds")


class TestM7NamedOnTheWire:
    """Named questions: their shifts, modifiers and outcome text."""

    async def test_act_next_exceptional_yes_gives_its_outcome_text(self, session):
        reply = await answered(session, named("act_next", acting="aav", difficulty="avg"), 13)
        assert (reply["named"], reply["question"], reply["chance"], reply["answer"]) == (
            "act_next", "Does the character act next?", 65, "exceptional_yes")
        assert "+1RS to the character's question to hit" in reply["outcome"]
        assert reply["outcome"] in reply["card"]["html"].replace("&#39;", "'")

    async def test_strength_takes_the_attribute_one_rank_lower(self, session):
        reply = await answered(session, named("strength_weakness", acting="Average", difficulty="High"), 99)
        assert reply["shifts"] == [{"label": "Built into the question", "target": "acting", "shift": -1}]
        assert (reply["acting_rank"], reply["chance"], reply["answer"]) == ("Below Average", 15, "exceptional_no")

    async def test_modifiers_with_times_and_free_shifts_add_up(self, session):
        reply = await answered(session, named("increase_ability", acting="exc", difficulty="weak", difficulty_shift=-1,
                                              modifiers=[{"key": "very_complex"}, {"key": "extra_items", "times": 2}],
                                              question="Does Brakka learn surgery?"), 17)
        assert [(s["label"], s["shift"]) for s in reply["shifts"]] == [
            ("A very complex ability, such as surgery", 2),
            ("Training: each further item trained at the same time (x2)", 2),
            ("Free shift", -1),
        ]
        assert (reply["difficulty_rank"], reply["chance"], reply["answer"]) == ("Average", 85, "exceptional_yes")
        assert "Does the ability increase by 1RS (or is a new one gained)?" in reply["card"]["html"]

    async def test_every_named_question_answers_with_its_text(self, session):
        for n, key in enumerate(("act_next", "hit", "hurt", "succumb", "increase_attribute", "increase_ability",
                                 "strength_weakness", "ageing", "lack_of_use")):
            reply = await answered(session, named(key, event_id=f"ev-{n}"), 60)
            assert reply["named"] == key and reply["outcome"]


class TestRefusals:
    """Refusals carry the contract's code and the offending field, roll no die and change
    nothing."""

    @pytest.mark.parametrize(
        ("message", "code", "field", "text"),
        [
            (question(acting="godlike"), "bad_message", "acting_rank", "unknown rank 'godlike'"),
            (question(difficulty="High 2+"), "bad_message", "difficulty_rank", "only Superhuman and Miniscule"),
            (question(modifiers=[{"key": "adrenaline"}]), "bad_message", "modifiers", "belong to a named question"),
            (named("hit", modifiers=[{"key": "unused"}]), "bad_message", "modifiers[0].key", "'hit' has no modifier"),
            (named("hurt", modifiers=[{"key": "weak_spot", "times": 3}]), "bad_message", "modifiers[0].times",
             "1..2 times"),
            (named("act_next", modifiers=[{"key": "adrenaline"}, {"key": "adrenaline"}]), "bad_message",
             "modifiers[1].key", "taken twice"),
            (named("parry"), "bad_message", "named", "Invalid enum value 'parry'"),
            (named("hit", modifiers=[{"key": "luck"}]), "bad_message", "modifiers[0].key", "Invalid enum value"),
            (question(acting_shift=27), "bad_message", "acting_shift", "Expected `int` <= 26"),
            (question(extra=1), "bad_message", "extra", "unknown field"),
        ],
    )
    async def test_bad_questions(self, session, message, code, field, text):
        dice = ScriptedDice([50])
        reply = json.loads((await session.receive(frame(message), dice)).frames[0])
        assert (reply["code"], reply["field"]) == (code, field)
        assert text in reply["message"]
        assert dice.used == 0

    async def test_no_die_left_is_refused_naming_dice(self, session):
        reply = await send(session, question(), dice=[])
        assert (reply["code"], reply["field"]) == ("bad_message", "dice")

    async def test_only_a_gm_changes_the_settings_and_a_refusal_changes_nothing(self, session):
        reply = await send(session, chart_settings(user_id=PLAYER, user_is_gm=False, odds_questions=True))
        assert (reply["code"], reply["field"]) == ("forbidden", "user_id")
        catalog = await send(session, catalog_query())
        assert (catalog["odds_questions"], catalog["chaos_factor"]) == (False, 5)
        assert (await send(session, odds_question("likely"), dice=[50]))["code"] == "not_eligible"

    async def test_the_catalog_is_a_query_not_a_decision(self, session, store):
        """Opening the dialog writes nothing: no audit record, no stored reply, so the same
        query_id read again sees the world's current options."""
        before = await send(session, catalog_query())
        await send(session, chart_settings(odds_questions=True, chaos_factor=3))
        after = await send(session, catalog_query())
        assert (before["chaos_factor"], after["chaos_factor"]) == (5, 3)
        audited = await store.audit_rows(AuditFilter(world_id="w"))
        assert [row.type for row in audited] == ["chart_settings"]

    async def test_settings_change_only_what_is_sent(self, session):
        first = await send(session, chart_settings(odds_questions=True, chaos_factor=3))
        second = await send(session, chart_settings("ev-settings-2", chaos_factor=7))
        assert (first["type"], first["odds_questions"], first["chaos_factor"]) == ("chart_settings_applied", True, 3)
        assert (second["odds_questions"], second["chaos_factor"]) == (True, 7)

    async def test_chaos_factor_out_of_range(self, session):
        reply = await send(session, chart_settings(chaos_factor=10))
        assert (reply["code"], reply["field"]) == ("bad_message", "chaos_factor")


class TestReplayAndCatalog:
    async def test_the_same_event_id_gets_the_same_answer_and_rolls_nothing(self, session):
        first = await answered(session, question(), 37)
        dice = ScriptedDice([99])
        again = json.loads((await session.receive(frame(question()), dice)).frames[0])
        assert again == first and dice.used == 0

    async def test_catalog_lists_ranks_odds_named_questions_and_the_worlds_options(self, session):
        await send(session, chart_settings(odds_questions=True, chaos_factor=4))
        catalog = await send(session, catalog_query())
        assert catalog["ranks"][0] == "Miniscule 2+" and catalog["ranks"][-1] == "Superhuman 2+"
        assert len(catalog["ranks"]) == 13 and catalog["odds"][4] == "50/50"
        assert [q["key"] for q in catalog["questions"]][:3] == ["act_next", "hit", "hurt"]
        strength = next(q for q in catalog["questions"] if q["key"] == "strength_weakness")
        assert strength["acting_base_shift"] == -1
        assert strength["modifiers"][2] == {"key": "extra_items", "label": "Training: each further item trained at "
                                            "the same time", "target": "difficulty", "shift": 1, "max_times": 10}
        assert list(strength["outcomes"]) == ["exceptional_yes", "yes", "no", "exceptional_no"]
        assert (catalog["odds_questions"], catalog["chaos_factor"]) == (True, 4)


class TestAudit:
    """Every Fate Chart decision is in the audit trail, listed by its answer, and re-derives."""

    async def test_answers_settings_and_refusals_are_listed(self, session):
        await send(session, chart_settings(odds_questions=True))
        await answered(session, question(difficulty_shift=1, question="Is the door locked?", actor_id=ACTOR_ID,
                                         actor_name="Brakka"), 37)
        await send(session, question("ev-bad", acting="godlike"))
        page = await send(session, {"type": "audit_query", "v": 1, "query_id": "q1", "ruleset": "mythic"})
        refused, answer, settings = page["records"]
        assert (answer["type"], answer["outcome"], answer["fate_roll"], answer["test_name"]) == (
            "chart_question", "yes", 37, "Is the door locked?")
        assert (answer["actor_id"], answer["actor_name"], answer["user_id"]) == (ACTOR_ID, "Brakka", PLAYER)
        assert answer["detail"] == ("High vs Above Average: 55% (exceptional yes <= 11, exceptional no >= 92), "
                                    "roll 37: Yes")
        assert (settings["outcome"], settings["detail"], settings["user_id"]) == (
            "chart_settings", "odds questions on, Chaos Factor 5", GM)
        assert (refused["outcome"], refused["event_id"]) == ("bad_message", "ev-bad")

    async def test_verify_re_derives_every_mythic_decision(self, tmp_path):
        store = await replay(EXAMPLE, tmp_path / "audit.sqlite3", bytes(range(32)))
        (report,) = await store.verify("w", bytes(range(32)))
        await store.close()
        assert report.ok, report.problems
        assert report.records == 10


class TestExampleSession:
    """README's example, run through the CLI as a user would."""

    def test_example_session_through_resolve(self):
        result = run_bridge("resolve", "--cards", stdin=EXAMPLE.read_text())
        assert result.returncode == 0, result.stderr
        out = [json.loads(line) for line in result.stdout.splitlines()]
        assert [r["type"] for r in out] == ["chart_settings_applied"] + ["chart_answered"] * 5 + [
            "error", "chart_answered", "error", "chart_answered"]
        assert (out[0]["odds_questions"], out[0]["chaos_factor"]) == (True, 6)
        ferryman, act_next, hit, hurt, flee = out[1:6]
        assert (ferryman["difficulty_rank"], ferryman["chance"], ferryman["answer"]) == ("Above Average", 55, "yes")
        assert (act_next["chance"], act_next["answer"]) == (65, "exceptional_yes")
        assert (hit["acting_rank"], hit["chance"], hit["answer"]) == ("High", 75, "yes")
        assert hurt["outcome"].startswith("A wound")
        assert (flee["odds"], flee["chaos_factor"], flee["difficulty_rank"], flee["chance"], flee["answer"]) == (
            "Somewhat likely", 6, "Below Average", 80, "exceptional_no")
        assert flee["visibility"] == "gm"
        assert (out[6]["code"], out[6]["field"]) == ("forbidden", "user_id")
        assert (out[7]["difficulty_rank"], out[7]["chance"], out[7]["answer"]) == ("Average", 85, "exceptional_yes")
        assert (out[8]["code"], out[8]["field"]) == ("bad_message", "difficulty_rank")
        assert (out[9]["acting_rank"], out[9]["chance"], out[9]["exceptional_no"], out[9]["answer"]) == (
            "Superhuman 4+", 135, None, "yes")
        assert "Difficulty Rank: Average +1RS → Above Average" in result.stderr
        assert "Chance: 135%; exceptional yes ≤ 27, exceptional no none" in result.stderr


# --- independent review: the rulings as the wire shows them at their edges ---------------------


async def rolled(session: Session, message: dict, dice: list[int]) -> tuple[dict, int]:
    """The reply to ``message`` and how many of the scripted ``dice`` it used."""
    scripted = ScriptedDice(dice)
    reply = json.loads((await session.receive(frame(message), scripted)).frames[0])
    return reply, scripted.used


class TestReviewM5OneD100:
    """M5 (review): each question rolls exactly one d100, whatever its shifts or modifiers; the
    thresholds at the chart's ends reach the wire, card and audit as none."""

    async def test_one_die_per_question(self, session):
        reply, used = await rolled(session, named("strength_weakness", modifiers=[
            {"key": "poor_instruction"}, {"key": "extra_items", "times": 3}], acting_shift=2), [40, 1, 1])
        assert reply["type"] == "chart_answered" and (reply["roll"], used) == (40, 1)
        await send(session, chart_settings(odds_questions=True))
        reply, used = await rolled(session, odds_question("likely"), [60, 1])
        assert (reply["roll"], used) == (60, 1)

    async def test_negative_chance_roll_1_is_a_plain_no(self, session):
        """Miniscule 2+ vs Superhuman 2+: -65. Roll 1 > -65: no; exceptional no from
        101 - floor(165/5) = 68."""
        reply = await answered(session, question(acting="M2+", difficulty="S2+"), 1)
        assert (reply["chance"], reply["exceptional_yes"], reply["exceptional_no"], reply["answer"]) == (
            -65, None, 68, "no")
        assert "exceptional yes none" in reply["card"]["html"]

    async def test_exceptional_no_only_on_100_at_95(self, session):
        """S2+ vs Average +2RS to DR is S2+ vs High: 95; exceptional no from 101 - floor(5/5) = 100.
        (Every chart value and every step beyond is a multiple of 5, so p 96..99, where M5's
        formula gives the unreachable 101, never reaches the wire.)"""
        reply = await answered(session, question(acting="S2+", difficulty="avg", difficulty_shift=2), 100)
        assert (reply["difficulty_rank"], reply["chance"], reply["exceptional_no"], reply["answer"]) == (
            "High", 95, 100, "exceptional_no")

    async def test_chance_100_has_no_exceptional_no_anywhere(self, session, store):
        """Below Average vs Miniscule 2+: 100; roll 100 is a yes; the card and the audit say none."""
        reply = await answered(session, question(acting="BAv", difficulty="m2+"), 100)
        assert (reply["chance"], reply["exceptional_yes"], reply["exceptional_no"], reply["answer"]) == (
            100, 20, None, "yes")
        assert "exceptional no none" in reply["card"]["html"]
        page = await send(session, {"type": "audit_query", "v": 1, "query_id": "q1", "ruleset": "mythic"})
        assert page["records"][0]["detail"] == ("Below Average vs Miniscule 2+: 100% (exceptional yes <= 20, "
                                                "exceptional no >= none), roll 100: Yes")


class TestReviewM4ShiftsOnTheWire:
    """M4/M7 (review): built-in shift, then each modifier, then the free shifts, each listed; the
    ranks after all of them, past the ends when they go there."""

    async def test_everything_at_once(self, session):
        """Strength, Exceptional vs High: built-in -1, poor instruction -2, interrupted -1 (AR);
        three further items +3 (DR); free +1 AR, -4 DR. AR 8-1-2-1+1 = Average; DR 7+3-4 = Above
        Average: 35; roll 7 <= floor(35/5) is an exceptional yes."""
        reply = await answered(session, named(
            "strength_weakness", acting="Exceptional", difficulty="High", acting_shift=1, difficulty_shift=-4,
            modifiers=[{"key": "poor_instruction"}, {"key": "interrupted"}, {"key": "extra_items", "times": 3}]), 7)
        assert [(s["label"], s["target"], s["shift"]) for s in reply["shifts"]] == [
            ("Built into the question", "acting", -1),
            ("Training: poor instruction or resources", "acting", -2),
            ("Training: interrupted for a short time", "acting", -1),
            ("Training: each further item trained at the same time (x3)", "difficulty", 3),
            ("Free shift", "acting", 1),
            ("Free shift", "difficulty", -4),
        ]
        assert (reply["acting_asked"], reply["difficulty_asked"]) == ("Exceptional", "High")
        assert (reply["acting_rank"], reply["difficulty_rank"], reply["chance"], reply["answer"]) == (
            "Average", "Above Average", 35, "exceptional_yes")
        html = reply["card"]["html"]
        assert "Exceptional -3RS &rarr; Average" in html and "High -1RS &rarr; Above Average" in html

    async def test_shifts_that_cancel_leave_the_rank(self, session):
        reply = await answered(session, named("ageing", acting="avg", difficulty="avg", modifiers=[
            {"key": "lived_poorly"}, {"key": "lived_healthily"}]), 50)
        assert (reply["difficulty_rank"], reply["chance"], reply["answer"]) == ("Average", 50, "yes")

    async def test_both_ranks_past_opposite_ends(self, session):
        """Superhuman 2+ +2RS (S4+) vs Miniscule 2+ -1RS (M3+): 170 + 40 + 20 = 230; exceptional
        yes up to 46."""
        reply = await answered(session, question(acting="s2+", difficulty="m2+", acting_shift=2, difficulty_shift=-1),
                               47)
        assert (reply["acting_rank"], reply["difficulty_rank"], reply["chance"], reply["exceptional_yes"],
                reply["exceptional_no"], reply["answer"]) == ("Superhuman 4+", "Miniscule 3+", 230, 46, None, "yes")


class TestReviewRefusalsLeaveNothing:
    """M6/M7 and the protocol's refusals (review): a refused question rolls no die and the world's
    options stay as they were."""

    async def test_odds_turned_off_again_are_refused_without_a_die(self, session):
        await send(session, chart_settings(odds_questions=True, chaos_factor=2))
        await send(session, chart_settings("ev-settings-2", odds_questions=False))
        reply, used = await rolled(session, odds_question("likely"), [50])
        assert (reply["code"], used) == ("not_eligible", 0)
        catalog = await send(session, catalog_query())
        assert (catalog["odds_questions"], catalog["chaos_factor"]) == (False, 2)

    async def test_unknown_odds_roll_no_die(self, session):
        await send(session, chart_settings(odds_questions=True))
        reply, used = await rolled(session, odds_question("probably"), [50])
        assert (reply["code"], used) == ("bad_message", 0)

    async def test_refused_modifier_after_good_ones_rolls_nothing(self, session):
        reply, used = await rolled(session, named("increase_ability", modifiers=[
            {"key": "very_complex"}, {"key": "extra_items", "times": 2}, {"key": "very_complex"}]), [50])
        assert (reply["code"], reply["field"], used) == ("bad_message", "modifiers[2].key", 0)

    async def test_a_players_settings_change_nothing(self, session):
        await send(session, chart_settings(odds_questions=True, chaos_factor=8))
        reply = await send(session, chart_settings("ev-settings-2", user_id=PLAYER, user_is_gm=False,
                                                   odds_questions=False, chaos_factor=1))
        assert reply["code"] == "forbidden"
        answer = await answered(session, odds_question("50/50"), 50)
        assert (answer["chaos_factor"], answer["difficulty_rank"], answer["chance"]) == (8, "Weak", 85)


class TestReviewM6ChaosFactorAtTheTime:
    """M6 (review): an odds question is answered under the Chaos Factor of the moment; a later
    change does not alter an answer already given (replayed by its event_id)."""

    async def test_later_change_leaves_the_answer(self, session):
        await send(session, chart_settings(odds_questions=True, chaos_factor=1))
        first = await answered(session, odds_question("Has to be"), 81)
        assert (first["difficulty_rank"], first["chance"], first["answer"]) == ("Incredible", 80, "no")
        await send(session, chart_settings("ev-settings-2", chaos_factor=9))
        again, used = await rolled(session, odds_question("Has to be"), [1])
        assert again == first and used == 0
        fresh = await answered(session, odds_question("Has to be", event_id="ev-odds-2"), 81)
        assert (fresh["difficulty_rank"], fresh["chance"], fresh["answer"]) == ("Miniscule", 145, "yes")


# --- M8-M9 (rulings added since the ruleset was built) --------------------------------------------


class TestM8ShiftsToTheQuestionOnTheWire:
    """M8: "+N RS to the question" moves the Acting Rank N up; a weak spot takes the size the
    asker gives (``times``), +1 when none is given."""

    @pytest.mark.parametrize(("modifier", "shift", "acting", "chance"), [
        ({"key": "weak_spot"}, 1, "Exceptional", 85),
        ({"key": "weak_spot", "times": 1}, 1, "Exceptional", 85),
        ({"key": "weak_spot", "times": 2}, 2, "Incredible", 90),
    ])
    async def test_a_weak_spot_on_the_question_whether_hurt(self, session, modifier, shift, acting, chance):
        reply = await answered(session, named("hurt", acting="High", difficulty="Average", modifiers=[modifier]), 50)
        assert [(s["target"], s["shift"]) for s in reply["shifts"]] == [("acting", shift)]
        assert (reply["acting_rank"], reply["difficulty_rank"], reply["chance"]) == (acting, "Average", chance)

    async def test_a_weak_spot_of_3_is_refused(self, session):
        reply = await send(session, named("hurt", modifiers=[{"key": "weak_spot", "times": 3}]), [50])
        assert (reply["type"], reply["code"], reply["field"]) == ("error", "bad_message", "modifiers[0].times")

    async def test_got_the_drop_moves_the_attacker_toward_yes(self, session):
        """Average vs Average, got the drop: Above Average vs Average, 65: a 60 hits."""
        reply = await answered(session, named("hit", acting="Average", difficulty="Average",
                                              modifiers=[{"key": "got_the_drop"}]), 60)
        assert (reply["acting_rank"], reply["chance"], reply["answer"]) == ("Above Average", 65, "yes")


class TestM9ThresholdsAndEmptyModifiersOnTheWire:
    """M9: thresholds as M5's formulas give them, not held to 1..100; an empty modifier list is
    the same as none."""

    async def test_an_exceptional_no_below_1_is_reported(self, session):
        """Miniscule 30+ vs Superhuman 30+: -65 - 20 x 28 - 20 x 28 = -1185; exceptional no from
        101 - floor(1285 / 5) = -156."""
        reply = await answered(session, question(acting="Miniscule 30+", difficulty="Superhuman 30+"), 1)
        assert (reply["chance"], reply["exceptional_yes"], reply["exceptional_no"], reply["answer"]) == (
            -1185, None, -156, "exceptional_no")
        assert "exceptional no &ge; -156" in reply["card"]["html"]

    async def test_an_exceptional_yes_above_100_is_reported(self, session):
        """Superhuman 30+ vs Miniscule 30+: 1290; exceptional yes up to floor(1290 / 5) = 258."""
        reply = await answered(session, question(acting="Superhuman 30+", difficulty="Miniscule 30+"), 100)
        assert (reply["chance"], reply["exceptional_yes"], reply["exceptional_no"], reply["answer"]) == (
            1290, 258, None, "exceptional_yes")
        assert "exceptional yes &le; 258" in reply["card"]["html"]

    async def test_an_empty_list_is_no_modifier_without_a_named_question(self, session):
        plain = await answered(session, question("ev-1"), 37)
        empty = await answered(session, question("ev-2", modifiers=[]), 37)
        assert {**empty, "event_id": "ev-1"} == plain
        assert empty["shifts"] == [] and empty["chance"] == 75

    async def test_an_empty_list_is_no_modifier_with_a_named_question(self, session):
        message = named("hurt", event_id="ev-1")
        del message["modifiers"]
        plain = await answered(session, message, 37)
        empty = await answered(session, named("hurt", event_id="ev-2", modifiers=[]), 37)
        assert {**empty, "event_id": "ev-1"} == plain
        assert (empty["shifts"], empty["acting_rank"], empty["chance"]) == ([], "High", 75)
