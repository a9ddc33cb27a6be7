"""Mythic Fate Chart rules (``bridge/rulesets/mythic/rules.py``) against seed 003 and the rulings M1-M9 of
``docs/rules.md``.

One class per ruling; every ruling is pinned with concrete values. The chart (M2) is checked
cell by cell against the table printed in the rulings themselves (``tests/fixtures/rules/DECISIONS.md``).
"""

from __future__ import annotations

import functools
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.rulesets.mythic import rules as mythic
from bridge.rulesets.mythic.rules import (
    ANSWERS,
    NAMED_QUESTIONS,
    ModifierRefused,
    Thresholds,
    answer,
    apply_modifiers,
    ask,
    chance,
    format_shift,
    named_question,
    odds_ranks,
    parse_odds,
    parse_rank,
    rank_name,
    shifted,
    thresholds,
)

from .helpers import FIXTURES

DECISIONS = FIXTURES / "rules" / "DECISIONS.md"
ABBREVIATIONS = ("M2+", "Min", "Weak", "Low", "BAv", "Avg", "AAv", "High", "Exc", "Inc", "Awe", "Sup", "S2+")
M2P, MIN, WEAK, LOW, BAV, AVG, AAV, HIGH, EXC, INC, AWE, SUP, S2P = range(13)


@functools.cache
def decisions_chart() -> tuple[tuple[str, ...], dict[str, list[int]]]:
    """The M2 block of DECISIONS.md: its column headers and each row's 13 values by row name."""
    if not DECISIONS.exists():
        pytest.fail(f"DECISIONS.md not found: expected it at {DECISIONS}")
    text = DECISIONS.read_text()
    block = re.search(r"- M2 .*?```\n(.*?)```", text, re.S).group(1).splitlines()
    header = tuple(block[0].split())
    rows = {line.split()[0]: [int(v) for v in line.split()[1:]] for line in block[1:] if line.strip()}
    return header, rows


# --- M1 ----------------------------------------------------------------------------------------


class TestM1Ranks:
    """M1: the ladder Miniscule 2+ .. Superhuman 2+, and Superhuman / Miniscule N+ beyond it;
    names read case-insensitively with the chart's short forms."""

    def test_ladder_in_order(self):
        assert mythic.RANKS == ("Miniscule 2+", "Miniscule", "Weak", "Low", "Below Average", "Average",
                                "Above Average", "High", "Exceptional", "Incredible", "Awesome",
                                "Superhuman", "Superhuman 2+")

    @pytest.mark.parametrize("rank", range(13), ids=ABBREVIATIONS)
    def test_full_names_read_in_any_case(self, rank):
        name = mythic.RANKS[rank]
        assert parse_rank(name) == parse_rank(name.upper()) == parse_rank(name.lower()) == rank

    @pytest.mark.parametrize("rank", range(13), ids=ABBREVIATIONS)
    def test_the_charts_abbreviations_read(self, rank):
        assert parse_rank(ABBREVIATIONS[rank]) == parse_rank(ABBREVIATIONS[rank].lower()) == rank

    @pytest.mark.parametrize(
        ("text", "rank"),
        [
            ("avg", AVG), ("  Above   average ", AAV), ("below-average", BAV), ("Below Avg", BAV),
            ("minuscule", MIN), ("m", MIN), ("sup", SUP), ("s", SUP), ("exc.", EXC),
            ("s2+", S2P), ("S 2+", S2P), ("superhuman 2+", S2P), ("m2+", M2P), ("Min 2+", M2P),
            ("superhuman 3+", 13), ("S3+", 13), ("sup 10+", 20), ("Miniscule 3+", -1), ("m4+", -2),
            ("minuscule 12 +", -10),
        ],
    )
    def test_short_forms_and_ranks_beyond(self, text, rank):
        assert parse_rank(text) == rank

    @pytest.mark.parametrize(
        ("text", "why"),
        [
            ("High 2+", "only Superhuman and Miniscule take N+"),
            ("superhuman 1+", "from 2+ up"),
            ("superhuman 0+", "from 2+ up"),
            ("superhuman 100+", "unknown rank"),
            ("3+", "unknown rank"),
            ("", "unknown rank"),
            ("godlike", "unknown rank"),
            ("Average Joe", "unknown rank"),
            ("s+2", "unknown rank"),
        ],
    )
    def test_unknown_ranks_are_refused_naming_the_forms(self, text, why):
        with pytest.raises(ValueError, match=re.escape(why)) as caught:
            parse_rank(text)
        assert repr(text) in str(caught.value)

    @pytest.mark.parametrize(
        ("rank", "name"),
        [(M2P, "Miniscule 2+"), (AVG, "Average"), (S2P, "Superhuman 2+"), (13, "Superhuman 3+"),
         (20, "Superhuman 10+"), (-1, "Miniscule 3+"), (-7, "Miniscule 9+")],
    )
    def test_rank_names(self, rank, name):
        assert rank_name(rank) == name

    @pytest.mark.parametrize("rank", range(-30, 45))
    def test_every_name_reads_back_as_its_rank(self, rank):
        assert parse_rank(rank_name(rank)) == rank


# --- M2 ----------------------------------------------------------------------------------------


