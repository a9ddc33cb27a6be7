"""His Majesty the Worm rules (``bridge/rulesets/hmtw/rules.py``) against seed 002 (Tests of Fate) and the
rulings H1-H14 of ``docs/rules.md``.

One class per ruling; every ruling is pinned with concrete values. The shuffle's uniformity is
checked statistically with a fixed seed (chi-square on the position each card is dealt at).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest

from bridge.rulesets.hmtw import rules as hmtw
from bridge.rulesets.hmtw.rules import (
    FOOL,
    GM_DECK,
    PLAYER_DECK,
    Decks,
    Pile,
    begin_test,
    binds,
    close_pushes,
    card,
    close_test,
    draw,
    end_round,
    finish_tests,
    fool_drawn,
    group_binds,
    group_hits,
    group_outcome,
    may_push,
    modifier,
    new_decks,
    obstacle_key,
    open_test,
    push_outcome,
    reshuffle,
    fate_outcome,
    total,
)

SEED = 20261129


def seeded(seed: int = SEED) -> Callable[[int], int]:
    """A fixed-seed ``pick`` (uniform in 1..n), standing in for the bridge's dice."""
    rng = random.Random(seed)
    return lambda n: rng.randint(1, n)


def first(n: int) -> int:
    """A ``pick`` that always takes the first undrawn card."""
    return 1


def draws(decks: Decks, deck: str, count: int, pick: Callable[[int], int]) -> tuple[list[str], Decks, list]:
    """``count`` draws from ``deck``: the codes dealt, the decks after, every reshuffle."""
    codes, reshuffles = [], []
    for _ in range(count):
        drawn = draw(decks, deck, pick)
        codes.append(drawn.card.code)
        reshuffles.extend(drawn.reshuffles)
        decks = drawn.decks
    return codes, decks, reshuffles


# --- H1 -----------------------------------------------------------------------------------------


class TestH1Decks:
    """H1: the player deck is the 56 minors plus the Fool, the GM deck the 21 majors; drawn cards
    go to the discard pile; a draw finding the deck empty shuffles the discard pile back in."""

    def test_player_deck_is_56_minors_and_the_fool(self):
        assert len(PLAYER_DECK) == 57 == len(set(PLAYER_DECK))
        minors = [c for c in PLAYER_DECK if c != FOOL]
        assert len(minors) == 56
        assert {card(c).suit for c in minors} == {"swords", "pentacles", "cups", "wands"}
        assert PLAYER_DECK[0] == "swords-1" and PLAYER_DECK[13] == "swords-14" and PLAYER_DECK[-1] == FOOL

    def test_gm_deck_is_the_21_numbered_majors(self):
        assert len(GM_DECK) == 21
        assert [card(c).value for c in GM_DECK] == list(range(1, 22))
        assert (card(GM_DECK[0]).name, card(GM_DECK[-1]).name) == ("I The Magician", "XXI The World")
        assert FOOL not in GM_DECK

    def test_a_draw_takes_the_picked_undrawn_card_onto_the_discard_pile(self):
        drawn = draw(new_decks(), "player", lambda n: 15)  # 15th in deck order: Ace of Pentacles
        assert drawn.card.name == "Ace of Pentacles"
        assert len(drawn.decks.player.undrawn) == 56 and drawn.decks.player.discard == ("pentacles-1",)
        assert "pentacles-1" not in drawn.decks.player.undrawn
        assert drawn.decks.gm == new_decks().gm and drawn.reshuffles == ()
        again = draw(drawn.decks, "player", lambda n: 15)  # the pile closed up: now II of Pentacles
        assert again.card.code == "pentacles-2"
        assert again.decks.player.discard == ("pentacles-1", "pentacles-2")

    def test_the_pick_is_among_the_undrawn_cards(self):
        faces = []
        draws(new_decks(), "player", 3, lambda n: faces.append(n) or 1)
        assert faces == [57, 56, 55]
        with pytest.raises(ValueError, match="1..57"):
            draw(new_decks(), "player", lambda n: 58)
        with pytest.raises(ValueError):
            draw(new_decks(), "gm", lambda n: 0)

    def test_a_deck_never_deals_a_card_twice_between_reshuffles(self):
        codes, decks, reshuffles = draws(new_decks(), "player", 57, seeded())
        assert sorted(codes) == sorted(PLAYER_DECK) and reshuffles == []
        assert decks.player == Pile((), tuple(codes))
        gm_codes, _, _ = draws(new_decks(), "gm", 21, seeded(SEED + 1))
        assert sorted(gm_codes) == sorted(GM_DECK)

    def test_an_empty_deck_takes_its_discard_pile_back_in(self):
        codes, decks, _ = draws(new_decks(), "gm", 21, first)
        assert decks.gm.undrawn == () and len(decks.gm.discard) == 21
        drawn = draw(decks, "gm", first)
        assert drawn.reshuffles == (hmtw.Reshuffled("exhausted", ("gm",)),)
        assert drawn.card.code == "major-1"
        assert len(drawn.decks.gm.undrawn) == 20 and drawn.decks.gm.discard == ("major-1",)

    def test_exhausting_one_deck_leaves_the_other(self):
        _, decks, _ = draws(new_decks(), "player", 57, first)
        decks = draw(decks, "gm", first).decks
        drawn = draw(decks, "player", first)
        assert drawn.reshuffles == (hmtw.Reshuffled("exhausted", ("player",)),)
        assert drawn.decks.gm.discard == ("major-1",)


