"""hmtw: tests of fate with tarot decks (His Majesty the Worm; docs/rules.md H1-H14).

The bridge keeps each world's two decks and draws every card itself. The module sends what is
tested. It gets back the cards drawn, the totals, the outcome and a chat card to post.
"""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from ...wire.base import BridgeMessage, Card, Id, Name, OutPart, Part, UserRequest, Visibility

HmtwAttribute = Literal["swords", "pentacles", "cups", "wands"]
HmtwScore = Annotated[int, Meta(ge=1, le=4, description="An attribute score, 1..4 (H3).")]
HmtwObstacleName = Annotated[str, Meta(min_length=1, max_length=256,
                               description="What is tested against, as the GM names it (H9).")]
HmtwGroupTestId = Annotated[str, Meta(min_length=1, max_length=120, description=(
    "An opaque identifier, short enough that '<id>/1' and '<id>/2' stay identifiers."))]
HmtwOutcome = Literal["great_success", "success", "failure", "great_failure"]
HmtwGroupOutcome = Literal["success", "falls_short", "failure", "disaster"]
HmtwDeckName = Literal["player", "gm"]
HmtwReshuffleReason = Literal["fool", "exhausted", "gm"]
HmtwDeckCommandName = Literal["status", "reshuffle", "round_end", "close_push"]


class HmtwActor(Part, kw_only=True, frozen=True):
    """The adventurer who draws.

    ``owner_user_ids`` lists every Foundry user with OWNER permission on the actor, GMs included.
    """

    actor_id: Id
    name: Name
    owner_user_ids: Annotated[list[Id], Meta(max_length=64)] = []


class HmtwTest(UserRequest, tag="hmtw_test", kw_only=True, frozen=True):
    """A test of fate (H3-H6, H9).

    ``actor`` tests ``attribute`` at ``score``, with ``favor`` and/or ``disfavor``; both cancel
    (H4). ``obstacle`` is optional; a failure binds it (H9). ``test_id`` names the test for a later
    ``hmtw_push``; it is unique in the world. ``user_id`` is the Foundry user who asked: an owner of
    the actor, or a GM. ``visibility`` is the roll mode the card is posted with, its push's card
    too. Only ``public`` reaches overlay viewers.

    Answered ``hmtw_tested``, or ``error``:

    - ``forbidden``;
    - ``not_eligible`` when the obstacle is bound by fate;
    - ``bad_message`` for a ``test_id`` already used.
    """

    test_id: Id
    actor: HmtwActor
    attribute: HmtwAttribute
    score: HmtwScore
    favor: bool = False
    disfavor: bool = False
    obstacle: HmtwObstacleName | None = None
    user_name: Name | None = None
    user_is_gm: bool = False
    visibility: Visibility = "public"


class HmtwGroupMember(Part, kw_only=True, frozen=True):
    """One adventurer of a group test.

    The actor, its score in the tested attribute, its own favor/disfavor, and the user drawing for
    it. Only that user may push its failure.
    """

    actor: HmtwActor
    score: HmtwScore
    favor: bool = False
    disfavor: bool = False
    user_id: Id
    user_name: Name | None = None


class HmtwGroupTest(UserRequest, tag="hmtw_group_test", kw_only=True, frozen=True):
    """A group test (H10).

    ``members`` are the most and the least qualified adventurer, in that order. Each draws for
    ``attribute``. Their tests are ``<test_id>/1`` and ``<test_id>/2`` for ``hmtw_push``.
    ``user_id`` is who asked: an owner of a member's actor, or a GM. ``visibility`` as in
    ``hmtw_test``. Answered ``hmtw_group_tested`` or ``error``, as ``hmtw_test``.
    """

    test_id: HmtwGroupTestId
    attribute: HmtwAttribute
    obstacle: HmtwObstacleName | None = None
    members: Annotated[list[HmtwGroupMember], Meta(min_length=2, max_length=2)]
    user_name: Name | None = None
    user_is_gm: bool = False
    visibility: Visibility = "public"