class TestM2Chart:
    """M2: every one of the 169 cells equals the table in DECISIONS.md."""

    def test_headers_are_the_ladder_in_order(self):
        header, rows = decisions_chart()
        assert header == ABBREVIATIONS
        assert tuple(rows) == ABBREVIATIONS
        assert [parse_rank(h) for h in header] == list(range(13))

    @pytest.mark.parametrize("acting", range(13), ids=ABBREVIATIONS)
    @pytest.mark.parametrize("difficulty", range(13), ids=ABBREVIATIONS)
    def test_cell(self, acting, difficulty):
        _, rows = decisions_chart()
        assert chance(acting, difficulty) == rows[ABBREVIATIONS[acting]][difficulty]

    @pytest.mark.parametrize(
        ("acting", "difficulty", "p"),
        [(AVG, AVG, 50), (HIGH, AVG, 75), (M2P, S2P, -65), (S2P, M2P, 170), (LOW, INC, 5), (AAV, S2P, 0)],
    )
    def test_landmark_cells(self, acting, difficulty, p):
        assert chance(acting, difficulty) == p


# --- M3 ----------------------------------------------------------------------------------------


class TestM3BeyondTheChart:
    """M3: +/-20 per step beyond Superhuman 2+ / Miniscule 2+, on all four edges, both at once."""

    @pytest.mark.parametrize("difficulty", range(13), ids=ABBREVIATIONS)
    def test_acting_superhuman_n_is_the_s2_row_plus_20_per_step(self, difficulty):
        s2 = chance(S2P, difficulty)
        assert (chance(13, difficulty), chance(14, difficulty), chance(18, difficulty)) == (s2 + 20, s2 + 40, s2 + 120)

    @pytest.mark.parametrize("difficulty", range(13), ids=ABBREVIATIONS)
    def test_acting_miniscule_n_is_the_m2_row_minus_20_per_step(self, difficulty):
        m2 = chance(M2P, difficulty)
        assert (chance(-1, difficulty), chance(-2, difficulty)) == (m2 - 20, m2 - 40)

    @pytest.mark.parametrize("acting", range(13), ids=ABBREVIATIONS)
    def test_difficulty_superhuman_n_is_the_s2_column_minus_20_per_step(self, acting):
        s2 = chance(acting, S2P)
        assert (chance(acting, 13), chance(acting, 15)) == (s2 - 20, s2 - 60)

    @pytest.mark.parametrize("acting", range(13), ids=ABBREVIATIONS)
    def test_difficulty_miniscule_n_is_the_m2_column_plus_20_per_step(self, acting):
        m2 = chance(acting, M2P)
        assert (chance(acting, -1), chance(acting, -3)) == (m2 + 20, m2 + 60)

    @pytest.mark.parametrize(
        ("acting", "difficulty", "p"),
        [
            ("Superhuman 3+", "Average", 120),
            ("Miniscule 3+", "Average", -20),
            ("Average", "Superhuman 4+", -45),
            ("Average", "Miniscule 4+", 145),
            ("Superhuman 3+", "Superhuman 3+", 50),  # 50 + 20 - 20
            ("Superhuman 4+", "Miniscule 3+", 230),  # 170 + 40 + 20
            ("Miniscule 3+", "Superhuman 4+", -125),  # -65 - 20 - 40
            ("Miniscule 5+", "Miniscule 3+", 10),  # 50 - 60 + 20
        ],
    )
    def test_worked_values_including_both_beyond(self, acting, difficulty, p):
        assert chance(parse_rank(acting), parse_rank(difficulty)) == p


# --- M4 ----------------------------------------------------------------------------------------


class TestM4RankShifts:
    """M4: +1RS to DR moves the Difficulty Rank one step up; shifts go past the ends into the N+
    ranks; p is never clamped."""

    def test_plus_one_to_dr_moves_difficulty_up(self):
        result = ask(HIGH, AVG, 37, difficulty_shift=+1)
        assert (rank_name(result.acting), rank_name(result.difficulty)) == ("High", "Above Average")
        assert result.limits.chance == 55

    def test_minus_two_to_ar_moves_acting_down(self):
        result = ask(HIGH, AVG, 37, acting_shift=-2)
        assert rank_name(result.acting) == "Average" and result.limits.chance == 50

    @pytest.mark.parametrize(
        ("rank", "shift", "name"),
        [(S2P, +1, "Superhuman 3+"), (SUP, +3, "Superhuman 4+"), (M2P, -1, "Miniscule 3+"),
         (MIN, -4, "Miniscule 5+"), (13, -1, "Superhuman 2+"), (-2, +3, "Miniscule")],
    )
    def test_shifts_run_past_the_ends(self, rank, shift, name):
        assert rank_name(shifted(rank, shift)) == name

    def test_p_is_never_clamped(self):
        assert ask(S2P, M2P, 1, acting_shift=+2, difficulty_shift=-1).limits.chance == 230
        assert ask(M2P, S2P, 1, acting_shift=-1, difficulty_shift=+2).limits.chance == -125

    @pytest.mark.parametrize(("shift", "text"), [(1, "+1RS"), (-2, "-2RS"), (0, "0RS")])
    def test_shift_is_written_as_the_seed_writes_it(self, shift, text):
        assert format_shift(shift) == text


