"""hmtw decisions: the world's tarot decks, tests of fate, pushes, group tests, Challenge Actions,
and the GM's deck commands (DECISIONS.md H1-H14).

Pure: the world's state comes in as a :class:`~bridge.state.WorldState`, dice as an injected
:class:`~bridge.dice.Dice`. Each draw is one die of as many faces as cards left undrawn: the
pick among them in deck order (see ``bridge.rulesets.hmtw.rules``). Every refusal is raised
before the first write, so a refused request changes nothing. Every card is drawn before the
first write too.

Records (kinds):

- ``hmtw.decks`` (key ``world``): both decks, undrawn in deck order and discard in the order
  drawn. Also the tests still open for a push, the player cards on the table (H14) and the
  reshuffles waiting (H1, H6, H7).
- ``hmtw.test`` (by ``test_id`` / ``action_id``; a group's members as ``<test_id>/1``, ``/2``):
  each test of fate, group member's test or Challenge Action, with its cards and outcome.
- ``hmtw.group`` (by ``test_id``): a group test's members, hits and outcome (H10).
- ``hmtw.bound`` (key ``guild``): the obstacles bound by fate, and the test that bound each (H9).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from typing import Literal, TypedDict

import msgspec

from . import cards, wire
from ... import wire as shared
from ...ruleset import Decider, Handler, Outcome, handler, log_fields, rolling
from ...dice import Dice
from ...errors import BadMessage, Forbidden, Joined, NotEligible, NotFound, Text
from ...i18n import N_, _, ngettext
from . import rules as hmtw
from ...state import WorldState

RULESET = hmtw.RULESET
DECKS, TESTS, GROUPS, BOUND = "hmtw.decks", "hmtw.test", "hmtw.group", "hmtw.bound"
DECKS_KEY, BOUND_KEY = "world", "guild"
TestKind = Literal["test", "member", "challenge"]


class OnTableRecord(msgspec.Struct, kw_only=True, frozen=True):
    """A card on the table as stored (``hmtw.OnTable``, H14)."""

    card: str
    held_by: list[str]


class DecksRecord(msgspec.Struct, kw_only=True, frozen=True):
    """A world's decks as stored: ``hmtw.Decks`` field for field, lists for tuples.

    A record written before H14 has no ``table`` (None): its drawn cards are all on the discard
    pile. The next decision deals by H14 and stores a ``table``. Re-derived under
    :func:`before_h14`, a decision stores none, as it did then.
    """

    player_undrawn: list[str]
    player_discard: list[str]
    gm_undrawn: list[str]
    gm_discard: list[str]
    open_tests: list[str] = []
    table: list[OnTableRecord] | None = None
    reshuffle_after_test: bool = False
    reshuffle_at_round_end: bool = False


class TestRecord(msgspec.Struct, kw_only=True, frozen=True):
    """One draw for an adventurer.

    It is a test of fate (``test``), a group member's test (``member``, with ``group_id``), or a
    Challenge Action (``challenge``: ``outcome`` None, ``total`` is its value). ``first`` and
    ``pushed`` are card codes. ``total`` includes the pushed card once pushed.
    """

    test_id: str
    kind: TestKind
    group_id: str | None = None
    actor_id: str
    actor_name: str
    user_id: str
    user_name: str | None
    attribute: wire.HmtwAttribute
    score: int
    favor: bool
    disfavor: bool
    obstacle: str | None
    first: str
    pushed: str | None = None
    total: int
    outcome: wire.HmtwOutcome | None
    visibility: wire.Visibility = "public"


class GroupRecord(msgspec.Struct, kw_only=True, frozen=True):
    """A group test (H10): its members' test ids (most qualified first), hits and outcome."""

    test_id: str
    attribute: wire.HmtwAttribute
    obstacle: str | None
    member_ids: list[str]
    hits: int
    outcome: wire.HmtwGroupOutcome
    visibility: wire.Visibility = "public"


class BoundEntry(msgspec.Struct, kw_only=True, frozen=True):
    """One obstacle bound by fate (H9), under its :func:`hmtw.obstacle_key`."""

    key: str
    obstacle: str
    test_id: str
    outcome: str


class BoundRecord(msgspec.Struct, kw_only=True, frozen=True):
    """The guild's obstacles bound by fate, in the order they were bound."""

    obstacles: list[BoundEntry] = []


# --- state --------------------------------------------------------------------------------------


_BEFORE_H14: ContextVar[bool] = ContextVar("hmtw_before_h14", default=False)


@contextmanager
def before_h14() -> Iterator[None]:
    """Decide as before H14 inside (the ruleset's :class:`~bridge.ruleset.Era`).

    Every drawn player card goes onto the discard pile at once. The decks are stored without a
    ``table``, and their counts have no ``player_on_table``. Only ``audit verify`` enters it, for a
    record decided before H14. Live decisions always follow H14.
    """
    token = _BEFORE_H14.set(True)
    try:
        yield
    finally:
        _BEFORE_H14.reset(token)


