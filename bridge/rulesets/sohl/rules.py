"""Song of Heroic Lands: Success Tests and Fate (seeds 000, 001; DECISIONS.md S1-S12).

Pure and table-driven: no I/O, no clock, no randomness. The caller (``bridge.core``) rolls a
Fate Test's dice from an injected source and passes them in as numbers.

Success levels are plain ints: CF -1, MF 0, MS 1, CS 2, extended beyond both ends (S2).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

RULESET = "sohl"
# The tables whose words the cards show translated (extracted by bridge/i18n_extract.py).
SHOWN_TABLES = ("LEVEL_NAMES",)

# S1: the four ordinary levels and their names.
CF, MF, MS, CS = -1, 0, 1, 2
LEVEL_ABBREVIATIONS = {CF: "CF", MF: "MF", MS: "MS", CS: "CS"}
LEVEL_NAMES = {
    CF: "Critical Failure",
    MF: "Marginal Failure",
    MS: "Marginal Success",
    CS: "Critical Success",
}
CRITICAL_DIGITS = frozenset({0, 5})  # S1: units digit 0 or 5 is critical
D100_FACES = 100

# S4: Fate ML = 50 + floor(Aura EML / 2), held to the EML bounds 5..95.
FATE_ML_BASE = 50
EML_MIN, EML_MAX = 5, 95

# S12: the world option.
FATE_OPTIONS = ("everyone", "pc_only", "off")
DEFAULT_FATE_OPTION = "everyone"

# S5: every reason Fate may be withheld, in the order they are reported.
WITHHELD_REASONS = (
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
AURA_CODE = "aur"


FateOutcome = Literal["lost", "kept", "spent", "choice"]  # S9: what a Fate Test did to the point


@dataclass(frozen=True, slots=True)
class FateEffect:
    """What a Fate Test result does (S9).

    ``outcome`` is lost/kept/spent/choice. ``gain`` is in success levels. ``consumes_charge``
    says whether a charge is consumed. The last two are None while a choice is pending.
    """

    outcome: FateOutcome
    gain: int | None
    consumes_charge: bool | None


# S9: Fate Test level -> effect on the point and the original test.
FATE_TEST_TABLE = {
    CF: FateEffect("lost", 0, True),
    MF: FateEffect("kept", 0, False),
    MS: FateEffect("spent", 1, True),
    CS: FateEffect("choice", None, None),
}
# S9: the player's answer to a Fate Test Critical Success.
CS_CHOICE_TABLE = {
    "spend": FateEffect("spent", 2, True),
    "keep": FateEffect("kept", 1, False),
}


class PointLike(Protocol):
    """A Fate Point as the rules read it (``bridge.wire.FatePoint`` fits); read only."""

    @property
    def point_id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def skill_code(self) -> str | None: ...
    @property
    def charges(self) -> int | None: ...


# --- S1-S3: grading ----------------------------------------------------------------------------


def grade(roll: int, eml: int, level_mod: int = 0) -> int:
    """S1: the success level of a d100 ``roll`` (1..100) against ``eml``, plus ``level_mod``.

    Success if ``roll <= eml``; critical if the units digit is 0 or 5. The EML is used as given
    (never clamped). Raises ``ValueError`` for a roll outside 1..100.

    >>> grade(32, 45), grade(35, 45), grade(62, 45), grade(70, 45)
    (1, 2, 0, -1)
    """
    if not 1 <= roll <= D100_FACES:
        raise ValueError(f"a d100 roll is 1..100, got {roll}")
    critical = roll % 10 in CRITICAL_DIGITS
    if roll <= eml:
        level = CS if critical else MS
    else:
        level = CF if critical else MF
    return level + level_mod


def is_success(level: int) -> bool:
    """S2: level >= 1 is a success (extended levels included)."""
    return level >= MS


def is_critical(level: int) -> bool:
    """S2: level >= 2 is a critical success, level <= -1 a critical failure."""
    return level >= CS or level <= CF


def label(level: int, basic: bool = False) -> str:
    """S2/S3: the level's written form: ``CF``, ``MF``, ``MS``, ``CS``, ``CS+1``, ``CF-1``...

    For a basic test: ``Success`` (level >= 1) or ``Failure`` (level <= 0).
    """
    if basic:
        return "Success" if is_success(level) else "Failure"
    if level > CS:
        return f"CS+{level - CS}"
    if level < CF:
        return f"CF-{CF - level}"
    return LEVEL_ABBREVIATIONS[level]


def name(level: int, basic: bool = False) -> str:
    """The level's long name for cards (S3).

    E.g. ``Marginal Success``, ``Critical Success +1``, ``Critical Failure -2``. For a basic test:
    ``Success`` / ``Failure``.
    """
    if basic:
        return label(level, basic=True)
    if level > CS:
        return f"{LEVEL_NAMES[CS]} +{level - CS}"
    if level < CF:
        return f"{LEVEL_NAMES[CF]} -{CF - level}"
    return LEVEL_NAMES[level]


# --- S4: Fate ML -------------------------------------------------------------------------------


def fate_ml(aura_eml: int) -> int:
    """S4: the Fate Mastery Level, ``50 + floor(aura_eml / 2)`` held to 5..95."""
    return max(EML_MIN, min(EML_MAX, FATE_ML_BASE + aura_eml // 2))


# --- S6: Skill Base basis ----------------------------------------------------------------------

_SB_CALL = re.compile(r"\bsb\(([^()]*)\)")
_ATTR_REF = re.compile(r"\battr\.([A-Za-z_][A-Za-z0-9_]*)")


def skill_base_basis(formula: str) -> list[str]:
    """S6: the basis attribute codes of a SoHL ``skillBaseFormula``.

    The attributes named inside ``sb(...)`` (wherever it stands); with no ``sb(...)``, every
    ``attr.<code>`` in the formula. Order of first appearance, no repeats.

    >>> skill_base_basis("sb(attr.str, attr.dex) + attr.aur / 10")
    ['str', 'dex']
    >>> skill_base_basis("attr.aur * 2")
    ['aur']
    """
    return list(_formula_basis(formula))


@functools.lru_cache(maxsize=1024)  # a world's skills have a few formulas, sent with every test
def _formula_basis(formula: str) -> tuple[str, ...]:
    """:func:`skill_base_basis` of ``formula`` as a tuple, parsed once per formula."""
    calls = _SB_CALL.findall(formula)
    source = " ".join(calls) if calls else formula
    return tuple(dict.fromkeys(_ATTR_REF.findall(source)))


def is_aura_governed(kind: str, code: str, basis: Iterable[str]) -> bool:
    """S5 ``aura_governed``: the Aura attribute's own test, or a skill whose basis has ``aur``."""
    if kind == "attribute":
        return code == AURA_CODE
    return kind == "skill" and AURA_CODE in basis