def position_chi_square_z(pick: Callable[[int], int], shuffles: int) -> float:
    """Deal the whole player deck ``shuffles`` times; chi-square of the 57 x 57 table of (card,
    position dealt) counts against the uniform expectation, as a z-score (Wilson-Hilferty)."""
    n = len(PLAYER_DECK)
    index = {code: i for i, code in enumerate(PLAYER_DECK)}
    counts = [[0] * n for _ in range(n)]
    for _ in range(shuffles):
        codes, _, _ = draws(new_decks(), "player", n, pick)
        for position, code in enumerate(codes):
            counts[index[code]][position] += 1
    expected = shuffles / n
    chi2 = sum((o - expected) ** 2 / expected for row in counts for o in row)
    # Each cell counts a Binomial(shuffles, 1/n), so E[chi2] = n * n * (1 - 1/n): n(n-1) degrees
    # of freedom (checked against 40 seeds: mean 3209, sd 84 for df 3192, sd sqrt(2 df) = 80).
    df = n * (n - 1)
    return ((chi2 / df) ** (1 / 3) - (1 - 2 / (9 * df))) / math.sqrt(2 / (9 * df))


class TestH1ShuffleIsUniform:
    """H1: drawing a uniformly picked undrawn card deals every card at every position equally
    often (a lazy Fisher-Yates shuffle); the same statistic catches a biased shuffle."""

    SHUFFLES = 57 * 40  # 40 expected per (card, position) cell

    def test_positions_are_uniform(self):
        z = position_chi_square_z(seeded(), self.SHUFFLES)
        assert abs(z) < 3.5, z

    def test_the_statistic_flags_a_biased_shuffle(self):
        rng = random.Random(SEED)
        biased = lambda n: 1 if rng.random() < 0.05 else rng.randint(1, n)  # noqa: E731
        assert position_chi_square_z(biased, self.SHUFFLES) > 10


# --- H2 -----------------------------------------------------------------------------------------


class TestH2CardValues:
    """H2: Ace 1, II..X 2..10, Page 11, Knight 12, Queen 13, King 14, the Fool 0 with no suit."""

    @pytest.mark.parametrize(
        "code, name, value",
        [
            ("swords-1", "Ace of Swords", 1),
            ("pentacles-4", "IV of Pentacles", 4),
            ("cups-10", "X of Cups", 10),
            ("wands-11", "Page of Wands", 11),
            ("wands-12", "Knight of Wands", 12),
            ("cups-13", "Queen of Cups", 13),
            ("swords-14", "King of Swords", 14),
        ],
    )
    def test_minor_values(self, code, name, value):
        assert (card(code).name, card(code).value) == (name, value)

    def test_the_fool_is_zero_with_no_suit(self):
        fool = card(FOOL)
        assert (fool.name, fool.value, fool.suit) == ("The Fool", 0, None)

    def test_each_suit_has_ace_to_king(self):
        for suit in hmtw.SUITS:
            assert [card(f"{suit}-{v}").value for v in range(1, 15)] == list(range(1, 15))

    def test_unknown_card(self):
        with pytest.raises(ValueError, match="no tarot card"):
            card("swords-15")


