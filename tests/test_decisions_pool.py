"""pool decisions through a Session on an in-memory store (the path ``resolve`` runs): the ledger
kept by the bridge, checks, saves and d20 rerolls, each ruling P1-P13 as the wire shows it; that
refusals change nothing; the audit trail; and the README's example session through the CLI."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from bridge import core, wire
from bridge.dice import ScriptedDice
from bridge.session import Session
from bridge.store import SQLiteStore

from .helpers import run_bridge, send
from .pool_messages import (ALDRIC, BREN, GM, PLAYER, STRANGER, character, chat_roll, check, configure, gm,
                            reroll, retainer, save)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "pool-session.jsonl"
QUERIES = itertools.count()  # fresh event ids for ledger reads


async def ok(session: Session, message: dict, dice: list[int] | None = None) -> dict:
    reply = await send(session, message, dice)
    assert reply["type"] != "error", reply
    return reply


async def ledger(session: Session, character_id: str = ALDRIC) -> dict:
    """The character's ledger entry, read with a fresh query."""
    reply = await ok(session, gm("pool_ledger_query", f"query-{next(QUERIES)}", character_ids=[character_id]))
    return reply["characters"][0]


def fate(entry: dict) -> tuple[int, int, int]:
    return entry["session_fate"], entry["earned_fate"], entry["destiny"]


@pytest.fixture
async def party(session):
    """Configured world, Aldric (PC, level 3, stamina 4) and Bren (retainer), session started."""
    await ok(session, configure())
    await ok(session, character())
    await ok(session, retainer())
    await ok(session, gm("pool_session_start", "ev-start"))
    return session


class TestLedger:
    """The GM's ledger actions (P5, P8) and who may take them."""

    async def test_entering_a_character_before_any_session(self, session):
        reply = await ok(session, character())
        assert reply["action"] == "character" and reply["session_open"] is False
        entry = reply["characters"][0]
        assert (entry["level"], entry["tier"], entry["stamina"], entry["fate"]) == (3, 2, 4, 0)
        assert "Aldric" in reply["card"]["html"]

    async def test_a_player_may_not_change_the_ledger(self, session):
        await ok(session, character())
        for message in (character(event_id="x1"), gm("pool_session_start", "x2"), gm("pool_award", "x3", character_ids=[ALDRIC])):
            refused = await send(session, {**message, "user_id": PLAYER, "user_is_gm": False})
            assert (refused["code"], refused["field"]) == ("forbidden", "user_is_gm")
        assert fate(await ledger(session)) == (0, 0, 0)

    async def test_p5_session_start_gives_three_session_fate_to_player_characters_only(self, party):
        reply = await ok(party, gm("pool_session_start", "again"))
        assert [c["character_id"] for c in reply["characters"]] == [ALDRIC]
        assert fate(reply["characters"][0]) == (3, 0, 0)
        assert fate(await ledger(party, BREN)) == (0, 0, 0)

    async def test_p5_the_old_session_fate_is_gone_at_the_next_start(self, party):
        await ok(party, check(fate=1), dice=[2, 2, 2, 2, 2])  # session Fate 3 -> 2
        await ok(party, gm("pool_award", "award", character_ids=[ALDRIC], amount=2))
        reply = await ok(party, gm("pool_session_start", "next"))
        assert fate(reply["characters"][0]) == (3, 2, 0)  # 3, not 2 + 3; earned Fate kept

    async def test_p5_session_end_drops_session_fate_and_keeps_earned(self, party):
        await ok(party, gm("pool_award", "award", character_ids=[ALDRIC]))
        reply = await ok(party, gm("pool_session_end", "end"))
        assert reply["session_open"] is False
        assert fate(reply["characters"][0]) == (0, 1, 0)

    async def test_p5_a_player_character_entered_mid_session_gets_its_session_fate(self, party):
        reply = await ok(party, character("ev-cara", character_id="actorCara0000001", name="Cara"))
        assert fate(reply["characters"][0]) == (3, 0, 0)

    async def test_p8_rest_converts_only_earned_fate(self, party):
        await ok(party, gm("pool_award", "award", character_ids=[ALDRIC], amount=2))
        reply = await ok(party, gm("pool_rest", "rest"))
        assert fate(reply["characters"][0]) == (3, 0, 2)
        again = await ok(party, gm("pool_rest", "rest-2", character_ids=[ALDRIC]))
        assert fate(again["characters"][0]) == (3, 0, 2)

    async def test_p8_level_gained_resets_destiny(self, party):
        await ok(party, gm("pool_award", "award", character_ids=[ALDRIC], amount=2))
        await ok(party, gm("pool_rest", "rest"))
        reply = await ok(party, gm("pool_level_gained", "level", character_id=ALDRIC))
        entry = reply["characters"][0]
        assert (entry["level"], entry["tier"], entry["destiny"]) == (4, 2, 0)

    async def test_p8_a_level_without_destiny_is_refused_and_nothing_changes(self, party):
        refused = await send(party, gm("pool_level_gained", "level", character_id=ALDRIC))
        assert (refused["code"], refused["field"]) == ("not_eligible", "character_id")
        assert (await ledger(party))["level"] == 3

    async def test_no_level_past_tier_five(self, party):
        await ok(party, character("ev-top", level=10))
        await ok(party, gm("pool_award", "award", character_ids=[ALDRIC]))
        await ok(party, gm("pool_rest", "rest"))
        refused = await send(party, gm("pool_level_gained", "level", character_id=ALDRIC))
        assert (refused["code"], refused["field"]) == ("not_eligible", "character_id")
        assert (await ledger(party))["destiny"] == 1

    async def test_p12_awards_and_rests_refuse_retainers(self, party):
        refused = await send(party, gm("pool_award", "award", character_ids=[ALDRIC, BREN]))
        assert (refused["code"], refused["field"]) == ("not_eligible", "character_ids")
        assert fate(await ledger(party)) == (3, 0, 0)  # Aldric, listed first, got nothing either

    async def test_set_stamina_and_unknown_character(self, party):
        reply = await ok(party, gm("pool_set_stamina", "stamina", character_id=BREN, stamina=5))
        assert reply["characters"][0]["stamina"] == 5
        missing = await send(party, gm("pool_set_stamina", "stamina-2", character_id="nobody", stamina=1))
        assert (missing["code"], missing["field"]) == ("not_found", "character_id")

    async def test_retyping_a_pc_as_a_retainer_drops_its_fate(self, party):
        reply = await ok(party, character("ev-retype", kind="follower"))
        assert fate(reply["characters"][0]) == (0, 0, 0)

    async def test_a_player_queries_only_owned_characters(self, party):
        mine = await ok(party, {"type": "pool_ledger_query", "v": 1, "event_id": "q", "user_id": PLAYER})
        assert [c["character_id"] for c in mine["characters"]] == [ALDRIC, BREN]
        assert mine["card"] is None
        others = await ok(party, {"type": "pool_ledger_query", "v": 1, "event_id": "q1", "user_id": STRANGER})
        assert others["characters"] == []
        refused = await send(party, {"type": "pool_ledger_query", "v": 1, "event_id": "q2", "user_id": STRANGER,
                                     "character_ids": [ALDRIC]})
        assert (refused["code"], refused["field"]) == ("forbidden", "user_id")


