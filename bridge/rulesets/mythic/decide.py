"""mythic decisions: the Fate Chart answers yes/no questions (DECISIONS.md M1-M9).

Pure: the world's state comes in as a :class:`~bridge.state.WorldState`, dice as an injected
:class:`~bridge.dice.Dice`: one d100 per question. A refusal is raised as a
:class:`~bridge.errors.Refusal` before anything is written or rolled.

Records (kinds): ``mythic.options`` (key ``world``) holds the world's Fate Chart options. They
say whether odds questions are on (M6) and give the Chaos Factor. It is absent until a GM first
sends ``chart_settings``. Questions keep no record of their own. The answer is the reply, kept
under its ``event_id`` and in the audit trail.
"""

from __future__ import annotations

from typing import TypedDict

import msgspec

from . import cards, wire
from ... import wire as shared
from ...ruleset import Decider, Handler, Query, handler, rolling
from ...dice import Dice
from ...errors import BadMessage, Forbidden, NotEligible
from ...i18n import N_, _, rule_text
from . import rules as mythic
from ...state import WorldState

RULESET = mythic.RULESET
# The audit ``outcome`` values of the Fate Chart's decisions in words (Ruleset.outcome_names).
OUTCOME_NAMES = {**mythic.ANSWER_NAMES, "chart_settings": N_("settings")}
OPTIONS, WORLD_KEY = "mythic.options", "world"
ANSWER_TEMPLATE = "mythic_answer.html.j2"
DEFAULT_QUESTION = N_("Fate Chart question")  # the card's title when the asker gave no words
FREE_SHIFT, BUILT_IN = N_("Free shift"), N_("Built into the question")


class ChartOptions(msgspec.Struct, kw_only=True, frozen=True):
    """A world's Fate Chart options: odds questions on (M6; off by default), and the Chaos Factor (1..9)."""

    odds_questions: bool = False
    chaos_factor: int = mythic.DEFAULT_CHAOS_FACTOR


def _options(state: WorldState) -> ChartOptions:
    return state.get(OPTIONS, WORLD_KEY, ChartOptions) or ChartOptions()


def _rank(text: str, field: str) -> int:
    """M1: a rank as written, or ``bad_message`` naming ``field``."""
    try:
        return mythic.parse_rank(text)
    except ValueError as exc:
        raise BadMessage(rule_text(exc), field=field) from None


def _roll(dice: Dice) -> int:
    """M5: the bridge's d100."""
    return rolling(lambda: dice.roll(mythic.D100_FACES))


# --- chart_question ----------------------------------------------------------------------------


def _named_shifts(message: wire.ChartQuestion) -> tuple[mythic.NamedQuestion | None, list[wire.ChartShift]]:
    """M7: the named question asked, if any, and the shifts it brings.

    The shifts are its built-in Acting shift and the modifiers taken. Refuses modifiers without a
    named question, and ones it does not list. An empty list of modifiers is the same as none, with
    or without a named question (M9).
    """
    if message.named is None:
        if message.modifiers:
            raise BadMessage(N_("modifiers belong to a named question: give named too"),
                             field="modifiers")
        return None, []
    named = mythic.named_question(message.named)
    try:
        applied = mythic.apply_modifiers(named, [(m.key, m.times) for m in message.modifiers])
    except mythic.ModifierRefused as exc:
        raise BadMessage(rule_text(exc), field=f"modifiers[{exc.index}].{exc.part}") from None
    shifts = [wire.ChartShift(label=BUILT_IN, target=mythic.ACTING, shift=named.acting_base_shift)
              ] if named.acting_base_shift else []
    shifts += [
        wire.ChartShift(label=a.modifier.label if a.times == 1 else f"{a.modifier.label} (x{a.times})",
                        target=a.modifier.target, shift=a.shift)
        for a in applied
    ]
    return named, shifts


def _chart_question(message: wire.ChartQuestion, state: WorldState, dice: Dice) -> wire.ChartAnswered:
    """M1-M5, M7: read the ranks, add up the shifts, roll the d100, answer."""
    acting = _rank(message.acting_rank, "acting_rank")
    difficulty = _rank(message.difficulty_rank, "difficulty_rank")
    named, shifts = _named_shifts(message)
    shifts += [wire.ChartShift(label=FREE_SHIFT, target=target, shift=shift)
               for target, shift in ((mythic.ACTING, message.acting_shift),
                                     (mythic.DIFFICULTY, message.difficulty_shift)) if shift]
    question = message.question or (named.question if named else DEFAULT_QUESTION)
    return _answer(message, state, dice, question=question, named=named, odds=None,
                   chaos_factor=None, acting=acting, difficulty=difficulty, shifts=shifts)


