"""His Majesty the Worm: tests of fate with tarot decks (seed 002; DECISIONS.md H1-H14).

Pure and table-driven: no I/O, no clock, no randomness. A draw takes a function
``pick(n) -> 1..n``; the bridge passes its ``Dice.roll``. So the caller owns every random number.

Cards are text codes:

- ``"<suit>-<value>"`` for the minor arcana. ``"pentacles-4"`` is the IV of Pentacles,
  ``"wands-12"`` the Knight of Wands.
- ``"fool"`` for the Fool.
- ``"major-<n>"`` for the major arcana I..XXI.

A pile's undrawn cards stay in deck order, the order of :data:`PLAYER_DECK` / :data:`GM_DECK`. A
draw takes the ``pick(len(undrawn))``-th of them. Drawing a uniformly chosen undrawn card, one
at a time, deals every order with the same chance as a full shuffle: Fisher-Yates done lazily.
And no future order exists anywhere before it is drawn.

H14: a player card drawn by a test lies on the table (:attr:`Decks.table`) until its test is
finished. It is in neither the deck nor the discard pile, and no reshuffle puts it back. So the
undrawn cards, the discard pile and the table always hold the 57 player cards between them
(:func:`player_cards`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Literal

RULESET = "hmtw"
# The tables whose words the cards show translated (extracted by bridge/i18n_extract.py).
SHOWN_TABLES = (
    "SUIT_NAMES", "RANK_NAMES", "FOOL_NAME", "MAJOR_ARCANA", "OUTCOME_NAMES", "GROUP_OUTCOME_NAMES",
    "NO_OBSTACLE_NAME",
)

# H3: the four attributes; each is its own suit. Scores 1..4.
SUITS = ("swords", "pentacles", "cups", "wands")
SUIT_NAMES = {"swords": "Swords", "pentacles": "Pentacles", "cups": "Cups", "wands": "Wands"}
SUIT_SYMBOLS = {"swords": "\u2694", "pentacles": "\u26e4", "cups": "\U0001f3c6", "wands": "\U0001fa84"}
SCORE_MIN, SCORE_MAX = 1, 4

# H2: the minor arcana's ranks by value.
RANK_NAMES = {
    1: "Ace", 2: "II", 3: "III", 4: "IV", 5: "V", 6: "VI", 7: "VII", 8: "VIII", 9: "IX", 10: "X",
    11: "Page", 12: "Knight", 13: "Queen", 14: "King",
}
FOOL = "fool"
FOOL_NAME = "The Fool"
FOOL_VALUE = 0  # H2: the Fool is worth 0 and has no suit
FOOL_SYMBOL = "\U0001f0cf"

# H1: the GM deck, the 21 numbered major arcana (value = number; traditional names).
MAJOR_ARCANA = {
    1: ("I", "The Magician"), 2: ("II", "The High Priestess"), 3: ("III", "The Empress"),
    4: ("IV", "The Emperor"), 5: ("V", "The Hierophant"), 6: ("VI", "The Lovers"),
    7: ("VII", "The Chariot"), 8: ("VIII", "Strength"), 9: ("IX", "The Hermit"),
    10: ("X", "Wheel of Fortune"), 11: ("XI", "Justice"), 12: ("XII", "The Hanged Man"),
    13: ("XIII", "Death"), 14: ("XIV", "Temperance"), 15: ("XV", "The Devil"),
    16: ("XVI", "The Tower"), 17: ("XVII", "The Star"), 18: ("XVIII", "The Moon"),
    19: ("XIX", "The Sun"), 20: ("XX", "Judgement"), 21: ("XXI", "The World"),
}
MAJOR_SYMBOL = "\u2736"

# H4: favor and disfavor, never stacked, cancelling each other.
FAVOR_BONUS = 3
# H5: the total that succeeds.
SUCCESS_AT = 14

Outcome = Literal["great_success", "success", "failure", "great_failure"]
GroupOutcome = Literal["success", "falls_short", "failure", "disaster"]
DeckName = Literal["player", "gm"]
ReshuffleReason = Literal["fool", "exhausted", "gm"]

OUTCOME_NAMES = {"great_success": "Great success", "success": "Success", "failure": "Failure",
                 "great_failure": "Great failure"}
GROUP_OUTCOME_NAMES = {"success": "Success", "falls_short": "Falls short", "failure": "Failure",
                       "disaster": "Disaster"}

# H10: hits per adventurer's outcome, and the group outcome by the smallest sum it needs.
HITS: dict[str, int] = {"great_success": 2, "success": 1, "failure": 0, "great_failure": -1}
GROUP_OUTCOMES: tuple[tuple[int, GroupOutcome], ...] = (
    (2, "success"),
    (1, "falls_short"),
    (0, "failure"),
)
GROUP_DISASTER: GroupOutcome = "disaster"
GROUP_SIZE = 2  # H10: the most and the least qualified adventurer
# H9/H10: outcomes that bind the obstacle.
BINDING_OUTCOMES = frozenset({"failure", "great_failure"})
BINDING_GROUP_OUTCOMES = frozenset({"failure", "disaster"})


@dataclass(frozen=True, slots=True)
class Card:
    """One tarot card (H2).

    ``code`` is as in the module docstring. ``name`` is as printed: "Knight of Wands", "The Fool",
    "XIII Death". ``suit`` is None for the Fool and the majors. Then ``value`` and a text ``symbol``.
    """

    code: str
    name: str
    suit: str | None
    value: int
    symbol: str


def _minor(suit: str, value: int) -> Card:
    return Card(f"{suit}-{value}", f"{RANK_NAMES[value]} of {SUIT_NAMES[suit]}", suit, value,
                SUIT_SYMBOLS[suit])


_MINORS = tuple(_minor(suit, value) for suit in SUITS for value in RANK_NAMES)
_FOOL = Card(FOOL, FOOL_NAME, None, FOOL_VALUE, FOOL_SYMBOL)
_MAJORS = tuple(Card(f"major-{n}", f"{numeral} {title}", None, n, MAJOR_SYMBOL)
                for n, (numeral, title) in MAJOR_ARCANA.items())
CARDS: dict[str, Card] = {c.code: c for c in (*_MINORS, _FOOL, *_MAJORS)}

# H1: the decks in deck order: Swords Ace..King, Pentacles, Cups, Wands, then the Fool; I..XXI.
PLAYER_DECK: tuple[str, ...] = (*(c.code for c in _MINORS), FOOL)
GM_DECK: tuple[str, ...] = tuple(c.code for c in _MAJORS)
DECKS: dict[str, tuple[str, ...]] = {"player": PLAYER_DECK, "gm": GM_DECK}


def card(code: str) -> Card:
    """H2: the card with ``code``. Raises ``ValueError`` for an unknown code.

    >>> card("wands-12").name, card("wands-12").value, card("fool").value
    ('Knight of Wands', 12, 0)
    """
    try:
        return CARDS[code]
    except KeyError:
        raise ValueError(f"no tarot card {code!r}") from None


# --- H3-H6: the test of fate -------------------------------------------------------------------


def modifier(favor: bool, disfavor: bool) -> int:
    """H4: +3 for favor, -3 for disfavor, 0 for both (they cancel) or neither. Several sources of
    favor are still one favor: the flags are booleans, so nothing stacks."""
    return (FAVOR_BONUS if favor else 0) - (FAVOR_BONUS if disfavor else 0)


def total(card_value: int, score: int, favor: bool = False, disfavor: bool = False) -> int:
    """H4, and H8 for a Challenge Action's value: card value (0..14) + attribute score (1..4) + :func:`modifier`.

    Raises ``ValueError`` for a score outside 1..4 (H3).

    >>> total(4, 2), total(12, 2), total(0, 4, favor=True)
    (6, 14, 7)
    """
    if not SCORE_MIN <= score <= SCORE_MAX:
        raise ValueError(f"an attribute score is {SCORE_MIN}..{SCORE_MAX}, got {score}")
    return card_value + score + modifier(favor, disfavor)


def fate_outcome(first: Card, attribute: str, test_total: int) -> Outcome:
    """H5: the outcome of a test of fate's initial draw ``first``, testing ``attribute`` at ``test_total``.

    - ``great_success``: >= 14, and ``first`` is of the tested suit.
    - ``success``: >= 14.
    - ``failure``: <= 13.

    Raises ``ValueError`` for an unknown attribute.
    """
    if attribute not in SUITS:
        raise ValueError(f"an attribute is one of {SUITS}, got {attribute!r}")
    if test_total < SUCCESS_AT:
        return "failure"
    return "great_success" if first.suit == attribute else "success"


def push_outcome(pushed: Card, pushed_total: int) -> Outcome:
    """H6: the outcome after pushing fate.

    ``pushed_total`` is the failed total plus the pushed card's value. The Fool is a great failure
    whatever the total. >= 14 is a success, never great, even in the tested suit. <= 13 is a great
    failure.
    """
    if pushed.code == FOOL or pushed_total < SUCCESS_AT:
        return "great_failure"
    return "success"


def may_push(outcome: Outcome, pushed: bool, challenge: bool) -> bool:
    """H6/H8: fate may be pushed once, only on a failed test of fate, never on a Challenge Action."""
    return outcome == "failure" and not pushed and not challenge


def binds(outcome: Outcome) -> bool:
    """H9: a failed test (failure, or great failure after a push) binds its obstacle."""
    return outcome in BINDING_OUTCOMES


# --- H10: group tests --------------------------------------------------------------------------


def group_hits(outcomes: Iterable[Outcome]) -> int:
    """H10: the sum of hits: great success 2, success 1, failure 0, great failure -1."""
    return sum(HITS[o] for o in outcomes)


def group_outcome(hits: int) -> GroupOutcome:
    """H10: >= 2 success, 1 falls short, 0 failure, < 0 disaster."""
    for least, outcome in GROUP_OUTCOMES:
        if hits >= least:
            return outcome
    return GROUP_DISASTER


def group_binds(outcome: GroupOutcome) -> bool:
    """H10/H9: a group outcome of failure or disaster binds the obstacle."""
    return outcome in BINDING_GROUP_OUTCOMES


# The refusal of a blank obstacle name, shown translated by the bridge (babel.cfg lists it).
NO_OBSTACLE_NAME = "an obstacle needs a name"


def obstacle_key(obstacle: str) -> str:
    """H9/H13: the key an obstacle is bound under.

    Letter case and repeated or surrounding spaces do not matter: " The  locked Door " and "the
    locked door" are one obstacle. Raises ``ValueError`` (:data:`NO_OBSTACLE_NAME`) for a blank name.
    """
    key = " ".join(obstacle.split()).casefold()
    if not key:
        raise ValueError(NO_OBSTACLE_NAME)
    return key


# --- H1, H7: the decks -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pile:
    """One deck as it lies on the table (H1): ``undrawn`` in deck order, ``discard`` in the order drawn."""

    undrawn: tuple[str, ...]
    discard: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class OnTable:
    """H14: a player card on the table, kept there while any test in ``held_by`` is open.

    ``held_by`` is its own test, or every member of its group test. A group's cards stay until the
    group test is resolved.
    """

    card: str
    held_by: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Decks:
    """A world's two decks (H1), and what H6/H7/H14 wait for.

    - ``open_tests``: the tests whose failure may still be pushed; the latest draw's (H6).
    - ``table``: the player cards of tests not finished yet, in the order drawn (H14).
    - ``h14``: False only while an audit trail decided before H14 is re-derived. Every drawn card
      then goes onto the discard pile at once, as it did then.
    - ``reshuffle_after_test``: the Fool came up in a test still open. Both decks are reshuffled
      when no test is open any more.
    - ``reshuffle_at_round_end``: the Fool came up in a Challenge. Both decks are reshuffled at the
      end of the round (H7).
    """

    player: Pile
    gm: Pile
    open_tests: tuple[str, ...] = ()
    table: tuple[OnTable, ...] = ()
    h14: bool = True
    reshuffle_after_test: bool = False
    reshuffle_at_round_end: bool = False

    def pile(self, deck: DeckName) -> Pile:
        """The pile of ``deck`` (``player`` or ``gm``)."""
        return self.player if deck == "player" else self.gm

    def on_table(self) -> frozenset[str]:
        """H14: the codes of the player cards on the table."""
        return frozenset(t.card for t in self.table)


@dataclass(frozen=True, slots=True)
class Reshuffled:
    """One reshuffle to announce (H7): why, and which decks."""

    reason: ReshuffleReason
    decks: tuple[DeckName, ...]


@dataclass(frozen=True, slots=True)
class Drawn:
    """A draw's result: the ``card``, the decks after it, and the reshuffles it caused."""

    card: Card
    decks: Decks
    reshuffles: tuple[Reshuffled, ...] = ()