class TestChecks:
    """P1-P4, P6 through pool_check with the bridge's d6s fixed."""

    async def test_pool_threshold_successes_and_pass(self, party):
        """P1/P4: +2 and Tier 2 = 4d6 on 5+; 5 and 6 succeed, the 6 explodes into a 2."""
        reply = await ok(party, check(label="Climb the wall"), dice=[5, 3, 6, 4, 2])
        assert (reply["pool_size"], reply["threshold"], reply["mode"]) == (4, 5, "normal")
        assert [d["face"] for d in reply["dice"]] == [5, 3, 6, 4, 2]
        assert [d["explosion"] for d in reply["dice"]] == [False] * 4 + [True]
        assert (reply["successes"], reply["needed"], reply["passed"]) == (2, 2, True)
        assert (reply["task_name"], reply["fate_spent"]) == ("Hard", {"from_session": 0, "from_earned": 0})
        assert reply["pass_chance"] == pytest.approx(0.47325, abs=1e-5)  # 1 - P(0) - P(1), explosions included
        assert "Climb the wall" in reply["card"]["title"]

    async def test_p1_negative_stat_rolls_tier_dice_and_needs_sixes(self, party):
        reply = await ok(party, check(stat_modifier=-1, task_tier=1), dice=[5, 6, 3])
        assert (reply["pool_size"], reply["threshold"], reply["successes"]) == (2, 6, 1)

    async def test_p3_p13_advantage_sources_do_not_stack_and_cancel(self, party):
        adv = await ok(party, check("e1", advantage_sources=3), dice=[4, 4, 3, 2])
        both = await ok(party, check("e2", advantage_sources=2, disadvantage_sources=1), dice=[4, 4, 3, 2])
        neg = await ok(party, check("e3", stat_modifier=-2, advantage_sources=1), dice=[5, 4])
        assert (adv["mode"], adv["successes"]) == ("advantage", 2)
        assert (both["mode"], both["successes"]) == ("normal", 0)
        assert (neg["threshold"], neg["successes"]) == (5, 1)

    async def test_p4_a_rule_may_give_its_own_number(self, party):
        reply = await ok(party, check(task_tier=1, successes_needed=3), dice=[5, 5, 2, 2])
        assert (reply["needed"], reply["passed"]) == (3, False)

    async def test_p6_bought_dice_join_the_pool_and_spend_session_fate(self, party):
        reply = await ok(party, check(fate=2), dice=[2, 2, 2, 2, 2, 2])
        assert (reply["pool_size"], reply["bought"]) == (6, 2)
        assert reply["fate_spent"] == {"from_session": 2, "from_earned": 0}
        assert fate(reply["character"]) == (1, 0, 0)

    async def test_p5_session_fate_is_spent_before_earned(self, party):
        await ok(party, gm("pool_award", "award", character_ids=[ALDRIC], amount=2))
        reply = await ok(party, check(fate=4), dice=[2] * 8)
        assert reply["fate_spent"] == {"from_session": 3, "from_earned": 1}
        assert fate(reply["character"]) == (0, 1, 0)

    async def test_p6_more_fate_than_held_is_refused_and_nothing_changes(self, party):
        refused = await send(party, check(fate=4), dice=[2] * 8)
        assert (refused["code"], refused["field"]) == ("no_charges", "fate")
        assert fate(await ledger(party)) == (3, 0, 0)

    async def test_p8_destiny_cannot_be_spent(self, party):
        await ok(party, gm("pool_award", "award", character_ids=[ALDRIC], amount=2))
        await ok(party, gm("pool_rest", "rest"))
        await ok(party, gm("pool_session_end", "end"))
        refused = await send(party, check(fate=1), dice=[2] * 5)
        assert refused["code"] == "no_charges" and "Destiny is not Fate" in refused["message"]
        assert fate(await ledger(party)) == (0, 0, 2)

    async def test_stat_score_is_looked_up_in_the_world_table(self, party):
        """P11: score 14 -> +2 in this world's table."""
        reply = await ok(party, check(stat_modifier=None, stat_score=14), dice=[2, 2, 2, 2])
        assert (reply["stat_modifier"], reply["pool_size"]) == (2, 4)

    async def test_stat_given_twice_or_not_at_all(self, party):
        for fields in ({"stat_score": 14}, {"stat_modifier": None}):
            refused = await send(party, check(f"e-{len(fields)}-{list(fields)[0]}", **fields))
            assert (refused["code"], refused["field"]) == ("bad_message", "stat_modifier")

    async def test_other_users_may_not_roll_for_the_character(self, party):
        refused = await send(party, check(user_id=STRANGER), dice=[2] * 4)
        assert (refused["code"], refused["field"]) == ("forbidden", "user_id")
        assert (await ok(party, check("gm-roll", user_id=GM, user_is_gm=True), dice=[2] * 4))["successes"] == 0

    async def test_missing_dice_is_a_bad_message_and_spends_nothing(self, party):
        refused = await send(party, check(fate=1), dice=[5])
        assert (refused["code"], refused["field"]) == ("bad_message", "dice")
        assert fate(await ledger(party)) == (3, 0, 0)


