"""pool rules (``bridge/rulesets/pool/rules.py``) against seed 004 and the rulings P1-P16 of
``docs/rules.md``: one class per ruling, each pinned with values; then the exact odds
of a check against the roller."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from fractions import Fraction

import pytest

from bridge.dice import ScriptedDice
from bridge.rulesets.pool import rules as pool
from bridge.rulesets.pool.rules import (ADVANTAGE, DISADVANTAGE, NORMAL, OnesPaid, chance_to_pass, count_successes,
                               dc_table_problems, gain_level, kept_d20, pay_ones, passes, pool_size,
                               rerolled_total, rest, roll_d20s, roll_mode, roll_pool, roll_stat_die,
                               save_passes, save_total, spend_fate, stat_row, stat_table_problems,
                               success_distribution, success_threshold, task_tier_name, tier_for_level)


@dataclass(frozen=True)
class Row:
    """A stat table row (fits ``pool.StatRowLike``)."""

    min_score: int
    die: int
    modifier: int


TABLE = [Row(3, -6, -2), Row(8, -4, -1), Row(10, 0, 0), Row(12, 4, 1), Row(14, 6, 2), Row(16, 8, 3)]


class TestTier:
    """Seed: Tier = half the level, rounded up."""

    @pytest.mark.parametrize(("level", "tier"), [(1, 1), (2, 1), (3, 2), (4, 2), (5, 3), (9, 5), (10, 5)])
    def test_half_level_rounded_up(self, level, tier):
        assert tier_for_level(level) == tier

    def test_level_zero_raises(self):
        with pytest.raises(ValueError, match="level"):
            tier_for_level(0)


class TestP1PoolSize:
    """P1: stat modifier + Tier (+ bought); a negative modifier gives Tier dice and only 6s."""

    @pytest.mark.parametrize(
        ("modifier", "tier", "bought", "size"),
        [(2, 2, 0, 4), (0, 1, 0, 1), (3, 5, 2, 10), (-1, 2, 0, 2), (-2, 3, 1, 4), (0, 2, 3, 5)],
    )
    def test_size(self, modifier, tier, bought, size):
        assert pool_size(modifier, tier, bought) == size

    def test_negative_modifier_succeeds_only_on_six(self):
        assert success_threshold(-1, NORMAL) == 6
        assert count_successes([5, 6, 4, 6], success_threshold(-1, NORMAL)) == 2

    def test_plus_zero_is_not_a_penalty(self):
        """Seed: at a stat of 10-11 (+0) the pool succeeds on 5+."""
        assert success_threshold(0, NORMAL) == 5

    @pytest.mark.parametrize(("tier", "bought"), [(0, 0), (1, -1)])
    def test_bad_inputs_raise(self, tier, bought):
        with pytest.raises(ValueError):
            pool_size(2, tier, bought)


class TestP2Dice:
    """P2: 1 costs stamina and pays Fate; 2-4 nothing; 5 succeeds; 6 succeeds and adds a die that
    counts the same way (1s included)."""

    def test_faces(self):
        assert count_successes([1, 2, 3, 4, 5, 6], 5) == 2

    def test_a_six_adds_one_die_after_the_pool(self):
        dice = ScriptedDice([6, 3, 2])
        assert roll_pool(2, dice) == [6, 3, 2]
        assert dice.used == 3

    def test_explosions_chain(self):
        """Two 6s in the pool, then an exploded 6: three extra dice in all."""
        assert roll_pool(3, ScriptedDice([6, 6, 2, 6, 4, 1, 5])) == [6, 6, 2, 6, 4, 1]

    def test_a_one_on_an_exploded_die_counts(self):
        faces = roll_pool(1, ScriptedDice([6, 1]))
        assert faces == [6, 1]
        assert pay_ones(faces.count(1), stamina=3, holds_fate=True, narrative=False) == OnesPaid(1, 1, (True,))

    @pytest.mark.parametrize(
        ("ones", "stamina", "lost", "gained", "paid"),
        [
            (2, 5, 2, 2, (True, True)),
            (3, 1, 1, 1, (True, False, False)),  # stamina runs out on the first 1
            (1, 0, 0, 0, (False,)),  # no stamina: costs nothing, pays nothing
            (0, 0, 0, 0, ()),
        ],
    )
    def test_ones_cost_stamina_and_pay_fate(self, ones, stamina, lost, gained, paid):
        assert pay_ones(ones, stamina, holds_fate=True, narrative=False) == OnesPaid(lost, gained, paid)

    def test_negative_counts_raise(self):
        with pytest.raises(ValueError):
            pay_ones(-1, 2, True, False)


class TestP3Thresholds:
    """P3: advantage 4+, normal 5+, disadvantage 6; a negative stat 5+ at advantage, 6 otherwise."""

    @pytest.mark.parametrize(
        ("modifier", "mode", "threshold"),
        [(2, NORMAL, 5), (2, ADVANTAGE, 4), (2, DISADVANTAGE, 6), (0, ADVANTAGE, 4),
         (-1, NORMAL, 6), (-1, ADVANTAGE, 5), (-3, DISADVANTAGE, 6)],
    )
    def test_threshold(self, modifier, mode, threshold):
        assert success_threshold(modifier, mode) == threshold

    def test_fours_count_only_at_advantage(self):
        faces = [4, 4, 5, 2]
        assert [count_successes(faces, success_threshold(1, m)) for m in (ADVANTAGE, NORMAL, DISADVANTAGE)] == [3, 1, 0]


class TestP4Pass:
    """P4: pass when successes reach the task's tier (or a rule's number); names of task tiers."""

    @pytest.mark.parametrize(("successes", "needed", "passed"), [(2, 2, True), (3, 2, True), (1, 2, False), (0, 1, False)])
    def test_pass(self, successes, needed, passed):
        assert passes(successes, needed) is passed

    @pytest.mark.parametrize(("tier", "name"), [(1, "Basic"), (2, "Hard"), (4, "Heroic"), (5, "Legendary")])
    def test_names(self, tier, name):
        assert task_tier_name(tier, ["Hard", "Daunting", "Heroic"]) == name

    def test_no_invented_names(self):
        """P11: with no configured names, tiers 2..4 have none; 1 and 5 keep the seed's."""
        assert [task_tier_name(t, None) for t in (1, 2, 3, 4, 5)] == ["Basic", None, None, None, "Legendary"]

    @pytest.mark.parametrize("tier", [0, 6])
    def test_out_of_range(self, tier):
        with pytest.raises(ValueError, match="1..5"):
            task_tier_name(tier, None)


