"""Song of Heroic Lands rules (``bridge/rulesets/sohl/rules.py``) against seeds 000 (Fate), 001 (Success
Tests) and the rulings S1-S12 of ``docs/rules.md``.

One class per ruling; every ruling is pinned with concrete values.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from bridge.rulesets.sohl import rules as sohl
from bridge.rulesets.sohl.rules import (
    CF,
    CS,
    MF,
    MS,
    FateContext,
    FateEffect,
    apply_gain,
    charges_after,
    choice_effect,
    fate_ml,
    fate_test_effect,
    grade,
    is_aura_governed,
    is_critical,
    is_success,
    label,
    name,
    point_applies,
    skill_base_basis,
    suggested_points,
    withheld_reasons,
)

# --- helpers -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """A minimal Fate Point (fits ``sohl.PointLike``)."""

    point_id: str
    name: str
    skill_code: str | None = None
    charges: int | None = None


def general(name: str = "Luck", charges: int | None = None, point_id: str | None = None) -> Point:
    return Point(point_id or name.lower(), name, None, charges)


def specific(
    skill_code: str, name: str = "Knack", charges: int | None = None, point_id: str | None = None
) -> Point:
    return Point(point_id or f"{name.lower()}-{skill_code}", name, skill_code, charges)


def ctx(**overrides) -> FateContext:
    """An eligible Fate context (a PC's Sword skill test, one general unlimited point);
    ``overrides`` change single fields."""
    base = dict(
        fate_option="everyone",
        player_owned=True,
        aura_eml=55,
        aura_disabled=False,
        aural_shock=False,
        test_kind="skill",
        test_code="swd",
        basis=("str", "dex"),
        already_fated=False,
        points=(general(),),
    )
    base.update(overrides)
    return FateContext(**base)


def names(points) -> list[str]:
    return [p.name for p in points]


def ids(points) -> list[str]:
    return [p.point_id for p in points]


def fate_then_apply(original_level: int, fate_level: int, choice: str | None = None) -> int:
    """The original test's new level after a Fate Test of ``fate_level`` (and CS ``choice``)."""
    effect = fate_test_effect(fate_level)
    if effect.outcome == "choice":
        effect = choice_effect(choice)
    return apply_gain(original_level, effect.gain)


# --- S1 ----------------------------------------------------------------------------------------


class TestS1SuccessTest:
    """S1: d100 1..100; success if roll <= EML; critical on units digit 0 or 5; CF -1, MF 0,
    MS 1, CS 2; the EML is never clamped; ``successLevelMod`` is added after grading."""

    def test_level_constants(self):
        assert (CF, MF, MS, CS) == (-1, 0, 1, 2)

    @pytest.mark.parametrize(
        "roll, expected",
        [(32, MS), (35, CS), (62, MF), (70, CF)],
        ids=["32-MS", "35-CS", "62-MF", "70-CF"],
    )
    def test_seed_worked_examples_eml_45(self, roll, expected):
        assert grade(roll, 45) == expected

    @pytest.mark.parametrize(
        "roll, eml, expected",
        [
            (45, 45, CS),  # roll == EML succeeds, units 5 critical
            (44, 44, MS),  # roll == EML succeeds, marginal
            (46, 45, MF),  # one over fails
            (50, 45, CF),  # units 0 over EML
            (40, 45, CS),  # units 0 under EML
            (1, 45, MS),  # lowest roll
            (1, 1, MS),
            (5, 5, CS),
            (10, 9, CF),
            (100, 45, CF),  # roll 100: units 0, over EML
            (100, 100, CS),  # roll 100 at EML 100
            (99, 100, MS),
            (100, 99, CF),
        ],
    )
    def test_boundaries(self, roll, eml, expected):
        assert grade(roll, eml) == expected

    @pytest.mark.parametrize(
        "roll, eml, expected",
        [
            (100, 120, CS),  # EML above 100 is used as given: 100 succeeds
            (99, 150, MS),
            (100, 96, CF),  # not held to 95 either... 100 > 96 fails
            (96, 96, MS),  # would fail if clamped to 95
            (97, 96, MF),
            (1, 0, MF),  # EML below 1: every roll fails
            (5, 0, CF),
            (3, 4, MS),  # would fail if clamped up to 5
            (4, -10, MF),
            (1, -10, MF),
        ],
    )
    def test_eml_is_not_clamped(self, roll, eml, expected):
        assert grade(roll, eml) == expected

    @pytest.mark.parametrize("roll", [5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 95, 100])
    def test_every_multiple_of_five_is_critical(self, roll):
        assert grade(roll, 50) in (CS, CF)
        assert is_critical(grade(roll, 50))

    @pytest.mark.parametrize("roll", [1, 2, 3, 4, 6, 9, 11, 49, 51, 99])
    def test_other_rolls_are_marginal(self, roll):
        assert grade(roll, 50) in (MS, MF)
        assert not is_critical(grade(roll, 50))

    def test_one_in_five_successes_and_failures_is_critical(self):
        levels = [grade(roll, 45) for roll in range(1, 101)]
        assert levels.count(CS) == 9 and levels.count(MS) == 36  # 45 successes
        assert levels.count(CF) == 11 and levels.count(MF) == 44  # 55 failures

    @pytest.mark.parametrize(
        "roll, eml, level_mod, expected",
        [
            (32, 45, 1, 2),  # MS + 1
            (35, 45, 1, 3),  # CS + 1 = CS+1
            (35, 45, 2, 4),
            (62, 45, -1, -1),  # MF - 1
            (70, 45, -1, -2),  # CF - 1 = CF-1
            (70, 45, -2, -3),
            (70, 45, 2, 1),  # CF + 2
            (32, 45, 0, 1),
        ],
    )
    def test_level_mod_added_after_grading(self, roll, eml, level_mod, expected):
        assert grade(roll, eml, level_mod) == expected
        assert grade(roll, eml, level_mod) == grade(roll, eml) + level_mod

    def test_level_mod_does_not_shift_the_eml(self):
        # a +1 level mod on a failed roll is MF + 1, never a re-grade against a higher target
        assert grade(46, 45, level_mod=1) == MS
        assert grade(50, 45, level_mod=1) == MF

    @pytest.mark.parametrize("roll", [0, 101, -1, 1000])
    def test_roll_outside_1_to_100_raises(self, roll):
        with pytest.raises(ValueError, match="1..100"):
            grade(roll, 45)


# --- S2 ----------------------------------------------------------------------------------------


class TestS2ExtendedLevels:
    """S2: the level is an unbounded integer; CS+1, CS+2, CF-1, CF-2; >= 2 critical success,
    <= -1 critical failure, >= 1 success."""

    @pytest.mark.parametrize(
        "level, written",
        [
            (-4, "CF-3"),
            (-3, "CF-2"),
            (-2, "CF-1"),
            (-1, "CF"),
            (0, "MF"),
            (1, "MS"),
            (2, "CS"),
            (3, "CS+1"),
            (4, "CS+2"),
            (12, "CS+10"),
        ],
    )
    def test_label(self, level, written):
        assert label(level) == written

    @pytest.mark.parametrize(
        "level, long_name",
        [
            (-3, "Critical Failure -2"),
            (-2, "Critical Failure -1"),
            (-1, "Critical Failure"),
            (0, "Marginal Failure"),
            (1, "Marginal Success"),
            (2, "Critical Success"),
            (3, "Critical Success +1"),
            (4, "Critical Success +2"),
        ],
    )
    def test_long_name(self, level, long_name):
        assert name(level) == long_name

    @pytest.mark.parametrize(
        "level, success, critical",
        [
            (-3, False, True),
            (-2, False, True),
            (-1, False, True),
            (0, False, False),
            (1, True, False),
            (2, True, True),
            (3, True, True),  # a CS+1 is a Critical Success
            (4, True, True),
        ],
    )
    def test_success_and_critical(self, level, success, critical):
        assert is_success(level) is success
        assert is_critical(level) is critical

    def test_levels_rank_from_worst_to_best(self):
        assert sorted([CS, MF, CF, MS]) == [CF, MF, MS, CS]


# --- S3 ----------------------------------------------------------------------------------------


class TestS3BasicTests:
    """S3: a basic test reads "Success" at level >= 1 and "Failure" at level <= 0, also after
    Fate."""

    @pytest.mark.parametrize(
        "level, reading",
        [
            (-3, "Failure"),
            (-1, "Failure"),
            (0, "Failure"),
            (1, "Success"),
            (2, "Success"),
            (4, "Success"),
        ],
    )
    def test_basic_label_and_name(self, level, reading):
        assert label(level, basic=True) == reading
        assert name(level, basic=True) == reading

    @pytest.mark.parametrize(
        "roll, reading", [(32, "Success"), (35, "Success"), (62, "Failure"), (70, "Failure")]
    )
    def test_seed_examples_as_basic_tests(self, roll, reading):
        assert label(grade(roll, 45), basic=True) == reading

    @pytest.mark.parametrize(
        "original, fate_level, choice, reading",
        [
            (MF, MS, None, "Success"),  # MF + 1 = MS
            (CF, MS, None, "Failure"),  # CF + 1 = MF
            (CF, CS, "spend", "Success"),  # CF + 2 = MS
            (MF, MF, None, "Failure"),  # no gain
            (MS, CS, "spend", "Success"),  # CS+1 still just "Success"
        ],
    )
    def test_basic_reading_after_a_gain(self, original, fate_level, choice, reading):
        new_level = fate_then_apply(original, fate_level, choice)
        assert label(new_level, basic=True) == reading
        assert name(new_level, basic=True) == reading

    def test_basic_false_keeps_the_ordinary_labels(self):
        assert label(MS, basic=False) == "MS"
        assert name(MS, basic=False) == "Marginal Success"


# --- S4 ----------------------------------------------------------------------------------------


class TestS4FateML:
    """S4: Fate ML = 50 + floor(Aura EML / 2), held to 5..95."""

    @pytest.mark.parametrize(
        "aura_eml, expected",
        [
            (55, 77),  # 50 + 27
            (54, 77),
            (56, 78),
            (1, 50),  # odd values round down
            (3, 51),
            (0, 50),
            (-1, 49),  # floor(-0.5) = -1
            (-3, 48),
            (-10, 45),
            (-89, 5),  # 50 - 45 = 5, exactly the floor
            (-90, 5),  # 50 - 45
            (-92, 5),  # 50 - 46 = 4, held to 5
            (-200, 5),
            (90, 95),  # exactly the ceiling
            (91, 95),
            (92, 95),  # 96 held to 95
            (200, 95),
        ],
    )
    def test_fate_ml(self, aura_eml, expected):
        assert fate_ml(aura_eml) == expected

    def test_bounds_are_the_eml_bounds(self):
        assert (sohl.EML_MIN, sohl.EML_MAX) == (5, 95)
        assert sohl.FATE_ML_BASE == 50


# --- S5 ----------------------------------------------------------------------------------------


class TestS5Withheld:
    """S5: every reason Fate is withheld, reported in the ruling's order."""

    def test_reason_order(self):
        assert sohl.WITHHELD_REASONS == (
            "fate_off",
            "not_pc",
            "no_aura",
            "aural_shock",
            "aura_governed",
            "mystical",
            "fate_test",
            "already_fated",
            "no_points",
        )

    def test_eligible_context_has_no_reasons(self):
        assert withheld_reasons(ctx()) == []

    @pytest.mark.parametrize(
        "overrides, reason",
        [
            ({"fate_option": "off"}, "fate_off"),
            ({"fate_option": "pc_only", "player_owned": False}, "not_pc"),
            ({"aura_eml": None}, "no_aura"),  # no Aura attribute
            ({"aura_disabled": True}, "no_aura"),
            ({"aura_eml": 0}, "no_aura"),
            ({"aura_eml": -5}, "no_aura"),
            ({"aural_shock": True}, "aural_shock"),
            ({"test_kind": "attribute", "test_code": "aur", "basis": ()}, "aura_governed"),
            ({"basis": ("aur", "wil")}, "aura_governed"),
            ({"test_kind": "mystical", "test_code": "myst", "basis": ()}, "mystical"),
            ({"test_kind": "fate", "test_code": "fate", "basis": ()}, "fate_test"),
            ({"already_fated": True}, "already_fated"),
            ({"points": ()}, "no_points"),
            ({"points": (general(charges=0),)}, "no_points"),
            ({"points": (specific("dag"),)}, "no_points"),
        ],
    )
    def test_each_reason_alone(self, overrides, reason):
        assert withheld_reasons(ctx(**overrides)) == [reason]

    @pytest.mark.parametrize(
        "overrides",
        [
            {"aura_eml": 1},  # the smallest usable Aura
            {"fate_option": "pc_only", "player_owned": True},
            {"fate_option": "everyone", "player_owned": False},  # NPCs may use Fate
            {"test_kind": "attribute", "test_code": "str", "basis": ()},
            {"basis": ()},
            {"points": (general(charges=1),)},
            {"points": (specific("swd"),)},
        ],
    )
    def test_not_withheld(self, overrides):
        assert withheld_reasons(ctx(**overrides)) == []

    def test_not_pc_only_under_pc_only(self):
        assert withheld_reasons(ctx(fate_option="off", player_owned=False)) == ["fate_off"]

    def test_several_reasons_in_order(self):
        context = ctx(
            fate_option="off",
            aura_eml=None,
            aural_shock=True,
            basis=("aur",),
            already_fated=True,
            points=(),
        )
        assert withheld_reasons(context) == [
            "fate_off",
            "no_aura",
            "aural_shock",
            "aura_governed",
            "already_fated",
            "no_points",
        ]

    def test_pc_only_npc_mystical_fated(self):
        context = ctx(
            fate_option="pc_only",
            player_owned=False,
            test_kind="mystical",
            basis=(),
            already_fated=True,
        )
        assert withheld_reasons(context) == ["not_pc", "mystical", "already_fated"]

    def test_fate_test_of_disabled_aura_with_empty_point(self):
        context = ctx(
            aura_disabled=True,
            test_kind="fate",
            test_code="fate",
            basis=(),
            points=(general(charges=0),),
        )
        assert withheld_reasons(context) == ["no_aura", "fate_test", "no_points"]

    def test_aura_attribute_test_in_shock(self):
        context = ctx(aural_shock=True, test_kind="attribute", test_code="aur", basis=())
        assert withheld_reasons(context) == ["aural_shock", "aura_governed"]

    def test_reasons_follow_the_ruling_order_when_all_apply(self):
        # only one test kind can hold at a time, so check the two halves around it
        skill = ctx(
            fate_option="pc_only",
            player_owned=False,
            aura_eml=0,
            aural_shock=True,
            basis=("aur",),
            already_fated=True,
            points=(),
        )
        assert withheld_reasons(skill) == [
            "not_pc",
            "no_aura",
            "aural_shock",
            "aura_governed",
            "already_fated",
            "no_points",
        ]
        reasons = withheld_reasons(dataclasses.replace(skill, test_kind="fate", basis=()))
        assert reasons == [
            "not_pc",
            "no_aura",
            "aural_shock",
            "fate_test",
            "already_fated",
            "no_points",
        ]
        assert reasons == [r for r in sohl.WITHHELD_REASONS if r in reasons]

    @pytest.mark.parametrize(
        "kind, code, basis, governed",
        [
            ("attribute", "aur", (), True),
            ("attribute", "str", (), False),
            ("attribute", "str", ("aur",), False),  # attributes have no basis
            ("skill", "ritual", ("aur",), True),
            ("skill", "ritual", ("wil", "aur"), True),
            ("skill", "swd", ("str", "dex"), False),
            ("skill", "aur", (), False),  # a skill is governed by its basis, not its code
            ("mystical", "myst", ("aur",), False),  # withheld as "mystical" instead
            ("fate", "fate", ("aur",), False),
        ],
    )
    def test_is_aura_governed(self, kind, code, basis, governed):
        assert is_aura_governed(kind, code, basis) is governed


# --- S6 ----------------------------------------------------------------------------------------


class TestS6BasisAttributes:
    """S6: the basis is the arguments of ``sb(...)`` wherever it stands; with no ``sb(...)``,
    every ``attr.<code>``. ``sb(attr.str, attr.dex) + attr.aur / 10`` is NOT Aura-governed."""

    @pytest.mark.parametrize(
        "formula, basis",
        [
            ("sb(attr.aur, attr.wil)", ["aur", "wil"]),
            ("sb(attr.str, attr.dex) + attr.aur / 10", ["str", "dex"]),
            ("attr.aur / 10 + sb(attr.str, attr.dex)", ["str", "dex"]),  # sb not first
            ("5 + sb(attr.wil, attr.aur) * 2", ["wil", "aur"]),
            ("attr.aur * 2", ["aur"]),  # no sb at all
            ("attr.str + attr.aur", ["str", "aur"]),
            ("(attr.int + attr.aur + attr.wil) / 3", ["int", "aur", "wil"]),
            ("sb(attr.str, attr.str, attr.dex)", ["str", "dex"]),  # repeated inside sb
            ("attr.dex + attr.dex + attr.aur", ["dex", "aur"]),  # repeated without sb
            ("sb(attr.str,attr.dex)", ["str", "dex"]),
            ("", []),
            ("10", []),
        ],
    )
    def test_skill_base_basis(self, formula, basis):
        assert skill_base_basis(formula) == basis

    @pytest.mark.parametrize(
        "formula, governed",
        [
            ("sb(attr.aur, attr.wil)", True),
            ("sb(attr.str, attr.dex) + attr.aur / 10", False),
            ("attr.aur / 10 + sb(attr.str, attr.dex)", False),
            ("attr.str + sb(attr.wil, attr.aur)", True),
            ("attr.aur * 2", True),  # no sb: every attr counts
            ("attr.str + attr.dex", False),
            ("sb(attr.aur, attr.aur, attr.aur)", True),
        ],
    )
    def test_governance_from_formula(self, formula, governed):
        basis = skill_base_basis(formula)
        assert is_aura_governed("skill", "skl", basis) is governed
        reasons = withheld_reasons(ctx(test_code="skl", basis=basis))
        assert ("aura_governed" in reasons) is governed


# --- S7 ----------------------------------------------------------------------------------------


class TestS7PointApplies:
    """S7: a point applies when general or its skill code is the tested skill's or attribute's
    shortcode; a limited point at 0 does not apply; unlimited (None) is never used up."""

    @pytest.mark.parametrize(
        "point, test_code, applies",
        [
            (general(), "swd", True),
            (general(charges=2), "str", True),
            (Point("empty-code", "Luck", "", None), "swd", True),  # empty code = general
            (specific("swd"), "swd", True),
            (specific("swd", charges=1), "swd", True),
            (specific("dag"), "swd", False),  # for another skill
            (specific("dag", charges=3), "swd", False),
            (specific("str"), "str", True),  # attribute shortcode
            (specific("str"), "dex", False),
            (general(charges=0), "swd", False),  # limited at 0
            (specific("swd", charges=0), "swd", False),
            (general(charges=None), "swd", True),  # unlimited
            (specific("swd", charges=None), "swd", True),
        ],
    )
    def test_point_applies(self, point, test_code, applies):
        assert point_applies(point, test_code) is applies

    @pytest.mark.parametrize(
        "charges, consumes, after",
        [
            (3, True, 2),
            (1, True, 0),
            (3, False, 3),
            (0, False, 0),
            (None, True, None),  # unlimited never used up
            (None, False, None),
        ],
    )
    def test_charges_after(self, charges, consumes, after):
        assert charges_after(charges, consumes) == after

    def test_unlimited_point_survives_any_number_of_spends(self):
        charges = None
        for _ in range(50):
            charges = charges_after(charges, consumes=True)
        assert charges is None

    def test_limited_point_runs_out_then_stops_applying(self):
        point = general(charges=2)
        for expected in (1, 0):
            assert point_applies(point, "swd")
            point = dataclasses.replace(point, charges=charges_after(point.charges, True))
            assert point.charges == expected
        assert not point_applies(point, "swd")

    @pytest.mark.parametrize("charges", [0, -1])
    def test_consuming_from_an_empty_point_raises(self, charges):
        with pytest.raises(ValueError, match="none left"):
            charges_after(charges, consumes=True)


# --- S8 ----------------------------------------------------------------------------------------


class TestS8SuggestedOrder:
    """S8: suggested order of applicable points: specific before general; within each, unlimited
    before limited; then by name (case-insensitive)."""

    def test_specific_before_general(self):
        points = [general("Alpha"), specific("swd", "Zulu")]
        assert names(suggested_points(points, "swd")) == ["Zulu", "Alpha"]

    def test_unlimited_before_limited(self):
        points = [general("Alpha", charges=5), general("Zulu", charges=None)]
        assert names(suggested_points(points, "swd")) == ["Zulu", "Alpha"]

    def test_then_by_name(self):
        points = [general("Charlie"), general("Alpha"), general("Bravo")]
        assert names(suggested_points(points, "swd")) == ["Alpha", "Bravo", "Charlie"]

    def test_name_order_is_case_insensitive(self):
        points = [general("bravo"), general("Charlie"), general("ALPHA")]
        assert names(suggested_points(points, "swd")) == ["ALPHA", "bravo", "Charlie"]

    def test_specific_limited_before_general_unlimited(self):
        points = [general("Wellspring", None), specific("swd", "Blade Luck", 1)]
        assert names(suggested_points(points, "swd")) == ["Blade Luck", "Wellspring"]

    def test_full_order_and_filtering(self):
        points = [
            general("a general limited", charges=2, point_id="g-lim"),
            general("B general unlimited", point_id="g-unl"),
            specific("swd", "z specific limited", charges=1, point_id="s-lim"),
            specific("swd", "Y specific unlimited", point_id="s-unl-y"),
            specific("swd", "x specific unlimited", point_id="s-unl-x"),
            specific("dag", "other skill", point_id="other"),
            general("empty", charges=0, point_id="empty"),
            specific("swd", "empty specific", charges=0, point_id="empty-s"),
        ]
        assert ids(suggested_points(points, "swd")) == [
            "s-unl-x",
            "s-unl-y",
            "s-lim",
            "g-unl",
            "g-lim",
        ]

    def test_same_name_falls_back_to_id(self):
        points = [general("Luck", point_id="p2"), general("Luck", point_id="p1")]
        assert ids(suggested_points(points, "swd")) == ["p1", "p2"]

    def test_order_does_not_depend_on_input_order(self):
        points = [general("b"), specific("swd", "a", 3), general("a", 1), specific("swd", "c")]
        expected = ids(suggested_points(points, "swd"))
        assert ids(suggested_points(list(reversed(points)), "swd")) == expected
        assert names(suggested_points(points, "swd")) == ["c", "a", "b", "a"]

    def test_nothing_applies(self):
        assert suggested_points([specific("dag"), general(charges=0)], "swd") == []
        assert suggested_points([], "swd") == []

    def test_every_applicable_point_is_offered(self):
        # the choice is the player's: all applicable points are returned, not just the first
        points = [general("A"), general("B"), specific("swd", "C")]
        assert len(suggested_points(points, "swd")) == 3


# --- S9 ----------------------------------------------------------------------------------------


class TestS9FateTest:
    """S9: Fate Test d100 vs Fate ML graded as S1. CF lost (charge consumed) +0; MF kept +0;
    MS spent (charge consumed) +1; CS the player's choice: spend +2 (consumed) or keep +1."""

    @pytest.mark.parametrize(
        "fate_level, effect",
        [
            (CF, FateEffect("lost", 0, True)),
            (MF, FateEffect("kept", 0, False)),
            (MS, FateEffect("spent", 1, True)),
            (CS, FateEffect("choice", None, None)),  # pending: no silent default
        ],
    )
    def test_fate_test_table(self, fate_level, effect):
        assert fate_test_effect(fate_level) == effect

    @pytest.mark.parametrize(
        "choice, effect",
        [
            ("spend", FateEffect("spent", 2, True)),
            ("keep", FateEffect("kept", 1, False)),
        ],
    )
    def test_critical_success_choice(self, choice, effect):
        assert choice_effect(choice) == effect

    @pytest.mark.parametrize("fate_level", [-2, 3, 4, -3])
    def test_extended_fate_level_raises(self, fate_level):
        with pytest.raises(ValueError, match="-1..2"):
            fate_test_effect(fate_level)

    @pytest.mark.parametrize("choice", ["", "Spend", "KEEP", "default", "lost"])
    def test_unknown_choice_raises(self, choice):
        with pytest.raises(ValueError, match="'spend' or 'keep'"):
            choice_effect(choice)

    @pytest.mark.parametrize(
        "aura_eml, roll, fate_level, outcome",
        [
            (55, 32, MS, "spent"),  # Fate ML 77
            (55, 75, CS, "choice"),
            (55, 77, MS, "spent"),  # roll == Fate ML
            (55, 78, MF, "kept"),
            (55, 80, CF, "lost"),
            (0, 50, CS, "choice"),  # Fate ML 50
            (0, 51, MF, "kept"),
            (200, 96, MF, "kept"),  # Fate ML held to 95
            (200, 100, CF, "lost"),
        ],
    )
    def test_fate_test_graded_against_fate_ml(self, aura_eml, roll, fate_level, outcome):
        level = grade(roll, fate_ml(aura_eml))
        assert level == fate_level
        assert fate_test_effect(level).outcome == outcome

    @pytest.mark.parametrize(
        "charges, fate_level, choice, after",
        [
            (2, CF, None, 1),
            (2, MF, None, 2),
            (2, MS, None, 1),
            (2, CS, "spend", 1),
            (2, CS, "keep", 2),
            (1, CF, None, 0),
            (None, CF, None, None),
            (None, MS, None, None),
            (None, CS, "spend", None),
        ],
    )
    def test_charges_after_fate_test(self, charges, fate_level, choice, after):
        effect = fate_test_effect(fate_level)
        if choice is not None:
            effect = choice_effect(choice)
        assert charges_after(charges, effect.consumes_charge) == after


# --- S10 ---------------------------------------------------------------------------------------


class TestS10GainUncapped:
    """S10: the gain is added to the original level, uncapped: MS + 2 = CS+1 (3); CF + 1 = MF."""

    @pytest.mark.parametrize(
        "level, gain, new_level, written",
        [
            (MS, 2, 3, "CS+1"),
            (CF, 1, MF, "MF"),
            (CS, 1, 3, "CS+1"),
            (CS, 2, 4, "CS+2"),
            (MF, 1, MS, "MS"),
            (MF, 2, CS, "CS"),
            (MS, 0, MS, "MS"),
            (-3, 1, -2, "CF-1"),
            (3, 2, 5, "CS+3"),
        ],
    )
    def test_apply_gain(self, level, gain, new_level, written):
        assert apply_gain(level, gain) == new_level
        assert label(apply_gain(level, gain)) == written

    @pytest.mark.parametrize(
        "original, fate_level, choice, new_level",
        [
            (MS, CS, "spend", 3),  # the seed's example: MS up two rungs is CS+1
            (CS, CS, "keep", 3),
            (CF, MS, None, MF),
            (MF, MS, None, MS),
            (MS, MS, None, CS),
            (MF, CF, None, MF),
            (MF, MF, None, MF),
        ],
    )
    def test_original_level_after_fate(self, original, fate_level, choice, new_level):
        assert fate_then_apply(original, fate_level, choice) == new_level

    def test_descriptions_rederived_from_new_level(self):
        # the roll is never re-rolled: 32 vs 45 stays MS, Fate only lifts the level
        new_level = apply_gain(grade(32, 45), choice_effect("spend").gain)
        assert (new_level, label(new_level), name(new_level)) == (3, "CS+1", "Critical Success +1")
        assert is_success(new_level) and is_critical(new_level)


# --- S11 ---------------------------------------------------------------------------------------


class TestS11OnceFated:
    """S11: once fated, never again: a second request is refused with ``already_fated``."""

    def test_fated_result_is_refused(self):
        assert withheld_reasons(ctx(already_fated=True)) == ["already_fated"]

    @pytest.mark.parametrize(
        "fate_level, choice", [(CF, None), (MF, None), (MS, None), (CS, "spend"), (CS, "keep")]
    )
    def test_any_outcome_marks_the_result_fated(self, fate_level, choice):
        # whatever the first Fate Test did (an MF changes nothing and keeps the point), the point
        # that survives still applies, so the retry is refused for being fated and nothing else
        point = general(charges=2)
        effect = choice_effect(choice) if choice else fate_test_effect(fate_level)
        charges = charges_after(point.charges, effect.consumes_charge)
        after = dataclasses.replace(point, charges=charges)
        assert point_applies(after, "swd")
        assert withheld_reasons(ctx(already_fated=True, points=(after,))) == ["already_fated"]

    def test_refused_even_with_unlimited_points(self):
        points = (general(), specific("swd"))
        assert withheld_reasons(ctx(already_fated=True, points=points)) == ["already_fated"]

    def test_not_fated_yet_is_eligible(self):
        assert withheld_reasons(ctx(already_fated=False)) == []


# --- S12 ---------------------------------------------------------------------------------------


class TestS12WorldOption:
    """S12: world option values ``everyone`` (default), ``pc_only``, ``off``."""

    def test_values_and_default(self):
        assert sohl.FATE_OPTIONS == ("everyone", "pc_only", "off")
        assert sohl.DEFAULT_FATE_OPTION == "everyone"

    @pytest.mark.parametrize(
        "option, player_owned, reasons",
        [
            ("everyone", True, []),
            ("everyone", False, []),
            ("pc_only", True, []),
            ("pc_only", False, ["not_pc"]),
            ("off", True, ["fate_off"]),
            ("off", False, ["fate_off"]),
        ],
    )
    def test_option_effect(self, option, player_owned, reasons):
        assert withheld_reasons(ctx(fate_option=option, player_owned=player_owned)) == reasons

    @pytest.mark.parametrize("option", ["", "Everyone", "OFF", "pc-only", "gm_only", "on"])
    def test_invalid_option_raises(self, option):
        with pytest.raises(ValueError, match="fate_option"):
            withheld_reasons(ctx(fate_option=option))


# --- module-level ------------------------------------------------------------------------------


def test_ruleset_id():
    assert sohl.RULESET == "sohl"


class TestS7PointCovers:
    """S7, first half (``point_covers``): which points a test can use, charges aside."""

    @pytest.mark.parametrize(("skill_code", "covers"), [(None, True), ("", True), ("archery", True), ("melee", False)])
    def test_general_or_specific_to_the_code(self, skill_code, covers):
        point = Point("p", "P", skill_code, 0)
        assert sohl.point_covers(point, "archery") is covers
        assert sohl.point_applies(point, "archery") is False  # no charge left either way