class TestOnes:
    """P2, P10, P12: what 1s cost and pay, on the ledger."""

    async def test_p2_a_one_on_an_exploded_die_costs_stamina_and_pays_fate(self, party):
        reply = await ok(party, check(), dice=[6, 3, 2, 2, 1])
        assert reply["dice"][-1] == {"face": 1, "explosion": True, "success": False, "paid": True}
        assert (reply["stamina_lost"], reply["fate_gained"]) == (1, 1)
        assert (reply["character"]["stamina"], fate(reply["character"])) == (3, (3, 1, 0))

    async def test_p2_ones_with_no_stamina_cost_nothing_and_pay_nothing(self, party):
        await ok(party, gm("pool_set_stamina", "tired", character_id=ALDRIC, stamina=1))
        reply = await ok(party, check(), dice=[1, 1, 1, 5])
        assert [d["paid"] for d in reply["dice"]] == [True, False, False, None]
        assert (reply["stamina_lost"], reply["fate_gained"]) == (1, 1)
        assert (reply["character"]["stamina"], reply["character"]["earned_fate"]) == (0, 1)

    async def test_p10_narrative_consequences_pay_fate_without_stamina(self, party):
        await ok(party, configure("narrative", narrative_consequences=True))
        await ok(party, gm("pool_set_stamina", "tired", character_id=ALDRIC, stamina=0))
        reply = await ok(party, check(), dice=[1, 1, 3, 5])
        assert (reply["stamina_lost"], reply["fate_gained"], reply["character"]["earned_fate"]) == (0, 2, 2)
        assert "narrative consequences" in reply["card"]["html"]

    async def test_p12_a_retainers_ones_cost_stamina_and_pay_nothing(self, party):
        await ok(party, configure("narrative", narrative_consequences=True))
        reply = await ok(party, check(character_id=BREN, stat_modifier=1), dice=[1, 1])
        assert (reply["stamina_lost"], reply["fate_gained"]) == (2, 0)
        assert (reply["character"]["stamina"], fate(reply["character"])) == (0, (0, 0, 0))

    async def test_p12_a_retainer_cannot_buy_dice(self, party):
        refused = await send(party, check(character_id=BREN, fate=1), dice=[2] * 3)
        assert (refused["code"], refused["field"]) == ("not_eligible", "fate")


class TestSaves:
    """P9 with the world's tables (P11): d20s, then the stat die, then the Fate die."""

    async def test_save_total_against_the_dc(self, party):
        """Heart 14 -> d6, Fate 12 -> d4, Tier 2: 9 + 4 + 1 + 2 = 16 vs 14."""
        reply = await ok(party, save(), dice=[9, 4, 1])
        assert (reply["d20s"], reply["kept"], reply["stat_die"], reply["fate_die"]) == ([9], 9, [6, 4], [4, 1])
        assert (reply["total"], reply["dc"], reply["passed"], reply["roll_id"]) == (16, 14, True, "ev-save")

    async def test_a_total_equal_to_the_dc_passes(self, party):
        reply = await ok(party, save(bonus=-2), dice=[9, 4, 1])
        assert (reply["total"], reply["passed"]) == (14, True)

    async def test_a_fate_save_rolls_the_fate_die_once(self, party):
        reply = await ok(party, save(save="fate", stat_score=None, fate_score=16), dice=[10, 7])
        assert (reply["stat_die"], reply["fate_die"], reply["total"]) == ([8, 7], None, 19)

    async def test_negative_stat_die_and_disadvantage(self, party):
        """Body 9 -> -d4; disadvantage keeps the lower d20."""
        reply = await ok(party, save(save="body", stat_score=9, disadvantage_sources=1), dice=[17, 5, 3, 2])
        assert (reply["mode"], reply["kept"], reply["stat_die"], reply["total"]) == ("disadvantage", 5, [-4, -3], 6)

    async def test_dc_from_effect_tier(self, party):
        reply = await ok(party, save(dc=None, effect_tier=5), dice=[20, 1, 1])
        assert (reply["dc"], reply["passed"]) == (18, True)

    async def test_no_dc_table_is_not_invented(self, session):
        await ok(session, configure(dc_by_effect_tier=None))
        await ok(session, character())
        refused = await send(session, save(dc=None, effect_tier=2), dice=[10, 1, 1])
        assert (refused["code"], refused["field"]) == ("not_found", "effect_tier")

    async def test_dc_and_effect_tier_together(self, party):
        refused = await send(party, save(effect_tier=2), dice=[10, 1, 1])
        assert (refused["code"], refused["field"]) == ("bad_message", "dc")

    async def test_a_score_outside_the_table(self, party):
        refused = await send(party, save(stat_score=2), dice=[10, 1, 1])
        assert (refused["code"], refused["field"]) == ("not_found", "stat_score")

    async def test_the_card_offers_a_reroll_only_to_player_characters(self, party):
        pc = await ok(party, save(), dice=[9, 4, 1])
        bren = await ok(party, save("ev-save-bren", character_id=BREN, user_id=GM, user_is_gm=True), dice=[9, 4, 1])
        assert 'data-fate-bridge-pool-reroll="ev-save"' in pc["card"]["html"]
        assert "data-fate-bridge-pool-reroll" not in bren["card"]["html"]