# --- S7/S8: Fate Points ------------------------------------------------------------------------


def point_covers(point: PointLike, test_code: str) -> bool:
    """S7, first half: the point is general (no skill code) or specific to the tested code."""
    return point.skill_code in (None, "") or point.skill_code == test_code


def point_applies(point: PointLike, test_code: str) -> bool:
    """S7: a point applies when it covers the test (:func:`point_covers`) and has a charge left.

    ``charges`` None is unlimited. A limited point at 0 does not apply.
    """
    return point_covers(point, test_code) and (point.charges is None or point.charges > 0)


def suggested_points(points: Iterable[PointLike], test_code: str) -> list[PointLike]:
    """S7/S8: the points that apply to the test, in suggested order.

    Specific before general. Within each, unlimited before limited. Then by name, then id, to be
    total.
    """
    applicable = [p for p in points if point_applies(p, test_code)]
    if len(applicable) < 2:
        return applicable
    return sorted(applicable, key=_suggested_order)


def _suggested_order(point: PointLike) -> tuple[bool, bool, str, str]:
    """S8's order of a point among the suggested: specific, unlimited, name, id."""
    return not point.skill_code, point.charges is not None, point.name.casefold(), point.point_id


# --- S5: who may call on Fate ------------------------------------------------------------------


@dataclass(slots=True)
class FateContext:
    """Everything S5 reads. ``aura_eml`` None = no Aura attribute; ``basis`` per S6.

    Made for each grading and Fate request, and only read. Not frozen: a frozen dataclass's
    ``__init__`` costs twice as much.
    """

    fate_option: str
    player_owned: bool
    aura_eml: int | None
    aura_disabled: bool
    aural_shock: bool
    test_kind: str
    test_code: str
    basis: Sequence[str]
    already_fated: bool
    points: Sequence[PointLike]


def withheld_reasons(ctx: FateContext) -> list[str]:
    """S5: every reason Fate is withheld from this result, in the order of S5; empty = eligible.

    ``no_points``: no point applies (S7). Which ones do, in S8's order, is :func:`suggested_points`.

    Raises ``ValueError`` for a ``fate_option`` outside S12's values.
    """
    if ctx.fate_option not in FATE_OPTIONS:
        raise ValueError(f"fate_option must be one of {FATE_OPTIONS}, got {ctx.fate_option!r}")
    checks = {
        "fate_off": ctx.fate_option == "off",
        "not_pc": ctx.fate_option == "pc_only" and not ctx.player_owned,
        "no_aura": ctx.aura_eml is None or ctx.aura_disabled or ctx.aura_eml <= 0,
        "aural_shock": ctx.aural_shock,
        "aura_governed": is_aura_governed(ctx.test_kind, ctx.test_code, ctx.basis),
        "mystical": ctx.test_kind == "mystical",
        "fate_test": ctx.test_kind == "fate",
        "already_fated": ctx.already_fated,
        "no_points": not any(point_applies(p, ctx.test_code) for p in ctx.points),
    }
    return [reason for reason in WITHHELD_REASONS if checks[reason]]


# --- S9/S10: the Fate Test ---------------------------------------------------------------------


def fate_test_effect(fate_level: int) -> FateEffect:
    """S9: what a Fate Test of ``fate_level`` (-1..2, graded by S1) does to the point and test."""
    try:
        return FATE_TEST_TABLE[fate_level]
    except KeyError:
        raise ValueError(f"a Fate Test level is -1..2, got {fate_level}") from None


def choice_effect(choice: str) -> FateEffect:
    """S9: the effect of answering a Fate Test CS with ``spend`` (+2, charge) or ``keep`` (+1)."""
    try:
        return CS_CHOICE_TABLE[choice]
    except KeyError:
        raise ValueError(f"a Fate choice is 'spend' or 'keep', got {choice!r}") from None


def apply_gain(level: int, gain: int) -> int:
    """S10: the new level of the original test, uncapped (MS + 2 = CS+1, CF + 1 = MF)."""
    return level + gain


def charges_after(charges: int | None, consumes: bool) -> int | None:
    """S7/S9: a point's charges after a Fate Test. Unlimited (None) is never used up.

    Raises ``ValueError`` if a limited point with no charge would be consumed. The caller must have
    refused with ``no_charges`` first.
    """
    if charges is None or not consumes:
        return charges
    if charges <= 0:
        raise ValueError("cannot consume a charge from a point with none left")
    return charges - 1