def _decks(state: WorldState) -> hmtw.Decks:
    record = state.get(DECKS, DECKS_KEY, DecksRecord)
    if record is None:
        return replace(hmtw.new_decks(), h14=not _BEFORE_H14.get())
    return hmtw.Decks(
        player=hmtw.Pile(tuple(record.player_undrawn), tuple(record.player_discard)),
        gm=hmtw.Pile(tuple(record.gm_undrawn), tuple(record.gm_discard)),
        open_tests=tuple(record.open_tests),
        table=tuple(hmtw.OnTable(t.card, tuple(t.held_by)) for t in record.table or ()),
        h14=not _BEFORE_H14.get(),
        reshuffle_after_test=record.reshuffle_after_test,
        reshuffle_at_round_end=record.reshuffle_at_round_end,
    )


def _put_decks(state: WorldState, decks: hmtw.Decks) -> None:
    state.put(DECKS, DECKS_KEY, DecksRecord(
        player_undrawn=list(decks.player.undrawn),
        player_discard=list(decks.player.discard),
        gm_undrawn=list(decks.gm.undrawn),
        gm_discard=list(decks.gm.discard),
        open_tests=list(decks.open_tests),
        table=[OnTableRecord(card=t.card, held_by=list(t.held_by)) for t in decks.table] if decks.h14 else None,
        reshuffle_after_test=decks.reshuffle_after_test,
        reshuffle_at_round_end=decks.reshuffle_at_round_end,
    ))


def _bound(state: WorldState) -> list[BoundEntry]:
    record = state.get(BOUND, BOUND_KEY, BoundRecord)
    return [] if record is None else list(record.obstacles)


def _put_bound(state: WorldState, obstacle: str | None, bound: list[BoundEntry]) -> None:
    """Store the guild's bound obstacles after a test against ``obstacle`` (none: unchanged)."""
    if obstacle is not None:
        state.put(BOUND, BOUND_KEY, BoundRecord(obstacles=bound))


def _rebind(bound: list[BoundEntry], obstacle: str | None, test_id: str, outcome: str | None,
            binding: bool) -> tuple[list[BoundEntry], bool]:
    """H9: ``bound`` with ``obstacle`` bound or released by ``test_id``; and whether it is bound now.

    It is bound by ``test_id`` when ``binding``. It is released when that test bound it and no
    longer does.
    """
    if obstacle is None:
        return bound, False
    key = hmtw.obstacle_key(obstacle)
    kept = [b for b in bound if not (b.key == key and b.test_id == test_id)]
    if binding:
        kept.append(BoundEntry(key=key, obstacle=obstacle, test_id=test_id, outcome=str(outcome)))
    return kept, binding


# --- checks (raise before any write) ------------------------------------------------------------


def _require_gm(user_is_gm: bool, what: str) -> None:
    """Refuse ``forbidden`` unless a GM asks; ``what`` (a msgid) says what only a GM may do."""
    if not user_is_gm:
        raise Forbidden(N_("only a GM may %(what)s"), {"what": Text(what)}, field="user_id")


def _require_owner(actors: Sequence[wire.HmtwActor], user_id: str, user_is_gm: bool) -> None:
    """Only a GM, or an owner of the drawing adventurer (or of one of a group's), may draw."""
    if not user_is_gm and not any(user_id in a.owner_user_ids for a in actors):
        names = Joined(tuple(repr(a.name) for a in actors), Text(N_(" or ")))
        raise Forbidden(N_("user %(user)s does not own %(names)s and may not draw for them"),
                        {"user": user_id, "names": names}, field="user_id")


def _require_new_ids(state: WorldState, ids: Sequence[str], field: str) -> None:
    for test_id in ids:
        if (state.get(TESTS, test_id, TestRecord) is not None
                or state.get(GROUPS, test_id, GroupRecord) is not None):
            raise BadMessage(N_("%(test)r names an earlier test in this world"), {"test": test_id},
                             field=field)


def _obstacle_key(obstacle: str) -> str:
    """H9: the obstacle's key; a blank name is the message's fault."""
    try:
        return hmtw.obstacle_key(obstacle)
    except ValueError:
        raise BadMessage(hmtw.NO_OBSTACLE_NAME, field="obstacle") from None


