"""hmtw decisions through a Session on an in-memory store (the path ``resolve`` and the server
run), with scripted dice: each die picks among the undrawn cards in deck order
(``hmtw_messages.Table`` turns a card's code into that die).

Each class pins rulings H1-H14 as the wire shows them, and that a refusal draws nothing and
changes nothing. The last classes run the example session through ``fate-bridge resolve`` and
verify the audit trail re-derives every hmtw decision.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.dice import ScriptedDice
from bridge import registry
from bridge.registry import decode_client
from bridge.rulesets.hmtw import decide as hmtw_decide
from bridge.rulesets.hmtw import rules as hmtw
from bridge.session import Session
from bridge.store import SQLiteStore

from .helpers import FIXTURES, replay, run_bridge, send
from .hmtw_messages import (GM, PATCHES, PLAYER, PLAYER_TWO, SILAN, STRANGER, Table, actor, challenge, clear,
                            deck_command, fate_test, frame, gm_draw, group_test, member, push)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "hmtw-session.jsonl"
KEY = bytes(range(32))


class FacesDice:
    """Dice that take the first undrawn card and remember how many faces each die had."""

    def __init__(self) -> None:
        self.faces: list[int] = []

    def roll(self, faces: int) -> int:
        self.faces.append(faces)
        return 1


@pytest.fixture
def table():
    return Table()


async def drawn(session: Session, table: Table, message: dict, *codes: str) -> dict:
    """Send a message whose draws take ``codes``; the reply must not be an error."""
    reply = await send(session, message, table.picks(*codes))
    assert reply["type"] != "error", reply
    return reply


STATUS_IDS = itertools.count()  # fresh event ids: a repeated one would replay an older status


async def status(session: Session) -> dict:
    return await send(session, deck_command("status", event_id=f"status-{next(STATUS_IDS)}"))


async def refused(session: Session, message: dict, code: str, field: str, dice: list[int] | None = None) -> dict:
    """Send a message that must be refused with ``code`` on ``field`` and change no deck."""
    before = await status(session)
    reply = await send(session, message, dice)
    assert (reply["type"], reply["code"], reply["field"]) == ("error", code, field), reply
    after = await status(session)
    for key in ("decks", "open_tests", "bound", "reshuffle_after_test", "reshuffle_at_round_end"):
        assert after[key] == before[key], key
    return reply


# --- H1 -----------------------------------------------------------------------------------------


class TestH1DecksPerWorld:
    """H1: each world keeps its player deck (57) and GM deck (21) in the store; every draw is a die
    over the undrawn cards; an empty deck takes its discards back with a reshuffle notice."""

    async def test_each_draw_is_a_die_over_the_undrawn_cards(self, session):
        dice = FacesDice()
        first = await session.receive(frame(fate_test("e1", "t1", score=4)), dice)
        await session.receive(frame(fate_test("e2", "t2", score=4)), dice)
        await session.receive(frame(gm_draw("e3")), dice)
        assert dice.faces == [57, 56, 21]
        assert json.loads(first.frames[0])["test"]["first"]["name"] == "Ace of Swords"
        counts = (await status(session))["decks"]
        # H14: t2 failed and may still be pushed, so its card is on the table; t1's was discarded
        # when t2 closed its push window.
        assert counts == {"player_undrawn": 55, "player_discarded": 1, "player_on_table": 1,
                          "gm_undrawn": 20, "gm_discarded": 1}

    async def test_decks_survive_a_restart(self, tmp_path):
        db = tmp_path / "decks.sqlite3"
        table = Table()
        store = await SQLiteStore.open(db)
        await store.add_world("w", None)
        await drawn(Session(store, ScriptedDice([]), trusted=True, default_world="w"), table,
                    fate_test("e1", "t1"), "cups-7")
        await store.close()
        store = await SQLiteStore.open(db)
        session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
        reply = await drawn(session, table, fate_test("e2", "t2"), "cups-8")
        assert reply["test"]["first"]["code"] == "cups-8"  # pick 36 after cups-7 left the pile
        assert reply["decks"]["player_undrawn"] == 55
        await store.close()

    async def test_worlds_keep_their_own_decks(self, store, session):
        await store.add_world("other", None)
        other = Session(store, ScriptedDice([]), trusted=True, default_world="other")
        await send(session, fate_test("e1", "t1"), [1])
        reply = await send(other, fate_test("e1", "t1"), [1])
        assert reply["test"]["first"]["code"] == "swords-1"
        assert reply["decks"]["player_undrawn"] == 56

    async def test_the_gm_deck_runs_out_and_is_reshuffled(self, session):
        for n in range(21):
            reply = await send(session, gm_draw(f"g{n}"), [1])
            assert reply["drawn"]["value"] == n + 1 and reply["reshuffles"] == []
        assert reply["decks"]["gm_undrawn"] == 0
        reply = await send(session, gm_draw("g21"), [21])
        assert reply["reshuffles"] == [{"reason": "exhausted", "decks": ["gm"]}]
        assert reply["drawn"]["name"] == "XXI The World"
        assert (reply["decks"]["gm_undrawn"], reply["decks"]["gm_discarded"]) == (20, 1)
        assert "The GM deck ran out" in reply["notice"]["html"]

    async def test_the_player_deck_runs_out_and_is_reshuffled(self, session):
        """57 Challenge Actions deal every player card once (the Fool waits for the round end);
        the 58th finds the deck empty."""
        seen = []
        for n in range(57):
            reply = await send(session, challenge(f"a{n}", f"act{n}"), [1])
            seen.append(reply["drawn"]["code"])
        assert len(set(seen)) == 57 and reply["decks"]["player_undrawn"] == 0
        reply = await send(session, challenge("a57", "act57"), [1])
        assert reply["reshuffles"] == [{"reason": "exhausted", "decks": ["player"]}]
        assert reply["drawn"]["code"] == "swords-1" and reply["decks"]["player_undrawn"] == 56

    async def test_scripted_dice_that_do_not_fit_are_a_bad_line(self, session):
        reply = await refused(session, fate_test(), "bad_message", "dice", dice=[58])
        assert "d57" in reply["message"]
        await refused(session, fate_test(), "bad_message", "dice", dice=[])


class TestGmCommands:
    """H1/H7: status, reshuffle now, round end and the GM deck are for GMs only."""

    @pytest.mark.parametrize("message", [deck_command("reshuffle", user_is_gm=False), gm_draw(user_is_gm=False),
                                         clear("door", user_is_gm=False)],
                             ids=["reshuffle", "gm_draw", "clear"])
    async def test_players_are_refused(self, session, message):
        await refused(session, message, "forbidden", "user_id")

    async def test_reshuffle_now_puts_every_card_back_but_the_table_and_notifies_the_table(self, session, table):
        await drawn(session, table, fate_test(), "cups-2")
        await send(session, gm_draw(), [5])
        reply = await send(session, deck_command("reshuffle", event_id="r1"))
        assert reply["reshuffles"] == [{"reason": "gm", "decks": ["player", "gm"]}]
        # H14: the open test's cups-2 stays on the table, out of the reshuffled deck.
        assert reply["decks"] == {"player_undrawn": 56, "player_discarded": 0, "player_on_table": 1,
                                  "gm_undrawn": 21, "gm_discarded": 0}
        assert "The GM reshuffles both decks" in reply["notice"]["html"]
        assert reply["open_tests"] == ["tof1"]  # a failure still open for its push

    async def test_status_changes_nothing(self, session, table):
        await drawn(session, table, fate_test(), "wands-12")
        reply = await status(session)
        assert reply["reshuffles"] == [] and reply["notice"] is None
        assert reply["decks"]["player_discarded"] == 1 and "56 to draw" in reply["card"]["html"]


# --- H2-H5 --------------------------------------------------------------------------------------


class TestH2ToH5TestOfFate:
    """H2-H5 on the wire: card values, total = card + attribute +/- 3, success at 14, great
    success only with the tested suit on the initial draw."""

    async def test_seed_example_knight_of_wands(self, session, table):
        reply = await drawn(session, table, fate_test(), "wands-12")
        test = reply["test"]
        assert test["first"] == {"code": "wands-12", "name": "Knight of Wands", "suit": "wands", "value": 12,
                                 "symbol": "\U0001fa84"}
        assert (test["total"], test["outcome"], test["push_by"]) == (14, "success", [])
        assert "Knight of Wands (Wands, 12)" in reply["card"]["html"]
        assert reply["card"]["speaker_actor_id"] == SILAN

    async def test_seed_example_iv_of_pentacles(self, session, table):
        reply = await drawn(session, table, fate_test(), "pentacles-4")
        assert (reply["test"]["total"], reply["test"]["outcome"]) == (6, "failure")
        assert reply["test"]["push_by"] == [PLAYER]
        assert f'data-fate-bridge-hmtw-push="tof1" data-fate-bridge-drawer="{PLAYER}"' in reply["card"]["html"]

    @pytest.mark.parametrize("code, value", [("swords-11", 11), ("cups-12", 12), ("wands-13", 13), ("swords-14", 14)],
                             ids=["Page", "Knight", "Queen", "King"])
    async def test_court_card_values(self, session, table, code, value):
        reply = await drawn(session, table, fate_test(attribute="pentacles", score=1), code)
        assert reply["test"]["first"]["value"] == value and reply["test"]["total"] == value + 1

    async def test_great_success_needs_the_tested_suit(self, session, table):
        reply = await drawn(session, table, fate_test(), "pentacles-12")
        assert (reply["test"]["total"], reply["test"]["outcome"]) == (14, "great_success")
        assert "Great success" in reply["card"]["html"]

    async def test_favor_and_disfavor_cancel(self, session, table):
        reply = await drawn(session, table, fate_test(favor=True, disfavor=True), "cups-11")
        assert (reply["test"]["modifier"], reply["test"]["total"], reply["test"]["outcome"]) == (0, 13, "failure")
        assert "favor and disfavor cancel" in reply["card"]["html"]

    async def test_favor_adds_3_and_disfavor_takes_3(self, session, table):
        favored = await drawn(session, table, fate_test("e1", "t1", favor=True), "cups-9")
        disfavored = await drawn(session, table, fate_test("e2", "t2", disfavor=True), "cups-10")
        assert (favored["test"]["modifier"], favored["test"]["total"]) == (3, 14)
        assert (disfavored["test"]["modifier"], disfavored["test"]["total"]) == (-3, 9)

    @pytest.mark.parametrize("score", [0, 5])
    async def test_scores_outside_1_to_4_are_refused(self, session, score):
        await refused(session, fate_test(score=score), "bad_message", "score", dice=[1])

    async def test_a_stranger_may_not_draw_for_the_adventurer(self, session):
        await refused(session, fate_test(user_id=STRANGER), "forbidden", "user_id", dice=[1])

    async def test_a_gm_may_draw_for_any_adventurer(self, session, table):
        reply = await drawn(session, table, fate_test(user_id=GM, user_is_gm=True), "cups-1")
        assert reply["test"]["push_by"] == [GM]

    async def test_a_test_id_names_one_test(self, session, table):
        await drawn(session, table, fate_test("e1", "t1"), "cups-1")
        await refused(session, fate_test("e2", "t1"), "bad_message", "test_id", dice=[1])


# --- H6 -----------------------------------------------------------------------------------------


class TestH6PushingFate:
    """H6: the drawer alone pushes a failed test, once: 14+ success (never great), 13- great
    failure, the Fool a great failure."""

    async def test_push_in_the_tested_suit_is_a_success_never_great(self, session, table):
        await drawn(session, table, fate_test(), "pentacles-4")
        reply = await drawn(session, table, push(), "pentacles-8")
        test = reply["test"]
        assert (test["pushed"]["name"], test["total"], test["outcome"], test["push_by"]) == (
            "VIII of Pentacles", 14, "success", [])
        assert reply["event_id"] == "ev-push"

    async def test_push_at_13_or_less_is_a_great_failure(self, session, table):
        await drawn(session, table, fate_test(favor=True), "swords-1")  # 1 + 2 + 3 = 6
        reply = await drawn(session, table, push(), "cups-7")
        assert (reply["test"]["total"], reply["test"]["outcome"]) == (13, "great_failure")
        assert "Great failure" in reply["card"]["html"] and "Push fate" not in reply["card"]["html"]

    async def test_the_fool_on_a_push_is_a_great_failure_and_reshuffles(self, session, table):
        await drawn(session, table, fate_test(score=4, favor=True), "cups-6")  # 6 + 4 + 3 = 13
        reply = await drawn(session, table, push(), "fool")
        assert (reply["test"]["total"], reply["test"]["outcome"]) == (13, "great_failure")
        assert reply["reshuffles"] == [{"reason": "fool", "decks": ["player", "gm"]}]
        assert reply["decks"]["player_undrawn"] == 57
        assert "The Fool was drawn" in reply["notice"]["html"]

    async def test_push_refused_after_a_success(self, session, table):
        await drawn(session, table, fate_test(), "wands-12")
        reply = await refused(session, push(), "not_eligible", "test_id", dice=[1])
        assert "only after a failure" in reply["message"]

    async def test_push_only_once(self, session, table):
        await drawn(session, table, fate_test(), "pentacles-4")
        await drawn(session, table, push("p1"), "cups-1")
        reply = await refused(session, push("p2"), "not_eligible", "test_id", dice=[1])
        assert "pushed on this test already" in reply["message"]

    async def test_only_the_drawer_pushes(self, session, table):
        await drawn(session, table, fate_test(), "pentacles-4")
        await refused(session, push(user_id=GM), "forbidden", "user_id", dice=[1])
        await refused(session, push(user_id=STRANGER), "forbidden", "user_id", dice=[1])

    async def test_unknown_test(self, session):
        await refused(session, push(test_id="nope"), "not_found", "test_id", dice=[1])

    async def test_no_push_once_the_table_has_drawn_again(self, session, table):
        await drawn(session, table, fate_test("e1", "t1"), "pentacles-4")
        await drawn(session, table, fate_test("e2", "t2"), "wands-14")
        reply = await refused(session, push(test_id="t1"), "not_eligible", "test_id", dice=[1])
        assert "drawn since" in reply["message"]

    async def test_a_gm_deck_draw_leaves_the_push_open(self, session, table):
        await drawn(session, table, fate_test(), "pentacles-4")
        await send(session, gm_draw(), [1])
        reply = await drawn(session, table, push(), "pentacles-10")
        assert reply["test"]["outcome"] == "success"


# --- H7 -----------------------------------------------------------------------------------------


class TestH7TheFool:
    """H7: the Fool reshuffles both decks when its test is finished; in a Challenge at the end
    of the round; the table is told."""

    async def test_fool_first_totals_at_most_7_and_may_be_pushed(self, session, table):
        reply = await drawn(session, table, fate_test(score=4, favor=True), "fool")
        test = reply["test"]
        assert (test["first"]["name"], test["first"]["suit"], test["total"]) == ("The Fool", None, 7)
        assert (test["outcome"], test["push_by"]) == ("failure", [PLAYER])
        assert reply["reshuffles"] == []  # not until the test is finished
        assert (await status(session))["reshuffle_after_test"] is True

    async def test_the_push_after_a_fool_reshuffles_after_the_push_card(self, session, table):
        await drawn(session, table, fate_test(score=4, favor=True), "fool")
        await send(session, gm_draw(), [3])
        reply = await drawn(session, table, push(), "wands-7")  # drawn before the reshuffle
        assert (reply["test"]["total"], reply["test"]["outcome"]) == (14, "success")
        assert reply["reshuffles"] == [{"reason": "fool", "decks": ["player", "gm"]}]
        assert reply["decks"] == {"player_undrawn": 57, "player_discarded": 0, "player_on_table": 0,
                                  "gm_undrawn": 21, "gm_discarded": 0}

    async def test_a_fool_left_unpushed_reshuffles_before_the_next_draw(self, session, table):
        await drawn(session, table, fate_test("e1", "t1"), "swords-3", )
        await drawn(session, table, fate_test("e2", "t2"), "fool")
        table.reshuffle()
        reply = await drawn(session, table, fate_test("e3", "t3"), "swords-3")  # back in the deck
        assert reply["reshuffles"] == [{"reason": "fool", "decks": ["player", "gm"]}]
        # H14: t3 failed, so its swords-3 is on the table, not discarded.
        assert [reply["decks"][k] for k in ("player_undrawn", "player_discarded", "player_on_table")] == [56, 0, 1]
        assert reply["notice"]["title"] == "The decks are reshuffled"

    async def test_in_a_challenge_the_fool_waits_for_the_round_end(self, session, table):
        reply = await drawn(session, table, challenge("a1", "act1"), "fool")
        assert reply["reshuffle_at_round_end"] is True and reply["reshuffles"] == []
        assert "reshuffled at the end of the round" in reply["card"]["html"]
        reply = await drawn(session, table, challenge("a2", "act2"), "swords-1")
        assert reply["reshuffles"] == [] and reply["decks"]["player_discarded"] == 2
        reply = await send(session, deck_command("round_end", event_id="end1"))
        assert reply["reshuffles"] == [{"reason": "fool", "decks": ["player", "gm"]}]
        assert reply["decks"]["player_undrawn"] == 57 and reply["reshuffle_at_round_end"] is False
        reply = await send(session, deck_command("round_end", event_id="end2"))
        assert reply["reshuffles"] == [] and reply["notice"] is None


# --- H8 -----------------------------------------------------------------------------------------


class TestH8ChallengeActions:
    """H8: value = card + attribute +/- 3; never pushed; never bound by fate."""

    async def test_value(self, session, table):
        reply = await drawn(session, table, challenge(favor=True), "wands-9")
        assert (reply["drawn"]["name"], reply["modifier"], reply["value"]) == ("IX of Wands", 3, 16)
        assert reply["card"]["title"] == "Challenge Action: Swords"

    async def test_never_pushed(self, session, table):
        await drawn(session, table, challenge(score=1), "cups-1")  # value 2
        reply = await refused(session, push(test_id="act1"), "not_eligible", "test_id", dice=[1])
        assert "(H8)" in reply["message"]

    async def test_an_action_names_no_obstacle(self, session):
        await refused(session, challenge(obstacle="the goblin"), "bad_message", "obstacle", dice=[1])


# --- H9 -----------------------------------------------------------------------------------------


class TestH9BoundByFate:
    """H9: a failed test binds its obstacle for everyone in the guild until the GM clears it."""

    async def test_a_failure_binds_the_obstacle_for_the_whole_guild(self, session, table):
        reply = await drawn(session, table, fate_test(obstacle="The locked door"), "cups-2")
        assert reply["bound"] is True and "bound by fate" in reply["card"]["html"]
        await refused(session, fate_test("e2", "t2", obstacle="the  LOCKED door"), "not_eligible", "obstacle",
                      dice=[1])
        other = fate_test("e3", "t3", obstacle="The locked door", user_id=PLAYER_TWO,
                          actor=actor(PATCHES, "Patches", (PLAYER_TWO,)))
        reply = await refused(session, other, "not_eligible", "obstacle", dice=[1])
        assert "bound by fate after test tof1 (Failure)" in reply["message"]
        assert (await status(session))["bound"] == [
            {"obstacle": "The locked door", "test_id": "tof1", "outcome": "failure"}]

    async def test_the_gm_clears_it(self, session, table):
        await drawn(session, table, fate_test(obstacle="The locked door"), "cups-2")
        reply = await send(session, clear("the locked door"))
        assert (reply["type"], reply["obstacle"], reply["test_id"]) == ("hmtw_obstacle_cleared", "The locked door",
                                                                        "tof1")
        reply = await drawn(session, table, fate_test("e2", "t2", obstacle="The locked door"), "wands-12")
        assert reply["test"]["outcome"] == "success"

    async def test_a_blank_obstacle_is_a_bad_message(self, session):
        await refused(session, fate_test(obstacle="   "), "bad_message", "obstacle", dice=[1])
        await refused(session, clear(" "), "bad_message", "obstacle")

    async def test_clearing_an_obstacle_not_bound(self, session):
        await refused(session, clear("the open door"), "not_found", "obstacle")

    async def test_a_successful_push_releases_it_a_great_failure_keeps_it(self, session, table):
        await drawn(session, table, fate_test("e1", "t1", obstacle="door"), "cups-2")
        reply = await drawn(session, table, push("p1", "t1"), "cups-14")
        assert (reply["test"]["outcome"], reply["bound"]) == ("success", False)
        await drawn(session, table, fate_test("e2", "t2", obstacle="door"), "cups-3")
        reply = await drawn(session, table, push("p2", "t2"), "cups-4")
        assert (reply["test"]["outcome"], reply["bound"]) == ("great_failure", True)
        assert (await status(session))["bound"][0]["outcome"] == "great_failure"

    async def test_a_success_does_not_bind(self, session, table):
        reply = await drawn(session, table, fate_test(obstacle="door"), "wands-12")
        assert reply["bound"] is False
        assert (await status(session))["bound"] == []


# --- H10 ----------------------------------------------------------------------------------------


class TestH10GroupTests:
    """H10: the most and the least qualified each draw; hits 2/1/0/-1 sum to the group outcome;
    failure or disaster binds the obstacle."""

    async def test_great_success_and_failure_make_a_success(self, session, table):
        reply = await drawn(session, table, group_test(), "cups-11", "swords-2")  # 14 great, 3 failure
        assert [m["outcome"] for m in reply["members"]] == ["great_success", "failure"]
        assert [m["test_id"] for m in reply["members"]] == ["grp1/1", "grp1/2"]
        assert (reply["hits"], reply["outcome"], reply["bound"]) == (2, "success", False)
        assert reply["members"][1]["push_by"] == [PLAYER_TWO]

    async def test_success_and_failure_fall_short(self, session, table):
        reply = await drawn(session, table, group_test(obstacle="the wolf"), "wands-11", "swords-2")
        assert (reply["hits"], reply["outcome"], reply["bound"]) == (1, "falls_short", False)

    async def test_two_failures_fail_and_bind(self, session, table):
        reply = await drawn(session, table, group_test(obstacle="the wolf"), "swords-3", "swords-2")
        assert (reply["hits"], reply["outcome"], reply["bound"]) == (0, "failure", True)
        assert reply["members"][0]["push_by"] == [PLAYER] and reply["members"][1]["push_by"] == [PLAYER_TWO]
        await refused(session, fate_test(obstacle="The Wolf"), "not_eligible", "obstacle", dice=[1])

    async def test_a_pushed_great_failure_makes_a_disaster(self, session, table):
        await drawn(session, table, group_test(obstacle="the wolf"), "swords-3", "swords-2")
        reply = await drawn(session, table, push("p1", "grp1/2", PLAYER_TWO), "swords-4")  # 3 + 4 = 7
        assert reply["type"] == "hmtw_group_tested" and reply["event_id"] == "p1"
        assert [m["outcome"] for m in reply["members"]] == ["failure", "great_failure"]
        assert (reply["hits"], reply["outcome"], reply["bound"]) == (-1, "disaster", True)
        assert reply["members"][0]["push_by"] == [PLAYER]  # the other member may still push
        reply = await drawn(session, table, push("p2", "grp1/1", PLAYER), "swords-14")  # 3 + 3 + 14
        assert (reply["hits"], reply["outcome"], reply["bound"]) == (0, "failure", True)

    async def test_a_pushed_success_lifts_the_group(self, session, table):
        await drawn(session, table, group_test(obstacle="the wolf"), "cups-12", "swords-2")  # 15 great, 3
        reply = await drawn(session, table, push("p1", "grp1/2", PLAYER_TWO), "wands-14")
        assert (reply["hits"], reply["outcome"], reply["bound"]) == (3, "success", False)

    async def test_two_different_adventurers(self, session):
        same = group_test(members=[member(actor(), 3, PLAYER), member(actor(), 1, PLAYER)])
        await refused(session, same, "bad_message", "members[1].actor.actor_id", dice=[1, 1])

    async def test_exactly_two_members(self, session):
        await refused(session, group_test(members=[member(actor(), 3, PLAYER)]), "bad_message", "members",
                      dice=[1])

    async def test_bound_obstacles_refuse_group_tests_too(self, session, table):
        await drawn(session, table, fate_test(obstacle="the wolf"), "cups-2")
        await refused(session, group_test(obstacle="the wolf"), "not_eligible", "obstacle", dice=[1, 1])


class TestOverlayCards:
    """What overlay viewers may see: a test's card when drawn ``public`` (its push follows it),
    never a whispered one; the table's reshuffle notice; never the GM deck's card."""

    async def overlay(self, session: Session, message: dict, dice: list[int] | None = None) -> dict | None:
        reply = await session.receive(frame(message), None if dice is None else ScriptedDice(dice))
        return None if reply.overlay_card is None else json.loads(reply.overlay_card)

    async def test_public_test_and_its_push(self, session, table):
        shown = await self.overlay(session, fate_test(), table.picks("pentacles-4"))
        assert shown["card"]["title"] == "Test of fate: Pentacles" and shown["ruleset"] == "hmtw"
        shown = await self.overlay(session, push(), table.picks("pentacles-13"))
        assert "Pushed fate" in shown["card"]["html"]

    async def test_whispered_test_and_its_push_stay_private(self, session, table):
        assert await self.overlay(session, fate_test(visibility="gm"), table.picks("pentacles-4")) is None
        assert await self.overlay(session, push(), table.picks("pentacles-13")) is None
        assert await self.overlay(session, group_test(visibility="blind"), table.picks("cups-1", "cups-2")) is None
        assert await self.overlay(session, challenge(visibility="self"), table.picks("cups-3")) is None

    async def test_gm_commands_show_only_the_table_notices(self, session):
        assert await self.overlay(session, gm_draw(), [1]) is None
        assert await self.overlay(session, deck_command("status")) is None
        shown = await self.overlay(session, deck_command("reshuffle", event_id="r1"))
        assert shown["card"]["title"] == "The decks are reshuffled"


# --- audit and resolve --------------------------------------------------------------------------


class TestAudit:
    """Every hmtw decision lands in the audit trail with its columns and re-derives from its
    recorded reads and dice."""

    async def test_every_decision_re_derives(self, tmp_path):
        store = await replay(EXAMPLE, tmp_path / "audit.sqlite3", KEY)
        (report,) = await store.verify("w", KEY)
        assert report.ok, report.problems
        assert report.records == len(EXAMPLE.read_text().splitlines())
        rows = await store.audit_page("w", _query())
        await store.close()
        by_type = {r.type: r for r in reversed(rows.records)}
        first = rows.records[-1]
        assert (first.ruleset, first.message_id, first.outcome, first.test_name) == (
            "hmtw", "tof-conch", "success", "Test of fate: Pentacles")
        assert first.detail == "Knight of Wands 12 + Pentacles 2 = 14: success"
        assert by_type["hmtw_group_test"].outcome == "success"
        assert by_type["hmtw_challenge_action"].outcome == "challenge"
        assert by_type["hmtw_gm_draw"].detail.startswith("XIII Death")
        refusals = [r for r in rows.records if r.outcome in ("forbidden", "not_eligible")]
        assert {r.message_id for r in refusals} == {"tof-clockwork", "tof-clockwork-2", "tof-bars"}


def _query():
    from bridge import wire

    return wire.AuditQuery(query_id="q", limit=200)


def run_resolve(stdin: str) -> subprocess.CompletedProcess:
    return run_bridge("resolve", "--cards", stdin=stdin)


class TestResolveExample:
    """README's example: a recorded His Majesty the Worm session through ``fate-bridge resolve``."""

    def test_example_session(self):
        result = run_resolve(EXAMPLE.read_text())
        assert result.returncode == 0, result.stderr
        out = [json.loads(line) for line in result.stdout.splitlines()]
        assert [r["type"] for r in out] == [
            "hmtw_tested", "hmtw_tested", "hmtw_tested", "hmtw_tested", "hmtw_tested", "error", "hmtw_tested",
            "error", "hmtw_obstacle_cleared", "hmtw_tested", "hmtw_tested", "error", "hmtw_group_tested",
            "hmtw_challenge_drawn", "hmtw_gm_drawn", "hmtw_decks"]
        outcomes = [(r["test"]["total"], r["test"]["outcome"]) for r in out if r["type"] == "hmtw_tested"]
        assert outcomes == [(14, "success"), (21, "great_success"), (6, "failure"), (14, "success"),
                            (3, "failure"), (9, "great_failure"), (3, "failure"), (16, "success")]
        assert (out[5]["code"], out[7]["code"], out[11]["code"]) == ("forbidden", "not_eligible", "not_eligible")
        assert out[10]["reshuffles"] == [{"reason": "fool", "decks": ["player", "gm"]}]
        assert (out[12]["hits"], out[12]["outcome"]) == (2, "success")
        assert (out[13]["value"], out[14]["drawn"]["name"]) == (13, "XIII Death")
        assert out[15]["decks"] == {"player_undrawn": 54, "player_discarded": 3, "player_on_table": 0,
                                    "gm_undrawn": 20, "gm_discarded": 1}
        assert "Drawn: 🪄 Knight of Wands (Wands, 12)" in result.stderr
        assert "Pushed fate: ⚔ VI of Swords (Swords, 6)" in result.stderr
        assert "Total: 9 → Great failure" in result.stderr

    def test_without_dice_the_bridge_draws_its_own(self):
        line = json.loads(EXAMPLE.read_text().splitlines()[0])
        del line["dice"]
        out = json.loads(run_resolve(json.dumps(line) + "\n").stdout)
        assert out["type"] == "hmtw_tested" and out["decks"]["player_undrawn"] == 56
        assert out["test"]["total"] == out["test"]["first"]["value"] + 2