# --- M5 ----------------------------------------------------------------------------------------

EY, Y, N, EN = ANSWERS

# p -> (exceptional yes threshold, exceptional no threshold, [(roll, answer)] on every boundary:
# threshold - 1, threshold, threshold + 1 for each threshold a d100 can reach, and 1 / 100).
M5_CASES = {
    -65: (None, 68, [(1, N), (67, N), (68, EN), (69, EN), (100, EN)]),
    -20: (None, 77, [(1, N), (76, N), (77, EN), (78, EN), (100, EN)]),
    0: (None, 81, [(1, N), (80, N), (81, EN), (82, EN), (100, EN)]),
    5: (1, 82, [(1, EY), (2, Y), (4, Y), (5, Y), (6, N), (81, N), (82, EN), (83, EN)]),
    25: (5, 86, [(4, EY), (5, EY), (6, Y), (24, Y), (25, Y), (26, N), (85, N), (86, EN), (87, EN)]),
    50: (10, 91, [(9, EY), (10, EY), (11, Y), (49, Y), (50, Y), (51, N), (90, N), (91, EN), (92, EN)]),
    95: (19, 100, [(18, EY), (19, EY), (20, Y), (94, Y), (95, Y), (96, N), (99, N), (100, EN)]),
    100: (20, None, [(1, EY), (19, EY), (20, EY), (21, Y), (99, Y), (100, Y)]),
    115: (23, None, [(22, EY), (23, EY), (24, Y), (100, Y)]),
    170: (34, None, [(33, EY), (34, EY), (35, Y), (100, Y)]),
}


class TestM5Thresholds:
    """M5: yes if roll <= p; exceptional yes if roll <= floor(p/5) (none when p < 5);
    exceptional no if roll >= 101 - floor((100-p)/5) (none when no d100 reaches it)."""

    @pytest.mark.parametrize("p", M5_CASES)
    def test_thresholds(self, p):
        exceptional_yes, exceptional_no, _ = M5_CASES[p]
        assert thresholds(p) == Thresholds(chance=p, exceptional_yes=exceptional_yes,
                                           exceptional_no=exceptional_no)

    @pytest.mark.parametrize(
        ("p", "roll", "expected"),
        [(p, roll, expected) for p, (_, _, rolls) in M5_CASES.items() for roll, expected in rolls],
    )
    def test_rolls_on_each_boundary(self, p, roll, expected):
        assert answer(thresholds(p), roll) == expected

    @pytest.mark.parametrize("p", [96, 97, 99])
    def test_no_exceptional_no_between_96_and_99(self, p):
        """101 - floor((100 - p) / 5) is 101 here: no d100 reaches it, and M9 reports it as 101,
        not none (none only when p >= 100)."""
        assert thresholds(p).exceptional_no == 101
        assert answer(thresholds(p), 100) == N

    @pytest.mark.parametrize("p", [1, 4])
    def test_no_exceptional_yes_below_5(self, p):
        assert thresholds(p).exceptional_yes is None
        assert answer(thresholds(p), 1) == Y

    def test_seed_worked_examples(self):
        """DECISIONS.md M5: p 50 -> 10/50/91; 25 -> 5/25/86; 0 -> none/0/81; -20 -> none/-20/77;
        115 -> 23/115/none."""
        assert [(t.exceptional_yes, t.chance, t.exceptional_no) for t in map(thresholds, (50, 25, 0, -20, 115))] == [
            (10, 50, 91), (5, 25, 86), (None, 0, 81), (None, -20, 77), (23, 115, None)]

    @pytest.mark.parametrize("roll", [0, 101, -5])
    def test_a_roll_outside_1_to_100_is_refused(self, roll):
        with pytest.raises(ValueError, match="1..100"):
            answer(thresholds(50), roll)

    @given(st.integers(min_value=-400, max_value=500))
    def test_the_four_answers_partition_1_to_100_and_match_the_formulas(self, p):
        """Property: for every p, the rolls giving each answer are exactly the ranges M5's formulas
        give, and together they are 1..100 once each."""
        by_answer = {a: [r for r in range(1, 101) if answer(thresholds(p), r) == a] for a in ANSWERS}
        floor_yes, floor_no = p // 5, (100 - p) // 5
        exceptional_yes = set(range(1, min(floor_yes, 100) + 1))
        yes = set(range(max(floor_yes, 0) + 1, min(p, 100) + 1))
        exceptional_no = set(range(max(101 - floor_no, p + 1, 1), 101))
        no = set(range(1, 101)) - exceptional_yes - yes - exceptional_no
        assert set(by_answer[EY]) == exceptional_yes
        assert set(by_answer[Y]) == yes
        assert set(by_answer[EN]) == exceptional_no
        assert set(by_answer[N]) == no
        assert sorted(sum(by_answer.values(), [])) == list(range(1, 101))
        assert len(exceptional_yes) + len(yes) == max(0, min(p, 100))


# --- M6 ----------------------------------------------------------------------------------------