class TestRerolls:
    """P7: 1 Fate rerolls the d20(s), session Fate first; repeatable; PCs only."""

    async def test_reroll_a_chat_attack(self, party):
        reply = await ok(party, reroll(roll=chat_roll(d20s=[12], total=17)), dice=[3])
        assert (reply["d20s_before"], reply["d20s"], reply["total_before"], reply["total"]) == ([12], [3], 17, 8)
        assert (reply["kind"], reply["passed"], reply["rerolls"]) == ("attack", None, 1)
        assert reply["fate_spent"] == {"from_session": 1, "from_earned": 0}
        assert fate(reply["character"]) == (2, 0, 0)

    async def test_at_advantage_two_new_d20s_and_the_higher_is_kept(self, party):
        snapshot = chat_roll(kind="ability_test", mode="advantage", d20s=[3, 12], total=17)
        reply = await ok(party, reroll(roll=snapshot), dice=[4, 18])
        assert (reply["kept_before"], reply["d20s"], reply["kept"], reply["total"]) == (12, [4, 18], 18, 23)

    async def test_the_new_roll_stands_and_may_be_rerolled_again(self, party):
        await ok(party, gm("pool_award", "award", character_ids=[ALDRIC]))
        snapshot = chat_roll(kind="save", mode="disadvantage", d20s=[15, 6], total=10, dc=12)
        first = await ok(party, reroll(roll=snapshot), dice=[19, 8])
        second = await ok(party, reroll("ev-reroll-2"), dice=[16, 14])  # no snapshot: the standing roll
        assert (first["kept"], first["total"], first["passed"]) == (8, 12, True)
        assert (second["kept_before"], second["kept"], second["total"], second["passed"]) == (8, 14, 18, True)
        assert second["rerolls"] == 2
        stale = await ok(party, reroll("ev-reroll-3", roll=snapshot), dice=[1, 2])  # old snapshot ignored
        assert (stale["d20s_before"], stale["total_before"], stale["total"]) == ([16, 14], 18, 5)
        assert fate(stale["character"]) == (0, 1, 0)  # three rerolls: session Fate first

    async def test_a_bridge_save_is_rerolled_keeping_its_dice(self, party):
        await ok(party, save(), dice=[3, 4, 1])  # 3 + 4 + 1 + 2 = 10 vs 14
        reply = await ok(party, reroll(roll_id="ev-save"), dice=[11])
        assert (reply["total_before"], reply["total"], reply["dc"], reply["passed"]) == (10, 18, 14, True)

    async def test_a_retainer_is_refused(self, party):
        refused = await send(party, reroll(roll=chat_roll(character_id=BREN), user_id=GM, user_is_gm=True), dice=[5])
        assert (refused["code"], refused["field"]) == ("not_eligible", "roll_id")

    async def test_no_fate_left_is_refused(self, party):
        await ok(party, gm("pool_session_end", "end"))
        refused = await send(party, reroll(roll=chat_roll()), dice=[5])
        assert (refused["code"], refused["field"]) == ("no_charges", "roll_id")

    async def test_refusals_leave_the_roll_and_the_ledger_as_they_were(self, party):
        stranger = await send(party, reroll(roll=chat_roll(), user_id=STRANGER), dice=[5])
        assert (stranger["code"], stranger["field"]) == ("forbidden", "user_id")
        missing = await send(party, reroll("ev-2"), dice=[5])  # the refused snapshot was not kept
        assert (missing["code"], missing["field"]) == ("not_found", "roll_id")
        assert fate(await ledger(party)) == (3, 0, 0)

    async def test_a_snapshot_whose_d20s_do_not_fit_its_mode(self, party):
        refused = await send(party, reroll(roll=chat_roll(mode="advantage", d20s=[7])), dice=[5, 5])
        assert (refused["code"], refused["field"]) == ("bad_message", "roll.d20s")

    async def test_a_roll_by_someone_not_in_the_ledger(self, party):
        refused = await send(party, reroll(roll=chat_roll(character_id="nobody")), dice=[5])
        assert (refused["code"], refused["field"]) == ("not_found", "roll.character_id")


async def overlay_card(session: Session, message: dict, dice: list[int]) -> dict | None:
    """The ``overlay_card`` a decision sends the world's viewers (None: nothing)."""
    reply = await session.receive(json.dumps(message).encode(), ScriptedDice(dice))
    assert json.loads(reply.frames[0])["type"] != "error"
    return None if reply.overlay_card is None else json.loads(reply.overlay_card)


class TestPublicResultsReachTheOverlay:
    """Every public Fate result reaches the stream overlay, pool's too: the request's
    ``visibility`` (the roll mode of the ChatMessage showing it) decides, as for every ruleset;
    absent, the result is not public (the safe side: the bridge cannot tell who saw it)."""

    @pytest.mark.parametrize("message, dice", [
        (check(visibility="public"), [5, 3, 6, 4, 2]),
        (save(visibility="public"), [3, 4, 1]),
        (reroll(roll=chat_roll(), visibility="public"), [3]),
    ], ids=["check", "save", "reroll"])
    async def test_a_public_roll_shows_its_card(self, party, message, dice):
        shown = await overlay_card(party, message, dice)
        assert shown is not None and (shown["type"], shown["ruleset"]) == ("overlay_card", "pool")
        assert shown["card"]["ruleset"] == "pool" and shown["key"] == message["event_id"]

    @pytest.mark.parametrize("visibility", ["gm", "blind", "self", None])
    async def test_a_private_or_unsaid_roll_shows_nothing(self, party, visibility):
        extra = {} if visibility is None else {"visibility": visibility}
        assert await overlay_card(party, check(**extra), [5, 3, 6, 4, 2]) is None
        assert await overlay_card(party, reroll(roll=chat_roll(), **extra), [3]) is None

    async def test_an_unknown_visibility_is_refused_on_its_field(self, party):
        reply = await send(party, check(visibility="whisper"))
        assert (reply["type"], reply["code"], reply["field"]) == ("error", "bad_message", "visibility")