# --- chart_odds_question -----------------------------------------------------------------------


def _chart_odds_question(message: wire.ChartOddsQuestion, state: WorldState, dice: Dice) -> wire.ChartAnswered:
    """M6: odds and the world's Chaos Factor on the same chart, when the GM allows them."""
    try:
        odds = mythic.parse_odds(message.odds)
    except ValueError as exc:
        raise BadMessage(rule_text(exc), field="odds") from None
    options = _options(state)
    if not options.odds_questions:
        raise NotEligible(N_("odds questions are off in this world: the GM turns them on in the "
                             "Fate Chart settings"), field="odds")
    acting, difficulty = mythic.odds_ranks(odds, options.chaos_factor)
    return _answer(message, state, dice, question=message.question or DEFAULT_QUESTION,
                   named=None, odds=mythic.ODDS[odds], chaos_factor=options.chaos_factor,
                   acting=acting, difficulty=difficulty, shifts=[])


# --- the answer --------------------------------------------------------------------------------


def _answer(
    message: wire.ChartQuestion | wire.ChartOddsQuestion,
    state: WorldState,
    dice: Dice,
    *,
    question: str,
    named: mythic.NamedQuestion | None,
    odds: str | None,
    chaos_factor: int | None,
    acting: int,
    difficulty: int,
    shifts: list[wire.ChartShift],
) -> wire.ChartAnswered:
    """M4, M5: apply the shifts, roll, and build the reply with its card."""
    acting_shift = sum(s.shift for s in shifts if s.target == mythic.ACTING)
    difficulty_shift = sum(s.shift for s in shifts if s.target == mythic.DIFFICULTY)
    result = mythic.ask(acting, difficulty, _roll(dice), acting_shift, difficulty_shift)
    limits = result.limits
    outcome = named.outcomes[result.answer] if named else None
    card = cards.render_card(
        ANSWER_TEMPLATE,
        title=question if message.question else _(question),  # the asker's own words stay
        ruleset=RULESET,
        speaker_actor_id=message.actor_id,
        speaker_alias=message.actor_name,
        named_question=_(named.question) if named and named.question != question else None,
        guidance=named and (_(named.acting_guidance), _(named.difficulty_guidance)),
        odds=odds and _(odds),
        chaos_factor=chaos_factor,
        acting_asked=cards.rank_name(acting),
        acting_rank=cards.rank_name(result.acting),
        acting_shift=mythic.format_shift(acting_shift),
        difficulty_asked=cards.rank_name(difficulty),
        difficulty_rank=cards.rank_name(result.difficulty),
        difficulty_shift=mythic.format_shift(difficulty_shift),
        shifts=[(cards.shift_label(s.label), _("AR") if s.target == mythic.ACTING else _("DR"),
                 mythic.format_shift(s.shift)) for s in shifts],
        chance=limits.chance,
        exceptional_yes=limits.exceptional_yes,
        exceptional_no=limits.exceptional_no,
        roll=result.roll,
        answer=result.answer,
        answer_name=_(mythic.ANSWER_NAMES[result.answer]),
        outcome=outcome and _(outcome),
        user_name=message.user_name,
    )
    return wire.ChartAnswered(
        event_id=message.event_id,
        question=question,
        named=None if named is None else named.key,
        odds=odds,
        chaos_factor=chaos_factor,
        acting_asked=mythic.rank_name(acting),
        difficulty_asked=mythic.rank_name(difficulty),
        shifts=shifts,
        acting_rank=mythic.rank_name(result.acting),
        difficulty_rank=mythic.rank_name(result.difficulty),
        chance=limits.chance,
        exceptional_yes=limits.exceptional_yes,
        exceptional_no=limits.exceptional_no,
        roll=result.roll,
        answer=result.answer,
        outcome=outcome,
        visibility=message.visibility,
        card=card,
    )


# --- chart_settings, chart_catalog_query -------------------------------------------------------