# --- H3, H4 -------------------------------------------------------------------------------------


class TestH3Attributes:
    """H3: Swords, Pentacles, Cups, Wands, scored 1..4; each attribute is its own suit."""

    def test_the_attributes_are_the_suits(self):
        assert hmtw.SUITS == ("swords", "pentacles", "cups", "wands")

    @pytest.mark.parametrize("score", [0, 5, -1])
    def test_scores_outside_1_to_4_are_refused(self, score):
        with pytest.raises(ValueError, match="1..4"):
            total(7, score)

    def test_unknown_attribute_is_refused(self):
        with pytest.raises(ValueError, match="attribute"):
            fate_outcome(card("cups-10"), "coins", 14)


class TestH4Total:
    """H4: total = card + attribute + 3 for favor - 3 for disfavor; no stacking; both cancel."""

    @pytest.mark.parametrize(
        "code, score, expected",
        [("pentacles-4", 2, 6), ("wands-12", 2, 14)],  # seed 002's two worked examples
        ids=["IV-of-Pentacles", "Knight-of-Wands"],
    )
    def test_seed_examples(self, code, score, expected):
        assert total(card(code).value, score) == expected

    @pytest.mark.parametrize(
        "favor, disfavor, mod, expected",
        [(False, False, 0, 12), (True, False, 3, 15), (False, True, -3, 9), (True, True, 0, 12)],
        ids=["neither", "favor", "disfavor", "both-cancel"],
    )
    def test_favor_and_disfavor(self, favor, disfavor, mod, expected):
        assert modifier(favor, disfavor) == mod
        assert total(10, 2, favor, disfavor) == expected


# --- H5 -----------------------------------------------------------------------------------------


class TestH5Outcome:
    """H5: success at 14+, failure at 13-; great success when 14+ and the initial draw is of the
    tested attribute's suit."""

    @pytest.mark.parametrize(
        "code, attribute, score, expected",
        [
            ("wands-12", "pentacles", 2, "success"),  # seed: Knight of Wands, Pentacles 2 = 14
            ("pentacles-12", "pentacles", 2, "great_success"),  # same total, tested suit
            ("pentacles-11", "pentacles", 2, "failure"),  # 13, tested suit: still a failure
            ("pentacles-4", "pentacles", 2, "failure"),  # seed: IV of Pentacles = 6
            ("swords-14", "swords", 1, "great_success"),
            ("cups-10", "wands", 4, "success"),
        ],
    )
    def test_outcomes(self, code, attribute, score, expected):
        drawn = card(code)
        assert fate_outcome(drawn, attribute, total(drawn.value, score)) == expected

    def test_the_fool_first_is_at_most_7_and_fails(self):
        fool = card(FOOL)
        best = total(fool.value, 4, favor=True)
        assert best == 7
        assert fate_outcome(fool, "swords", best) == "failure"


# --- H6 -----------------------------------------------------------------------------------------


class TestH6PushingFate:
    """H6: only after a failure; one more card added to the total; 14+ success (never great),
    13- great failure; the Fool on a push is a great failure."""

    @pytest.mark.parametrize(
        "failed_total, pushed, expected_total, expected",
        [
            (6, "pentacles-8", 14, "success"),  # tested suit on the push: not great
            (6, "pentacles-14", 20, "success"),
            (6, "cups-7", 13, "great_failure"),
            (3, "swords-1", 4, "great_failure"),
            (7, "wands-14", 21, "success"),  # after the Fool first
        ],
    )
    def test_pushed_totals(self, failed_total, pushed, expected_total, expected):
        card_pushed = card(pushed)
        assert failed_total + card_pushed.value == expected_total
        assert push_outcome(card_pushed, expected_total) == expected

    def test_the_fool_on_a_push_is_a_great_failure(self):
        assert push_outcome(card(FOOL), 13) == "great_failure"
        assert push_outcome(card(FOOL), 20) == "great_failure"  # whatever the total

    @pytest.mark.parametrize(
        "outcome, pushed, challenge, allowed",
        [
            ("failure", False, False, True),
            ("success", False, False, False),
            ("great_success", False, False, False),
            ("failure", True, False, False),  # exactly one more card
            ("great_failure", True, False, False),
            ("failure", False, True, False),  # H8
        ],
    )
    def test_may_push(self, outcome, pushed, challenge, allowed):
        assert may_push(outcome, pushed, challenge) is allowed

    def test_a_failed_test_stays_open_until_pushed(self):
        decks = open_test(open_test(new_decks(), "a"), "b")
        assert decks.open_tests == ("a", "b")
        assert close_test(decks, "a").open_tests == ("b",)