class TestP5SessionFateFirst:
    """P5: session Fate is spent before earned Fate; 3 session Fate a session."""

    def test_session_fate_is_three(self):
        assert pool.SESSION_FATE == 3

    @pytest.mark.parametrize(
        ("session", "earned", "cost", "from_session", "from_earned"),
        [(3, 2, 1, 1, 0), (1, 2, 2, 1, 1), (0, 2, 2, 0, 2), (3, 0, 3, 3, 0), (2, 2, 0, 0, 0)],
    )
    def test_order(self, session, earned, cost, from_session, from_earned):
        spent = spend_fate(session, earned, cost)
        assert (spent.from_session, spent.from_earned) == (from_session, from_earned)

    @pytest.mark.parametrize(("session", "earned", "cost"), [(0, 0, 1), (1, 1, 3), (2, 0, -1)])
    def test_not_enough_or_negative_raises(self, session, earned, cost):
        with pytest.raises(ValueError):
            spend_fate(session, earned, cost)


class TestP6BuyingDice:
    """P6: 1 Fate per die, added to the pool before the roll."""

    def test_bought_dice_join_the_pool(self):
        assert pool.FATE_PER_DIE == 1
        assert pool_size(1, 2, 2) - pool_size(1, 2, 0) == 2

    def test_bought_dice_help_a_negative_stat(self):
        assert pool_size(-2, 1, 1) == 2


