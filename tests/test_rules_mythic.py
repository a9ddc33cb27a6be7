"""Mythic Fate Chart rules (``bridge/rules/mythic.py``) against seed 003 and the rulings M1-M7 of
``shared/rules/DECISIONS.md``.

One class per ruling; every ruling is pinned with concrete values. The chart (M2) is checked
cell by cell against the table printed in DECISIONS.md itself.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.rules import mythic
from bridge.rules.mythic import (
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

DECISIONS = Path(__file__).resolve().parent.parent.parent / "shared" / "rules" / "DECISIONS.md"
ABBREVIATIONS = ("M2+", "Min", "Weak", "Low", "BAv", "Avg", "AAv", "High", "Exc", "Inc", "Awe", "Sup", "S2+")
M2P, MIN, WEAK, LOW, BAV, AVG, AAV, HIGH, EXC, INC, AWE, SUP, S2P = range(13)


@functools.cache
def decisions_chart() -> tuple[tuple[str, ...], dict[str, list[int]]]:
    """The M2 block of DECISIONS.md: its column headers and each row's 13 values by row name."""
    if not DECISIONS.exists():
        pytest.fail(f"DECISIONS.md not found: expected shared/ beside the repository at {DECISIONS}")
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
        """101 - floor((100 - p) / 5) is 101 here: no d100 reaches it, so it is reported as none."""
        assert thresholds(p).exceptional_no is None
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
