"""mythic: the Fate Chart (Mythic; docs/rules.md M1-M9).

Any table, in any game system, asks the Fate Chart a yes/no question.

- ``chart_question``: ranks, rank shifts, and optionally one of the named questions with its
  modifiers.
- ``chart_odds_question``: odds, under the world's Chaos Factor (M6).

Both are answered ``chart_answered``, with the bridge's d100. ``chart_settings`` (GM only) turns
odds questions on and sets the Chaos Factor. ``chart_catalog_query`` returns the ranks, odds and
named questions for the module's dialog.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from msgspec import Meta

from . import rules as _chart
from ...wire.base import BridgeMessage, Card, D100, Id, Name, OutPart, Part, Request, UserRequest, Visibility

RankText = Annotated[
    str,
    Meta(min_length=1, max_length=32, description="A Fate Chart rank (M1), case-insensitive: "
         "'High', 'avg', 'BAv', 'S2+', 'Superhuman 3+', 'm3+'."),
]
OddsText = Annotated[
    str,
    Meta(min_length=1, max_length=32, description="Odds (M6), case-insensitive: "
         + ", ".join(_chart.ODDS) + "."),
]
# A free rank shift (M4); the ladder has 13 ranks, so two lengths of it either way is plenty.
RankShift = Annotated[int, Meta(ge=-2 * len(_chart.RANKS), le=2 * len(_chart.RANKS))]
ChaosFactor = Annotated[int, Meta(ge=_chart.CHAOS_MIN, le=_chart.CHAOS_MAX,
                                  description="The Chaos Factor (M6), 1..9.")]
# A Literal built from a rules table: msgspec and the schemas read it at run time; to a type
# checker, which cannot evaluate it, the value is a str.
if TYPE_CHECKING:
    NamedQuestionKey = str
    ModifierKey = str
    ChartAnswerWord = str
else:
    NamedQuestionKey = Literal[tuple(_chart.NAMED_QUESTIONS)]
    ModifierKey = Literal[tuple(dict.fromkeys(m.key for q in _chart.NAMED_QUESTIONS.values() for m in q.modifiers))]
    ChartAnswerWord = Literal[_chart.ANSWERS]


class ChartModifierTaken(Part, kw_only=True, frozen=True):
    """One listed modifier of the named question, taken ``times`` times.

    More than once only for the "per item" / "per RS" ones. For a weak spot, ``times`` is its size;
    1 when not given (M8).
    """

    key: ModifierKey
    times: Annotated[int, Meta(ge=1, le=_chart.MAX_REPEATS)] = 1


class ChartQuestion(UserRequest, tag="chart_question", kw_only=True, frozen=True):
    """Ask the Fate Chart (M1-M5, M7). Anyone may ask.

    ``acting_rank`` goes against ``difficulty_rank``, as the asker chose them. The free shifts
    ``acting_shift`` / ``difficulty_shift`` move them (M4). A ``named`` question also moves them by
    its built-in shift and the ``modifiers`` taken. ``question`` is the asker's words; a named
    question supplies its own when absent. ``actor_id``/``actor_name``: the ChatMessage speaker.
    Answered ``chart_answered``, or ``error``: ``bad_message`` for an unknown rank, or a modifier
    the named question does not list.
    """

    acting_rank: RankText
    difficulty_rank: RankText
    acting_shift: RankShift = 0
    difficulty_shift: RankShift = 0
    named: NamedQuestionKey | None = None
    modifiers: Annotated[list[ChartModifierTaken], Meta(max_length=16)] = []
    question: Name | None = None
    user_name: Name | None = None
    actor_id: Id | None = None
    actor_name: Name | None = None
    visibility: Visibility = "public"


class ChartOddsQuestion(UserRequest, tag="chart_odds_question", kw_only=True, frozen=True):
    """Ask the Fate Chart by odds (M6), under the world's Chaos Factor.

    Only when the GM has turned odds questions on (``chart_settings``). Answered ``chart_answered``,
    or ``error``: ``not_eligible`` while odds questions are off; ``bad_message`` for unknown odds.
    """

    odds: OddsText
    question: Name | None = None
    user_name: Name | None = None
    actor_id: Id | None = None
    actor_name: Name | None = None
    visibility: Visibility = "public"


class ChartShift(OutPart, kw_only=True, frozen=True):
    """One rank shift that went into an answer.

    ``label`` is a modifier's text, or ``Free shift`` / ``Built into the question``. Then the rank
    it moved (``acting`` / ``difficulty``), and by how much.
    """

    label: str
    target: _chart.ShiftTarget
    shift: int


class ChartAnswered(BridgeMessage, tag="chart_answered", kw_only=True, frozen=True):
    """The Fate Chart's answer.

    - ``acting_asked``, ``difficulty_asked``: the ranks as given, by their chart names. For odds,
      the ranks of M6.
    - ``acting_rank``, ``difficulty_rank``: after every shift in ``shifts`` (M4).
    - ``chance``, ``exceptional_yes`` (roll <= it), ``exceptional_no`` (roll >= it): M5's
      thresholds. ``chance`` may be below 0 or above 100. The other two are null when no d100
      reaches them.
    - ``answer``: one of exceptional_yes / yes / no / exceptional_no.
    - ``outcome``: the named question's text for the answer; null otherwise.
    - ``visibility``: echoes the question's, for posting ``card``.
    """

    event_id: str
    question: str
    named: str | None
    odds: str | None
    chaos_factor: int | None
    acting_asked: str
    difficulty_asked: str
    shifts: list[ChartShift]
    acting_rank: str
    difficulty_rank: str
    chance: int
    exceptional_yes: int | None
    exceptional_no: int | None
    roll: D100
    answer: ChartAnswerWord
    outcome: str | None
    visibility: Visibility
    card: Card


class ChartSettings(UserRequest, tag="chart_settings", kw_only=True, frozen=True):
    """The GM sets the world's Fate Chart options. Answered ``chart_settings_applied``.

    ``odds_questions`` turns M6 on or off; off until set. ``chaos_factor`` is 1..9; 5 until set. An
    absent field is left as it is. Only a GM may (``user_is_gm``, filled by the GM's module from
    Foundry); others get ``forbidden``.
    """

    user_is_gm: bool = False
    odds_questions: bool | None = None
    chaos_factor: ChaosFactor | None = None


class ChartSettingsApplied(BridgeMessage, tag="chart_settings_applied", kw_only=True, frozen=True):
    """The world's Fate Chart options after a ``chart_settings``."""

    event_id: str
    odds_questions: bool
    chaos_factor: int