BOTH_DECKS: tuple[DeckName, ...] = ("player", "gm")


def full_pile(deck: DeckName, leave_out: frozenset[str] = frozenset()) -> Pile:
    """H1: ``deck`` with every card undrawn, in deck order: 57 player cards, 21 GM cards.

    Except the cards in ``leave_out``: those still on the table (H14).
    """
    return Pile(tuple(c for c in DECKS[deck] if c not in leave_out))


def new_decks() -> Decks:
    """H1: a world's decks before its first draw: both full, nothing pending."""
    return Decks(full_pile("player"), full_pile("gm"))


def reshuffle(decks: Decks, reason: ReshuffleReason) -> tuple[Decks, Reshuffled]:
    """H7, and the GM's "reshuffle now": every discard of both decks back in, the Fool included.

    Cards still on the table stay out (H14). Every Fool is back in the deck or on the table. So no
    reshuffle waits any more, after a test or at round end. Open tests stay open.
    """
    after = Decks(full_pile("player", decks.on_table()), full_pile("gm"),
                  open_tests=decks.open_tests, table=decks.table, h14=decks.h14)
    return after, Reshuffled(reason, BOTH_DECKS)


def _fool_reshuffle(decks: Decks, keep: Decks) -> tuple[Decks, Reshuffled]:
    """H7/H12: one Fool's reshuffle, keeping the other Fool's wait as ``keep`` has it.

    So a Challenge Action's Fool still reshuffles at the end of its round, even when an ordinary
    test's Fool was reshuffled in between. And the other way round. Only the GM's "reshuffle now"
    ends both waits (:func:`reshuffle`).
    """
    after, reshuffled = reshuffle(decks, "fool")
    return replace(after, reshuffle_after_test=keep.reshuffle_after_test,
                   reshuffle_at_round_end=keep.reshuffle_at_round_end), reshuffled