class TestP7Reroll:
    """P7: only the kept d20 changes; at advantage/disadvantage two new d20s, higher/lower kept."""

    @pytest.mark.parametrize(
        ("d20s", "mode", "kept"),
        [([12], NORMAL, 12), ([4, 18], ADVANTAGE, 18), ([4, 18], DISADVANTAGE, 4), ([9, 9], ADVANTAGE, 9)],
    )
    def test_kept(self, d20s, mode, kept):
        assert kept_d20(d20s, mode) == kept

    def test_reroll_at_advantage_keeps_the_higher_of_two_new_d20s(self):
        new = roll_d20s(ADVANTAGE, ScriptedDice([4, 18]))
        assert new == [4, 18] and kept_d20(new, ADVANTAGE) == 18
        # old 2d20kh [3, 12] + 5 = 17; the new kept 18 replaces the 12
        assert rerolled_total(17, kept_d20([3, 12], ADVANTAGE), 18) == 23

    def test_modifiers_and_other_dice_stand(self):
        assert rerolled_total(total=21, kept_before=9, kept_after=2) == 14

    @pytest.mark.parametrize(("d20s", "mode"), [([1, 2], NORMAL), ([5], ADVANTAGE), ([5], DISADVANTAGE)])
    def test_count_must_fit_the_mode(self, d20s, mode):
        with pytest.raises(ValueError, match="d20"):
            kept_d20(d20s, mode)


class TestP8RestAndDestiny:
    """P8: a Rest turns earned Fate into Destiny; a level gained resets Destiny to 0."""

    @pytest.mark.parametrize(("earned", "destiny", "after"), [(2, 0, (0, 2)), (3, 1, (0, 4)), (0, 5, (0, 5))])
    def test_rest(self, earned, destiny, after):
        assert rest(earned, destiny) == after

    def test_level_gain_resets_destiny(self):
        assert gain_level(3, 4) == (4, 0)

    def test_a_level_costs_at_least_one_destiny(self):
        with pytest.raises(ValueError, match="at least 1 Destiny"):
            gain_level(3, 0)

    def test_destiny_is_never_spent_as_fate(self):
        """spend_fate takes no Destiny: 0 session + 0 earned cannot pay, whatever the Destiny."""
        with pytest.raises(ValueError):
            spend_fate(0, 0, 1)


class TestP9Saves:
    """P9: d20 + stat die + Fate die + Tier + bonus vs DC; equal passes."""

    def test_total(self):
        assert save_total(kept=11, stat_die=4, fate_die=-2, tier=2, bonus=1) == 16

    @pytest.mark.parametrize(("total", "dc", "passed"), [(14, 14, True), (13, 14, False), (20, 14, True)])
    def test_equal_passes(self, total, dc, passed):
        assert save_passes(total, dc) is passed

    @pytest.mark.parametrize(("die", "scripted", "value"), [(6, 4, 4), (-4, 3, -3), (0, None, 0), (12, 12, 12)])
    def test_signed_stat_die(self, die, scripted, value):
        dice = ScriptedDice([] if scripted is None else [scripted])
        assert roll_stat_die(die, dice) == value
        assert dice.used == (0 if scripted is None else 1)

    def test_unknown_die_raises(self):
        with pytest.raises(ValueError, match="stat die"):
            roll_stat_die(7, ScriptedDice([1]))

    def test_disadvantage_rolls_two_and_keeps_the_lower(self):
        assert kept_d20(roll_d20s(DISADVANTAGE, ScriptedDice([15, 6])), DISADVANTAGE) == 6


class TestP10NarrativeConsequences:
    """P10: a player character's 1 pays Fate and costs no stamina, even at 0 stamina."""

    @pytest.mark.parametrize("stamina", [0, 1, 5])
    def test_pays_without_stamina(self, stamina):
        assert pay_ones(2, stamina, holds_fate=True, narrative=True) == OnesPaid(0, 2, (True, True))


class TestP11WorldTables:
    """P11: the stat table, DC table and tier names are world configuration, validated."""

    @pytest.mark.parametrize(("score", "row"), [(3, TABLE[0]), (9, TABLE[1]), (10, TABLE[2]), (11, TABLE[2]),
                                               (15, TABLE[4]), (30, TABLE[5])])
    def test_lookup(self, score, row):
        assert stat_row(score, TABLE) == row

    def test_below_the_table_or_empty_is_none(self):
        assert stat_row(2, TABLE) is None
        assert stat_row(12, []) is None

    def test_valid_table(self):
        assert stat_table_problems(TABLE) == []

    @pytest.mark.parametrize(
        ("rows", "problem"),
        [
            ([Row(10, 0, 0), Row(10, 4, 1)], "row 1: min_score 10 does not rise"),
            ([Row(10, 5, 0)], "row 0: the die 5"),
            ([Row(10, 4, 1), Row(12, 4, 0)], "row 1: die or modifier falls"),
            ([Row(10, 6, 1), Row(12, 4, 2)], "row 1: die or modifier falls"),
        ],
    )
    def test_invalid_tables(self, rows, problem):
        assert any(str(p).startswith(problem) for p in stat_table_problems(rows))

    def test_dc_table(self):
        assert dc_table_problems([10, 12, 14, 16, 18]) == []
        assert list(map(str, dc_table_problems([10, 12, 11, 16, 18]))) == ["effect tier 3: DC 11 is below tier 2's 12"]
        assert list(map(str, dc_table_problems([10, 12]))) == ["2 DCs given, one per effect tier (1, 2, 3, 4, 5) needed"]