class TestConfiguration:
    """P11: the world's tables are validated, and only a GM sets them."""

    async def test_a_falling_stat_table_is_refused(self, session):
        rows = [{"min_score": 10, "die": 6, "modifier": 1}, {"min_score": 12, "die": 4, "modifier": 1}]
        refused = await send(session, configure(stat_table=rows))
        assert (refused["code"], refused["field"]) == ("bad_message", "config.stat_table")

    async def test_a_falling_dc_table_is_refused(self, session):
        refused = await send(session, configure(dc_by_effect_tier=[10, 14, 12, 16, 18]))
        assert (refused["code"], refused["field"]) == ("bad_message", "config.dc_by_effect_tier")

    async def test_wrong_length_is_refused_by_the_wire(self, session):
        refused = await send(session, configure(task_tier_names=["Hard"]))
        assert (refused["code"], refused["field"]) == ("bad_message", "config.task_tier_names")

    async def test_without_names_the_card_shows_only_the_number(self, session):
        await ok(session, configure(task_tier_names=None))
        await ok(session, character())
        reply = await ok(session, check(task_tier=3), dice=[2, 2, 2, 2])
        assert reply["task_name"] is None and "(task tier 3)" in reply["card"]["html"]

    async def test_only_a_gm_configures(self, session):
        refused = await send(session, {**configure(), "user_is_gm": False})
        assert refused["code"] == "forbidden"


class TestCardsEscape:
    async def test_names_and_labels_are_escaped(self, session):
        await ok(session, configure())
        await ok(session, character(name="<img src=x onerror=alert(1)>"))
        reply = await ok(session, check(label="<b>x</b>", user_name="<script>"), dice=[2, 2, 2, 2])
        html = reply["card"]["html"]
        assert "<img" not in html and "<b>" not in html and "<script>" not in html
        assert "&lt;img src=x onerror=alert(1)&gt;" in html


class TestAudit:
    """Every reply has audit columns, and every recorded decision re-derives from its inputs."""

    async def test_trail_columns_and_verify(self, tmp_path):
        db = tmp_path / "pool.sqlite3"
        key = bytes(range(32))
        store = await SQLiteStore.open(db, audit_key=key)
        await store.add_world("w", None)
        session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
        for line in EXAMPLE.read_text().splitlines():
            message = json.loads(line)
            dice = message.pop("dice", None)
            await send(session, message, dice)
        page = await store.audit_page("w", wire.AuditQuery(query_id="q", ruleset="pool", limit=200))
        outcomes = [r.outcome for r in reversed(page.records)]
        assert outcomes[:4] == ["configured", "character", "character", "session_start"]
        assert {"passed", "failed", "rerolled", "no_charges", "not_eligible", "rest", "level_gained"} <= set(outcomes)
        rerolled = next(r for r in page.records if r.outcome == "rerolled")
        assert (rerolled.actor_name, rerolled.point_name) == ("Aldric", "session Fate")
        (report,) = await store.verify("w", key)
        assert report.ok, report.problems
        await store.close()

    def test_every_pool_message_has_a_handler_and_summarizer(self):
        from bridge.rulesets import pool as pool_ruleset
        for cls in pool_ruleset.wire.CLIENT:
            route = core.routes()[cls]
            assert route == core.Decides(pool_ruleset.RULESET.handlers[cls], pool_ruleset.decide.refused)
            assert route.handler.__wrapped__.__module__ == "bridge.rulesets.pool.decide"
        assert pool_ruleset.RULESET.refused is pool_ruleset.decide.refused


class TestExampleSession:
    """README's example: ``fate-bridge resolve --cards < examples/pool-session.jsonl``."""

    def test_example_through_the_cli(self):
        result = run_bridge("resolve", "--cards", stdin=EXAMPLE.read_text())
        assert result.returncode == 0, result.stderr
        out = [json.loads(line) for line in result.stdout.splitlines()]
        assert [r["type"] for r in out] == [
            "pool_configured", "pool_ledger", "pool_ledger", "pool_ledger", "pool_check_rolled",
            "pool_save_rolled", "pool_rerolled", "pool_rerolled", "error", "pool_check_rolled", "pool_ledger",
            "pool_ledger", "error", "pool_ledger", "pool_ledger", "pool_ledger",
        ]
        check_, save_, reroll_1, reroll_2, retainer_refused, bren = out[4:10]
        assert (check_["pool_size"], check_["successes"], check_["passed"]) == (5, 3, True)
        assert (check_["stamina_lost"], check_["fate_gained"]) == (1, 1)
        assert fate(check_["character"]) == (2, 1, 0)
        assert (save_["total"], save_["passed"]) == (12, False)
        assert (reroll_1["kept"], reroll_1["total"], reroll_1["passed"]) == (18, 24, True)
        assert (reroll_2["d20s"], reroll_2["kept"], reroll_2["total"]) == ([4, 18], 18, 23)
        assert retainer_refused["code"] == "not_eligible"
        assert (bren["stamina_lost"], bren["fate_gained"]) == (1, 0)
        rest, end, destiny_refused, level, start = out[10], out[11], out[12], out[13], out[15]
        assert fate(rest["characters"][0]) == (0, 0, 1)
        assert fate(end["characters"][0]) == (0, 0, 1)
        assert destiny_refused["code"] == "no_charges"
        assert (level["characters"][0]["level"], level["characters"][0]["destiny"]) == (4, 0)
        assert fate(start["characters"][0]) == (3, 0, 0)
        assert "Pool: 5d6 (stat +2, Tier 2, 1 bought with Fate), normal: succeeds on 5+" in result.stderr
        assert "Reroll 1: d20 18, total 24 vs DC 14: Passed" in result.stderr


# --- independent audit: edge cases computed by hand from seed 004 and P1-P13 -------------------