class TestM6OddsQuestions:
    """M6: Impossible .. Has to be are Acting Ranks Miniscule .. Superhuman; Chaos Factor 9 .. 1
    is Difficulty Rank Miniscule .. Incredible."""

    @pytest.mark.parametrize(
        ("odds", "rank"),
        [("Impossible", "Miniscule"), ("No way", "Weak"), ("Very unlikely", "Low"),
         ("Unlikely", "Below Average"), ("50/50", "Average"), ("Somewhat likely", "Above Average"),
         ("Likely", "High"), ("Very likely", "Exceptional"), ("Near sure thing", "Incredible"),
         ("A sure thing", "Awesome"), ("Has to be", "Superhuman")],
    )
    def test_odds_are_acting_ranks(self, odds, rank):
        assert rank_name(odds_ranks(parse_odds(odds), 5)[0]) == rank

    @pytest.mark.parametrize(
        ("chaos_factor", "rank"),
        [(9, "Miniscule"), (8, "Weak"), (7, "Low"), (6, "Below Average"), (5, "Average"),
         (4, "Above Average"), (3, "High"), (2, "Exceptional"), (1, "Incredible")],
    )
    def test_chaos_factor_is_the_difficulty_rank(self, chaos_factor, rank):
        assert rank_name(odds_ranks(0, chaos_factor)[1]) == rank

    def test_likely_at_chaos_factor_5_is_high_against_average(self):
        acting, difficulty = odds_ranks(parse_odds("likely"), 5)
        assert chance(acting, difficulty) == 75

    def test_has_to_be_at_chaos_factor_9(self):
        assert chance(*odds_ranks(parse_odds("has to be"), 9)) == 145

    @pytest.mark.parametrize(("text", "index"), [("LIKELY", 6), ("fifty-fifty", 4), ("50 50", 4),
                                                  ("sure thing", 9), ("  no   way ", 1)])
    def test_odds_read_in_any_case_and_short_forms(self, text, index):
        assert parse_odds(text) == index

    def test_unknown_odds_are_refused_naming_the_odds(self):
        with pytest.raises(ValueError, match="use one of Impossible, No way"):
            parse_odds("probably")

    @pytest.mark.parametrize(("odds", "chaos_factor"), [(0, 0), (0, 10), (11, 5), (-1, 5)])
    def test_out_of_range(self, odds, chaos_factor):
        with pytest.raises(ValueError):
            odds_ranks(odds, chaos_factor)


# --- M7 ----------------------------------------------------------------------------------------


class TestM7NamedQuestions:
    """M7: the seed's named questions with rank guidance, listed modifiers and four outcome
    texts."""

    def test_every_named_question_of_the_seed(self):
        assert list(NAMED_QUESTIONS) == ["act_next", "hit", "hurt", "succumb", "increase_attribute",
                                         "increase_ability", "strength_weakness", "ageing", "lack_of_use"]

    @pytest.mark.parametrize("key", NAMED_QUESTIONS)
    def test_four_outcome_texts_and_guidance(self, key):
        question = NAMED_QUESTIONS[key]
        assert tuple(question.outcomes) == ANSWERS
        assert all(text.strip() for text in question.outcomes.values())
        assert len(set(question.outcomes.values())) == 4
        assert question.question.endswith("?")
        assert question.acting_guidance and question.difficulty_guidance

    @pytest.mark.parametrize(
        ("key", "modifiers"),
        [
            ("act_next", [("adrenaline", "acting", 1, 1)]),
            ("hit", [("got_the_drop", "acting", 1, 1), ("adrenaline", "acting", 1, 1)]),
            ("hurt", [("weak_spot", "acting", 1, 2)]),
            ("succumb", [("wound_penalty", "difficulty", -1, 10)]),
            ("increase_attribute", [("poor_instruction", "acting", -2, 1), ("interrupted", "acting", -1, 1),
                                    ("extra_items", "difficulty", 1, 10)]),
            ("increase_ability", [("poor_instruction", "acting", -2, 1), ("interrupted", "acting", -1, 1),
                                  ("extra_items", "difficulty", 1, 10), ("very_complex", "difficulty", 2, 1)]),
            ("strength_weakness", [("poor_instruction", "acting", -2, 1), ("interrupted", "acting", -1, 1),
                                   ("extra_items", "difficulty", 1, 10)]),
            ("ageing", [("lived_poorly", "difficulty", -1, 1), ("lived_healthily", "difficulty", 1, 1)]),
            ("lack_of_use", [("unused", "difficulty", -1, 1)]),
        ],
    )
    def test_listed_modifiers(self, key, modifiers):
        assert [(m.key, m.target, m.shift, m.max_times) for m in NAMED_QUESTIONS[key].modifiers] == modifiers

    @pytest.mark.parametrize(
        ("key", "answer_word", "fragment"),
        [
            ("act_next", EY, "+1RS to the character's question to hit"),
            ("act_next", EN, "+1RS to the opponent's question to hit"),
            ("hit", EN, "opponent takes the next action"),
            ("hurt", EY, "Full damage"),
            ("succumb", EY, "dies"),
            ("succumb", EN, "counts as stunning"),
            ("increase_ability", Y, "gained at Weak"),
            ("ageing", EY, "crisis"),
            ("lack_of_use", EY, "falls 2RS"),
            ("lack_of_use", Y, "falls 1RS"),
        ],
    )
    def test_outcome_texts_follow_the_seed(self, key, answer_word, fragment):
        assert fragment in NAMED_QUESTIONS[key].outcomes[answer_word]

    def test_strength_uses_the_attribute_one_rank_lower(self):
        question = named_question("strength_weakness")
        assert question.acting_base_shift == -1
        assert all(q.acting_base_shift == 0 for q in NAMED_QUESTIONS.values() if q is not question)

    def test_modifiers_add_their_shifts_to_their_rank(self):
        question = named_question("increase_ability")
        applied = apply_modifiers(question, [("very_complex", 1), ("extra_items", 3), ("interrupted", 1)])
        assert [(a.modifier.key, a.shift) for a in applied] == [("very_complex", 2), ("extra_items", 3),
                                                                ("interrupted", -1)]
        assert [a.modifier.target for a in applied] == ["difficulty", "difficulty", "acting"]

    def test_a_named_question_asked_with_its_modifiers(self):
        """Exceptional AR (IQ) learning surgery from nothing (Weak) with one more item in training:
        Exceptional vs Weak +2 +1 = Average: 85; roll 17 <= floor(85 / 5) is an exceptional yes."""
        question = named_question("increase_ability")
        applied = apply_modifiers(question, [("very_complex", 1), ("extra_items", 1)])
        result = ask(EXC, WEAK, 17, difficulty_shift=sum(a.shift for a in applied))
        assert (rank_name(result.difficulty), result.limits.chance, result.answer) == ("Average", 85, EY)

    @pytest.mark.parametrize(
        ("key", "taken", "index", "part", "text"),
        [
            ("hit", [("unused", 1)], 0, "key", "'hit' has no modifier 'unused'"),
            ("act_next", [("adrenaline", 1), ("adrenaline", 1)], 1, "key", "taken twice"),
            ("hurt", [("weak_spot", 3)], 0, "times", "1..2 times, got 3"),
            ("ageing", [("lived_poorly", 1), ("lived_healthily", 2)], 1, "times", "1..1 times"),
            ("succumb", [("wound_penalty", 0)], 0, "times", "1..10 times, got 0"),
        ],
    )
    def test_modifiers_a_question_cannot_take(self, key, taken, index, part, text):
        with pytest.raises(ModifierRefused, match=re.escape(text)) as caught:
            apply_modifiers(named_question(key), taken)
        assert (caught.value.index, caught.value.part) == (index, part)

    def test_unknown_named_question(self):
        with pytest.raises(ValueError, match="unknown named question 'parry'"):
            named_question("parry")