def _require_unbound(bound: list[BoundEntry], obstacle: str | None) -> None:
    """H9: a bound obstacle cannot be tested again by anyone in the guild."""
    if obstacle is None:
        return
    key = _obstacle_key(obstacle)
    entry = next((b for b in bound if b.key == key), None)
    if entry is not None:
        raise NotEligible(
            N_("%(obstacle)r is bound by fate after test %(test)s (%(outcome)s): nobody in the guild "
               "may test it again until the GM says circumstances changed (H9)"),
            {"obstacle": entry.obstacle, "test": entry.test_id,
             "outcome": Text(OUTCOME_NAMES[entry.outcome])},  # a test's or a group's (failure, disaster)
            field="obstacle",
        )


def _picker(dice: Dice) -> Callable[[int], int]:
    """The draw's ``pick``: one die of ``n`` faces.

    Scripted dice that run out or do not fit are the line's fault (``resolve``): ``bad_message`` on
    ``dice``.
    """

    def pick(n: int) -> int:
        return rolling(lambda: dice.roll(n), f" (a draw picks 1..{n} among the undrawn cards)")

    return pick


# --- wire parts and cards -----------------------------------------------------------------------


def _face(card: hmtw.Card) -> wire.HmtwCardFace:
    return wire.HmtwCardFace(code=card.code, name=card.name, suit=card.suit,  # type: ignore[arg-type]
                             value=card.value, symbol=card.symbol)


def _counts(decks: hmtw.Decks) -> wire.HmtwDeckCounts:
    player_undrawn, player_discarded = hmtw.counts(decks.player)
    gm_undrawn, gm_discarded = hmtw.counts(decks.gm)
    return wire.HmtwDeckCounts(player_undrawn=player_undrawn, player_discarded=player_discarded,
                               player_on_table=len(decks.table) if decks.h14 else None,
                               gm_undrawn=gm_undrawn, gm_discarded=gm_discarded)


def _reshuffled(reshuffles: Sequence[hmtw.Reshuffled]) -> list[wire.HmtwReshuffled]:
    return [wire.HmtwReshuffled(reason=r.reason, decks=list(r.decks)) for r in reshuffles]


RESHUFFLE_TEXT = {
    "fool": N_("The Fool was drawn: both decks are reshuffled, every card back in."),
    "exhausted": N_("The %(deck)s deck ran out: its discard pile is shuffled back in."),
    "gm": N_("The GM reshuffles both decks, every card back in."),
}
DECK_TITLES = {"player": N_("player"), "gm": N_("GM")}


def _notice(reshuffles: Sequence[hmtw.Reshuffled], decks: hmtw.Decks) -> wire.Card | None:
    """H7: the public chat card announcing this decision's reshuffles; None without one.

    If cards are still on the table after them, a line says those stayed out (H14).
    """
    if not reshuffles:
        return None
    lines = [_(RESHUFFLE_TEXT[r.reason]) % {"deck": _(DECK_TITLES[r.decks[0]])} for r in reshuffles]
    if decks.table and any("player" in r.decks for r in reshuffles):
        lines.append(ngettext("%(num)s card still on the table stays out until its test is finished.",
                              "%(num)s cards still on the table stay out until their tests are finished.",
                              len(decks.table)) % {"num": len(decks.table)})
    return cards.render_card("hmtw_reshuffle.html.j2", title=_("The decks are reshuffled"),
                             ruleset=RULESET, lines=lines)


def _modifier_text(favor: bool, disfavor: bool) -> str:
    """H4 in words, for the card."""
    if favor and disfavor:
        return _("favor and disfavor cancel")
    if favor:
        return _("favor +%(bonus)s") % {"bonus": hmtw.FAVOR_BONUS}
    if disfavor:
        return _("disfavor -%(bonus)s") % {"bonus": hmtw.FAVOR_BONUS}
    return ""


def _result(record: TestRecord, open_tests: Sequence[str]) -> wire.HmtwTestResult:
    """One adventurer's test as the wire shows it.

    ``push_by`` is the drawer while the test is open for a push (H6).
    """
    assert record.outcome is not None  # never called for a Challenge Action
    pushable = record.test_id in open_tests and hmtw.may_push(
        record.outcome, record.pushed is not None, record.kind == "challenge")
    return wire.HmtwTestResult(
        test_id=record.test_id,
        actor_id=record.actor_id,
        actor_name=record.actor_name,
        user_id=record.user_id,
        attribute=record.attribute,
        score=record.score,
        modifier=hmtw.modifier(record.favor, record.disfavor),
        first=_face(hmtw.card(record.first)),
        pushed=None if record.pushed is None else _face(hmtw.card(record.pushed)),
        total=record.total,
        outcome=record.outcome,
        push_by=[record.user_id] if pushable else [],
    )