# --- review: edge cases computed by hand against H1-H10 ---------------------------------------


class TestH1NthDraw:
    """H1 with H7: the 57th player card empties the deck, the 58th draw takes the discards back
    (``exhausted``); a Fool drawn in the Challenge still reshuffles both decks at the round's end."""

    async def test_exhausted_then_round_end(self, session):
        for n in range(57):
            reply = await send(session, challenge(f"a{n}", f"act{n}"), [1])
        assert reply["drawn"]["code"] == "fool" and reply["reshuffle_at_round_end"] is True
        assert reply["decks"]["player_undrawn"] == 0 and reply["reshuffles"] == []
        await send(session, gm_draw("g1"), [2])
        reply = await send(session, challenge("a57", "act57"), [57])  # the Fool is back in: last
        assert reply["reshuffles"] == [{"reason": "exhausted", "decks": ["player"]}]
        assert reply["drawn"]["code"] == "fool"
        assert reply["decks"] == {"player_undrawn": 56, "player_discarded": 1, "player_on_table": 0,
                                  "gm_undrawn": 20, "gm_discarded": 1}
        reply = await send(session, deck_command("round_end", event_id="end"))
        assert reply["reshuffles"] == [{"reason": "fool", "decks": ["player", "gm"]}]
        assert reply["decks"] == {"player_undrawn": 57, "player_discarded": 0, "player_on_table": 0,
                                  "gm_undrawn": 21, "gm_discarded": 0}