class TestP12Retainers:
    """P12: a retainer's or follower's 1s cost stamina and pay nothing; the narrative option is a
    player's (P10), so it changes nothing for them."""

    @pytest.mark.parametrize("narrative", [False, True])
    def test_ones(self, narrative):
        assert pay_ones(2, 1, holds_fate=False, narrative=narrative) == OnesPaid(1, 0, (True, False))

    def test_only_player_characters_hold_fate(self):
        assert pool.FATE_HOLDERS == {"pc"} and set(pool.CHARACTER_KINDS) == {"pc", "retainer", "follower"}


class TestP13Sources:
    """P13: any number of sources is one advantage/disadvantage; both cancel."""

    @pytest.mark.parametrize(
        ("adv", "dis", "mode"),
        [(0, 0, NORMAL), (1, 0, ADVANTAGE), (3, 0, ADVANTAGE), (0, 2, DISADVANTAGE), (1, 1, NORMAL), (3, 1, NORMAL)],
    )
    def test_mode(self, adv, dis, mode):
        assert roll_mode(adv, dis) == mode

    def test_negative_raises(self):
        with pytest.raises(ValueError):
            roll_mode(-1, 0)


# --- the exact odds against the roller --------------------------------------------------------


def enumerated(size: int, threshold: int, up_to: int) -> list[Fraction]:
    """Exhaustive enumeration of every face sequence (explosions included) until ``up_to``
    successes: an independent computation of ``success_distribution``."""
    result = [Fraction(0)] * (up_to + 1)

    def walk(dice_left: int, successes: int, chance: Fraction) -> None:
        if successes >= up_to:
            result[up_to] += chance
            return
        if dice_left == 0:
            result[successes] += chance
            return
        for face in range(1, 7):
            walk(dice_left - 1 + (face == 6), successes + (face >= threshold), chance / 6)

    walk(size, 0, Fraction(1))
    return result


def exact(size: int, threshold: int, up_to: int) -> list[Fraction]:
    numerators, denominator = success_distribution(size, threshold, up_to)
    return [Fraction(n, denominator) for n in numerators]


class SeededDice:
    """A fixed-seed roller (``random.Random``) for frequency runs."""

    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)

    def roll(self, faces: int) -> int:
        return self._random.randint(1, faces)


MODES = {"normal": 5, "advantage": 4, "disadvantage": 6}  # thresholds at a non-negative stat


class TestExactOdds:
    """The pool's success distribution by convolution equals an exhaustive enumeration, and the
    roller's frequencies over a fixed-seed run match it (pools of 2-6 dice, every mode)."""

    def test_one_die_by_hand(self):
        # P(0) = 4/6; P(1) = a 5, or a 6 then a failure = 1/6 + 1/6 * 4/6; P(>= 2) the rest
        assert exact(1, 5, 2) == [Fraction(2, 3), Fraction(5, 18), Fraction(1, 18)]

    @pytest.mark.parametrize("size", [1, 2, 3, 4])
    @pytest.mark.parametrize("threshold", [4, 5, 6])
    def test_convolution_equals_enumeration(self, size, threshold):
        assert exact(size, threshold, 4) == enumerated(size, threshold, 4)

    def test_sums_to_one_and_chance_to_pass(self):
        assert sum(exact(5, 5, 6)) == 1
        assert chance_to_pass(3, 5, 1) == pytest.approx(1 - (4 / 6) ** 3)  # one success of three dice
        assert chance_to_pass(2, 6, 1) == pytest.approx(1 - (5 / 6) ** 2)

    @pytest.mark.parametrize("size", [2, 3, 4, 5, 6])
    @pytest.mark.parametrize("mode", list(MODES))
    def test_roller_frequencies_match(self, size, mode):
        runs, up_to, threshold = 20_000, 6, MODES[mode]
        dice = SeededDice(1000 * size + threshold)
        counts = [0] * (up_to + 1)
        for _ in range(runs):
            successes = count_successes(roll_pool(size, dice), threshold)
            counts[min(successes, up_to)] += 1
        for k, p in enumerate(exact(size, threshold, up_to)):
            tolerance = 5 * math.sqrt(float(p) * (1 - float(p)) / runs) + 1e-3
            assert abs(counts[k] / runs - float(p)) <= tolerance, (k, counts[k] / runs, float(p))

    def test_bad_arguments(self):
        with pytest.raises(ValueError):
            success_distribution(2, 1, 3)
        with pytest.raises(ValueError):
            success_distribution(2, 5, 0)