def _test_view(result: wire.HmtwTestResult, record: TestRecord) -> dict[str, object]:
    """What the card templates show of one adventurer's test."""
    return {
        "test_id": result.test_id,
        "actor_name": result.actor_name,
        "user_id": result.user_id,
        "user_name": record.user_name,
        "suit": cards.suit_name(result.attribute),
        "score": result.score,
        "modifier": result.modifier,
        "modifier_text": _modifier_text(record.favor, record.disfavor),
        "first": result.first,
        "pushed": result.pushed,
        "total": result.total,
        "outcome": result.outcome,
        "outcome_name": _(hmtw.OUTCOME_NAMES[result.outcome]),
        "pushable": bool(result.push_by),
    }


def _test_card(result: wire.HmtwTestResult, record: TestRecord, obstacle: str | None,
               bound: bool) -> wire.Card:
    return cards.render_card(
        "hmtw_test.html.j2",
        title=_("Test of fate: %(suit)s") % {"suit": cards.suit_name(result.attribute)},
        ruleset=RULESET,
        speaker_actor_id=result.actor_id,
        speaker_alias=result.actor_name,
        test=_test_view(result, record),
        obstacle=obstacle,
        bound=bound,
    )


def _tested(event_id: str, record: TestRecord, decks: hmtw.Decks, bound: bool,
            reshuffles: Sequence[hmtw.Reshuffled]) -> wire.HmtwTested:
    result = _result(record, decks.open_tests)
    return wire.HmtwTested(
        event_id=event_id,
        test=result,
        obstacle=record.obstacle,
        bound=bound,
        decks=_counts(decks),
        reshuffles=_reshuffled(reshuffles),
        notice=_notice(reshuffles, decks),
        card=_test_card(result, record, record.obstacle, bound),
    )


def _group_tested(event_id: str, group: GroupRecord, members: Sequence[TestRecord],
                  decks: hmtw.Decks, bound: bool,
                  reshuffles: Sequence[hmtw.Reshuffled]) -> wire.HmtwGroupTested:
    results = [_result(m, decks.open_tests) for m in members]
    card = cards.render_card(
        "hmtw_group.html.j2",
        title=_("Group test: %(suit)s") % {"suit": cards.suit_name(group.attribute)},
        ruleset=RULESET,
        members=[_test_view(r, m) for r, m in zip(results, members)],
        hits=group.hits,
        outcome=group.outcome,
        outcome_name=_(hmtw.GROUP_OUTCOME_NAMES[group.outcome]),
        obstacle=group.obstacle,
        bound=bound,
    )
    return wire.HmtwGroupTested(
        event_id=event_id,
        test_id=group.test_id,
        members=results,
        hits=group.hits,
        outcome=group.outcome,
        obstacle=group.obstacle,
        bound=bound,
        decks=_counts(decks),
        reshuffles=_reshuffled(reshuffles),
        notice=_notice(reshuffles, decks),
        card=card,
    )


# --- hmtw_test ----------------------------------------------------------------------------------


def _draw_test(decks: hmtw.Decks, pick: Callable[[int], int], test_id: str, held_by: tuple[str, ...],
               drawer: wire.HmtwTest | wire.HmtwGroupMember, request: wire.HmtwTest | wire.HmtwGroupTest,
               ) -> tuple[hmtw.Decks, TestRecord, tuple[hmtw.Reshuffled, ...]]:
    """H3-H5, H7, H14: draw the initial card of one adventurer's test.

    ``drawer`` gives the actor, score, favor, disfavor and user. ``request`` gives the attribute,
    obstacle and visibility. The card lies on the table while a test of ``held_by`` is open (H14). A
    failure stays open for a push (H6). A Fool waits to reshuffle until the test is finished.
    """
    attribute = request.attribute
    group_id = request.test_id if isinstance(request, wire.HmtwGroupTest) else None
    drawn = hmtw.draw(decks, "player", pick, held_by)
    decks = drawn.decks
    total = hmtw.total(drawn.card.value, drawer.score, drawer.favor, drawer.disfavor)
    outcome = hmtw.fate_outcome(drawn.card, attribute, total)
    if drawn.card.code == hmtw.FOOL:
        decks = hmtw.fool_drawn(decks, in_challenge=False)
    if hmtw.may_push(outcome, pushed=False, challenge=False):
        decks = hmtw.open_test(decks, test_id)
    record = TestRecord(
        test_id=test_id, kind="test" if group_id is None else "member", group_id=group_id,
        actor_id=drawer.actor.actor_id,
        actor_name=drawer.actor.name, user_id=drawer.user_id, user_name=drawer.user_name,
        attribute=attribute, score=drawer.score, favor=drawer.favor, disfavor=drawer.disfavor,
        obstacle=request.obstacle, first=drawn.card.code, total=total, outcome=outcome,
        visibility=request.visibility,
    )
    return decks, record, drawn.reshuffles