def draw(decks: Decks, deck: DeckName, pick: Callable[[int], int],
         held_by: tuple[str, ...] = ()) -> Drawn:
    """H1: draw one card from ``deck``: the ``pick(n)``-th (1..n) of its ``n`` undrawn cards, in deck order.

    A deck found empty first takes its discard pile back (reason ``exhausted``). It never takes a
    card on the table (H14).

    With ``held_by`` (the player deck's tests, see :class:`OnTable`), the card lies on the table
    until :func:`finish_tests` finds them all finished. Without it, the card goes onto the discard
    pile at once: the GM deck, or a Challenge Action, where nothing waits. So it does with
    ``decks.h14`` false, before H14. Raises ``ValueError`` if ``pick`` leaves 1..n, or for
    ``held_by`` on the GM deck.
    """
    if held_by and deck != "player":
        raise ValueError("only player cards lie on the table (H14)")
    pile = decks.pile(deck)
    reshuffles: tuple[Reshuffled, ...] = ()
    if not pile.undrawn:
        pile = full_pile(deck, decks.on_table())
        reshuffles = (Reshuffled("exhausted", (deck,)),)
    n = len(pile.undrawn)
    index = pick(n)
    if not 1 <= index <= n:
        raise ValueError(f"a pick among {n} cards is 1..{n}, got {index}")
    code = pile.undrawn[index - 1]
    undrawn = pile.undrawn[: index - 1] + pile.undrawn[index:]
    if held_by and decks.h14:
        after = replace(decks, player=Pile(undrawn, pile.discard),
                        table=(*decks.table, OnTable(code, held_by)))
    else:
        pile = Pile(undrawn, (*pile.discard, code))
        after = replace(decks, player=pile) if deck == "player" else replace(decks, gm=pile)
    return Drawn(CARDS[code], after, reshuffles)