# --- independent review: hand-computed edge cases, one class per ruling ------------------------


class TestReviewM1RankWriting:
    """M1 (review): the chart's two end ranks written in full or short, with either spelling of
    Miniscule, are the ends of the ladder; an N+ rank is only read after Superhuman / Miniscule."""

    @pytest.mark.parametrize(
        ("text", "rank"),
        [("Miniscule 2+", M2P), ("Minuscule 2+", M2P), ("MIN2+", M2P), ("Superhuman 2+", S2P),
         ("sup2+", S2P), ("s 2 +", S2P), ("Miniscule", MIN), ("Superhuman", SUP),
         ("Superhuman 99+", 109), ("Miniscule 99+", -97)],
    )
    def test_end_ranks_and_the_last_two_digit_n(self, text, rank):
        assert parse_rank(text) == rank

    @pytest.mark.parametrize("text", ["Weak 2+", "Average 3+", "Awesome 2+", "Exceptional 3+"])
    def test_no_n_plus_on_inner_ranks(self, text):
        with pytest.raises(ValueError, match="only Superhuman and Miniscule take N"):
            parse_rank(text)

    def test_names_beyond_count_from_2_plus(self):
        """Superhuman 2+ is the chart's last column, so one step beyond it is 3+ (not 2+ again)."""
        assert [rank_name(r) for r in (11, 12, 13, 14)] == ["Superhuman", "Superhuman 2+", "Superhuman 3+",
                                                           "Superhuman 4+"]
        assert [rank_name(r) for r in (1, 0, -1, -2)] == ["Miniscule", "Miniscule 2+", "Miniscule 3+",
                                                         "Miniscule 4+"]


class TestReviewM3BeyondTheChart:
    """M3 (review): values computed by hand from the M2 table; inside the chart the cell is used,
    never an extrapolation, and both adjustments add when both ranks are beyond."""

    @pytest.mark.parametrize(
        ("acting", "difficulty", "p"),
        [
            (SUP, AVG, 95),  # the Sup row is a cell of its own, not S2+ - 20
            (MIN, AVG, 5),  # likewise the Min row (M2+ + 20 would be 20)
            (AVG, SUP, 5), (AVG, MIN, 95),
            (13, M2P, 190),  # S3+ vs M2+: 170 + 20
            (M2P, 13, -85),  # M2+ vs S3+: -65 - 20
            (13, -1, 210),  # S3+ vs M3+: 170 + 20 + 20
            (-1, -1, 50),  # M3+ vs M3+: 50 - 20 + 20
            (16, 16, 50),  # S6+ vs S6+: 50 + 80 - 80
            (-1, 13, -105),  # M3+ vs S3+: -65 - 20 - 20
            (14, HIGH, 135),  # S4+ vs High: 95 + 40
            (13, S2P, 70),  # S3+ vs S2+: 50 + 20
            (S2P, 13, 30),  # S2+ vs S3+: 50 - 20
            (-2, AVG, -40),  # M4+ vs Avg: 0 - 40
            (LOW, -3, 155),  # Low vs M5+: 95 + 20 x (5 - 2)
        ],
    )
    def test_by_hand(self, acting, difficulty, p):
        assert chance(acting, difficulty) == p