def _test(message: wire.HmtwTest, state: WorldState, dice: Dice) -> wire.HmtwTested:
    """H3-H7, H9: draw for a test of fate, grade it, bind its obstacle on a failure."""
    _require_owner([message.actor], message.user_id, message.user_is_gm)
    _require_new_ids(state, [message.test_id], "test_id")
    bound = _bound(state)
    _require_unbound(bound, message.obstacle)
    decks, before = hmtw.begin_test(_decks(state))
    decks, record, during = _draw_test(decks, _picker(dice), message.test_id, (message.test_id,),
                                       message, message)
    decks, after = hmtw.finish_tests(decks)
    assert record.outcome is not None
    bound, is_bound = _rebind(bound, message.obstacle, record.test_id, record.outcome,
                              hmtw.binds(record.outcome))
    state.put(TESTS, record.test_id, record)
    _put_bound(state, message.obstacle, bound)
    _put_decks(state, decks)
    return _tested(message.event_id, record, decks, is_bound, (*before, *during, *after))


# --- hmtw_group_test ----------------------------------------------------------------------------


def _member_id(test_id: str, position: int) -> str:
    return f"{test_id}/{position}"


def _group_test(message: wire.HmtwGroupTest, state: WorldState, dice: Dice) -> wire.HmtwGroupTested:
    """H10: the most and the least qualified adventurer each draw; hits make the group outcome.

    Failure or disaster binds the obstacle (H9).
    """
    actors = [m.actor for m in message.members]
    _require_owner(actors, message.user_id, message.user_is_gm)
    if actors[0].actor_id == actors[1].actor_id:
        raise BadMessage(N_("a group test needs two different adventurers (H10)"),
                         field="members[1].actor.actor_id")
    member_ids = [_member_id(message.test_id, n) for n in range(1, hmtw.GROUP_SIZE + 1)]
    _require_new_ids(state, [message.test_id, *member_ids], "test_id")
    bound = _bound(state)
    _require_unbound(bound, message.obstacle)
    decks, reshuffles = hmtw.begin_test(_decks(state))
    pick = _picker(dice)
    records: list[TestRecord] = []
    for member, member_id in zip(message.members, member_ids):
        decks, record, during = _draw_test(decks, pick, member_id, tuple(member_ids), member, message)
        records.append(record)
        reshuffles += during
    decks, after = hmtw.finish_tests(decks)
    group = _group_record(message.test_id, message.attribute, message.obstacle, records,
                          message.visibility)
    bound, is_bound = _rebind(bound, message.obstacle, group.test_id, group.outcome,
                              hmtw.group_binds(group.outcome))
    for record in records:
        state.put(TESTS, record.test_id, record)
    state.put(GROUPS, group.test_id, group)
    _put_bound(state, message.obstacle, bound)
    _put_decks(state, decks)
    return _group_tested(message.event_id, group, records, decks, is_bound, (*reshuffles, *after))


def _group_record(test_id: str, attribute: wire.HmtwAttribute, obstacle: str | None,
                  members: Sequence[TestRecord], visibility: wire.Visibility) -> GroupRecord:
    """H10: the group's hits and outcome from its members' current outcomes."""
    hits = hmtw.group_hits(m.outcome for m in members if m.outcome is not None)
    return GroupRecord(test_id=test_id, attribute=attribute, obstacle=obstacle,
                       member_ids=[m.test_id for m in members], hits=hits,
                       outcome=hmtw.group_outcome(hits), visibility=visibility)


def _member(state: WorldState, test_id: str) -> TestRecord:
    """A group member's test (written with its group, so always there)."""
    record = state.get(TESTS, test_id, TestRecord)
    assert record is not None
    return record


# --- hmtw_push ----------------------------------------------------------------------------------


