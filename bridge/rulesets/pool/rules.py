"""pool: an unpublished d6-pool / d20 game (seed 004 "Fundamentals"; DECISIONS.md P1-P16).

Pure and table-driven: no I/O, no clock, no randomness of its own. Dice come in as a
:class:`DieRoller` (``bridge.dice.Dice`` fits) or as numbers. The Fate ledger is plain ints.

Terms:

- A *check* rolls a pool of d6s and counts successes against the *task's tier*: 1 Basic ..
  5 Legendary.
- A character's own *Tier* is half its level, rounded up. It adds dice to the pool and to saves.
- *Session Fate* (3 per session) and *earned Fate* (from 1s and GM awards) both spend.
- *Destiny* is earned Fate banked at a Rest. It is never spent as Fate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

RULESET = "pool"
# The tables whose words the cards show translated (extracted by bridge/i18n_extract.py).
SHOWN_TABLES = ("SEED_TASK_TIER_NAMES", "REFUSALS")

D6, D20 = 6, 20
EXPLODING_FACE = 6  # P2: a 6 succeeds and adds one more die
STAMINA_FACE = 1  # P2: a 1 costs stamina and pays earned Fate
SESSION_FATE = 3  # P5: every session starts with 3 session Fate
FATE_PER_DIE = 1  # P6: 1 Fate buys 1 die, before the roll
FATE_PER_REROLL = 1  # P7: 1 Fate rerolls a d20
DESTINY_PER_LEVEL = 1  # seed: "gaining a level costs at least 1" Destiny

# P4: the task tiers; the seed names only the ends, 2..4 are world configuration (P11).
MAX_TIER = 5  # seed: task tiers, effect tiers and a character's Tier all run 1-5
MAX_POOL = 30  # dice before explosions: a stat modifier and Tier are single digits; the exact
# pass chance of a 30-die pool takes a few ms, of 200 dice seconds (on the decision path)
MAX_LEVEL = 2 * MAX_TIER  # Tier = level / 2 rounded up, so Tier 5 ends at level 10
TASK_TIERS = tuple(range(1, MAX_TIER + 1))
SEED_TASK_TIER_NAMES = {1: "Basic", 5: "Legendary"}
CONFIGURED_TASK_TIERS = (2, 3, 4)
EFFECT_TIERS = TASK_TIERS  # P11: the DC table has one DC per effect tier

# P11: a stat die is a signed die: 6 = +d6, -4 = -d4 (a negative stat die), 0 = no die.
STAT_DIE_FACES = (4, 6, 8, 10, 12)

Mode = Literal["normal", "advantage", "disadvantage"]
NORMAL: Mode = "normal"
ADVANTAGE: Mode = "advantage"
DISADVANTAGE: Mode = "disadvantage"

# P1, P3: the lowest face that succeeds, by (stat modifier negative?, mode).
SUCCESS_THRESHOLDS: dict[tuple[bool, Mode], int] = {
    (False, NORMAL): 5,
    (False, ADVANTAGE): 4,
    (False, DISADVANTAGE): 6,
    (True, NORMAL): 6,
    (True, ADVANTAGE): 5,
    (True, DISADVANTAGE): 6,
}

# Who holds Fate (P5, P12): only player characters.
CHARACTER_KINDS = ("pc", "retainer", "follower")
FATE_HOLDERS = frozenset({"pc"})

# P9: the six saves; on a Fate save the Fate die is the save stat's die, rolled once.
SAVES = ("body", "mind", "sense", "heart", "cunning", "fate")
FATE_SAVE = "fate"

# P7: the d20 rolls Fate may reroll.
D20_ROLL_KINDS = ("attack", "save", "ability_test", "disruption_check", "injury_roll")


class DieRoller(Protocol):
    """A source of die rolls: ``roll(faces)`` returns an int in ``1..faces``."""

    def roll(self, faces: int) -> int: ...


# --- refusals ----------------------------------------------------------------------------------

# What these rules refuse, in English, with %(name)s placeholders: raised (or listed) as
# :class:`Refused`, shown translated by the bridge (``bridge.i18n.rule_text``; babel.cfg lists
# this table, so the catalog has each text).
REFUSALS = {
    "stat_die": "row %(row)s: the die %(die)s is not 0 or +/- one of %(faces)s",
    "stat_min_score": "row %(row)s: min_score %(score)s does not rise",
    "stat_falls": "row %(row)s: die or modifier falls as the score rises",
    "dc_count": "%(given)s DCs given, one per effect tier %(tiers)s needed",
    "dc_falls": "effect tier %(tier)s: DC %(dc)s is below tier %(lower)s's %(lower_dc)s",
    "level_destiny": "gaining a level costs at least %(cost)s Destiny, %(held)s held",
    "d20_count": "a %(mode)s roll has %(count)s d20, got %(got)s",
}


class Refused(ValueError):
    """What these rules refuse: ``template``, filled with ``values``.

    ``template`` is English, a text of :data:`REFUSALS`. ``str()`` is the English text. The bridge
    shows ``template`` translated (``bridge.i18n.rule_text``); the rules cannot import the bridge.
    """

    def __init__(self, template: str, **values: object) -> None:
        super().__init__(template % values)
        self.template = template
        self.values = values


# --- Tier and modes ----------------------------------------------------------------------------


def tier_for_level(level: int) -> int:
    """The character's Tier: half its level rounded up (seed "Tier"). Raises ``ValueError``
    for a level below 1.

    >>> [tier_for_level(n) for n in (1, 2, 3, 10)]
    [1, 1, 2, 5]
    """
    if level < 1:
        raise ValueError(f"a level is 1 or more, got {level}")
    return (level + 1) // 2


def roll_mode(advantage_sources: int, disadvantage_sources: int) -> Mode:
    """P3/P13: the roll's mode from its counts of advantage and disadvantage sources.

    Any number of advantage sources is advantage; any number of disadvantage sources,
    disadvantage. Both at once is a normal roll. Counts are >= 0 (``ValueError`` otherwise).
    """
    if advantage_sources < 0 or disadvantage_sources < 0:
        raise ValueError("advantage and disadvantage sources are counted from 0")
    if advantage_sources and not disadvantage_sources:
        return ADVANTAGE
    if disadvantage_sources and not advantage_sources:
        return DISADVANTAGE
    return NORMAL


# --- Checks: P1-P4, P6 -------------------------------------------------------------------------


def pool_size(stat_modifier: int, tier: int, bought: int = 0) -> int:
    """P1/P6: the number of d6s: stat modifier + Tier + dice bought with Fate.

    With a negative stat modifier it is Tier + bought: the modifier adds nothing. Raises
    ``ValueError`` for a Tier below 1 or a negative purchase.
    """
    if tier < 1:
        raise ValueError(f"a Tier is 1 or more, got {tier}")
    if bought < 0:
        raise ValueError(f"dice bought cannot be negative, got {bought}")
    return max(stat_modifier, 0) + tier + bought


def success_threshold(stat_modifier: int, mode: Mode) -> int:
    """P1/P3: the lowest d6 face that succeeds: 5 (normal), 4 (advantage), 6 (disadvantage).

    With a negative stat modifier it is 6, or 5 at advantage. A +0 modifier is not negative.
    """
    return SUCCESS_THRESHOLDS[(stat_modifier < 0, mode)]


def roll_pool(size: int, dice: DieRoller) -> list[int]:
    """P2: roll ``size`` d6s, then one more d6 for every 6, in that order; explosions explode too.

    Returns every face rolled: the first ``size`` are the pool, the rest explosions.
    """
    faces = [dice.roll(D6) for _ in range(size)]
    pending = faces.count(EXPLODING_FACE)
    while pending:
        face = dice.roll(D6)
        faces.append(face)
        pending += (face == EXPLODING_FACE) - 1
    return faces


def count_successes(faces: Sequence[int], threshold: int) -> int:
    """P2/P3: dice at or above ``threshold`` (a 6 always succeeds: every threshold is <= 6)."""
    return sum(face >= threshold for face in faces)


@dataclass(frozen=True, slots=True)
class OnesPaid:
    """What a check's 1s did (P2, P10, P12).

    ``stamina_lost`` and ``fate_gained`` are in points. ``paid`` says, for each 1 in roll order,
    whether it paid.
    """

    stamina_lost: int
    fate_gained: int
    paid: tuple[bool, ...]


def pay_ones(ones: int, stamina: int, holds_fate: bool, narrative: bool) -> OnesPaid:
    """P2, P10, P12: settle ``ones`` rolled 1s, in order, against ``stamina`` (>= 0).

    - Standard: each 1 costs 1 stamina and pays 1 earned Fate. Once stamina is 0, a 1 costs nothing
      and pays nothing (P2).
    - Narrative consequences (P10, a player character's check): a 1 costs no stamina and pays 1
      Fate, even at 0 stamina.
    - A retainer or follower (``holds_fate`` false, P12): a 1 costs stamina and pays nothing, under
      either option (P14: P12 before P10).

    Raises ``ValueError`` for negative counts.
    """
    if ones < 0 or stamina < 0:
        raise ValueError("ones and stamina are counted from 0")
    if narrative and holds_fate:
        return OnesPaid(stamina_lost=0, fate_gained=ones, paid=(True,) * ones)
    costing = min(ones, stamina)
    paid = (True,) * costing + (False,) * (ones - costing)
    return OnesPaid(stamina_lost=costing, fate_gained=costing if holds_fate else 0, paid=paid)


def passes(successes: int, needed: int) -> bool:
    """P4: a check passes when its successes reach the task's tier, or the number a rule gives."""
    return successes >= needed


def task_tier_name(task_tier: int, configured: Sequence[str] | None) -> str | None:
    """P4/P11: the name of task tier 1..5, or None.

    1 Basic and 5 Legendary come from the seed. 2..4 come from the world's ``configured`` names, in
    order. None when the world gave none: names are never invented. Raises ``ValueError`` outside
    1..5.
    """
    if task_tier not in TASK_TIERS:
        raise ValueError(f"a task tier is 1..5, got {task_tier}")
    if task_tier in SEED_TASK_TIER_NAMES:
        return SEED_TASK_TIER_NAMES[task_tier]
    return None if configured is None else configured[CONFIGURED_TASK_TIERS.index(task_tier)]


# --- The exact odds of a check -----------------------------------------------------------------


def _chain_numerators(threshold: int, up_to: int) -> list[int]:
    """P(one die and its explosions give k successes) for k = 0..up_to-1, as numerators over ``6 ** up_to``.

    k = 0 is a failed face. k >= 1 is k-1 sixes then a non-6 success, or k sixes then a failure.
    """
    failures, stop_successes = threshold - 1, EXPLODING_FACE - threshold
    over = [failures] + [D6 * stop_successes + failures] * (up_to - 1)  # over 6 ** (k + 1)
    return [n * D6 ** (up_to - k - 1) for k, n in enumerate(over)]


def success_distribution(size: int, threshold: int, up_to: int) -> tuple[list[int], int]:
    """The exact distribution of a pool's successes (P2/P3), explosions included.

    It convolves one die's chain ``size`` times, for ``size`` d6s succeeding on ``threshold``..6.
    Returns ``(numerators, denominator)``. ``numerators`` is ``[P(0), ..., P(up_to - 1),
    P(>= up_to)]`` over the common ``denominator``: integers, so exact. Raises ``ValueError`` for
    ``size`` < 0, ``up_to`` < 1, or a threshold outside 2..6.
    """
    if size < 0 or up_to < 1 or not 2 <= threshold <= EXPLODING_FACE:
        raise ValueError(f"bad pool: size {size}, threshold {threshold}, up_to {up_to}")
    chain = _chain_numerators(threshold, up_to)
    total = [1] + [0] * (up_to - 1)
    for _ in range(size):
        total = [sum(total[i] * chain[k - i] for i in range(k + 1)) for k in range(up_to)]
    denominator = D6 ** (up_to * size)
    return [*total, denominator - sum(total)], denominator


def chance_to_pass(size: int, threshold: int, needed: int) -> float:
    """P4: the chance (0..1) that a pool gets at least ``needed`` (>= 1) successes.

    The pool is ``size`` d6s succeeding on ``threshold``..6. From :func:`success_distribution`.
    """
    numerators, denominator = success_distribution(size, threshold, needed)
    return numerators[-1] / denominator


# --- Fate, Destiny: P5-P8 ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FateSpent:
    """Fate taken for a purchase (P5): ``from_session`` first, then ``from_earned``."""

    from_session: int
    from_earned: int


def spend_fate(session_fate: int, earned_fate: int, cost: int) -> FateSpent:
    """P5-P7: take ``cost`` Fate, session Fate first, then earned Fate. Destiny is never part of
    it (P8). Raises ``ValueError`` when ``cost`` is negative or more than the two hold."""
    if cost < 0:
        raise ValueError(f"a Fate cost cannot be negative, got {cost}")
    if cost > session_fate + earned_fate:
        raise ValueError(f"{cost} Fate needed, {session_fate + earned_fate} held")
    from_session = min(cost, session_fate)
    return FateSpent(from_session=from_session, from_earned=cost - from_session)


def rest(earned_fate: int, destiny: int) -> tuple[int, int]:
    """P8: at a Rest unspent earned Fate becomes Destiny: returns ``(earned, destiny)`` after,
    i.e. ``(0, destiny + earned_fate)``. Session Fate is not converted (the caller leaves it)."""
    return 0, destiny + earned_fate


def gain_level(level: int, destiny: int) -> tuple[int, int]:
    """P8: a level gained: returns ``(level + 1, 0)``; Destiny resets to 0.

    The seed's downtime says a level costs at least 1 Destiny. Raises :class:`Refused` when
    ``destiny`` is below it.
    """
    if destiny < DESTINY_PER_LEVEL:
        raise Refused(REFUSALS["level_destiny"], cost=DESTINY_PER_LEVEL, held=destiny)
    return level + 1, 0


# --- d20s: P7, P9 ------------------------------------------------------------------------------

D20_COUNT = {NORMAL: 1, ADVANTAGE: 2, DISADVANTAGE: 2}  # P7/P9: 2d20 at advantage/disadvantage


def kept_d20(d20s: Sequence[int], mode: Mode) -> int:
    """P7/P9: the d20 that counts.

    The only one (normal), the higher of two (advantage), the lower of two (disadvantage). Raises
    :class:`Refused` when the count does not fit the mode.
    """
    if len(d20s) != D20_COUNT[mode]:
        raise Refused(REFUSALS["d20_count"], mode=mode, count=D20_COUNT[mode], got=len(d20s))
    return min(d20s) if mode == DISADVANTAGE else max(d20s)


def roll_d20s(mode: Mode, dice: DieRoller) -> list[int]:
    """P7/P9: roll the d20s of a ``mode`` roll (one, or two at advantage/disadvantage)."""
    return [dice.roll(D20) for _ in range(D20_COUNT[mode])]


def rerolled_total(total: int, kept_before: int, kept_after: int) -> int:
    """P7: a reroll replaces only the kept d20: modifiers and other dice stand."""
    return total - kept_before + kept_after


def roll_stat_die(die: int, dice: DieRoller) -> int:
    """P9/P11: a signed stat die: ``6`` rolls +1d6, ``-4`` rolls -1d4, ``0`` is no die (0).

    Raises ``ValueError`` for faces outside :data:`STAT_DIE_FACES`.
    """
    if die == 0:
        return 0
    if abs(die) not in STAT_DIE_FACES:
        raise ValueError(f"a stat die is one of {STAT_DIE_FACES} (signed) or 0, got {die}")
    value = dice.roll(abs(die))
    return value if die > 0 else -value


def save_total(kept: int, stat_die: int, fate_die: int, tier: int, bonus: int = 0) -> int:
    """P9/P15: d20 (kept) + the save stat's die + the Fate die + Tier + bonus, as rolled values.

    Every roller adds its Tier, a retainer's or follower's too. On a Fate save the caller passes
    the Fate die once, as ``stat_die``, and ``fate_die`` 0.
    """
    return kept + stat_die + fate_die + tier + bonus


def save_passes(total: int, dc: int) -> bool:
    """P9: a save passes when its total reaches the DC (a total equal to the DC passes)."""
    return total >= dc


# --- World configuration: P11 ------------------------------------------------------------------


class StatRowLike(Protocol):
    """One row of a world's stat table.

    Scores from ``min_score`` up, to the next row, have the signed ``die`` and the flat ``modifier``.
    """

    @property
    def min_score(self) -> int: ...
    @property
    def die(self) -> int: ...
    @property
    def modifier(self) -> int: ...


Row = TypeVar("Row", bound=StatRowLike)


def stat_table_problems(rows: Sequence[StatRowLike]) -> list[Refused]:
    """P11: what is wrong with a world's stat score table; an empty list means valid.

    Each problem is a :class:`Refused`; ``str()`` is its English. The rules:

    - rows in rising ``min_score`` order, without repeats;
    - dice are signed faces of :data:`STAT_DIE_FACES`, or 0;
    - dice and modifiers never fall as the score rises.
    """
    problems = []
    for index, row in enumerate(rows):
        if row.die != 0 and abs(row.die) not in STAT_DIE_FACES:
            problems.append(Refused(REFUSALS["stat_die"], row=index, die=row.die, faces=STAT_DIE_FACES))
        if index and row.min_score <= rows[index - 1].min_score:
            problems.append(Refused(REFUSALS["stat_min_score"], row=index, score=row.min_score))
        if index and (row.die < rows[index - 1].die or row.modifier < rows[index - 1].modifier):
            problems.append(Refused(REFUSALS["stat_falls"], row=index))
    return problems


def dc_table_problems(dcs: Sequence[int]) -> list[Refused]:
    """P11: what is wrong with a world's DC-by-effect-tier list; an empty list means valid.

    It needs one DC per effect tier 1..5, never falling as the tier rises. Each problem is a
    :class:`Refused`.
    """
    problems = []
    if len(dcs) != len(EFFECT_TIERS):
        problems.append(Refused(REFUSALS["dc_count"], given=len(dcs), tiers=EFFECT_TIERS))
    problems += [Refused(REFUSALS["dc_falls"], tier=i + 2, dc=b, lower=i + 1, lower_dc=a)
                 for i, (a, b) in enumerate(zip(dcs, dcs[1:])) if b < a]
    return problems


def stat_row(score: int, rows: Sequence[Row]) -> Row | None:
    """P11: the row of a valid stat table that a stat ``score`` falls in.

    That is the last row whose ``min_score`` is at most ``score``. None below the first row, or for
    an empty table.
    """
    found = None
    for row in rows:
        if row.min_score > score:
            break
        found = row
    return found