class TestReviewM4ShiftOrder:
    """M4 (review): a shift moves the rank on the ladder before the chart is read (it is not a
    +/-20 on p), and a rank beyond the chart shifted back onto it reads the chart's cell."""

    def test_shift_moves_the_rank_not_the_chance(self):
        # S2+ -1RS to AR is Superhuman: the Sup row (95 vs Average), not 100 - 20.
        assert ask(S2P, AVG, 50, acting_shift=-1).limits.chance == 95

    def test_back_from_beyond_onto_the_chart(self):
        # Superhuman 3+ -2RS is Superhuman; Miniscule 3+ +2RS is Miniscule.
        assert ask(13, AVG, 50, acting_shift=-2).limits.chance == 95
        assert ask(-1, AVG, 50, acting_shift=+2).limits.chance == 5
        assert ask(AVG, 13, 50, difficulty_shift=-2).limits.chance == 5
        assert ask(AVG, -1, 50, difficulty_shift=+2).limits.chance == 95

    def test_shifts_run_on_past_the_end_in_one_go(self):
        # Awesome +3RS to AR: Superhuman, Superhuman 2+, Superhuman 3+; vs Average: 100 + 20.
        result = ask(AWE, AVG, 50, acting_shift=+3)
        assert (rank_name(result.acting), result.limits.chance) == ("Superhuman 3+", 120)
        # Weak -3RS to DR: Miniscule, Miniscule 2+, Miniscule 3+; Average vs it: 105 + 20.
        result = ask(AVG, WEAK, 50, difficulty_shift=-3)
        assert (rank_name(result.difficulty), result.limits.chance) == ("Miniscule 3+", 125)

    def test_both_ranks_shifted_at_once(self):
        # High -2RS to AR (Average), Average +1RS to DR (Above Average): 35.
        result = ask(HIGH, AVG, 36, acting_shift=-2, difficulty_shift=+1)
        assert (rank_name(result.acting), rank_name(result.difficulty), result.limits.chance,
                result.answer) == ("Average", "Above Average", 35, N)


class TestReviewM5Boundaries:
    """M5 (review): thresholds at p where floor(p/5) and floor((100-p)/5) change, and far beyond."""

    @pytest.mark.parametrize(
        ("p", "exceptional_yes", "exceptional_no"),
        [
            (1, None, 82), (4, None, 82),  # floor(99/5) = floor(96/5) = 19
            (5, 1, 82), (9, 1, 83), (10, 2, 83),  # floor(91/5) = 18
            (90, 18, 99), (91, 18, 100), (95, 19, 100),
            (96, 19, 101), (99, 19, 101), (100, 20, None),  # M9: 101, not none, below 100
            (-400, None, 1),  # floor(500/5) = 100: every roll is an exceptional no
            (499, 99, None), (500, 100, None),  # floor(500/5) = 100: every roll an exceptional yes
        ],
    )
    def test_thresholds_by_hand(self, p, exceptional_yes, exceptional_no):
        assert thresholds(p) == Thresholds(chance=p, exceptional_yes=exceptional_yes,
                                           exceptional_no=exceptional_no)

    @pytest.mark.parametrize(
        ("p", "roll", "expected"),
        [
            (9, 1, EY), (9, 2, Y), (9, 9, Y), (9, 10, N), (9, 82, N), (9, 83, EN),
            (10, 2, EY), (10, 3, Y), (10, 10, Y), (10, 11, N),
            (1, 1, Y), (1, 2, N), (1, 81, N), (1, 82, EN),
            (91, 99, N), (91, 100, EN), (96, 100, N), (99, 99, Y), (99, 100, N),
            (-400, 1, EN), (-399, 1, N), (-399, 2, EN),  # floor(499/5) = 99: from 2
            (500, 100, EY), (499, 100, Y), (499, 99, EY),
        ],
    )
    def test_answers_by_hand(self, p, roll, expected):
        assert answer(thresholds(p), roll) == expected

    def test_a_negative_chance_never_answers_yes(self):
        """p < 1: no roll of 1..100 is <= p, so the answer is only ever no or exceptional no."""
        for p in (0, -5, -65, -125):
            assert {answer(thresholds(p), r) for r in range(1, 101)} == {N, EN}

    def test_a_chance_of_100_or_more_never_answers_no(self):
        for p in (100, 115, 230):
            assert {answer(thresholds(p), r) for r in range(1, 101)} == {EY, Y}