def _push(message: wire.HmtwPush, state: WorldState, dice: Dice) -> Outcome:
    """H6: the drawer's one more card on a failed, still open test.

    It gives success (never great) or great failure. The Fool is a great failure, and reshuffles
    when the test is finished (H7). A group member's push re-sums the group (H10). The pushed card
    joins the test's on the table (H14). Both leave it when the test is finished; for a group
    member, when the group test is.
    """
    record = state.get(TESTS, message.test_id, TestRecord)
    if record is None:
        raise NotFound(N_("no test %(test)s was drawn in this world"), {"test": message.test_id},
                       field="test_id")
    if message.user_id != record.user_id:
        raise Forbidden(N_("only the player who drew may push fate (H6)"), field="user_id")
    if record.kind == "challenge":
        raise NotEligible(N_("a Challenge Action can never be pushed (H8)"), field="test_id")
    if record.pushed is not None:
        raise NotEligible(N_("fate was pushed on this test already (H6)"), field="test_id")
    assert record.outcome is not None  # only a Challenge Action has none
    if record.outcome != "failure":
        raise NotEligible(N_("fate is pushed only after a failure; this test's outcome: %(outcome)s (H6)"),
                          {"outcome": Text(hmtw.OUTCOME_NAMES[record.outcome])}, field="test_id")
    decks = _decks(state)
    if record.test_id not in decks.open_tests:
        raise NotEligible(N_("the table has drawn since this test, or the GM closed the push window: "
                             "fate can no longer be pushed on it (H6, H11)"), field="test_id")
    group = None if record.group_id is None else state.get(GROUPS, record.group_id, GroupRecord)
    held_by = (record.test_id,) if group is None else tuple(group.member_ids)
    drawn = hmtw.draw(decks, "player", _picker(dice), held_by)
    decks = hmtw.close_test(drawn.decks, record.test_id)
    if drawn.card.code == hmtw.FOOL:
        decks = hmtw.fool_drawn(decks, in_challenge=False)
    decks, after = hmtw.finish_tests(decks)
    reshuffles = (*drawn.reshuffles, *after)
    total = record.total + drawn.card.value
    record = msgspec.structs.replace(record, pushed=drawn.card.code, total=total,
                                     outcome=hmtw.push_outcome(drawn.card, total))
    assert record.outcome is not None
    bound = _bound(state)
    if group is None:
        assert record.group_id is None  # a member's record is written with its group
        bound, is_bound = _rebind(bound, record.obstacle, record.test_id, record.outcome,
                                  hmtw.binds(record.outcome))
        reply: wire.HmtwTested | wire.HmtwGroupTested = _tested(
            message.event_id, record, decks, is_bound, reshuffles)
    else:
        members = [record if m == record.test_id else _member(state, m) for m in group.member_ids]
        group = _group_record(group.test_id, group.attribute, group.obstacle, members,
                              group.visibility)
        bound, is_bound = _rebind(bound, group.obstacle, group.test_id, group.outcome,
                                  hmtw.group_binds(group.outcome))
        state.put(GROUPS, group.test_id, group)
        reply = _group_tested(message.event_id, group, members, decks, is_bound, reshuffles)
    state.put(TESTS, record.test_id, record)
    _put_bound(state, record.obstacle, bound)
    _put_decks(state, decks)
    return _outcome(message, reply, record.visibility)


# --- hmtw_challenge_action ----------------------------------------------------------------------


def _challenge_action(message: wire.HmtwChallengeAction, state: WorldState,
                      dice: Dice) -> wire.HmtwChallengeDrawn:
    """H8: value = card + attribute +/- 3. Never bound, never pushed.

    A Fool reshuffles at the round's end (H7).
    """
    _require_owner([message.actor], message.user_id, message.user_is_gm)
    _require_new_ids(state, [message.action_id], "action_id")
    decks, before = hmtw.begin_test(_decks(state))
    drawn = hmtw.draw(decks, "player", _picker(dice))
    decks = drawn.decks
    if drawn.card.code == hmtw.FOOL:
        decks = hmtw.fool_drawn(decks, in_challenge=True)
    value = hmtw.total(drawn.card.value, message.score, message.favor, message.disfavor)
    reshuffles = (*before, *drawn.reshuffles)
    face = _face(drawn.card)
    state.put(TESTS, message.action_id, TestRecord(
        test_id=message.action_id, kind="challenge", actor_id=message.actor.actor_id,
        actor_name=message.actor.name, user_id=message.user_id, user_name=message.user_name,
        attribute=message.attribute, score=message.score, favor=message.favor,
        disfavor=message.disfavor, obstacle=None, first=drawn.card.code, total=value,
        outcome=None, visibility=message.visibility,
    ))
    _put_decks(state, decks)
    card = cards.render_card(
        "hmtw_challenge.html.j2",
        title=_("Challenge Action: %(suit)s") % {"suit": cards.suit_name(message.attribute)},
        ruleset=RULESET,
        speaker_actor_id=message.actor.actor_id,
        speaker_alias=message.actor.name,
        drawn=face,
        suit=cards.suit_name(message.attribute),
        score=message.score,
        modifier=hmtw.modifier(message.favor, message.disfavor),
        modifier_text=_modifier_text(message.favor, message.disfavor),
        value=value,
        at_round_end=decks.reshuffle_at_round_end,
        actor_name=message.actor.name,
        user_name=message.user_name,
    )
    return wire.HmtwChallengeDrawn(
        event_id=message.event_id, action_id=message.action_id,
        actor_id=message.actor.actor_id, actor_name=message.actor.name,
        attribute=message.attribute, score=message.score,
        modifier=hmtw.modifier(message.favor, message.disfavor), drawn=face, value=value,
        reshuffle_at_round_end=decks.reshuffle_at_round_end, decks=_counts(decks),
        reshuffles=_reshuffled(reshuffles), notice=_notice(reshuffles, decks), card=card,
    )


# --- GM commands --------------------------------------------------------------------------------