class ChartCatalogQuery(Request, tag="chart_catalog_query", kw_only=True, frozen=True):
    """Ask for what the module's Fate Chart dialog lists; answered ``chart_catalog``."""



class ChartModifierInfo(OutPart, kw_only=True, frozen=True):
    """A named question's listed modifier (M7) as the dialog offers it."""

    key: str
    label: str
    target: _chart.ShiftTarget
    shift: int
    max_times: int


class ChartQuestionInfo(OutPart, kw_only=True, frozen=True):
    """A named question (M7) as the dialog lists it.

    Its text, rank guidance, note, built-in Acting shift, modifiers, and the outcome text of each
    answer.
    """

    key: str
    question: str
    acting_guidance: str
    difficulty_guidance: str
    note: str
    acting_base_shift: int
    modifiers: list[ChartModifierInfo]
    outcomes: dict[str, str]


class ChartCatalog(BridgeMessage, tag="chart_catalog", kw_only=True, frozen=True):
    """The catalog for the module's dialog.

    The ranks of M1 (the chart's 13, in order), the odds of M6 and the named questions of M7. Also
    the world's options: whether odds questions are on, and the Chaos Factor.
    """

    event_id: str
    ranks: list[str]
    odds: list[str]
    questions: list[ChartQuestionInfo]
    odds_questions: bool
    chaos_factor: int


CLIENT = (ChartQuestion, ChartOddsQuestion, ChartSettings, ChartCatalogQuery)
BRIDGE = (ChartAnswered, ChartSettingsApplied, ChartCatalog)