# --- independent audit: edge cases computed by hand from seed 004 and P1-P13 -------------------


class TestAuditP1NegativeModifierBoundary:
    """P1: "Check pool = stat modifier + Tier (+ dice bought with Fate). With a negative stat
    modifier the pool is Tier dice and only 6 succeeds"; seed: "A +0 modifier is not a penalty"."""

    @pytest.mark.parametrize(("modifier", "size", "threshold"), [(-1, 3, 6), (0, 3, 5), (1, 4, 5)])
    def test_minus_one_zero_plus_one_at_tier_three(self, modifier, size, threshold):
        assert (pool_size(modifier, 3), success_threshold(modifier, NORMAL)) == (size, threshold)

    def test_bought_dice_still_join_a_negative_pool_which_still_needs_sixes(self):
        """-5 adds nothing: Tier 1 + 2 bought = 3 dice, 6s only."""
        assert (pool_size(-5, 1, 2), success_threshold(-5, NORMAL)) == (3, 6)

    @pytest.mark.parametrize(("level", "size"), [(4, 3), (5, 4)])
    def test_tier_from_level_feeds_the_pool(self, level, size):
        """+1 at level 4 (Tier 2) is 3 dice; at level 5 (Tier 3) it is 4."""
        assert pool_size(1, tier_for_level(level)) == size


class TestAuditP2Explosions:
    """P2: "6 success and roll one more die (which counts the same way, 1s included)"; a 1 costs
    1 stamina and pays 1 earned Fate until stamina is gone."""

    def test_no_six_rolls_exactly_the_pool(self):
        """Three dice, no 6: the fourth scripted value (not even a d6 face) is never taken."""
        dice = ScriptedDice([5, 4, 3, 7])
        assert roll_pool(3, dice) == [5, 4, 3] and dice.used == 3

    def test_an_exploded_six_explodes_again_until_a_non_six(self):
        """One die: 6, 6, 6, 1 = three successes and a 1 on the third extra die."""
        dice = ScriptedDice([6, 6, 6, 1, 7])
        faces = roll_pool(1, dice)
        assert faces == [6, 6, 6, 1] and dice.used == 4
        assert count_successes(faces, 5) == 3 and faces.count(1) == 1

    def test_two_pool_sixes_and_an_exploding_extra_die(self):
        """Pool [6, 6]: two extra dice owed; the first extra is a 6 (one more owed): 6, 2, 3."""
        faces = roll_pool(2, ScriptedDice([6, 6, 6, 2, 3]))
        assert faces == [6, 6, 6, 2, 3]
        assert [count_successes(faces, t) for t in (4, 5, 6)] == [3, 3, 3]

    def test_the_unpaid_one_is_the_last_in_roll_order(self):
        """Pool [1, 6] + extra 1, stamina 1: the pool's 1 pays, the extra die's 1 does not."""
        faces = roll_pool(2, ScriptedDice([1, 6, 1]))
        assert pay_ones(faces.count(1), stamina=1, holds_fate=True, narrative=False) == OnesPaid(1, 1, (True, False))

    def test_stamina_exactly_enough(self):
        assert pay_ones(3, stamina=3, holds_fate=True, narrative=False) == OnesPaid(3, 3, (True, True, True))