# --- H7 -----------------------------------------------------------------------------------------


class TestH7TheFool:
    """H7: the Fool reshuffles both decks (every discard back, the Fool included) when the test
    is finished; in a Challenge at the round's end."""

    def played(self) -> Decks:
        """Decks with 5 player and 2 GM cards discarded, the Fool among the player's."""
        _, decks, _ = draws(new_decks(), "player", 4, first)
        decks = draw(decks, "player", lambda n: n).decks  # the Fool, last in deck order
        _, decks, _ = draws(decks, "gm", 2, first)
        assert FOOL in decks.player.discard
        return decks

    def test_reshuffle_puts_every_card_back(self):
        decks, reshuffled = reshuffle(self.played(), "fool")
        assert reshuffled == hmtw.Reshuffled("fool", ("player", "gm"))
        assert decks.player == Pile(PLAYER_DECK) and decks.gm == Pile(GM_DECK)

    def test_waits_while_the_test_is_open(self):
        decks = open_test(fool_drawn(self.played(), in_challenge=False), "t1")
        assert decks.reshuffle_after_test
        waiting, reshuffles = finish_tests(decks)
        assert reshuffles == () and waiting == decks

    def test_reshuffles_once_the_test_is_finished(self):
        decks = close_test(open_test(fool_drawn(self.played(), in_challenge=False), "t1"), "t1")
        after, reshuffles = finish_tests(decks)
        assert [r.reason for r in reshuffles] == ["fool"]
        assert after.player == Pile(PLAYER_DECK) and not after.reshuffle_after_test

    def test_a_new_draw_finishes_open_tests_first(self):
        decks = open_test(fool_drawn(self.played(), in_challenge=False), "t1")
        after, reshuffles = begin_test(decks)
        assert after.open_tests == () and [r.reason for r in reshuffles] == ["fool"]
        assert after.player == Pile(PLAYER_DECK)

    def test_a_new_draw_closes_open_tests_without_a_fool_and_reshuffles_nothing(self):
        decks = open_test(self.played(), "t1")
        after, reshuffles = begin_test(decks)
        assert after.open_tests == () and reshuffles == () and after.player == decks.player

    def test_in_a_challenge_the_fool_waits_for_the_round_end(self):
        decks = fool_drawn(self.played(), in_challenge=True)
        assert decks.reshuffle_at_round_end and not decks.reshuffle_after_test
        assert finish_tests(decks) == (decks, ())
        assert begin_test(decks)[1] == ()
        after, reshuffles = end_round(decks)
        assert [r.reason for r in reshuffles] == ["fool"] and after.gm == Pile(GM_DECK)
        assert not after.reshuffle_at_round_end

    def test_a_round_end_without_a_fool_changes_nothing(self):
        decks = self.played()
        assert end_round(decks) == (decks, ())

    def test_open_tests_stay_open_through_a_gm_reshuffle(self):
        decks, _ = reshuffle(open_test(self.played(), "t1"), "gm")
        assert decks.open_tests == ("t1",)


# --- H8 -----------------------------------------------------------------------------------------


class TestH8ChallengeActions:
    """H8: value = card + attribute +/- 3; not bound by fate; never pushed."""

    @pytest.mark.parametrize(
        "code, score, favor, disfavor, value",
        [("swords-9", 4, False, False, 13), ("swords-9", 4, True, False, 16), ("fool", 2, False, True, -1)],
    )
    def test_value(self, code, score, favor, disfavor, value):
        assert total(card(code).value, score, favor, disfavor) == value

    def test_never_pushed(self):
        assert may_push("failure", pushed=False, challenge=True) is False