class TestAuditP1NegativeStatScore:
    """P1 (with P3, P6, P11): score 9 is -1 in this world's table, so the pool is Tier dice (+
    bought) and only 6 succeeds; score 10 (+0) is not a penalty."""

    async def test_negative_score_with_a_bought_die_at_disadvantage(self, party):
        """Tier 2 + 1 bought = 3 dice on 6 only: [5, 6, 4] and the 6's extra 3: 1 success;
        the chance of at least one success is 1 - (5/6)^3."""
        reply = await ok(party, check(stat_modifier=None, stat_score=9, task_tier=1, fate=1,
                                      disadvantage_sources=1), dice=[5, 6, 4, 3])
        assert (reply["stat_modifier"], reply["pool_size"], reply["threshold"]) == (-1, 3, 6)
        assert [d["face"] for d in reply["dice"]] == [5, 6, 4, 3]
        assert (reply["successes"], reply["passed"]) == (1, True)
        assert reply["pass_chance"] == pytest.approx(1 - (5 / 6) ** 3)
        assert fate(reply["character"]) == (2, 0, 0)

    async def test_plus_zero_score(self, party):
        reply = await ok(party, check(stat_modifier=None, stat_score=10, task_tier=1), dice=[5, 2])
        assert (reply["stat_modifier"], reply["pool_size"], reply["threshold"], reply["successes"]) == (0, 2, 5, 1)

    async def test_both_sources_cancel_on_a_negative_stat(self, party):
        """P3/P13: -2 with advantage and disadvantage is a normal roll: 6 only, so 5s fail."""
        reply = await ok(party, check(stat_modifier=-2, task_tier=1, advantage_sources=1, disadvantage_sources=1),
                         dice=[5, 5])
        assert (reply["mode"], reply["pool_size"], reply["threshold"], reply["successes"]) == ("normal", 2, 6, 0)


class TestAuditP2OnesInRollOrder:
    """P2: each 1, exploded dice included, costs 1 stamina and pays 1 earned Fate while stamina
    lasts; once it is gone a 1 costs and pays nothing."""

    async def test_the_exploded_one_after_stamina_runs_out_pays_nothing(self, party):
        """Stamina 1; pool [1, 6, 2, 2] + extra 1: the pool's 1 pays, the extra's does not."""
        await ok(party, gm("pool_set_stamina", "audit-stamina", character_id=ALDRIC, stamina=1))
        reply = await ok(party, check(), dice=[1, 6, 2, 2, 1])
        assert [d["paid"] for d in reply["dice"]] == [True, None, None, None, False]
        assert [d["explosion"] for d in reply["dice"]] == [False] * 4 + [True]
        assert (reply["stamina_lost"], reply["fate_gained"], reply["successes"]) == (1, 1, 1)
        assert (reply["character"]["stamina"], fate(reply["character"])) == (0, (3, 1, 0))

    async def test_p4_a_negative_pool_reaches_tier_three_on_explosions(self, party):
        """-1, Tier 2: [6, 2], then 6, 6, 1 for the chain: three 6s pass task tier 3, and the
        last extra die's 1 costs stamina and pays Fate."""
        reply = await ok(party, check(stat_modifier=-1, task_tier=3), dice=[6, 2, 6, 6, 1])
        assert [d["face"] for d in reply["dice"]] == [6, 2, 6, 6, 1]
        assert (reply["successes"], reply["needed"], reply["passed"]) == (3, 3, True)
        assert reply["dice"][-1] == {"face": 1, "explosion": True, "success": False, "paid": True}
        assert (reply["character"]["stamina"], fate(reply["character"])) == (3, (3, 1, 0))


class TestAuditP5P6SpendBeforeTheRoll:
    """P5/P6: bought dice are paid before the roll (session Fate first, then earned); Fate paid
    by the roll's 1s comes after and cannot have paid for them."""

    async def test_earned_fate_spent_then_earned_again(self, party):
        await ok(party, gm("pool_session_end", "audit-end"))
        await ok(party, gm("pool_award", "audit-award", character_ids=[ALDRIC]))  # (0, 1, 0)
        reply = await ok(party, check(fate=1), dice=[1, 2, 2, 2, 2])
        assert reply["fate_spent"] == {"from_session": 0, "from_earned": 1}
        assert (reply["pool_size"], reply["fate_gained"]) == (5, 1)
        assert (reply["character"]["stamina"], fate(reply["character"])) == (3, (0, 1, 0))

    async def test_a_second_purchase_beyond_fate_is_refused_whole(self, party):
        """3 session Fate: buying 2 leaves 1; buying 2 more is refused and takes nothing."""
        await ok(party, check("audit-buy-1", fate=2), dice=[2] * 6)
        refused = await send(party, check("audit-buy-2", fate=2), dice=[2] * 6)
        assert (refused["code"], refused["field"]) == ("no_charges", "fate")
        assert fate(await ledger(party)) == (1, 0, 0)
        assert (await ledger(party))["stamina"] == 4

    async def test_a_retainer_entered_mid_session_gets_no_session_fate(self, party):
        """P5/P12: only player characters have Fate."""
        reply = await ok(party, retainer("audit-cora", character_id="actorCora0000001", name="Cora"))
        assert fate(reply["characters"][0]) == (0, 0, 0)


class TestAuditP7RerollRefusals:
    """P7 and the refusal rule: a refused reroll leaves the standing roll and the ledger as they
    were; the next paid reroll rerolls that roll; Destiny never pays (P8)."""

    async def test_no_fate_then_earned_fate_rerolls_the_original_save(self, party):
        """Disadvantage: [17, 5] keeps 5; 5 + d6 3 + d4 2 + Tier 2 = 12 vs 14, failed. With no
        Fate the reroll is refused; after 1 earned Fate, [19, 8] keeps 8: 12 - 5 + 8 = 15."""
        first = await ok(party, save(disadvantage_sources=1), dice=[17, 5, 3, 2])
        assert (first["kept"], first["total"], first["passed"]) == (5, 12, False)
        await ok(party, gm("pool_session_end", "audit-end"))
        refused = await send(party, reroll("audit-r1", roll_id="ev-save"), dice=[20, 20])
        assert (refused["code"], refused["field"]) == ("no_charges", "roll_id")
        await ok(party, gm("pool_award", "audit-award", character_ids=[ALDRIC]))
        reply = await ok(party, reroll("audit-r2", roll_id="ev-save"), dice=[19, 8])
        assert (reply["d20s_before"], reply["kept_before"], reply["total_before"]) == ([17, 5], 5, 12)
        assert (reply["d20s"], reply["kept"], reply["total"], reply["passed"]) == ([19, 8], 8, 15, True)
        assert reply["rerolls"] == 1 and reply["fate_spent"] == {"from_session": 0, "from_earned": 1}
        assert fate(reply["character"]) == (0, 0, 0)

    async def test_dice_running_out_mid_reroll_changes_nothing(self, party):
        """An advantage reroll needs two d20s: with one scripted it is refused, Fate untouched,
        and the next reroll still starts from the chat roll."""
        snapshot = chat_roll(mode="advantage", d20s=[3, 12], total=17)
        refused = await send(party, reroll("audit-r1", roll=snapshot), dice=[5])
        assert (refused["code"], refused["field"]) == ("bad_message", "dice")
        assert fate(await ledger(party)) == (3, 0, 0)
        reply = await ok(party, reroll("audit-r2", roll=snapshot), dice=[4, 2])
        assert (reply["d20s_before"], reply["kept"], reply["total"], reply["rerolls"]) == ([3, 12], 4, 9, 1)

    async def test_p8_destiny_alone_cannot_pay_a_reroll(self, party):
        await ok(party, gm("pool_award", "audit-award", character_ids=[ALDRIC]))
        await ok(party, gm("pool_rest", "audit-rest"))
        await ok(party, gm("pool_session_end", "audit-end"))
        refused = await send(party, reroll(roll=chat_roll()), dice=[20])
        assert refused["code"] == "no_charges"
        assert fate(await ledger(party)) == (0, 0, 1)