def _chart_settings(message: wire.ChartSettings, state: WorldState, dice: Dice) -> wire.ChartSettingsApplied:
    """M6: a GM turns odds questions on or off and sets the Chaos Factor."""
    if not message.user_is_gm:
        raise Forbidden(N_("only a GM may change the Fate Chart settings"), field="user_id")
    options = _options(state)
    changes = {name: value for name, value in (("odds_questions", message.odds_questions),
                                                ("chaos_factor", message.chaos_factor))
               if value is not None}
    options = msgspec.structs.replace(options, **changes)
    state.put(OPTIONS, WORLD_KEY, options)
    return wire.ChartSettingsApplied(event_id=message.event_id,
                                     odds_questions=options.odds_questions,
                                     chaos_factor=options.chaos_factor)


def _question_info(q: mythic.NamedQuestion) -> wire.ChartQuestionInfo:
    """A named question for the dialog, its words in the world's language.

    Keys, ranks and odds stay as they are: the module sends them back.
    """
    return wire.ChartQuestionInfo(
        key=q.key,
        question=_(q.question),
        acting_guidance=_(q.acting_guidance),
        difficulty_guidance=_(q.difficulty_guidance),
        note=q.note and _(q.note),
        acting_base_shift=q.acting_base_shift,
        modifiers=[wire.ChartModifierInfo(key=m.key, label=_(m.label), target=m.target,
                                          shift=m.shift, max_times=m.max_times)
                   for m in q.modifiers],
        outcomes={answer: _(text) for answer, text in q.outcomes.items()},
    )


def _chart_catalog_query(message: wire.ChartCatalogQuery, state: WorldState) -> wire.ChartCatalog:
    """M1, M6, M7 for the module's dialog, with the world's options.

    A read-only query: not audited, nothing written.
    """
    options = _options(state)
    return wire.ChartCatalog(
        event_id=message.event_id,
        ranks=list(mythic.RANKS),
        odds=list(mythic.ODDS),
        questions=[_question_info(q) for q in mythic.NAMED_QUESTIONS.values()],
        odds_questions=options.odds_questions,
        chaos_factor=options.chaos_factor,
    )


# Wrapped below the summarizer (every decision's Outcome: reply, columns, public card, log).
_DECIDERS: dict[type, Decider] = {
    wire.ChartQuestion: _chart_question,
    wire.ChartOddsQuestion: _chart_odds_question,
    wire.ChartSettings: _chart_settings,
}
QUERIES: dict[type, Query] = {wire.ChartCatalogQuery: _chart_catalog_query}


def answer_detail(reply: wire.ChartAnswered) -> str:
    """One readable line of an answer for the audit trail.

    E.g. ``High vs Above Average: 55% (exceptional yes <= 11, exceptional no >= 92), roll 37: Yes``.
    """
    def limit(value: int | None) -> str:
        return "none" if value is None else str(value)

    return (f"{reply.acting_rank} vs {reply.difficulty_rank}: {reply.chance}% (exceptional yes <= "
            f"{limit(reply.exceptional_yes)}, exceptional no >= {limit(reply.exceptional_no)}), "
            f"roll {reply.roll}: {mythic.ANSWER_NAMES[reply.answer]}")


class _Common(TypedDict):
    """The audit columns every mythic decision has, from its request."""

    ruleset: str
    actor_id: str | None
    actor_name: str | None


def summarize(message: shared.ClientMessage, reply: wire.BridgeMessage) -> shared.AuditColumns:
    """The audit columns of a mythic decision.

    The answer word (``exceptional_yes``, ``yes``, ``no``, ``exceptional_no``), ``chart_settings``,
    or the refusal's code.
    """
    common = _Common(ruleset=RULESET, actor_id=getattr(message, "actor_id", None),
                     actor_name=getattr(message, "actor_name", None))
    match reply:
        case wire.ChartAnswered():
            return shared.AuditColumns(**common, test_name=reply.question, outcome=reply.answer,
                                     fate_roll=reply.roll, detail=answer_detail(reply))
        case wire.ChartSettingsApplied():
            odds = "on" if reply.odds_questions else "off"
            return shared.AuditColumns(**common, outcome="chart_settings",
                                     detail=f"odds questions {odds}, Chaos Factor {reply.chaos_factor}")
        case shared.Error():
            return shared.AuditColumns(**common, test_name=getattr(message, "question", None),
                                     outcome=reply.code)
    raise TypeError(f"not a mythic reply: {type(reply).__name__}")


HANDLERS: dict[type, Handler] = {kind: handler(decide, summarize) for kind, decide in _DECIDERS.items()}


def refused(message: shared.ClientMessage, error: shared.Error, state: WorldState) -> shared.AuditColumns:
    """The audit columns of a refused mythic request (from the request alone)."""
    return summarize(message, error)