class TestH4H6FavorCountedOnceOnThePush:
    """H4/H6: favor or disfavor is in the failed total once; the push adds only the card's value;
    a push reaching 14 is a success even when the initial card was of the tested suit."""

    async def test_favor_once(self, session, table):
        reply = await drawn(session, table, fate_test(favor=True), "wands-5")  # 5 + 2 + 3
        assert (reply["test"]["total"], reply["test"]["outcome"]) == (10, "failure")
        reply = await drawn(session, table, push(), "cups-4")  # 10 + 4, not 17
        assert (reply["test"]["total"], reply["test"]["outcome"], reply["test"]["modifier"]) == (14, "success", 3)

    async def test_disfavor_once_and_tested_suit_first_still_not_great(self, session, table):
        reply = await drawn(session, table, fate_test(score=4, disfavor=True), "pentacles-12")  # 12 + 4 - 3
        assert (reply["test"]["total"], reply["test"]["outcome"]) == (13, "failure")
        reply = await drawn(session, table, push(), "swords-1")  # 13 + 1
        assert (reply["test"]["total"], reply["test"]["outcome"]) == (14, "success")

    async def test_a_push_one_short_is_a_great_failure(self, session, table):
        await drawn(session, table, fate_test(score=4, disfavor=True), "pentacles-11")  # 11 + 4 - 3 = 12
        reply = await drawn(session, table, push(), "cups-1")  # 13
        assert (reply["test"]["total"], reply["test"]["outcome"], reply["bound"]) == (13, "great_failure", False)