class TestAuditP8LevelChangesTier:
    """P8 with the seed's Tier: Destiny resets on a level; level 4 -> 5 takes Tier 2 -> 3, which
    adds a die to checks and 1 to saves."""

    async def test_level_five_is_tier_three(self, party):
        await ok(party, character("audit-level-4", level=4))
        await ok(party, gm("pool_award", "audit-award", character_ids=[ALDRIC], amount=2))
        await ok(party, gm("pool_rest", "audit-rest"))
        leveled = await ok(party, gm("pool_level_gained", "audit-level", character_id=ALDRIC))
        entry = leveled["characters"][0]
        assert (entry["level"], entry["tier"], entry["destiny"]) == (5, 3, 0)
        reply = await ok(party, check("audit-check"), dice=[2] * 5)
        assert (reply["tier"], reply["pool_size"], len(reply["dice"])) == (3, 5, 5)
        saved = await ok(party, save("audit-save"), dice=[10, 1, 1])
        assert (saved["tier"], saved["total"]) == (3, 15)


class TestAuditP9FateSave:
    """P9: on a Fate save the Fate die is rolled once; advantage and disadvantage cancel to one
    d20; advantage keeps the higher of two."""

    async def test_both_sources_roll_one_d20(self, party):
        """Fate 16 -> d8: 10 + 7 + Tier 2 = 19."""
        reply = await ok(party, save(save="fate", stat_score=None, fate_score=16, advantage_sources=2,
                                     disadvantage_sources=1), dice=[10, 7])
        assert (reply["mode"], reply["d20s"], reply["stat_die"], reply["fate_die"], reply["total"]) == (
            "normal", [10], [8, 7], None, 19)

    async def test_advantage_keeps_the_higher(self, party):
        """[4, 15] keeps 15: 15 + 7 + 2 = 24."""
        reply = await ok(party, save(save="fate", stat_score=None, fate_score=16, advantage_sources=1),
                         dice=[4, 15, 7])
        assert (reply["kept"], reply["total"]) == (15, 24)

    async def test_a_fate_score_without_a_die(self, party):
        """Fate 10 -> no die: 10 + 0 + 2 = 12 vs 12 passes; nothing more is rolled."""
        reply = await ok(party, save(save="fate", stat_score=None, fate_score=10, dc=12), dice=[10])
        assert (reply["stat_die"], reply["total"], reply["passed"]) == ([0, 0], 12, True)


class TestAuditP10P12RetainerUnderTheNarrativeOption:
    """P10/P12: the narrative option is a player character's; a retainer at 0 stamina with it
    on: its 1s cost nothing and pay nothing."""

    async def test_retainer_at_zero_stamina(self, party):
        await ok(party, configure("audit-narrative", narrative_consequences=True))
        await ok(party, gm("pool_set_stamina", "audit-stamina", character_id=BREN, stamina=0))
        reply = await ok(party, check(character_id=BREN, stat_modifier=1, task_tier=1), dice=[1, 1])
        assert [d["paid"] for d in reply["dice"]] == [False, False]
        assert (reply["stamina_lost"], reply["fate_gained"]) == (0, 0)
        assert (reply["character"]["stamina"], fate(reply["character"])) == (0, (0, 0, 0))
        assert "narrative consequences" not in reply["card"]["html"]


class TestPoolSizeBound:
    """A pool beyond pool.MAX_POOL dice is refused before any die is rolled: its exact pass chance
    would hold the writer thread for seconds (a 203-die pool took ~5 s)."""

    async def test_a_huge_pool_is_refused_naming_the_field(self, party):
        reply = await send(party, check(stat_modifier=40, task_tier=1), dice=[])
        assert (reply["code"], reply["field"]) == ("bad_message", "stat_modifier")
        assert "more than the 30" in reply["message"]


# --- P14-P16 (rulings added since the ruleset was built) ------------------------------------------


class TestP14RetainersUnderEitherOption:
    """P14: a retainer's or follower's 1 costs stamina and pays nothing under either GM option."""

    @pytest.mark.parametrize("narrative", [False, True])
    @pytest.mark.parametrize("kind", ["retainer", "follower"])
    async def test_ones_cost_stamina_and_pay_nothing(self, party, narrative, kind):
        await ok(party, configure("p14-config", narrative_consequences=narrative))
        await ok(party, retainer("p14-kind", kind=kind, stamina=3))
        reply = await ok(party, check(character_id=BREN, stat_modifier=2, task_tier=1), dice=[1, 5, 1])  # 2 + Tier 1
        assert [d["paid"] for d in reply["dice"]] == [True, None, True]
        assert (reply["stamina_lost"], reply["fate_gained"], reply["passed"]) == (2, 0, True)
        assert (reply["character"]["stamina"], fate(reply["character"])) == (1, (0, 0, 0))
        assert "narrative consequences" not in reply["card"]["html"]

    @pytest.mark.parametrize(("narrative", "stamina_lost", "stamina"), [(False, 2, 2), (True, 0, 4)])
    async def test_a_player_characters_ones_beside_them(self, party, narrative, stamina_lost, stamina):
        await ok(party, configure("p14-config", narrative_consequences=narrative))
        reply = await ok(party, check(), dice=[1, 5, 1, 2])
        assert (reply["stamina_lost"], reply["fate_gained"]) == (stamina_lost, 2)
        assert (reply["character"]["stamina"], fate(reply["character"])) == (stamina, (3, 2, 0))