# --- H9 -----------------------------------------------------------------------------------------


class TestH9BoundByFate:
    """H9: a failed test binds its obstacle for the whole guild until the GM clears it."""

    @pytest.mark.parametrize(
        "outcome, bound",
        [("failure", True), ("great_failure", True), ("success", False), ("great_success", False)],
    )
    def test_failures_bind(self, outcome, bound):
        assert binds(outcome) is bound

    @pytest.mark.parametrize("name", ["The locked door", "the  LOCKED door", "  the locked\tdoor "])
    def test_one_obstacle_whatever_the_case_and_spacing(self, name):
        assert obstacle_key(name) == "the locked door"

    def test_an_obstacle_needs_a_name(self):
        with pytest.raises(ValueError):
            obstacle_key("   ")


# --- H10 ----------------------------------------------------------------------------------------


class TestH10GroupTests:
    """H10: hits great success 2, success 1, failure 0, great failure -1; sum >= 2 success,
    1 falls short, 0 failure, < 0 disaster; failure or disaster binds."""

    @pytest.mark.parametrize(
        "outcomes, hits, expected",
        [
            (("great_success", "great_success"), 4, "success"),
            (("great_success", "failure"), 2, "success"),
            (("success", "success"), 2, "success"),
            (("success", "failure"), 1, "falls_short"),
            (("great_success", "great_failure"), 1, "falls_short"),
            (("success", "great_failure"), 0, "failure"),
            (("failure", "failure"), 0, "failure"),
            (("failure", "great_failure"), -1, "disaster"),
            (("great_failure", "great_failure"), -2, "disaster"),
        ],
    )
    def test_sums(self, outcomes, hits, expected):
        assert group_hits(outcomes) == hits
        assert group_outcome(hits) == expected

    @pytest.mark.parametrize(
        "outcome, bound",
        [("success", False), ("falls_short", False), ("failure", True), ("disaster", True)],
    )
    def test_failure_and_disaster_bind(self, outcome, bound):
        assert group_binds(outcome) is bound


# --- review: edge cases computed by hand against H1-H10 ---------------------------------------


class TestH1ExhaustedDeckTakesBackItsDiscardPile:
    """H1: "when a draw finds the deck empty, the discard pile is shuffled back in": the cards that
    come back are exactly that deck's discards, the other deck is untouched, and the refill happens
    on the draw that finds the deck empty (the Nth+1), never on the Nth."""

    def test_the_57th_draw_empties_the_player_deck_without_a_reshuffle(self):
        codes, decks, reshuffles = draws(new_decks(), "player", 57, seeded(SEED + 7))
        assert reshuffles == [] and decks.player.undrawn == () and len(decks.player.discard) == 57

    def test_the_58th_draw_refills_from_exactly_the_discards(self):
        _, decks, _ = draws(new_decks(), "player", 57, seeded(SEED + 7))
        decks = draw(decks, "gm", lambda n: 4).decks  # IV The Emperor, on the GM discard pile
        discards = set(decks.player.discard)
        drawn = draw(decks, "player", lambda n: n)  # the last of the refilled deck: the Fool
        assert drawn.reshuffles == (hmtw.Reshuffled("exhausted", ("player",)),)
        assert set(drawn.decks.player.undrawn) | {drawn.card.code} == discards == set(PLAYER_DECK)
        assert drawn.card.code == FOOL and drawn.decks.player.discard == (FOOL,)
        assert drawn.decks.gm == decks.gm  # the GM deck keeps its discard pile

    def test_the_22nd_gm_draw_refills_the_gm_deck_only(self):
        _, decks, _ = draws(new_decks(), "gm", 21, seeded(SEED + 8))
        decks = draw(decks, "player", first).decks
        drawn = draw(decks, "gm", lambda n: n)
        assert (len(drawn.decks.gm.undrawn), drawn.card.code) == (20, "major-21")
        assert drawn.decks.player == decks.player