class TestH7FoolInAGroupTest:
    """H7 with H10: a Fool drawn by one member reshuffles both decks only when the group's tests
    are all finished: not at the other member's push, but at the Fool-drawer's own push."""

    async def test_reshuffle_after_the_last_open_member(self, session, table):
        reply = await drawn(session, table, group_test(obstacle="the gate"), "fool", "cups-2")  # 0+3, 2+1
        assert [(m["total"], m["outcome"]) for m in reply["members"]] == [(3, "failure"), (3, "failure")]
        assert reply["reshuffles"] == [] and (reply["hits"], reply["outcome"], reply["bound"]) == (0, "failure", True)
        state = await status(session)
        assert state["reshuffle_after_test"] is True and state["open_tests"] == ["grp1/1", "grp1/2"]
        reply = await drawn(session, table, push("p2", "grp1/2", PLAYER_TWO), "cups-3")  # 3 + 3 = 6
        assert reply["members"][1]["outcome"] == "great_failure" and reply["reshuffles"] == []
        assert (reply["hits"], reply["outcome"], reply["bound"]) == (-1, "disaster", True)
        # H14: grp1/1 may still push, so the group test's three cards stay on the table.
        assert (reply["decks"]["player_discarded"], reply["decks"]["player_on_table"]) == (0, 3)
        reply = await drawn(session, table, push("p1", "grp1/1", PLAYER), "cups-14")  # 3 + 14 = 17
        assert [m["outcome"] for m in reply["members"]] == ["success", "great_failure"]
        assert (reply["hits"], reply["outcome"], reply["bound"]) == (0, "failure", True)
        assert reply["reshuffles"] == [{"reason": "fool", "decks": ["player", "gm"]}]
        assert reply["decks"]["player_undrawn"] == 57
        bound = (await status(session))["bound"]
        assert bound == [{"obstacle": "the gate", "test_id": "grp1", "outcome": "failure"}]


