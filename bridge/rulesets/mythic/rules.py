"""Mythic: the Fate Chart (seed 003; DECISIONS.md M1-M9).

Pure and table-driven: no I/O, no clock, no randomness. The caller rolls the d100
(``bridge.rulesets.mythic.decide``) from an injected source and passes it in as a number.

A rank is a plain int: its position on the ladder of M1. Miniscule 2+ is 0, Average 5,
Superhuman 2+ 12. Beyond the ends the ladder goes on (M3): Superhuman 3+ is 13, Miniscule 3+ is
-1. A rank shift (M4) is plain addition on that ladder and is never clamped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

RULESET = "mythic"
# The tables whose words the cards show translated (extracted by bridge/i18n_extract.py).
SHOWN_TABLES = (
    "RANKS", "ANSWER_NAMES", "ODDS", "_POOR_INSTRUCTION", "_INTERRUPTED", "_EXTRA_ITEMS",
    "_GOT_THE_DROP", "_ADRENALINE", "_TWICE_THE_TIME", "NAMED_QUESTIONS", "REFUSALS",
)

D100_FACES = 100

# --- M1: the rank ladder -----------------------------------------------------------------------

RANKS = (
    "Miniscule 2+",
    "Miniscule",
    "Weak",
    "Low",
    "Below Average",
    "Average",
    "Above Average",
    "High",
    "Exceptional",
    "Incredible",
    "Awesome",
    "Superhuman",
    "Superhuman 2+",
)
LOWEST, HIGHEST = 0, len(RANKS) - 1  # Miniscule 2+ and Superhuman 2+: the chart's ends
FIRST_BEYOND = 2  # "N+" ranks start at 2+ (the chart's own ends), so N - 2 counts the steps beyond

# Every way of writing a rank the bridge reads, after casefolding and collapsing spaces (M1): the
# chart's full names, the chart's column abbreviations (M2) and the other spelling of Miniscule.
RANK_WORDS: Mapping[str, int] = {
    **{name.casefold(): rank for rank, name in enumerate(RANKS) if LOWEST < rank < HIGHEST},
    "minuscule": 1,
    "min": 1,
    "m": 1,
    "below avg": 4,
    "bav": 4,
    "avg": 5,
    "above avg": 6,
    "aav": 6,
    "exc": 8,
    "inc": 9,
    "awe": 10,
    "sup": 11,
    "s": 11,
}
# The two ranks a written "N+" may follow (M3), and which way "beyond" goes from them.
BEYOND_ENDS: Mapping[int, tuple[int, int]] = {1: (LOWEST, -1), 11: (HIGHEST, +1)}
# A rank word, then maybe "N+" with at most two digits ("Superhuman 100+" is a typo, not a rank).
_RANK_TEXT = re.compile(r"^(?P<word>[a-z][a-z ]*?)\s*(?:(?P<n>\d{1,2})\s*\+)?$")

# --- M2: the Fate Chart, chance of "yes" in %; rows Acting Rank, columns Difficulty Rank --------

FATE_CHART: tuple[tuple[int, ...], ...] = (
    # M2+  Min Weak  Low  BAv  Avg  AAv High  Exc  Inc  Awe  Sup  S2+
    (50, 25, 10, 5, 5, 0, 0, -20, -20, -40, -40, -55, -65),  # M2+
    (75, 50, 25, 15, 10, 5, 5, 0, 0, -20, -20, -35, -45),  # Min
    (90, 75, 50, 35, 25, 15, 10, 5, 5, 0, 0, -15, -25),  # Weak
    (95, 85, 65, 50, 45, 25, 15, 10, 5, 5, 5, -5, -15),  # Low
    (100, 90, 75, 55, 50, 35, 20, 15, 10, 5, 5, 0, -10),  # BAv
    (105, 95, 85, 75, 65, 50, 35, 25, 15, 10, 10, 5, -5),  # Avg
    (110, 95, 90, 85, 80, 65, 50, 45, 25, 20, 15, 5, 0),  # AAv
    (115, 100, 95, 90, 85, 75, 55, 50, 35, 25, 20, 10, 5),  # High
    (120, 105, 95, 95, 90, 85, 75, 65, 50, 45, 35, 15, 5),  # Exc
    (125, 115, 100, 95, 95, 90, 80, 75, 55, 50, 45, 20, 10),  # Inc
    (130, 125, 110, 95, 95, 90, 85, 80, 65, 55, 50, 25, 10),  # Awe
    (150, 145, 130, 100, 100, 95, 95, 90, 85, 80, 75, 50, 25),  # Sup
    (170, 165, 150, 120, 120, 100, 100, 95, 95, 90, 90, 75, 50),  # S2+
)
BEYOND_STEP = 20  # M3: "+20 / -20 for each point over 2"

# --- M5: the answers ---------------------------------------------------------------------------

EXCEPTIONAL_FRACTION = 5  # M5: the lower 1/5 of the yes range, the upper 1/5 of the no range
ANSWERS = ("exceptional_yes", "yes", "no", "exceptional_no")
ANSWER_NAMES = {
    "exceptional_yes": "Exceptional yes",
    "yes": "Yes",
    "no": "No",
    "exceptional_no": "Exceptional no",
}

# --- M6: odds questions ------------------------------------------------------------------------

ODDS = (
    "Impossible",
    "No way",
    "Very unlikely",
    "Unlikely",
    "50/50",
    "Somewhat likely",
    "Likely",
    "Very likely",
    "Near sure thing",
    "A sure thing",
    "Has to be",
)
ODDS_FIRST_RANK = 1  # M6: Impossible is Acting Rank Miniscule, each odds one rank higher
ODDS_WORDS: Mapping[str, int] = {
    **{name.casefold(): i for i, name in enumerate(ODDS)},
    "sure thing": 9,
    "fifty fifty": 4,
    "50 50": 4,
}
CHAOS_MIN, CHAOS_MAX = 1, 9  # M6: the Chaos Factor
DEFAULT_CHAOS_FACTOR = 5  # Mythic's starting Chaos Factor
CHAOS_RANK_SUM = 10  # M6: Chaos Factor 9 is Difficulty Rank Miniscule (1), 1 is Incredible (9)

# --- M7: the named questions -------------------------------------------------------------------

ShiftTarget = Literal["acting", "difficulty"]  # which rank a modifier shifts
ACTING: ShiftTarget = "acting"
DIFFICULTY: ShiftTarget = "difficulty"
MAX_REPEATS = 10  # a "per item" modifier taken more than ten times has left the chart's sense


@dataclass(frozen=True, slots=True)
class Modifier:
    """One listed modifier of a named question (M7).

    Each time it is taken, it shifts the ``target`` rank (``acting`` or ``difficulty``) by ``shift``
    rank shifts (M4). It may be taken at most ``max_times`` times.
    """

    key: str
    label: str
    target: ShiftTarget
    shift: int
    max_times: int = 1


@dataclass(frozen=True, slots=True)
class NamedQuestion:
    """One of the seed's named questions (M7).

    It holds the question and which ranks to use, as guidance for the card. ``acting_base_shift``
    is a shift to the Acting Rank the seed builds in. It also holds its listed modifiers and the
    outcome text of each answer (keys of ``ANSWERS``).
    """

    key: str
    question: str
    acting_guidance: str
    difficulty_guidance: str
    note: str
    modifiers: tuple[Modifier, ...]
    outcomes: Mapping[str, str]
    acting_base_shift: int = 0


_POOR_INSTRUCTION = Modifier("poor_instruction", "Training: poor instruction or resources", ACTING, -2)
_INTERRUPTED = Modifier("interrupted", "Training: interrupted for a short time", ACTING, -1)
_EXTRA_ITEMS = Modifier("extra_items", "Training: each further item trained at the same time",
                        DIFFICULTY, +1, MAX_REPEATS)
_TRAINING = (_POOR_INSTRUCTION, _INTERRUPTED, _EXTRA_ITEMS)
# M8: "+N RS to the question" (got the drop, adrenaline, a weak spot) shifts the Acting Rank N
# steps up, toward yes; a weak spot's size is its ``times`` (1 or 2, 1 when the asker gives none).
_GOT_THE_DROP = Modifier("got_the_drop", "Got the drop (an exceptional answer on acting next)",
                         ACTING, +1)
_ADRENALINE = Modifier("adrenaline", "Adrenaline (shrugged off a blow: exceptional no on hurt)",
                       ACTING, +1)
_HALF_THE_TIME = "and it came naturally: it took half the time."
_TWICE_THE_TIME = "The attempt fails, and where it matters it took twice the time."

NAMED_QUESTIONS: Mapping[str, NamedQuestion] = {
    q.key: q
    for q in (
        NamedQuestion(
            key="act_next",
            question="Does the character act next?",
            acting_guidance="The character's combat ability.",
            difficulty_guidance="The opponent's combat ability (several opponents act as one "
            "combined rank).",
            note="Ask after every action in a fight, unless the situation plainly hands someone "
            "the next strike.",
            modifiers=(_ADRENALINE,),
            outcomes={
                "exceptional_yes": "The character acts, so quickly that the opponent is caught "
                "flat-footed: +1RS to the character's question to hit.",
                "yes": "The character acts next and may attack the opponent.",
                "no": "The opponent acts next and may attack the character (with several "
                "opponents, take the most logical one, or ask).",
                "exceptional_no": "The opponent acts next and catches the character flat-footed: "
                "+1RS to the opponent's question to hit.",
            },
        ),
        NamedQuestion(
            key="hit",
            question="Does the character hit?",
            acting_guidance="The attacker's combat ability.",
            difficulty_guidance="The defender's combat ability in melee; for a ranged attack, a "
            "difficulty the table settles on.",
            note="Asked once the character has the action.",
            modifiers=(_GOT_THE_DROP, _ADRENALINE),
            outcomes={
                "exceptional_yes": "A perfect strike, the players choose how: it finds a weak "
                "spot (+1 or +2RS to the question whether the opponent is hurt) or wins an extra "
                "advantage, such as knocking the weapon away, before damage is asked as usual.",
                "yes": "The blow lands: ask whether the opponent is hurt.",
                "no": "The attack misses.",
                "exceptional_no": "A fumble, such as dropping the weapon, striking the wrong "
                "target or being left exposed (decide by logic, or ask it as a further question), "
                "and the opponent takes the next action.",
            },
        ),
        NamedQuestion(
            key="hurt",
            question="Is the opponent hurt?",
            acting_guidance="The damage rank of the weapon.",
            difficulty_guidance="The toughness of the one who was hit.",
            note="Asked after a hit; what the hurt looks like depends on the weapon and the "
            "answer.",
            modifiers=(
                Modifier("weak_spot", "Struck a weak spot (exceptional hit), per RS",
                         ACTING, +1, 2),
            ),
            outcomes={
                "exceptional_yes": "Full damage: the weapon has its whole effect (see the damage "
                "rules).",
                "yes": "A wound: the weapon has part of its effect (see the damage rules).",
                "no": "Bruises or a little blood, but the blow changes nothing.",
                "exceptional_no": "The blow is shrugged off and something good comes of it, as "
                "the players decide, such as: the attacker's weapon breaks, the attacker is left "
                "exposed, or adrenaline gives +1RS to the next questions of acting next and "
                "hitting.",
            },
        ),
        NamedQuestion(
            key="succumb",
            question="Does the character succumb to wounds?",
            acting_guidance="The damage rank of the wound that called for this question.",
            difficulty_guidance="The character's toughness, lowered by the rank shifts of the "
            "wounds taken.",
            note="Ask when a body area holds -3RS of stunning wounds or any lethal wound, and "
            "again each time its RS grows.",
            modifiers=(
                Modifier("wound_penalty", "Wounds taken, per RS of penalty", DIFFICULTY, -1,
                         MAX_REPEATS),
            ),
            outcomes={
                "exceptional_yes": "Beaten down completely: after a lethal wound the character "
                "dies; after a stunning one the character is knocked out and the wound heals as a "
                "lethal one.",
                "yes": "The character passes out from the pain, or is otherwise out of action "
                "until some healing is done.",
                "no": "The character keeps going.",
                "exceptional_no": "Unshaken: a lethal last wound counts as stunning, and a stunning "
                "one is thrown off at once.",
            },
        ),
        NamedQuestion(
            key="increase_attribute",
            question="Does the attribute increase by 1RS?",
            acting_guidance="Willpower, for training or time (to raise Willpower itself, the "
            "higher of IQ and Intuition); for experience, a rank set for the event behind the "
            "check.",
            difficulty_guidance="The rank the attribute would rise to.",
            note="Willpower is what drives improvement.",
            modifiers=_TRAINING,
            outcomes={
                "exceptional_yes": f"The attribute rises 1RS, {_HALF_THE_TIME}",
                "yes": "The attribute rises 1RS.",
                "no": "The attempt fails; nothing changes.",
                "exceptional_no": _TWICE_THE_TIME,
            },
        ),
        NamedQuestion(
            key="increase_ability",
            question="Does the ability increase by 1RS (or is a new one gained)?",
            acting_guidance="The most closely related attribute.",
            difficulty_guidance="The rank the ability would reach (Weak for a new ability).",
            note="A new ability is learned like an existing one is raised: from nothing to Weak.",
            modifiers=(
                *_TRAINING,
                Modifier("very_complex", "A very complex ability, such as surgery", DIFFICULTY, +2),
            ),
            outcomes={
                "exceptional_yes": f"The ability rises 1RS (a new one is gained at Weak), "
                f"{_HALF_THE_TIME}",
                "yes": "The ability rises 1RS (a new one is gained at Weak).",
                "no": "The attempt fails; nothing changes.",
                "exceptional_no": _TWICE_THE_TIME,
            },
        ),
        NamedQuestion(
            key="strength_weakness",
            question="Does the character gain the strength (or lose the weakness)?",
            acting_guidance="The most closely related attribute; the bridge takes it 1RS lower.",
            difficulty_guidance="A rank set for how potent the strength or weakness is.",
            note="",
            modifiers=_TRAINING,
            outcomes={
                "exceptional_yes": f"The strength is gained (or the weakness lost), "
                f"{_HALF_THE_TIME}",
                "yes": "The strength is gained, or the weakness lost.",
                "no": "Nothing changes.",
                "exceptional_no": _TWICE_THE_TIME,
            },
            acting_base_shift=-1,
        ),
        NamedQuestion(
            key="ageing",
            question="Does the attribute drop with age?",
            acting_guidance="The attribute in question.",
            difficulty_guidance="The character's toughness.",
            note="For ordinary humans the checks start at age 30 and come every 10 years after; "
            "old age brings further effects (see the text).",
            modifiers=(
                Modifier("lived_poorly", "Lived poorly or unhealthily these 10 years", DIFFICULTY, -1),
                Modifier("lived_healthily", "Lived particularly healthily these 10 years",
                         DIFFICULTY, +1),
            ),
            outcomes={
                "exceptional_yes": "The attribute and every ability tied directly to it fall 1RS, "
                "and the character goes through a crisis.",
                "yes": "The attribute and every ability tied directly to it fall 1RS.",
                "no": "No change.",
                "exceptional_no": "No change, and the character is notably hale in this "
                "attribute: its next ageing check is skipped.",
            },
        ),
        NamedQuestion(
            key="lack_of_use",
            question="Does the attribute or ability fall from lack of use?",
            acting_guidance="The attribute or ability in question.",
            difficulty_guidance="Toughness for an attribute; the most closely related attribute "
            "for an ability.",
            note="Check at each year's end whatever was not used to the full that year; once a "
            "rank has fallen, check it no more until it is raised again.",
            modifiers=(
                Modifier("unused", "Not used even once in the past year", DIFFICULTY, -1),
            ),
            outcomes={
                "exceptional_yes": "It falls 2RS (an attribute takes the abilities tied directly "
                "to it along).",
                "yes": "It falls 1RS (an attribute takes the abilities tied directly to it along).",
                "no": "No change.",
                "exceptional_no": "No change, and it is kept in fine shape: next year's check is "
                "skipped.",
            },
        ),
    )
}


# --- refusals ----------------------------------------------------------------------------------

# What these rules refuse, in English, with %(name)s / %(name)r placeholders: raised as
# :class:`Refused`, shown translated by the bridge (``bridge.i18n.rule_text``; babel.cfg lists
# this table, so the catalog has each text).
REFUSALS = {
    "unknown_rank": "unknown rank %(text)r: use a Fate Chart rank (%(ranks)s; short forms such as M2+, Min, "
                    "BAv, Avg, AAv, Exc, Inc, Awe, Sup, S2+) or Superhuman N+ / Miniscule N+",
    "rank_beyond": "unknown rank %(text)r: only Superhuman and Miniscule take N+, from 2+ up",
    "unknown_odds": "unknown odds %(text)r: use one of %(odds)s",
    "no_such_modifier": "%(question)r has no modifier %(key)r: its modifiers are %(modifiers)s",
    "no_modifiers": "%(question)r has no modifier %(key)r: it takes no modifiers",
    "taken_twice": "%(key)r is taken twice: take it once with times",
    "times": "%(key)r is taken 1..%(most)s times, got %(times)s",
}


class Refused(ValueError):
    """A request these rules cannot take: ``template``, filled with ``values``.

    ``template`` is English, a text of :data:`REFUSALS`. ``str()`` is the English text. The bridge
    shows ``template`` translated (``bridge.i18n.rule_text``); the rules cannot import the bridge.
    """

    def __init__(self, template: str, **values: object) -> None:
        super().__init__(template % values)
        self.template = template
        self.values = values


# --- M1: ranks ---------------------------------------------------------------------------------


def parse_rank(text: str) -> int:
    """M1/M3: the rank written ``text``, as its position on the ladder (Average 5).

    Case-insensitive. It reads:

    - the full names (``Below Average``);
    - the chart's abbreviations (``BAv``, ``avg``, ``S2+``, ``M2+``);
    - ``min``/``minuscule``/``m`` and ``sup``/``s``;
    - the ranks beyond the chart, with a space or not (``Superhuman 3+``, ``s4+``, ``Miniscule 3+``).

    Raises :class:`Refused` (a ``ValueError``) naming the accepted forms for anything else,
    including ``High 2+`` and ``Superhuman 1+``.

    >>> parse_rank("avg"), parse_rank("S2+"), parse_rank("superhuman 3+"), parse_rank("m3+")
    (5, 12, 13, -1)
    """
    normal = " ".join(text.replace("-", " ").replace(".", " ").casefold().split())
    match = _RANK_TEXT.match(normal)
    rank = match and RANK_WORDS.get(match.group("word"))
    if match is None or rank is None:
        raise Refused(REFUSALS["unknown_rank"], text=text, ranks=", ".join(RANKS))
    if match.group("n") is None:
        return rank
    n = int(match.group("n"))
    if rank not in BEYOND_ENDS or n < FIRST_BEYOND:
        raise Refused(REFUSALS["rank_beyond"], text=text)
    end, direction = BEYOND_ENDS[rank]
    return end + direction * (n - FIRST_BEYOND)


def rank_name(rank: int) -> str:
    """M1/M3: the name of the rank at ladder position ``rank``.

    ``Average`` for 5, ``Superhuman 3+`` for 13, ``Miniscule 4+`` for -2.
    """
    if rank > HIGHEST:
        return f"Superhuman {FIRST_BEYOND + rank - HIGHEST}+"
    if rank < LOWEST:
        return f"Miniscule {FIRST_BEYOND + LOWEST - rank}+"
    return RANKS[rank]


def shifted(rank: int, shift: int) -> int:
    """M4: ``rank`` moved ``shift`` steps along the ladder (+ up, - down). Never clamped.

    It goes on past the ends into the N+ ranks. ``shifted(12, 2)`` is Superhuman 4+ (14).
    """
    return rank + shift


def format_shift(shift: int) -> str:
    """A rank shift as the seed writes it: ``+1RS``, ``-2RS``, ``0RS``."""
    return f"{shift:+d}RS" if shift else "0RS"


# --- M2/M3: the chance of yes ------------------------------------------------------------------


def _beyond(rank: int) -> int:
    """How many steps ``rank`` lies beyond the chart: + above Superhuman 2+, - below Miniscule 2+."""
    return max(rank - HIGHEST, 0) - max(LOWEST - rank, 0)


def chance(acting: int, difficulty: int) -> int:
    """M2/M3: the chance in % of "yes" for Acting Rank ``acting`` against Difficulty Rank ``difficulty``.

    Both are ladder positions. Inside the chart, it is the chart's cell. Beyond it, it is the
    nearest edge cell, adjusted per step beyond:

    - an Acting Rank: +20 per step above the top, -20 per step below the bottom;
    - a Difficulty Rank: -20 per step above the top, +20 per step below the bottom;
    - both, when both are beyond.

    Never clamped: it may be below 0 or above 100.

    >>> chance(7, 5), chance(13, 5), chance(-1, 13)
    (75, 120, -105)
    """
    row = min(max(acting, LOWEST), HIGHEST)
    column = min(max(difficulty, LOWEST), HIGHEST)
    return FATE_CHART[row][column] + BEYOND_STEP * (_beyond(acting) - _beyond(difficulty))


# --- M5: thresholds and the answer -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Thresholds:
    """M5 for a chance ``chance`` (%).

    Yes on a d100 roll <= ``chance``. Exceptional yes on a roll <= ``exceptional_yes``. Exceptional
    no on a roll >= ``exceptional_no``. Each exceptional threshold is None only where M5 says "none":
    exceptional yes when p < 5, exceptional no when p >= 100. Otherwise it is the formula's value,
    not held to 1..100 (M9).
    """

    chance: int
    exceptional_yes: int | None
    exceptional_no: int | None


def thresholds(p: int) -> Thresholds:
    """M5/M9: the thresholds of chance ``p``.

    Exceptional yes at ``floor(p / 5)``; None when p < 5. Exceptional no from ``101 - floor((100 -
    p) / 5)``; None when p >= 100. They are reported as the formulas give them (M9). So above 100
    for a large p, 0 or below for a very negative one. And 101 for p 96..99: a threshold no d100
    reaches, but not "none".

    >>> thresholds(-20), thresholds(97).exceptional_no, thresholds(-405).exceptional_no
    (Thresholds(chance=-20, exceptional_yes=None, exceptional_no=77), 101, 0)
    """
    yes_fifth = p // EXCEPTIONAL_FRACTION
    no_fifth = (D100_FACES - p) // EXCEPTIONAL_FRACTION
    return Thresholds(
        chance=p,
        exceptional_yes=yes_fifth if p >= EXCEPTIONAL_FRACTION else None,
        exceptional_no=D100_FACES + 1 - no_fifth if p < D100_FACES else None,
    )


def answer(limits: Thresholds, roll: int) -> str:
    """M5: the answer to a d100 ``roll`` (1..100) under ``limits``: one of ``ANSWERS``.
    Raises ``ValueError`` for a roll outside 1..100."""
    if not 1 <= roll <= D100_FACES:
        raise ValueError(f"a d100 roll is 1..100, got {roll}")
    if roll <= limits.chance:
        exceptional = limits.exceptional_yes is not None and roll <= limits.exceptional_yes
        return "exceptional_yes" if exceptional else "yes"
    exceptional = limits.exceptional_no is not None and roll >= limits.exceptional_no
    return "exceptional_no" if exceptional else "no"


@dataclass(frozen=True, slots=True)
class ChartAnswer:
    """A Fate Chart question answered.

    The ranks after shifts (ladder positions), the thresholds of their chance, the d100 roll, and
    the answer (one of ``ANSWERS``).
    """

    acting: int
    difficulty: int
    limits: Thresholds
    roll: int
    answer: str


def ask(acting: int, difficulty: int, roll: int, acting_shift: int = 0,
        difficulty_shift: int = 0) -> ChartAnswer:
    """M1-M5: ask the Fate Chart. ``acting``/``difficulty`` are ladder positions before shifts,
    the shifts rank shifts (M4), ``roll`` the d100 (1..100). Raises ``ValueError`` for a roll
    outside 1..100.

    >>> ask(7, 5, 37, difficulty_shift=1).answer  # High vs Average +1RS to DR: p 55
    'yes'
    """
    acting, difficulty = shifted(acting, acting_shift), shifted(difficulty, difficulty_shift)
    limits = thresholds(chance(acting, difficulty))
    return ChartAnswer(acting, difficulty, limits, roll, answer(limits, roll))


# --- M6: odds questions ------------------------------------------------------------------------


def parse_odds(text: str) -> int:
    """M6: the index in ``ODDS`` of the odds written ``text``.

    Case-insensitive. ``sure thing``, ``fifty-fifty`` and ``50 50`` also read. Raises
    :class:`Refused` naming the odds.
    """
    normal = " ".join(text.replace("-", " ").casefold().split())
    try:
        return ODDS_WORDS[normal]
    except KeyError:
        raise Refused(REFUSALS["unknown_odds"], text=text, odds=", ".join(ODDS)) from None


def odds_ranks(odds: int, chaos_factor: int) -> tuple[int, int]:
    """M6: the (Acting Rank, Difficulty Rank) of odds ``odds`` under Chaos Factor ``chaos_factor``.

    ``odds`` is an index in ``ODDS``; ``chaos_factor`` is 1..9. Impossible .. Has to be are
    Miniscule .. Superhuman. Chaos Factor 9 .. 1 is Miniscule .. Incredible. Raises ``ValueError``
    for either out of range.

    >>> odds_ranks(6, 5)  # Likely at Chaos Factor 5: High vs Average
    (7, 5)
    """
    if not 0 <= odds < len(ODDS):
        raise ValueError(f"odds are 0..{len(ODDS) - 1}, got {odds}")
    if not CHAOS_MIN <= chaos_factor <= CHAOS_MAX:
        raise ValueError(f"the Chaos Factor is {CHAOS_MIN}..{CHAOS_MAX}, got {chaos_factor}")
    return ODDS_FIRST_RANK + odds, CHAOS_RANK_SUM - chaos_factor


# --- M7: named questions -----------------------------------------------------------------------


def named_question(key: str) -> NamedQuestion:
    """M7: the named question ``key`` (a key of ``NAMED_QUESTIONS``); ``ValueError`` otherwise."""
    try:
        return NAMED_QUESTIONS[key]
    except KeyError:
        raise ValueError(
            f"unknown named question {key!r}: use one of {', '.join(NAMED_QUESTIONS)}"
        ) from None


@dataclass(frozen=True, slots=True)
class AppliedModifier:
    """A modifier as taken: the modifier and how many times (its shift counts that often)."""

    modifier: Modifier
    times: int

    @property
    def shift(self) -> int:
        """The rank shifts this modifier adds to its target rank."""
        return self.modifier.shift * self.times


class ModifierRefused(Refused):
    """A modifier a named question cannot take (M7).

    ``index`` is the offending entry's place in what was taken. ``part`` is its bad part: ``key``
    or ``times``.
    """

    def __init__(self, template: str, *, index: int, part: str, **values: object) -> None:
        super().__init__(template, **values)
        self.index = index
        self.part = part


def apply_modifiers(question: NamedQuestion,
                    taken: Sequence[tuple[str, int]]) -> list[AppliedModifier]:
    """M7/M9: the modifiers of ``question`` taken as ``(key, times)`` pairs, in the order taken.

    An empty ``taken`` is no modifier: an empty list.

    Raises :class:`ModifierRefused` when a key is not one of the question's modifiers, or is taken
    twice over (use ``times``). Also when ``times`` is not 1..``max_times`` for it. Only the "per
    item" and "per RS" modifiers go above 1.
    """
    listed = {m.key: m for m in question.modifiers}
    applied: list[AppliedModifier] = []
    for index, (key, times) in enumerate(taken):
        modifier = listed.get(key)
        if modifier is None:
            raise ModifierRefused(REFUSALS["no_such_modifier" if listed else "no_modifiers"], index=index,
                                  part="key", question=question.key, key=key, modifiers=", ".join(listed))
        if any(a.modifier.key == key for a in applied):
            raise ModifierRefused(REFUSALS["taken_twice"], index=index, part="key", key=key)
        if not 1 <= times <= modifier.max_times:
            raise ModifierRefused(REFUSALS["times"], index=index, part="times", key=key,
                                  most=modifier.max_times, times=times)
        applied.append(AppliedModifier(modifier, times))
    return applied