class TestAuditP3BothAtOnce:
    """P3/P13: advantage 4+, disadvantage only 6, both cancel (a normal roll); a negative stat 5+
    with advantage, 6 with disadvantage and 6 when both cancel."""

    @pytest.mark.parametrize(
        ("modifier", "adv", "dis", "threshold"),
        [(2, 1, 1, 5), (2, 3, 0, 4), (2, 0, 3, 6), (-1, 1, 1, 6), (-1, 2, 0, 5), (-1, 0, 2, 6), (0, 1, 0, 4)],
    )
    def test_threshold_from_sources(self, modifier, adv, dis, threshold):
        assert success_threshold(modifier, roll_mode(adv, dis)) == threshold


class TestAuditP4ExplosionsCountTowardTheTier:
    """P4: pass when successes >= the task's tier (or a rule's number); an exploded die's success
    counts."""

    def test_one_die_can_pass_tier_two(self):
        assert passes(count_successes(roll_pool(1, ScriptedDice([6, 5])), 5), 2)

    def test_a_six_then_a_failure_is_one_success(self):
        assert not passes(count_successes(roll_pool(1, ScriptedDice([6, 2])), 5), 2)

    @pytest.mark.parametrize(("successes", "needed", "passed"), [(4, 5, False), (5, 5, True), (1, 1, True)])
    def test_boundary(self, successes, needed, passed):
        assert passes(successes, needed) is passed


class TestAuditP5SpendAll:
    """P5: session Fate is spent first; a cost equal to all Fate held takes all of both."""

    def test_all_of_both(self):
        assert spend_fate(2, 3, 5) == pool.FateSpent(from_session=2, from_earned=3)

    def test_one_more_than_held(self):
        with pytest.raises(ValueError):
            spend_fate(2, 3, 6)

    def test_nothing_from_nothing(self):
        assert spend_fate(0, 0, 0) == pool.FateSpent(0, 0)


class TestAuditP7RerollTotals:
    """P7: only the kept d20 changes the total; at disadvantage the lower of two new d20s is kept;
    the new roll stands even when worse; it may be paid for again."""

    def test_disadvantage(self):
        """Old [15, 6] kept 6, total 10 (+4 of modifiers); new [19, 8] keeps 8: total 12."""
        new = roll_d20s(DISADVANTAGE, ScriptedDice([19, 8]))
        assert rerolled_total(10, kept_d20([15, 6], DISADVANTAGE), kept_d20(new, DISADVANTAGE)) == 12

    def test_a_worse_roll_stands(self):
        """Old [3, 12] kept 12, total 17; new [4, 2] keeps 4: total 9."""
        assert rerolled_total(17, 12, kept_d20([4, 2], ADVANTAGE)) == 9

    def test_chained_rerolls(self):
        """17 (kept 12) -> kept 18: 23 -> kept 1: 6 (the modifiers, +5, stand throughout)."""
        assert rerolled_total(rerolled_total(17, 12, 18), 18, 1) == 6


class TestAuditP8RestAndLevel:
    """P8: earned Fate -> Destiny at a Rest; Destiny resets to 0 on a level (1 Destiny is the
    least a level costs)."""

    def test_rest_with_nothing_earned(self):
        assert rest(0, 0) == (0, 0)

    def test_exactly_one_destiny_buys_the_last_level(self):
        assert gain_level(9, 1) == (10, 0)


class TestAuditP9SaveTotals:
    """P9: d20 + stat die + Fate die + Tier (+ bonus) vs DC; total >= DC passes."""

    def test_fate_save_rolls_the_fate_die_once(self):
        """Fate d8 rolled 7, Tier 3, kept 10: 20 (the Fate die passed once, as the stat die)."""
        assert save_total(kept=10, stat_die=7, fate_die=0, tier=3) == 20

    def test_negative_dice_can_take_the_total_below_one(self):
        """1 - 4 - 6 + Tier 1 = -8: fails even DC 1."""
        total = save_total(kept=1, stat_die=-4, fate_die=-6, tier=1)
        assert total == -8 and not save_passes(total, 1)

    @pytest.mark.parametrize(("bonus", "passed"), [(-1, True), (-2, False)])
    def test_bonus_at_the_boundary(self, bonus, passed):
        """10 + 3 + 2 + 2 = 17; with -1 it is 16 vs DC 16 (passes), with -2 15 (fails)."""
        assert save_passes(save_total(10, 3, 2, 2, bonus), 16) is passed