class TestH10PushesMoveTheGroup:
    """H10 with H9: a member's push re-sums the group; a falls-short group pushed into failure
    becomes bound, a failed group pushed into falls-short is released; after another player-deck
    draw no member may push."""

    async def test_falls_short_pushed_into_failure_binds(self, session, table):
        reply = await drawn(session, table, group_test(obstacle="the wolf"), "wands-11", "swords-2")  # 14, 3
        assert (reply["hits"], reply["outcome"], reply["bound"]) == (1, "falls_short", False)
        assert reply["members"][0]["push_by"] == []  # a success is never pushed
        reply = await drawn(session, table, push("p1", "grp1/2", PLAYER_TWO), "swords-4")  # 3 + 4 = 7
        assert (reply["hits"], reply["outcome"], reply["bound"]) == (0, "failure", True)
        await refused(session, fate_test("e2", "t2", obstacle="The Wolf"), "not_eligible", "obstacle", dice=[1])

    async def test_failure_pushed_into_falls_short_releases(self, session, table):
        await drawn(session, table, group_test(obstacle="the wolf"), "swords-3", "swords-2")  # 6, 3
        reply = await drawn(session, table, push("p1", "grp1/1", PLAYER), "cups-14")  # 6 + 14 = 20
        assert [m["outcome"] for m in reply["members"]] == ["success", "failure"]
        assert (reply["hits"], reply["outcome"], reply["bound"]) == (1, "falls_short", False)
        assert (await status(session))["bound"] == []
        reply = await drawn(session, table, fate_test("e2", "t2", obstacle="The Wolf"), "wands-12")
        assert reply["test"]["outcome"] == "success"

    async def test_members_cannot_push_after_the_table_draws_again(self, session, table):
        await drawn(session, table, group_test(), "swords-3", "swords-2")
        await drawn(session, table, challenge(), "wands-1")
        await refused(session, push("p1", "grp1/2", PLAYER_TWO), "not_eligible", "test_id", dice=[1])

    async def test_each_member_counts_only_its_own_favor(self, session, table):
        members = [member(actor(), 3, PLAYER, disfavor=True),
                   member(actor(PATCHES, "Patches", (PLAYER_TWO, GM)), 1, PLAYER_TWO, favor=True)]
        reply = await drawn(session, table, group_test(members=members), "cups-14", "cups-10")  # 14, 14
        assert [(m["total"], m["outcome"]) for m in reply["members"]] == [(14, "great_success"),
                                                                          (14, "great_success")]
        assert (reply["hits"], reply["outcome"]) == (4, "success")