def begin_test(decks: Decks) -> tuple[Decks, tuple[Reshuffled, ...]]:
    """H6/H7/H11: a new draw from the player deck closes the push window (see :func:`close_pushes`).

    Such a draw is a test, a group test or a Challenge Action. A push's own card belongs to a test
    already drawn. So a group's other member may still push after it.
    """
    return close_pushes(decks)


def close_pushes(decks: Decks) -> tuple[Decks, tuple[Reshuffled, ...]]:
    """H11: the push window closes.

    It closes when the table draws for a new test, or when the GM closes it. Fate can no longer be
    pushed on any open test. A Fool they drew is reshuffled now (H7, H12).
    """
    return finish_tests(replace(decks, open_tests=()))


def finish_tests(decks: Decks) -> tuple[Decks, tuple[Reshuffled, ...]]:
    """H14, H7/H12: the cards of finished tests leave the table for the discard pile, in the order drawn.

    Then, once no test is open, a Fool drawn in a test has both decks reshuffled (reason ``fool``).
    A Challenge Action's Fool still waits for its round's end.
    """
    decks = clear_table(decks)
    if decks.reshuffle_after_test and not decks.open_tests:
        after, reshuffled = _fool_reshuffle(decks, replace(decks, reshuffle_after_test=False))
        return after, (reshuffled,)
    return decks, ()