class TestAuditP10P12NarrativeAndRetainers:
    """P10: the narrative option is a player's: a PC's 1 pays Fate and costs no stamina. P12:
    retainers and followers hold no Fate: their 1s cost stamina (while it lasts) and pay nothing."""

    def test_retainer_at_no_stamina_with_the_option(self):
        assert pay_ones(3, 0, holds_fate=False, narrative=True) == OnesPaid(0, 0, (False, False, False))

    def test_retainer_runs_out_of_stamina(self):
        assert pay_ones(3, 2, holds_fate=False, narrative=False) == OnesPaid(2, 0, (True, True, False))

    def test_no_ones_no_payment(self):
        assert pay_ones(0, 0, holds_fate=True, narrative=True) == OnesPaid(0, 0, ())


class TestAuditExactOddsByHand:
    """P2/P3/P4: the pass chance, computed by hand for small pools (explosions included)."""

    def test_one_die_sixes_only_needing_two(self):
        """6 then 6: 1/36."""
        assert exact(1, 6, 2)[-1] == Fraction(1, 36)

    def test_one_die_at_advantage(self):
        """4+: P(0) = 1/2; P(1) = a 4 or 5 (2/6) + a 6 then a failure (1/6 * 3/6) = 5/12;
        P(>= 2) = a 6 then a 4+ = 1/12."""
        assert exact(1, 4, 2) == [Fraction(1, 2), Fraction(5, 12), Fraction(1, 12)]

    def test_two_dice_needing_two(self):
        """Per die P(0) = 2/3, P(1) = 5/18: 1 - 4/9 - 2 * 2/3 * 5/18 = 5/27."""
        assert exact(2, 5, 2)[-1] == Fraction(5, 27)
        assert chance_to_pass(2, 5, 2) == pytest.approx(5 / 27)


# --- P14-P16 (rulings added since the ruleset was built) ------------------------------------------


class TestP14RetainersUnderEitherOption:
    """P14: a retainer's or follower's 1 costs stamina and pays nothing under either GM option
    (P12 before P10); a player character's pays under both (P2, P10)."""

    @pytest.mark.parametrize("narrative", [False, True])
    @pytest.mark.parametrize(("ones", "stamina", "paid"), [
        (1, 3, OnesPaid(1, 0, (True,))),
        (2, 2, OnesPaid(2, 0, (True, True))),
        (3, 1, OnesPaid(1, 0, (True, False, False))),
        (2, 0, OnesPaid(0, 0, (False, False))),
    ])
    def test_costs_stamina_pays_nothing(self, narrative, ones, stamina, paid):
        assert pay_ones(ones, stamina, holds_fate=False, narrative=narrative) == paid

    def test_a_player_character_beside_it(self):
        """The same three 1s at 1 stamina: standard 1 stamina for 1 Fate; narrative 0 for 3."""
        assert pay_ones(3, 1, holds_fate=True, narrative=False) == OnesPaid(1, 1, (True, False, False))
        assert pay_ones(3, 1, holds_fate=True, narrative=True) == OnesPaid(0, 3, (True, True, True))


class TestP15TierOnSaves:
    """P15: a save adds the roller's Tier, whoever rolls (P9); Tier is half the level rounded up."""

    @pytest.mark.parametrize(("level", "total"), [(1, 13), (2, 13), (3, 14), (6, 15), (10, 17)])
    def test_tier_by_level(self, level, total):
        """d20 kept 9 + stat die 4 - Fate die 1 + Tier."""
        assert save_total(kept=9, stat_die=4, fate_die=-1, tier=tier_for_level(level)) == total


class TestP16LevelCost:
    """P16: a level gained costs at least 1 Destiny (all of it: Destiny resets, P8)."""

    @pytest.mark.parametrize(("level", "destiny", "after"), [(1, 1, (2, 0)), (5, 3, (6, 0)), (9, 1, (10, 0))])
    def test_costs_all_destiny(self, level, destiny, after):
        assert gain_level(level, destiny) == after

    @pytest.mark.parametrize("level", [1, 5, 9])
    def test_refused_at_zero_destiny(self, level):
        with pytest.raises(ValueError, match="at least 1 Destiny, 0 held"):
            gain_level(level, 0)

    def test_the_top_level_is_ten(self):
        assert pool.MAX_LEVEL == 10 and tier_for_level(pool.MAX_LEVEL) == pool.MAX_TIER == 5