class TestReviewM6OddsOnTheChart:
    """M6 (review): odds x Chaos Factor read the M2 table at Acting = Miniscule + odds index and
    Difficulty = the rank of 10 - Chaos Factor; values by hand from DECISIONS.md."""

    @pytest.mark.parametrize(
        ("odds", "chaos_factor", "p"),
        [
            ("Impossible", 1, -20),  # Min vs Inc
            ("Impossible", 9, 50),  # Min vs Min
            ("Has to be", 1, 80),  # Sup vs Inc
            ("50/50", 9, 95),  # Avg vs Min
            ("50/50", 1, 10),  # Avg vs Inc
            ("Near sure thing", 5, 90),  # Inc vs Avg
            ("A sure thing", 9, 125),  # Awe vs Min
            ("Very unlikely", 3, 10),  # Low vs High
            ("Unlikely", 7, 55),  # BAv vs Low
        ],
    )
    def test_by_hand(self, odds, chaos_factor, p):
        assert chance(*odds_ranks(parse_odds(odds), chaos_factor)) == p

    def test_every_pair_is_a_chart_cell(self):
        _, rows = decisions_chart()
        for odds in range(11):
            for chaos_factor in range(1, 10):
                acting, difficulty = odds_ranks(odds, chaos_factor)
                assert chance(acting, difficulty) == rows[ABBREVIATIONS[odds + 1]][10 - chaos_factor]


class TestReviewM7ModifiersTogether:
    """M7 (review): a named question's built-in shift and its modifiers add up on the ranks they
    name, as the seed's NOTES give them."""

    @staticmethod
    def _shifts(key, taken):
        question = named_question(key)
        applied = apply_modifiers(question, taken)
        acting = question.acting_base_shift + sum(a.shift for a in applied if a.modifier.target == "acting")
        difficulty = sum(a.shift for a in applied if a.modifier.target == "difficulty")
        return acting, difficulty

    def test_strength_with_every_training_modifier(self):
        """Strength: attribute at -1RS (built in), poor instruction -2RS to AR, interrupted -1RS to
        AR, three further items +3RS to DR. Exceptional vs High becomes Below Average vs Awesome: 5;
        exceptional yes only on 1, exceptional no from 101 - 19 = 82."""
        acting, difficulty = self._shifts("strength_weakness",
                                          [("poor_instruction", 1), ("interrupted", 1), ("extra_items", 3)])
        assert (acting, difficulty) == (-4, 3)
        results = [ask(EXC, HIGH, roll, acting, difficulty) for roll in (1, 2, 5, 6, 81, 82)]
        assert (rank_name(results[0].acting), rank_name(results[0].difficulty), results[0].limits.chance) == (
            "Below Average", "Awesome", 5)
        assert [r.answer for r in results] == [EY, Y, Y, N, N, EN]

    def test_hit_with_the_drop_and_adrenaline(self):
        """Got the drop (+1RS) and adrenaline (+1RS) both raise the attacker's rank: Average vs
        Average becomes High vs Average, 75."""
        assert self._shifts("hit", [("got_the_drop", 1), ("adrenaline", 1)]) == (2, 0)
        assert ask(AVG, AVG, 75, acting_shift=2).limits.chance == 75

    def test_succumb_toughness_lowered_by_the_wounds(self):
        """Toughness Average, -3RS of wounds: Weak; damage High vs Weak: 95."""
        acting, difficulty = self._shifts("succumb", [("wound_penalty", 3)])
        assert (acting, difficulty) == (0, -3)
        result = ask(HIGH, AVG, 18, acting, difficulty)
        assert (rank_name(result.difficulty), result.limits.chance) == ("Weak", 95)

    def test_ageing_lived_poorly_lowers_toughness(self):
        """Lived poorly: -1RS to DR (Toughness), so the attribute is likelier to drop: Average vs
        Average becomes Average vs Below Average, 65."""
        assert self._shifts("ageing", [("lived_poorly", 1)]) == (0, -1)
        assert ask(AVG, AVG, 65, difficulty_shift=-1).limits.chance == 65

    def test_lack_of_use_never_used(self):
        assert self._shifts("lack_of_use", [("unused", 1)]) == (0, -1)

    def test_a_very_complex_new_ability(self):
        """A new ability goes from nothing to Weak; surgery +2RS to DR: Weak + 2 = Below Average."""
        assert self._shifts("increase_ability", [("very_complex", 1)]) == (0, 2)
        assert rank_name(ask(AVG, WEAK, 50, difficulty_shift=2).difficulty) == "Below Average"

    def test_outcomes_are_in_the_seeds_sense(self):
        """The seed's four outcomes per question, in ANSWERS order (exceptional yes, yes, no,
        exceptional no): the change happens on yes / exceptional yes and not on no."""
        q = NAMED_QUESTIONS
        assert "rises 1RS" in q["increase_attribute"].outcomes[Y]
        assert "half the time" in q["increase_attribute"].outcomes[EY]
        assert "twice the time" in q["increase_attribute"].outcomes[EN]
        assert "nothing changes" in q["increase_attribute"].outcomes[N]
        assert "fall 1RS" in q["ageing"].outcomes[Y] and "No change" in q["ageing"].outcomes[N]
        assert "No change" in q["ageing"].outcomes[EN]
        assert "passes out" in q["succumb"].outcomes[Y] and "keeps going" in q["succumb"].outcomes[N]
        assert "wound" in q["hurt"].outcomes[Y] and "changes nothing" in q["hurt"].outcomes[N]
        assert "acts next" in q["act_next"].outcomes[Y] and "opponent acts next" in q["act_next"].outcomes[N]

    def test_example_outcomes_are_offered_as_examples(self):
        """Seed: on an exceptional hit "the choice is up to the players"; on a fumble the examples
        follow "such as"; on a shrugged-off blow "what exactly is up to the players, but can be
        something like": the card must not read as a closed list."""
        q = NAMED_QUESTIONS
        assert "players" in q["hit"].outcomes[EY]
        assert "such as" in q["hit"].outcomes[EN]
        assert "players" in q["hurt"].outcomes[EN] and "such as" in q["hurt"].outcomes[EN]