def clear_table(decks: Decks) -> Decks:
    """H14: every card on the table whose tests are all finished goes onto the discard pile.

    Finished means none in ``open_tests``. They go in the order drawn; the others stay.
    """
    open_now = set(decks.open_tests)
    staying = tuple(t for t in decks.table if open_now.intersection(t.held_by))
    if len(staying) == len(decks.table):
        return decks
    leaving = tuple(t.card for t in decks.table if not open_now.intersection(t.held_by))
    return replace(decks, player=Pile(decks.player.undrawn, (*decks.player.discard, *leaving)),
                   table=staying)


def open_test(decks: Decks, test_id: str) -> Decks:
    """H6/H11: a failed test stays open.

    Its drawer may push fate until the GM closes the window, or the next player-deck draw of
    another test (see :func:`close_pushes`).
    """
    return replace(decks, open_tests=(*decks.open_tests, test_id))


def close_test(decks: Decks, test_id: str) -> Decks:
    """H6: the test was pushed: it is finished (other open tests stay open)."""
    return replace(decks, open_tests=tuple(t for t in decks.open_tests if t != test_id))


def fool_drawn(decks: Decks, in_challenge: bool) -> Decks:
    """H7: the Fool came up: reshuffle when the test is finished, or at the end of the Challenge round."""
    if in_challenge:
        return replace(decks, reshuffle_at_round_end=True)
    return replace(decks, reshuffle_after_test=True)


def end_round(decks: Decks) -> tuple[Decks, tuple[Reshuffled, ...]]:
    """H7/H12: the end of a Challenge round.

    A Fool a Challenge Action drew in it has both decks reshuffled. An ordinary test's Fool still
    waits for its test to finish.
    """
    if not decks.reshuffle_at_round_end:
        return decks, ()
    after, reshuffled = _fool_reshuffle(decks, replace(decks, reshuffle_at_round_end=False))
    return after, (reshuffled,)


def counts(pile: Pile) -> tuple[int, int]:
    """H1: ``(undrawn, discarded)`` card counts of a pile."""
    return len(pile.undrawn), len(pile.discard)


def player_cards(decks: Decks) -> tuple[str, ...]:
    """H14: every player card where it lies: undrawn, discarded, then on the table. Always the
    57 cards of :data:`PLAYER_DECK`, each once (the property the tests check)."""
    return (*decks.player.undrawn, *decks.player.discard, *(t.card for t in decks.table))