class HmtwPush(UserRequest, tag="hmtw_push", kw_only=True, frozen=True):
    """The drawer pushes fate on the failed test ``test_id`` (H6): one more card.

    Answered ``hmtw_tested``; for a group member's test, ``hmtw_group_tested``. Or ``error``:

    - ``not_found``: no such test.
    - ``forbidden``: not the user who drew.
    - ``not_eligible``: a Challenge Action (H8); not a failure; pushed already; or the table has
      drawn since (H6).
    """

    test_id: Id
    user_name: Name | None = None


class HmtwChallengeAction(UserRequest, tag="hmtw_challenge_action", kw_only=True, frozen=True):
    """A Challenge Action (H8): value = card + ``score`` +/- 3.

    Never bound by fate, never pushed. A Fool drawn here reshuffles at the round's end (H7).
    ``action_id`` is unique in the world. ``visibility`` as in ``hmtw_test``. Answered
    ``hmtw_challenge_drawn`` or ``error`` (forbidden).
    """

    action_id: Id
    actor: HmtwActor
    attribute: HmtwAttribute
    score: HmtwScore
    favor: bool = False
    disfavor: bool = False
    user_name: Name | None = None
    user_is_gm: bool = False
    visibility: Visibility = "public"


class HmtwDeckCommand(UserRequest, tag="hmtw_deck_command", kw_only=True, frozen=True):
    """A GM's deck command. Answered ``hmtw_decks``; non-GMs get ``forbidden``.

    - ``status``: counts, what is pending, the obstacles bound.
    - ``reshuffle``: both decks, now.
    - ``round_end``: a Challenge round ends. A Fool drawn in it reshuffles both decks (H7).
    - ``close_push``: the push window closes. No open test may be pushed any more, and a Fool drawn
      in one reshuffles now (H11).
    """

    command: HmtwDeckCommandName
    user_is_gm: bool = False


class HmtwGmDraw(UserRequest, tag="hmtw_gm_draw", kw_only=True, frozen=True):
    """The GM draws from the GM deck (the major arcana, H1). Answered ``hmtw_gm_drawn``;
    non-GMs get ``forbidden``."""

    user_is_gm: bool = False


class HmtwClearObstacle(UserRequest, tag="hmtw_clear_obstacle", kw_only=True, frozen=True):
    """The GM marks that circumstances changed (H9): ``obstacle`` may be tested again.
    Answered ``hmtw_obstacle_cleared``; ``not_found`` when it is not bound, ``forbidden`` for
    non-GMs."""

    obstacle: HmtwObstacleName
    user_is_gm: bool = False


class HmtwCardFace(OutPart, kw_only=True, frozen=True):
    """A drawn card as the table sees it (H2).

    ``code`` (``pentacles-4``, ``fool``, ``major-13``), ``name`` (``IV of Pentacles``), ``suit``
    (null for the Fool and the majors), ``value`` and a text ``symbol``.
    """

    code: str
    name: str
    suit: HmtwAttribute | None
    value: int
    symbol: str


class HmtwDeckCounts(OutPart, kw_only=True, frozen=True):
    """Cards left to draw and on the discard pile, per deck (H1), and the player cards on the table.

    Cards on the table were drawn by a test not finished yet (H14). ``player_undrawn +
    player_discarded + player_on_table`` is always 57; ``gm_undrawn + gm_discarded`` always 21.
    ``player_on_table`` is null in a reply decided from decks stored before H14; none were on the
    table then.
    """

    player_undrawn: int
    player_discarded: int
    player_on_table: int | None = None
    gm_undrawn: int
    gm_discarded: int


class HmtwReshuffled(OutPart, kw_only=True, frozen=True):
    """One reshuffle (H1, H7), and the ``decks`` it put back together.

    Its reason: ``fool`` (the Fool was drawn), ``exhausted`` (a draw found the deck empty), or ``gm``
    (the GM's command).
    """

    reason: HmtwReshuffleReason
    decks: list[HmtwDeckName]


class HmtwTestResult(OutPart, kw_only=True, frozen=True):
    """One adventurer's test of fate.

    - ``first``: the initial card. ``pushed``: the pushed card, or null.
    - ``modifier``: from favor/disfavor (+3, 0, -3).
    - ``total``: with the pushed card's value, once pushed.
    - ``outcome``.
    - ``push_by``: who may push now, the drawer (H6). Empty once fate cannot be pushed.
    """

    test_id: str
    actor_id: str
    actor_name: str
    user_id: str
    attribute: HmtwAttribute
    score: int
    modifier: int
    first: HmtwCardFace
    pushed: HmtwCardFace | None
    total: int
    outcome: HmtwOutcome
    push_by: list[str]