class TestH4FavorOnceOnly:
    """H4: favor +3, disfavor -3, both cancel, whatever the card (the Fool too) and the score."""

    @pytest.mark.parametrize(
        "value, score, favor, disfavor, expected",
        [
            (0, 1, True, True, 1),  # Fool + 1, both cancel
            (0, 1, False, True, -2),  # Fool + 1 - 3: a total may go below zero
            (14, 4, True, False, 21),  # the highest total
            (14, 4, True, True, 18),
        ],
    )
    def test_extremes(self, value, score, favor, disfavor, expected):
        assert total(value, score, favor, disfavor) == expected


class TestH5BoundaryWithModifiers:
    """H5: 14 succeeds and 13 fails counting favor/disfavor; great only with the initial card in
    the tested suit."""

    @pytest.mark.parametrize(
        "code, attribute, score, favor, disfavor, expected_total, expected",
        [
            ("pentacles-9", "pentacles", 2, True, False, 14, "great_success"),  # 9 + 2 + 3
            ("pentacles-8", "pentacles", 2, True, False, 13, "failure"),  # 8 + 2 + 3
            ("pentacles-14", "pentacles", 2, False, True, 13, "failure"),  # King, disfavored
            ("pentacles-14", "pentacles", 3, False, True, 14, "great_success"),
            ("cups-14", "pentacles", 3, False, True, 14, "success"),  # King of another suit
            ("swords-10", "swords", 4, True, True, 14, "great_success"),  # both cancel
            ("swords-10", "swords", 3, True, True, 13, "failure"),
        ],
    )
    def test_boundaries(self, code, attribute, score, favor, disfavor, expected_total, expected):
        drawn = card(code)
        value = total(drawn.value, score, favor, disfavor)
        assert value == expected_total
        assert fate_outcome(drawn, attribute, value) == expected

    def test_the_fool_is_of_no_suit_so_never_great(self):
        assert card(FOOL).suit is None
        for suit in hmtw.SUITS:
            assert fate_outcome(card(FOOL), suit, 14) == "success"  # were a total of 14 reachable


class TestH6PushBoundaries:
    """H6: the pushed total is the failed total (favor/disfavor already in it, counted once) plus
    the pushed card; 14 succeeds, 13 is a great failure; the Fool is a great failure even if the
    failed total had somehow been 14."""

    @pytest.mark.parametrize(
        "failed_total, pushed, expected",
        [
            (13, "swords-1", "success"),  # 13 + Ace = 14
            (12, "swords-1", "great_failure"),  # 13
            (-2, "wands-14", "great_failure"),  # Fool + 1 - 3 = -2, + King = 12
            (-1, "wands-14", "great_failure"),  # 13
            (0, "wands-14", "success"),  # 14
        ],
    )
    def test_pushed_boundaries(self, failed_total, pushed, expected):
        pushed_card = card(pushed)
        assert push_outcome(pushed_card, failed_total + pushed_card.value) == expected

    def test_the_fool_on_a_push_adds_nothing_and_great_fails(self):
        for failed_total in (13, 14, 21):
            assert push_outcome(card(FOOL), failed_total + card(FOOL).value) == "great_failure"


class TestH7FoolBookkeeping:
    """H7: the reshuffle waits while any test is still open (a group's other member), and a
    reshuffle of both decks clears what was waiting."""

    def test_waits_for_every_open_test(self):
        decks = open_test(open_test(fool_drawn(new_decks(), in_challenge=False), "g/1"), "g/2")
        decks, reshuffles = finish_tests(close_test(decks, "g/1"))
        assert reshuffles == () and decks.reshuffle_after_test
        decks, reshuffles = finish_tests(close_test(decks, "g/2"))
        assert [r.reason for r in reshuffles] == ["fool"] and not decks.reshuffle_after_test

    def test_a_test_fool_reshuffles_now_and_a_challenge_fool_still_waits_for_the_round(self):
        """H12 (replacing the earlier "one reshuffle for both"): the ordinary test's Fool
        reshuffles when its test is finished; the Challenge Action's still reshuffles at the end
        of its round."""
        decks = fool_drawn(fool_drawn(new_decks(), in_challenge=True), in_challenge=False)
        after, reshuffles = begin_test(decks)
        assert [r.reason for r in reshuffles] == ["fool"]
        assert not after.reshuffle_after_test and after.reshuffle_at_round_end
        after, reshuffles = end_round(after)
        assert [r.reason for r in reshuffles] == ["fool"] and not after.reshuffle_at_round_end