class TestH9RefusalLeavesTheBindingTestOpen:
    """H9 with H6: testing a bound obstacle is refused for anyone, the GM too, and the refusal
    draws nothing, so the binding test may still be pushed, and a success releases it."""

    async def test_refusal_then_push(self, session, table):
        await drawn(session, table, fate_test(obstacle="door"), "cups-2")  # 4: failure, bound
        await refused(session, fate_test("e2", "t2", obstacle="Door", user_id=GM, user_is_gm=True),
                      "not_eligible", "obstacle", dice=[1])
        await refused(session, group_test(obstacle=" door "), "not_eligible", "obstacle", dice=[1, 1])
        reply = await drawn(session, table, push(), "cups-14")  # 4 + 14 = 18
        assert (reply["test"]["outcome"], reply["bound"]) == ("success", False)
        reply = await drawn(session, table, fate_test("e3", "t3", obstacle="door"), "cups-13")
        assert reply["test"]["outcome"] == "success"


class TestH8ChallengeValues:
    """H8: value = card + attribute +/- 3 with H4's cancelling; the Fool's value is 0 + attribute;
    a Challenge Action ends an open test's push window (it draws from the player deck)."""

    async def test_both_cancel_and_the_fool(self, session, table):
        reply = await drawn(session, table, challenge("a1", "act1", favor=True, disfavor=True), "cups-13")
        assert (reply["modifier"], reply["value"]) == (0, 17)
        reply = await drawn(session, table, challenge("a2", "act2", disfavor=True), "fool")
        assert (reply["drawn"]["value"], reply["value"], reply["reshuffles"]) == (0, 1, [])

    async def test_a_challenge_fool_is_not_reshuffled_by_a_test(self, session, table):
        await drawn(session, table, challenge("a1", "act1"), "fool")
        reply = await drawn(session, table, fate_test(), "wands-12")
        assert reply["reshuffles"] == [] and reply["decks"]["player_discarded"] == 2
        assert (await status(session))["reshuffle_at_round_end"] is True


# --- H11-H13 (rulings added since the ruleset was built) ------------------------------------------


class TestH11PushWindow:
    """H11: a failed test may be pushed until the table next draws from the player deck for a test
    or the GM closes the window; a refused request changes nothing, so it leaves the window open."""

    async def test_a_refused_test_of_a_bound_obstacle_leaves_the_push_open(self, session, table):
        reply = await drawn(session, table, fate_test("e1", "t1", obstacle="the wolf"), "pentacles-4")
        assert (reply["bound"], reply["test"]["push_by"]) == (True, [PLAYER])
        await refused(session, fate_test("e2", "t2", obstacle="The Wolf"), "not_eligible", "obstacle", dice=[1])
        assert (await status(session))["open_tests"] == ["t1"]
        reply = await drawn(session, table, push("p1", "t1"), "pentacles-10")  # 4 + 2 + 10 = 16
        assert (reply["test"]["total"], reply["test"]["outcome"], reply["bound"]) == (16, "success", False)

    async def test_a_refused_group_test_or_stranger_leaves_the_push_open(self, session, table):
        await drawn(session, table, fate_test("e1", "t1", obstacle="the wolf"), "pentacles-4")
        await refused(session, group_test(obstacle="the  wolf"), "not_eligible", "obstacle", dice=[1, 1])
        await refused(session, fate_test("e3", "t3", user_id=STRANGER), "forbidden", "user_id", dice=[1])
        await refused(session, challenge(user_id=STRANGER), "forbidden", "user_id", dice=[1])
        reply = await drawn(session, table, push("p1", "t1"), "swords-3")  # 6 + 3 = 9
        assert (reply["test"]["total"], reply["test"]["outcome"]) == (9, "great_failure")

    async def test_the_gm_closes_the_window(self, session, table):
        await drawn(session, table, fate_test("e1", "t1"), "pentacles-4")
        reply = await send(session, deck_command("close_push", event_id="close1"))
        assert (reply["type"], reply["command"], reply["open_tests"], reply["reshuffles"]) == (
            "hmtw_decks", "close_push", [], [])
        assert reply["decks"]["player_discarded"] == 1 and reply["card"]["title"] == "Push window closed"
        reply = await refused(session, push("p1", "t1"), "not_eligible", "test_id", dice=[1])
        assert "GM closed the push window" in reply["message"]

    async def test_closing_the_window_reshuffles_a_fool_waiting_for_its_test(self, session, table):
        await drawn(session, table, fate_test("e1", "t1", score=4, favor=True), "fool")
        reply = await send(session, deck_command("close_push", event_id="close1"))
        assert reply["reshuffles"] == [{"reason": "fool", "decks": ["player", "gm"]}]
        assert reply["decks"]["player_undrawn"] == 57 and reply["reshuffle_after_test"] is False
        assert "The Fool was drawn" in reply["notice"]["html"]

    async def test_only_a_gm_closes_the_window(self, session, table):
        await drawn(session, table, fate_test("e1", "t1"), "pentacles-4")
        await refused(session, deck_command("close_push", user_is_gm=False), "forbidden", "user_id")
        assert (await status(session))["open_tests"] == ["t1"]

    @pytest.mark.parametrize("kind", ["challenge", "group"])
    async def test_any_test_drawn_closes_the_window(self, session, table, kind):
        await drawn(session, table, fate_test("e1", "t1"), "pentacles-4")
        if kind == "challenge":
            await drawn(session, table, challenge("e2", "act1"), "swords-9")
        else:
            await drawn(session, table, group_test("e2", "grp1"), "cups-12", "cups-11")
        await refused(session, push("p1", "t1"), "not_eligible", "test_id", dice=[1])


class TestH12FoolAroundChallengeRounds:
    """H12: a Challenge Action's Fool reshuffles at the end of that round, even when ordinary tests
    come between; an ordinary test's Fool reshuffles when that test is finished, after its push."""

    async def test_ordinary_tests_between_leave_the_challenge_fool_for_the_round_end(self, session, table):
        reply = await drawn(session, table, challenge("a1", "act1"), "fool")
        assert reply["reshuffle_at_round_end"] is True
        reply = await drawn(session, table, fate_test("e1", "t1"), "pentacles-4")  # failure, open
        assert reply["reshuffles"] == []
        reply = await drawn(session, table, push("p1", "t1"), "swords-2")  # finished: 8
        assert reply["reshuffles"] == [] and reply["decks"]["player_discarded"] == 3
        reply = await drawn(session, table, fate_test("e2", "t2"), "wands-12")
        assert reply["reshuffles"] == [] and reply["decks"]["player_discarded"] == 4
        reply = await send(session, deck_command("round_end", event_id="end1"))
        assert reply["reshuffles"] == [{"reason": "fool", "decks": ["player", "gm"]}]
        assert reply["decks"]["player_undrawn"] == 57

    async def test_an_ordinary_fool_in_a_round_waits_for_its_push(self, session, table):
        await drawn(session, table, challenge("a1", "act1"), "swords-9")
        reply = await drawn(session, table, fate_test("e1", "t1", score=4, favor=True), "fool")
        assert reply["reshuffles"] == [] and reply["test"]["push_by"] == [PLAYER]
        reply = await send(session, deck_command("round_end", event_id="end1"))
        assert (reply["reshuffles"], reply["reshuffle_after_test"], reply["open_tests"]) == ([], True, ["t1"])
        reply = await drawn(session, table, push("p1", "t1"), "wands-7")  # 7 + 7 = 14
        assert (reply["test"]["total"], reply["test"]["outcome"]) == (14, "success")
        assert reply["reshuffles"] == [{"reason": "fool", "decks": ["player", "gm"]}]