class TestReviewM5ReachableChances:
    """M5 (review): every chance the chart can give (M2 cells, +/-20 steps of M3) is a multiple of
    5, so p 96..99, the only values where "none when p >= 100" and the formula's unreachable 101
    differ in what is reported, never occur on the chart; M9 rules that the formula's 101 is
    reported for them (not none), so no answer the bridge ever gave changes."""

    def test_every_reachable_chance_is_a_multiple_of_5(self):
        assert all(chance(a, d) % 5 == 0 for a in range(-15, 30) for d in range(-15, 30))

    def test_96_to_99_report_the_formulas_101(self):
        assert [thresholds(p).exceptional_no for p in (96, 97, 98, 99)] == [101] * 4


# --- M8-M9 (rulings added since the ruleset was built) --------------------------------------------


class TestM8ShiftsToTheQuestion:
    """M8: "+N RS to the question" shifts the Acting Rank N steps up (toward yes); a weak spot
    is +1 or +2 RS as the asker gives it, +1 when no size is given."""

    @pytest.mark.parametrize(("key", "modifier"), [("hit", "got_the_drop"), ("hit", "adrenaline"),
                                                   ("act_next", "adrenaline"), ("hurt", "weak_spot")])
    def test_to_the_question_is_up_the_acting_rank(self, key, modifier):
        (applied,) = apply_modifiers(named_question(key), [(modifier, 1)])
        assert (applied.modifier.target, applied.shift) == ("acting", 1)

    def test_toward_yes(self):
        """Got the drop on the question to hit, Average vs Average: Above Average vs Average, 50 ->
        65; a roll of 60 turns from no to yes."""
        (applied,) = apply_modifiers(named_question("hit"), [("got_the_drop", 1)])
        before, after = ask(AVG, AVG, 60), ask(AVG, AVG, 60, acting_shift=applied.shift)
        assert (before.limits.chance, before.answer) == (50, N)
        assert (rank_name(after.acting), after.limits.chance, after.answer) == ("Above Average", 65, Y)

    @pytest.mark.parametrize(("times", "shift", "acting", "p"), [(1, 1, "Exceptional", 85), (2, 2, "Incredible", 90)])
    def test_a_weak_spot_of_the_size_given(self, times, shift, acting, p):
        """Damage High vs toughness Average (75): a weak spot +1 -> Exceptional (85), +2 ->
        Incredible (90)."""
        (applied,) = apply_modifiers(named_question("hurt"), [("weak_spot", times)])
        result = ask(HIGH, AVG, 50, acting_shift=applied.shift)
        assert (applied.shift, rank_name(result.acting), result.limits.chance) == (shift, acting, p)

    def test_a_weak_spot_is_never_more_than_2(self):
        with pytest.raises(ModifierRefused, match="1..2") as refused:
            apply_modifiers(named_question("hurt"), [("weak_spot", 3)])
        assert (refused.value.index, refused.value.part) == (0, "times")


class TestM9ThresholdsAsTheFormulasGive:
    """M9: thresholds as M5's formulas give them, not held to 1..100; "none" only where M5 says
    so (exceptional yes when p < 5, exceptional no when p >= 100)."""

    @pytest.mark.parametrize(("p", "exceptional_yes", "exceptional_no"), [
        (-405, None, 0), (-420, None, -3), (-1000, None, -119),  # exceptional no of 0 or below
        (505, 101, None), (600, 120, None), (1000, 200, None),  # exceptional yes above 100
        (96, 19, 101), (98, 19, 101), (99, 19, 101),  # 101: unreachable, still not none
        (4, None, 82), (5, 1, 82), (100, 20, None),  # the two "none" edges of M5
    ])
    def test_by_hand(self, p, exceptional_yes, exceptional_no):
        assert thresholds(p) == Thresholds(chance=p, exceptional_yes=exceptional_yes,
                                           exceptional_no=exceptional_no)

    def test_far_beyond_the_chart(self):
        """Superhuman 30+ vs Miniscule 30+: 170 + 20 x 28 + 20 x 28 = 1290; yes up to 258."""
        result = ask(parse_rank("Superhuman 30+"), parse_rank("Miniscule 30+"), 100)
        assert (result.limits.chance, result.limits.exceptional_yes, result.limits.exceptional_no,
                result.answer) == (1290, 258, None, EY)

    def test_answers_still_follow_the_thresholds(self):
        assert {answer(thresholds(-420), r) for r in range(1, 101)} == {EN}
        assert {answer(thresholds(600), r) for r in range(1, 101)} == {EY}
        assert answer(thresholds(99), 100) == N

    @pytest.mark.parametrize("key", list(NAMED_QUESTIONS))
    def test_an_empty_list_of_modifiers_is_none(self, key):
        assert apply_modifiers(named_question(key), []) == []