class TestH10GroupSumsAfterPushes:
    """H10: every pair of member outcomes (pushes included) sums to the hits and group outcome
    computed by hand."""

    HAND = {"great_success": 2, "success": 1, "failure": 0, "great_failure": -1}

    @pytest.mark.parametrize("a", ["great_success", "success", "failure", "great_failure"])
    @pytest.mark.parametrize("b", ["great_success", "success", "failure", "great_failure"])
    def test_every_pair(self, a, b):
        hits = self.HAND[a] + self.HAND[b]
        expected = "success" if hits >= 2 else "falls_short" if hits == 1 else "failure" if hits == 0 else "disaster"
        assert group_hits((a, b)) == hits and group_outcome(hits) == expected
        assert group_binds(expected) is (expected in ("failure", "disaster"))


# --- H11-H13 (rulings added since the ruleset was built) ------------------------------------------


class TestH11PushWindow:
    """H11: a failed test may be pushed until the table next draws from the player deck for a
    test (a test of fate, a group test, a Challenge Action) or the GM closes the window."""

    def test_the_gm_closing_the_window_ends_every_open_test(self):
        decks = open_test(open_test(new_decks(), "g/1"), "g/2")
        after, reshuffles = close_pushes(decks)
        assert after.open_tests == () and reshuffles == ()
        assert after.player == decks.player and after.gm == decks.gm

    def test_closing_the_window_reshuffles_a_fool_drawn_in_an_open_test(self):
        """H11 with H7: the test is finished when its window closes, so its Fool reshuffles."""
        _, decks, _ = draws(new_decks(), "player", 3, first)
        decks = open_test(fool_drawn(decks, in_challenge=False), "t1")
        after, reshuffles = close_pushes(decks)
        assert [(r.reason, r.decks) for r in reshuffles] == [("fool", ("player", "gm"))]
        assert after.player == Pile(PLAYER_DECK) and not after.reshuffle_after_test

    def test_a_new_test_closes_the_window_like_the_gm(self):
        decks = open_test(fool_drawn(new_decks(), in_challenge=False), "t1")
        assert begin_test(decks) == close_pushes(decks)

    def test_a_gm_deck_draw_leaves_the_window_open(self):
        decks = open_test(new_decks(), "t1")
        assert draw(decks, "gm", first).decks.open_tests == ("t1",)

    def test_a_round_end_leaves_the_window_open(self):
        decks = open_test(fool_drawn(new_decks(), in_challenge=True), "t1")
        after, reshuffles = end_round(decks)
        assert after.open_tests == ("t1",) and [r.reason for r in reshuffles] == ["fool"]


class TestH12FoolAroundChallengeRounds:
    """H12: a Challenge Action's Fool reshuffles at the end of its round, even when ordinary tests
    of fate come between; an ordinary test's Fool when that test is finished (after its push)."""

    def test_ordinary_tests_between_do_not_reshuffle_a_challenge_fool(self):
        decks = fool_drawn(new_decks(), in_challenge=True)
        for test_id in ("t1", "t2"):  # two failed tests, each closed by the next draw
            decks, reshuffles = begin_test(decks)
            assert reshuffles == ()
            decks = open_test(draw(decks, "player", first).decks, test_id)
            decks, reshuffles = finish_tests(decks)
            assert reshuffles == ()
        assert decks.reshuffle_at_round_end and decks.open_tests == ("t2",)
        after, reshuffles = end_round(decks)
        assert [r.reason for r in reshuffles] == ["fool"] and after.player == Pile(PLAYER_DECK)

    def test_an_ordinary_fool_between_reshuffles_and_the_round_end_still_does(self):
        """The player deck ran out mid-round, so an ordinary test drew the Fool again: its
        reshuffle comes when that test is finished, and the Challenge's still at the round end."""
        decks = open_test(fool_drawn(fool_drawn(new_decks(), in_challenge=True), in_challenge=False), "t1")
        decks, reshuffles = finish_tests(close_test(decks, "t1"))  # pushed: finished
        assert [r.reason for r in reshuffles] == ["fool"]
        assert decks.reshuffle_at_round_end and not decks.reshuffle_after_test
        decks, reshuffles = end_round(decks)
        assert [r.reason for r in reshuffles] == ["fool"] and not decks.reshuffle_at_round_end

    def test_a_round_end_does_not_cut_short_an_ordinary_fools_wait(self):
        """An ordinary test's Fool, its test still open for a push, waits for that test even
        when the round ends (with a Challenge Fool) first."""
        decks = open_test(fool_drawn(fool_drawn(new_decks(), in_challenge=True), in_challenge=False), "t1")
        decks, reshuffles = end_round(decks)
        assert [r.reason for r in reshuffles] == ["fool"]
        assert decks.reshuffle_after_test and decks.open_tests == ("t1",)
        decks, reshuffles = finish_tests(close_test(decks, "t1"))
        assert [r.reason for r in reshuffles] == ["fool"] and not decks.reshuffle_after_test

    def test_an_ordinary_fool_waits_for_its_push_not_the_round_end(self):
        decks = open_test(fool_drawn(new_decks(), in_challenge=False), "t1")
        assert end_round(decks) == (decks, ())
        assert finish_tests(decks) == (decks, ())
        _, reshuffles = finish_tests(close_test(decks, "t1"))
        assert [r.reason for r in reshuffles] == ["fool"]

    def test_the_gm_reshuffle_ends_both_waits(self):
        decks = fool_drawn(fool_drawn(new_decks(), in_challenge=True), in_challenge=False)
        after, _ = reshuffle(decks, "gm")
        assert not after.reshuffle_after_test and not after.reshuffle_at_round_end