class TestH13ObstacleNames:
    """H13: obstacle names match ignoring letter case and repeated or surrounding spaces."""

    async def test_binding_refusing_and_clearing_by_any_spelling(self, session, table):
        reply = await drawn(session, table, fate_test("e1", "t1", obstacle="  The Old  Bridge "), "cups-2")
        assert reply["bound"] is True
        for n, spelling in enumerate(["the old bridge", "THE OLD BRIDGE", "The   Old Bridge  "]):
            await refused(session, fate_test(f"r{n}", f"r{n}", obstacle=spelling), "not_eligible", "obstacle",
                          dice=[1])
        reply = await send(session, clear(" the OLD bridge"))
        assert (reply["type"], reply["obstacle"], reply["test_id"]) == (
            "hmtw_obstacle_cleared", "  The Old  Bridge ", "t1")
        assert (await status(session))["bound"] == []

    async def test_other_words_are_other_obstacles(self, session, table):
        await drawn(session, table, fate_test("e1", "t1", obstacle="the old bridge"), "cups-2")
        reply = await drawn(session, table, fate_test("e2", "t2", obstacle="the old bridges"), "wands-12")
        assert (reply["test"]["outcome"], reply["bound"]) == ("success", False)
        await refused(session, clear("oldbridge"), "not_found", "obstacle")


# --- H14 ----------------------------------------------------------------------------------------


class RecordingDice(ScriptedDice):
    """Scripted dice that also remember how many faces each die had (how many cards a draw
    chose among)."""

    def __init__(self, values: list[int]) -> None:
        super().__init__(values)
        self.faces: list[int] = []

    def roll(self, faces: int) -> int:
        self.faces.append(faces)
        return super().roll(faces)


async def drain_all_but(session: Session, table: Table, *kept: str) -> None:
    """Draw every player card but ``kept`` with Challenge Actions (finished when drawn, so their
    cards go to the discard pile)."""
    for n, code in enumerate(c for c in hmtw.PLAYER_DECK if c not in kept):
        await drawn(session, table, challenge(f"drain{n}", f"drain{n}"), code)


async def recorded(session: Session, message: dict, picks: list[int]) -> tuple[dict, list[int]]:
    """The reply to ``message`` (not an error) and the faces of its draws."""
    dice = RecordingDice(picks)
    reply = json.loads((await session.receive(frame(message), dice)).frames[0])
    assert reply["type"] != "error", reply
    return reply, dice.faces


def player_counts(reply: dict) -> tuple[int, int, int]:
    decks = reply["decks"]
    return decks["player_undrawn"], decks["player_discarded"], decks["player_on_table"]


class TestH14CardsOnTheTable:
    """H14: a test's card stays on the table, in neither the deck nor the discard pile, until
    the test is finished; no reshuffle (an empty deck's, the Fool's, the GM's) deals it again."""

    async def test_a_success_is_finished_at_once(self, session, table):
        reply = await drawn(session, table, fate_test(), "wands-12")  # 12 + 2 = 14
        assert player_counts(reply) == (56, 1, 0)

    async def test_a_failure_stays_on_the_table_until_its_window_closes(self, session, table):
        reply = await drawn(session, table, fate_test(), "cups-2")
        assert player_counts(reply) == (56, 0, 1)
        reply = await send(session, deck_command("close_push", event_id="c1"))
        assert player_counts(reply) == (56, 1, 0)

    async def test_a_push_from_an_empty_deck_never_deals_the_tests_own_card(self, session, table):
        await drain_all_but(session, table, "swords-3")
        reply = await drawn(session, table, fate_test("e1", "t1"), "swords-3")  # 3 + 2 = 5
        assert player_counts(reply) == (0, 56, 1) and reply["test"]["push_by"] == [PLAYER]
        table.reshuffle(on_table=["swords-3"])
        reply, faces = await recorded(session, push("p1", "t1"), table.picks("wands-10"))
        assert faces == [56]  # the discard pile only: swords-3 lies on the table
        assert reply["reshuffles"] == [{"reason": "exhausted", "decks": ["player"]}]
        assert (reply["test"]["pushed"]["code"], reply["test"]["total"]) == ("wands-10", 15)
        assert player_counts(reply) == (55, 2, 0)  # the test is finished: both cards discarded

    async def test_every_pick_of_a_push_from_an_empty_deck_misses_the_table(self, session, table):
        """Whatever the die says (1..56), the pushed card is never the test's first card."""
        await drain_all_but(session, table, "swords-3")
        await drawn(session, table, fate_test("e1", "t1"), "swords-3")
        reply, faces = await recorded(session, push("p1", "t1"), [56])  # the last of the deck order
        assert faces == [56] and reply["test"]["pushed"]["code"] == "fool"

    async def test_a_group_member_never_draws_the_other_members_card(self, session, table):
        await drain_all_but(session, table, "cups-2")
        table.reshuffle(on_table=["cups-2"])  # member 1 takes the last card; member 2 the refill
        message = group_test("g1", "grp1")
        reply, faces = await recorded(session, message, [1, *table.picks("cups-3")])
        assert faces == [1, 56]
        assert [m["first"]["code"] for m in reply["members"]] == ["cups-2", "cups-3"]
        assert reply["reshuffles"] == [{"reason": "exhausted", "decks": ["player"]}]
        assert player_counts(reply) == (55, 0, 2)

    async def test_a_round_end_fool_reshuffle_leaves_an_open_tests_card_out(self, session, table):
        await drawn(session, table, challenge("a1", "act1"), "fool")
        await drawn(session, table, fate_test("e1", "t1"), "cups-2")
        reply = await send(session, deck_command("round_end", event_id="end1"))
        assert reply["reshuffles"] == [{"reason": "fool", "decks": ["player", "gm"]}]
        assert player_counts(reply) == (56, 0, 1) and reply["open_tests"] == ["t1"]
        assert "1 card still on the table stays out" in reply["notice"]["html"]
        table.reshuffle(on_table=["cups-2"])
        reply, faces = await recorded(session, push("p1", "t1"), table.picks("wands-12"))
        assert faces == [56] and player_counts(reply) == (55, 2, 0)

    async def test_a_group_tests_cards_stay_until_the_group_is_resolved(self, session, table):
        reply = await drawn(session, table, group_test(), "cups-14", "cups-2")  # 14 + 3; 2 + 1
        assert [m["outcome"] for m in reply["members"]] == ["great_success", "failure"]
        assert player_counts(reply) == (55, 0, 2)  # member 2 may push: both cards stay
        reply = await drawn(session, table, push("p2", "grp1/2", PLAYER_TWO), "wands-13")
        assert player_counts(reply) == (54, 3, 0)


class HypothesisDice:
    """Dice whose every roll hypothesis chooses (so it shrinks a failing sequence's draws)."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data

    def roll(self, faces: int) -> int:
        return self.data.draw(st.integers(1, faces), label=f"d{faces}")


class RecordsState:
    """A world's records as the store keeps them: JSON by kind and key (``bridge.state.WorldState``,
    the part hmtw's decisions use)."""

    world_id = "w"

    def __init__(self) -> None:
        self.records: dict[tuple[str, str], bytes] = {}

    def get(self, kind: str, key: str, type: type) -> object:
        raw = self.records.get((kind, key))
        return None if raw is None else msgspec.json.decode(raw, type=type)

    peek = get

    def put(self, kind: str, key: str, record: msgspec.Struct) -> None:
        self.records[(kind, key)] = msgspec.json.encode(record)