class TestP15TierOnSaves:
    """P15: saves add Tier for every roller, retainers and followers included."""

    @pytest.mark.parametrize(("kind", "level", "tier", "total"), [
        ("retainer", 1, 1, 15), ("retainer", 5, 3, 17), ("follower", 10, 5, 19), ("pc", 3, 2, 16)])
    async def test_tier_is_added(self, party, kind, level, tier, total):
        """Heart 14 -> d6 (4), Fate 12 -> d4 (1), d20 9: 14 + Tier."""
        await ok(party, retainer("p15-kind", kind=kind, level=level))
        reply = await ok(party, save("p15-save", character_id=BREN, user_id=GM, user_is_gm=True), dice=[9, 4, 1])
        assert (reply["tier"], reply["total"], reply["passed"]) == (tier, total, True)
        assert reply["character"]["tier"] == tier


class TestP16LedgerMidSession:
    """P16: a player character entered during a session gets its 3 session Fate at once; an
    award to a retainer or follower is refused; a level costs at least 1 Destiny, refused at 0
    Destiny and at level 10."""

    CARA = "actorCara0000001"

    async def test_entered_mid_session_gets_three_and_can_spend_them(self, party):
        reply = await ok(party, character("p16-cara", character_id=self.CARA, name="Cara"))
        assert (reply["session_open"], fate(reply["characters"][0])) == (True, (3, 0, 0))
        spent = await ok(party, check("p16-check", character_id=self.CARA, fate=3), dice=[2] * 7)
        assert spent["fate_spent"] == {"from_session": 3, "from_earned": 0}

    async def test_entered_between_sessions_waits_for_the_next(self, party):
        await ok(party, gm("pool_session_end", "p16-end"))
        reply = await ok(party, character("p16-cara", character_id=self.CARA, name="Cara"))
        assert fate(reply["characters"][0]) == (0, 0, 0)
        reply = await ok(party, gm("pool_session_start", "p16-start"))
        assert [fate(c) for c in reply["characters"]] == [(3, 0, 0), (3, 0, 0)]

    async def test_a_retainer_entered_again_as_a_player_character_gets_three(self, party):
        """Changed behaviour (P16): Bren, a retainer, becomes a player character mid-session and
        is entered as one: 3 session Fate at once (before P16 it waited for the next session)."""
        reply = await ok(party, retainer("p16-bren-pc", kind="pc"))
        assert (reply["characters"][0]["kind"], fate(reply["characters"][0])) == ("pc", (3, 0, 0))

    async def test_a_player_character_entered_again_keeps_its_ledger(self, party):
        await ok(party, check("p16-spend", fate=2), dice=[2] * 6)
        await ok(party, gm("pool_award", "p16-award", character_ids=[ALDRIC]))
        reply = await ok(party, character("p16-again", level=4))
        assert (reply["characters"][0]["level"], fate(reply["characters"][0])) == (4, (1, 1, 0))

    @pytest.mark.parametrize("kind", ["retainer", "follower"])
    async def test_an_award_to_a_retainer_or_follower_is_refused(self, party, kind):
        await ok(party, retainer("p16-kind", kind=kind))
        refused = await send(party, gm("pool_award", "p16-award", character_ids=[BREN], amount=2))
        assert (refused["code"], refused["field"]) == ("not_eligible", "character_ids")
        assert f"is a {kind}" in refused["message"]
        assert fate(await ledger(party, BREN)) == (0, 0, 0)

    async def test_an_award_naming_a_follower_beside_a_pc_is_refused_whole(self, party):
        await ok(party, retainer("p16-kind", kind="follower"))
        refused = await send(party, gm("pool_award", "p16-award", character_ids=[ALDRIC, BREN], amount=2))
        assert (refused["code"], refused["field"]) == ("not_eligible", "character_ids")
        assert (fate(await ledger(party)), fate(await ledger(party, BREN))) == ((3, 0, 0), (0, 0, 0))

    async def test_a_level_costs_at_least_one_destiny(self, party):
        refused = await send(party, gm("pool_level_gained", "p16-level-0", character_id=ALDRIC))
        assert (refused["code"], refused["field"]) == ("not_eligible", "character_id")
        assert "at least 1 Destiny, 0 held" in refused["message"]
        await ok(party, gm("pool_award", "p16-award", character_ids=[ALDRIC], amount=3))
        await ok(party, gm("pool_rest", "p16-rest"))
        reply = await ok(party, gm("pool_level_gained", "p16-level", character_id=ALDRIC))
        entry = reply["characters"][0]
        assert (entry["level"], entry["tier"], fate(entry)) == (4, 2, (3, 0, 0))

    async def test_no_level_past_ten_even_with_destiny(self, party):
        await ok(party, character("p16-nine", level=9))
        await ok(party, gm("pool_award", "p16-award", character_ids=[ALDRIC], amount=2))
        await ok(party, gm("pool_rest", "p16-rest"))
        reply = await ok(party, gm("pool_level_gained", "p16-ten", character_id=ALDRIC))
        assert (reply["characters"][0]["level"], reply["characters"][0]["destiny"]) == (10, 0)
        await ok(party, gm("pool_award", "p16-award-2", character_ids=[ALDRIC]))
        await ok(party, gm("pool_rest", "p16-rest-2"))
        refused = await send(party, gm("pool_level_gained", "p16-eleven", character_id=ALDRIC))
        assert (refused["code"], refused["field"]) == ("not_eligible", "character_id")
        assert "level 10" in refused["message"]
        entry = await ledger(party)
        assert (entry["level"], entry["destiny"]) == (10, 1)