COMMAND_TITLES = {"status": N_("Decks"), "reshuffle": N_("Decks reshuffled"),
                  "round_end": N_("End of the round"), "close_push": N_("Push window closed")}
# The audit ``outcome`` values of hmtw's decisions in words (bridge.ruleset.Ruleset.outcome_names):
# a test's or a group's outcome (H5, H6, H10), a Challenge Action, the GM's draw, clear and commands.
OUTCOME_NAMES = {**hmtw.OUTCOME_NAMES, **hmtw.GROUP_OUTCOME_NAMES, **COMMAND_TITLES,
                 "challenge": N_("Challenge Action"), "gm_draw": N_("GM deck"), "cleared": N_("Circumstances changed")}


def _deck_command(message: wire.HmtwDeckCommand, state: WorldState, dice: Dice) -> wire.HmtwDecks:
    """H1/H7/H11: the GM's deck commands.

    Deck status, reshuffle now, end of a Challenge round, or closing the push window. Closing it
    (H11) finishes every open test; a Fool drawn in one reshuffles now.
    """
    _require_gm(message.user_is_gm, N_("command the decks"))
    decks = _decks(state)
    reshuffles: tuple[hmtw.Reshuffled, ...] = ()
    if message.command == "reshuffle":
        decks, reshuffled = hmtw.reshuffle(decks, "gm")
        reshuffles = (reshuffled,)
    elif message.command == "round_end":
        decks, reshuffles = hmtw.end_round(decks)
    elif message.command == "close_push":
        decks, reshuffles = hmtw.close_pushes(decks)
    if message.command != "status":
        _put_decks(state, decks)
    bound = [wire.HmtwBoundObstacle(obstacle=b.obstacle, test_id=b.test_id, outcome=b.outcome)
             for b in _bound(state)]
    counts = _counts(decks)
    card = cards.render_card(
        "hmtw_decks.html.j2", title=_(COMMAND_TITLES[message.command]), ruleset=RULESET,
        counts=counts, decks=decks, bound=bound,
    )
    return wire.HmtwDecks(
        event_id=message.event_id, command=message.command, decks=counts,
        reshuffle_after_test=decks.reshuffle_after_test,
        reshuffle_at_round_end=decks.reshuffle_at_round_end, open_tests=list(decks.open_tests),
        bound=bound, reshuffles=_reshuffled(reshuffles), notice=_notice(reshuffles, decks), card=card,
    )


def _gm_draw(message: wire.HmtwGmDraw, state: WorldState, dice: Dice) -> wire.HmtwGmDrawn:
    """H1: a card from the GM deck (refilled from its discards when empty)."""
    _require_gm(message.user_is_gm, N_("draw from the GM deck"))
    drawn = hmtw.draw(_decks(state), "gm", _picker(dice))
    _put_decks(state, drawn.decks)
    face = _face(drawn.card)
    counts = _counts(drawn.decks)
    card = cards.render_card("hmtw_gm_draw.html.j2", title=_("GM deck"), ruleset=RULESET,
                             drawn=face, counts=counts)
    return wire.HmtwGmDrawn(event_id=message.event_id, drawn=face, decks=counts,
                            reshuffles=_reshuffled(drawn.reshuffles),
                            notice=_notice(drawn.reshuffles, drawn.decks), card=card)


def _clear_obstacle(message: wire.HmtwClearObstacle, state: WorldState,
                    dice: Dice) -> wire.HmtwObstacleCleared:
    """H9: the GM says circumstances changed: the obstacle may be tested again."""
    _require_gm(message.user_is_gm, N_("clear an obstacle bound by fate"))
    key = _obstacle_key(message.obstacle)
    bound = _bound(state)
    entry = next((b for b in bound if b.key == key), None)
    if entry is None:
        raise NotFound(N_("%(obstacle)r is not bound by fate"), {"obstacle": message.obstacle},
                       field="obstacle")
    state.put(BOUND, BOUND_KEY, BoundRecord(obstacles=[b for b in bound if b is not entry]))
    card = cards.render_card("hmtw_obstacle.html.j2", title=_("Circumstances changed"),
                             ruleset=RULESET, obstacle=entry.obstacle)
    return wire.HmtwObstacleCleared(event_id=message.event_id, obstacle=entry.obstacle,
                                    test_id=entry.test_id, card=card)


def public_card(reply: wire.BridgeMessage, visibility: wire.Visibility | None) -> wire.Card | None:
    """The card overlay viewers may see.

    - A test's, group test's or Challenge Action's card, when drawn ``public``. A push follows its
      test's ``visibility``.
    - The reshuffle notice of a GM command or GM draw.
    - The GM's "circumstances changed" card.
    """
    match reply:
        case wire.HmtwTested() | wire.HmtwChallengeDrawn() | wire.HmtwGroupTested():
            return reply.card if visibility == "public" else None
        case wire.HmtwDecks() | wire.HmtwGmDrawn():
            return reply.notice
        case wire.HmtwObstacleCleared():
            return reply.card
    return None