OPERATIONS = ("test", "group", "push", "challenge", "close_push", "round_end", "reshuffle", "gm_draw")


def hmtw_request(kind: str, n: int, data: st.DataObject, open_tests: list[str], drawer: dict[str, str]) -> dict | None:
    """One random request of ``kind`` (None: a push with no test open)."""
    score = data.draw(st.integers(1, 4), label="score")
    favor = {"favor": data.draw(st.booleans(), label="favor")}
    if kind == "test":
        return fate_test(f"e{n}", f"t{n}", score=score, **favor)
    if kind == "group":
        return group_test(f"e{n}", f"g{n}", members=[
            member(actor(), score, PLAYER, **favor),
            member(actor(PATCHES, "Patches", (PLAYER_TWO, GM)), data.draw(st.integers(1, 4)), PLAYER_TWO)])
    if kind == "push":
        if not open_tests:
            return None
        test_id = data.draw(st.sampled_from(open_tests), label="pushed test")
        return push(f"e{n}", test_id, drawer[test_id])
    if kind == "challenge":
        return challenge(f"e{n}", f"a{n}", score=score, **favor)
    if kind == "gm_draw":
        return gm_draw(f"e{n}")
    return deck_command(kind, event_id=f"e{n}")


def drawn_codes(kind: str, request: dict, reply: dict) -> list[str]:
    """The player cards a decision of ``kind`` drew."""
    tests = {t["test_id"]: t for t in reply.get("members", []) + [reply.get("test")] if t}
    if kind == "push":
        return [tests[request["test_id"]]["pushed"]["code"]]
    if kind in ("test", "group"):
        return [t["first"]["code"] for t in tests.values()]
    return [reply["drawn"]["code"]] if kind == "challenge" else []


class TestH14FiftySevenCards:
    """H14's invariant over random sequences of tests, group tests, pushes, Challenge Actions, GM
    draws, reshuffles, round ends and closed push windows, from a random start (any number of
    cards already discarded, so empty decks come often): after every decision the undrawn cards,
    the discard pile and the table hold the 57 player cards once each; no decision deals a card
    that was on the table; the two members of a group test never hold the same card."""

    @settings(max_examples=60, deadline=None, derandomize=True)
    @given(st.data())
    def test_the_57_player_cards_are_always_somewhere_once(self, data):
        state = RecordsState()
        left = data.draw(st.sets(st.sampled_from(hmtw.PLAYER_DECK)), label="undrawn at the start")
        state.put(hmtw_decide.DECKS, hmtw_decide.DECKS_KEY, hmtw_decide.DecksRecord(
            player_undrawn=[c for c in hmtw.PLAYER_DECK if c in left],
            player_discard=[c for c in hmtw.PLAYER_DECK if c not in left],
            gm_undrawn=list(hmtw.GM_DECK), gm_discard=[]))
        dice = HypothesisDice(data)
        drawer: dict[str, str] = {}
        for n in range(data.draw(st.integers(1, 25), label="decisions")):
            before = hmtw_decide._decks(state)
            kind = data.draw(st.sampled_from(OPERATIONS), label="operation")
            request = hmtw_request(kind, n, data, list(before.open_tests), drawer)
            if request is None:
                continue
            message = decode_client(frame(request))
            reply = msgspec.to_builtins(hmtw_decide.HANDLERS[type(message)](message, state, dice).reply)
            assert reply["type"] != "error", reply
            drawer.update({t["test_id"]: t["user_id"]
                           for t in reply.get("members", []) + [reply.get("test")] if t})
            dealt = drawn_codes(kind, request, reply)
            assert not before.on_table() & set(dealt), (kind, dealt, before.table)
            assert len(set(dealt)) == len(dealt)  # a group's two members hold two cards
            after = hmtw_decide._decks(state)
            assert sorted(hmtw.player_cards(after)) == sorted(hmtw.PLAYER_DECK)
            assert sum(player_counts(reply)) == 57
            # Only a test still open (or its group's) keeps a card on the table.
            assert all(set(entry.held_by) & set(after.open_tests) for entry in after.table)

    def test_a_world_stored_before_h14_has_nothing_on_the_table(self):
        """A decks record written before H14 has no ``table``: every drawn card is discarded."""
        state = RecordsState()
        state.records[(hmtw_decide.DECKS, hmtw_decide.DECKS_KEY)] = json.dumps({
            "player_undrawn": list(hmtw.PLAYER_DECK[1:]), "player_discard": ["swords-1"],
            "gm_undrawn": list(hmtw.GM_DECK), "gm_discard": [], "open_tests": ["t1"]}).encode()
        decks = hmtw_decide._decks(state)
        assert (decks.table, decks.player.discard, decks.open_tests) == ((), ("swords-1",), ("t1",))


# --- a trail decided before H14 ------------------------------------------------------------------

BEFORE_H14 = FIXTURES / "trails" / "hmtw-before-h14.sqlite3"
BEFORE_H14_KEY = b"k" * 32  # the HMAC checkpoint key the fixture was written with (its README)


@pytest.fixture
def before_h14(tmp_path: Path) -> Path:
    db = tmp_path / "before-h14.sqlite3"
    shutil.copy(BEFORE_H14, db)
    return db


async def _verify_before_h14(db: Path) -> Any:
    store = await SQLiteStore.open(db, audit_key=BEFORE_H14_KEY)
    try:
        (report,) = await store.verify("old-hmtw", BEFORE_H14_KEY)
        return report
    finally:
        await store.close()


def test_a_trail_decided_before_h14_still_verifies(before_h14):
    """H14 moved a tested card from the discard pile to the table: the example session as the
    bridge decided it before H14 (a failed test, its push, a group test, a Challenge Action)
    re-derives under the ruleset's era "before H14" (``Ruleset.eras``)."""
    report = asyncio.run(_verify_before_h14(before_h14))
    assert (report.records, report.ok) == (16, True), report.problems


def test_without_the_era_that_trail_fails(before_h14, monkeypatch):
    """The era is what lets it pass: under H14's rules alone the recorded decks counts and
    writes do not follow (the fixture is what it claims)."""
    monkeypatch.setattr(registry, "eras_of", lambda message: ())
    report = asyncio.run(_verify_before_h14(before_h14))
    assert not report.ok
    assert any(p.kind == "rederive" for p in report.problems)


def test_a_world_from_before_h14_deals_by_h14_from_its_next_decision(before_h14):
    """Live decisions never take the era: the next test of that world leaves its card on the
    table (H14), the 57 player cards are all counted, and the whole trail, old and new records,
    verifies."""
    async def go() -> dict:
        store = await SQLiteStore.open(before_h14, audit_key=BEFORE_H14_KEY)
        try:
            session = Session(store, ScriptedDice([]), trusted=True, default_world="old-hmtw")
            await session.receive(frame({"type": "hello", "v": 1, "world_id": "old-hmtw",
                                         "client": {"module_version": "0.1.0", "foundry_version": "13.351",
                                                    "system_id": "hmtw", "system_version": "1.0.0"}}))
            reply = await session.receive(frame(fate_test("after-h14", "tof-after", score=1)), ScriptedDice([1]))
            return json.loads(reply.frames[0])
        finally:
            await store.close()

    reply = asyncio.run(go())
    decks = reply["decks"]
    assert isinstance(decks["player_on_table"], int)
    assert decks["player_undrawn"] + decks["player_discarded"] + decks["player_on_table"] == 57
    report = asyncio.run(_verify_before_h14(before_h14))
    assert (report.records, report.ok) == (17, True), report.problems