class TestH13ObstacleNames:
    """H13: obstacle names match ignoring letter case and repeated or surrounding spaces."""

    @pytest.mark.parametrize("name", ["Old Bridge", "old bridge", "OLD BRIDGE", "  old   bridge  ",
                                      "old bridge ", " Old  Bridge"])
    def test_one_obstacle(self, name):
        assert obstacle_key(name) == "old bridge"

    @pytest.mark.parametrize("name", ["oldbridge", "old bridges", "the old bridge", "old-bridge"])
    def test_other_letters_are_other_obstacles(self, name):
        assert obstacle_key(name) != "old bridge"


class TestH14CardsOnTheTable:
    """H14: a test's card lies on the table until its tests are finished; refills and reshuffles
    leave it out."""

    def test_a_held_card_lies_on_the_table_not_the_discard_pile(self):
        drawn = draw(new_decks(), "player", lambda n: 1, ("t1",))
        assert (drawn.decks.player.discard, drawn.decks.table) == ((), (hmtw.OnTable("swords-1", ("t1",)),))
        assert sorted(hmtw.player_cards(drawn.decks)) == sorted(PLAYER_DECK)

    def test_it_leaves_the_table_once_no_test_holding_it_is_open(self):
        decks = open_test(open_test(draw(new_decks(), "player", lambda n: 1, ("g/1", "g/2")).decks, "g/1"), "g/2")
        decks, _ = finish_tests(close_test(decks, "g/1"))
        assert decks.on_table() == {"swords-1"}  # g/2 may still push: the group is not resolved
        decks, _ = finish_tests(close_test(decks, "g/2"))
        assert (decks.table, decks.player.discard) == ((), ("swords-1",))

    def test_an_empty_deck_refills_without_the_table(self):
        decks = Decks(Pile((), tuple(PLAYER_DECK[1:])), Pile(GM_DECK), open_tests=("t1",),
                      table=(hmtw.OnTable(PLAYER_DECK[0], ("t1",)),))
        faces: list[int] = []
        drawn = draw(decks, "player", lambda n: faces.append(n) or n, ("t1",))
        assert faces == [56] and drawn.card.code == FOOL
        assert drawn.decks.on_table() == {PLAYER_DECK[0], FOOL}

    def test_every_reshuffle_leaves_the_table_out(self):
        decks = draw(new_decks(), "player", lambda n: 5, ("t1",)).decks
        for reason in ("fool", "gm"):
            after, _ = reshuffle(decks, reason)
            assert "swords-5" not in after.player.undrawn and len(after.player.undrawn) == 56

    def test_the_gm_deck_has_no_table(self):
        with pytest.raises(ValueError, match="only player cards"):
            draw(new_decks(), "gm", lambda n: 1, ("t1",))