class HmtwTested(BridgeMessage, tag="hmtw_tested", kw_only=True, frozen=True):
    """A test of fate's result (H3-H6), after its draw or its push.

    ``bound`` says whether its ``obstacle`` is now bound by fate (H9). ``reshuffles`` lists the
    reshuffles this decision made. ``notice`` is their public chat card; null without one. ``card``
    is the test's chat card.
    """

    event_id: str
    test: HmtwTestResult
    obstacle: str | None
    bound: bool
    decks: HmtwDeckCounts
    reshuffles: list[HmtwReshuffled]
    notice: Card | None
    card: Card


class HmtwGroupTested(BridgeMessage, tag="hmtw_group_tested", kw_only=True, frozen=True):
    """A group test's result (H10), after its draws or a member's push.

    Both members' tests, the ``hits`` and the group ``outcome``. ``bound`` as in ``hmtw_tested``.
    """

    event_id: str
    test_id: str
    members: list[HmtwTestResult]
    hits: int
    outcome: HmtwGroupOutcome
    obstacle: str | None
    bound: bool
    decks: HmtwDeckCounts
    reshuffles: list[HmtwReshuffled]
    notice: Card | None
    card: Card


class HmtwChallengeDrawn(BridgeMessage, tag="hmtw_challenge_drawn", kw_only=True, frozen=True):
    """A Challenge Action's card and ``value`` (H8).

    ``reshuffle_at_round_end`` is true when a Fool waits for the round's end (H7).
    """

    event_id: str
    action_id: str
    actor_id: str
    actor_name: str
    attribute: HmtwAttribute
    score: int
    modifier: int
    drawn: HmtwCardFace
    value: int
    reshuffle_at_round_end: bool
    decks: HmtwDeckCounts
    reshuffles: list[HmtwReshuffled]
    notice: Card | None
    card: Card


class HmtwBoundObstacle(OutPart, kw_only=True, frozen=True):
    """An obstacle bound by fate (H9).

    Its name, the test that bound it, and that test's outcome (a test's or a group's).
    """

    obstacle: str
    test_id: str
    outcome: str


class HmtwDecks(BridgeMessage, tag="hmtw_decks", kw_only=True, frozen=True):
    """Answer to ``hmtw_deck_command``.

    The counts after it, what waits for a reshuffle (H7), the tests still open for a push, and the
    obstacles bound (H9). ``card`` is for the GM. ``notice``, a reshuffle's, is for the table.
    """

    event_id: str
    command: HmtwDeckCommandName
    decks: HmtwDeckCounts
    reshuffle_after_test: bool
    reshuffle_at_round_end: bool
    open_tests: list[str]
    bound: list[HmtwBoundObstacle]
    reshuffles: list[HmtwReshuffled]
    notice: Card | None
    card: Card


class HmtwGmDrawn(BridgeMessage, tag="hmtw_gm_drawn", kw_only=True, frozen=True):
    """The GM deck's card (H1).

    ``card`` is for the GM. ``notice``, an exhausted deck's reshuffle, is for the table.
    """

    event_id: str
    drawn: HmtwCardFace
    decks: HmtwDeckCounts
    reshuffles: list[HmtwReshuffled]
    notice: Card | None
    card: Card


class HmtwObstacleCleared(BridgeMessage, tag="hmtw_obstacle_cleared", kw_only=True, frozen=True):
    """The GM cleared a bound obstacle (H9): it may be tested again."""

    event_id: str
    obstacle: str
    test_id: str
    card: Card


CLIENT = (HmtwTest, HmtwGroupTest, HmtwPush, HmtwChallengeAction, HmtwDeckCommand, HmtwGmDraw,
          HmtwClearObstacle)
BRIDGE = (HmtwTested, HmtwGroupTested, HmtwChallengeDrawn, HmtwDecks, HmtwGmDrawn,
          HmtwObstacleCleared)