def _outcome(message: shared.ClientMessage, reply: wire.BridgeMessage,
             visibility: wire.Visibility | None) -> Outcome:
    """A hmtw decision's :class:`~bridge.ruleset.Outcome`; ``visibility`` is the drawn test's."""
    columns = summarize(message, reply)
    return Outcome(reply, columns, public_card(reply, visibility), log_fields(columns))


def _card_by_request(message: shared.ClientMessage, reply: wire.BridgeMessage) -> wire.Card | None:
    return public_card(reply, getattr(message, "visibility", None))


_DECIDERS: dict[type, Decider] = {
    wire.HmtwTest: _test,
    wire.HmtwGroupTest: _group_test,
    wire.HmtwChallengeAction: _challenge_action,
    wire.HmtwDeckCommand: _deck_command,
    wire.HmtwGmDraw: _gm_draw,
    wire.HmtwClearObstacle: _clear_obstacle,
}


# --- audit --------------------------------------------------------------------------------------


def _test_detail(test: wire.HmtwTestResult) -> str:
    """One line of a test: ``Knight of Wands 12 + Pentacles 2 = 14: success``."""
    mod = f" {test.modifier:+d}" if test.modifier else ""
    line = f"{test.first.name} {test.first.value} + {hmtw.SUIT_NAMES[test.attribute]} {test.score}{mod}"
    if test.pushed is not None:
        line += f"; pushed {test.pushed.name} {test.pushed.value}"
    return f"{line} = {test.total}: {test.outcome}"


class _Common(TypedDict):
    """The audit columns every hmtw decision has, from its request."""

    ruleset: str
    message_id: str | None


def summarize(message: shared.ClientMessage, reply: wire.BridgeMessage) -> shared.AuditColumns:
    """The audit columns of a hmtw decision.

    - ``message_id``: the test, group or action id.
    - ``outcome``: the test's or group's outcome, ``challenge``, ``gm_draw``, ``cleared``, the deck
      command, or the refusal's error code.
    - ``detail``: one line of what was drawn.
    """
    common = _Common(ruleset=RULESET,
                     message_id=getattr(message, "test_id", None) or getattr(message, "action_id", None))
    match reply:
        case wire.HmtwTested(test=test):
            return shared.AuditColumns(**common, actor_id=test.actor_id, actor_name=test.actor_name,
                                     test_name=f"Test of fate: {hmtw.SUIT_NAMES[test.attribute]}",
                                     outcome=test.outcome, detail=_test_detail(test))
        case wire.HmtwGroupTested():
            attribute = reply.members[0].attribute
            return shared.AuditColumns(
                ruleset=RULESET, message_id=reply.test_id,
                actor_name=" & ".join(m.actor_name for m in reply.members),
                test_name=f"Group test: {hmtw.SUIT_NAMES[attribute]}", outcome=reply.outcome,
                detail=f"hits {reply.hits}; " + "; ".join(_test_detail(m) for m in reply.members))
        case wire.HmtwChallengeDrawn():
            return shared.AuditColumns(
                **common, actor_id=reply.actor_id, actor_name=reply.actor_name,
                test_name=f"Challenge Action: {hmtw.SUIT_NAMES[reply.attribute]}",
                outcome="challenge", detail=f"{reply.drawn.name} {reply.drawn.value}: value {reply.value}")
        case wire.HmtwDecks() | wire.HmtwGmDrawn():
            counts = reply.decks
            detail = (f"player {counts.player_undrawn} left / {counts.player_discarded} discarded; "
                      f"GM {counts.gm_undrawn} left / {counts.gm_discarded} discarded")
            if isinstance(reply, wire.HmtwGmDrawn):
                return shared.AuditColumns(**common, outcome="gm_draw",
                                         detail=f"{reply.drawn.name}; {detail}")
            return shared.AuditColumns(**common, outcome=reply.command, detail=detail)
        case wire.HmtwObstacleCleared():
            return shared.AuditColumns(**common, outcome="cleared",
                                     detail=f"{reply.obstacle} (bound by {reply.test_id})")
        case shared.Error():
            return shared.AuditColumns(**common, outcome=reply.code, detail=reply.message)
    raise TypeError(f"not a hmtw reply: {type(reply).__name__}")


HANDLERS: dict[type, Handler] = {wire.HmtwPush: _push,
            **{kind: handler(decide, summarize, _card_by_request) for kind, decide in _DECIDERS.items()}}


def refused(message: shared.ClientMessage, error: shared.Error, state: WorldState) -> shared.AuditColumns:
    """The audit columns of a refused hmtw request (from the request alone)."""
    return summarize(message, error)
