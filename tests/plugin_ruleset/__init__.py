"""A throwaway ruleset kept outside ``bridge/``: a called coin flip, built with the public
:class:`bridge.ruleset.Ruleset` type alone (tests/test_rulesets.py registers it).

``coin_flip`` (a user calls heads or tails; one d2 decides: 1 heads, 2 tails) is answered
``coin_flipped`` with a chat card, public unless the request says otherwise.
"""

from __future__ import annotations

from typing import Literal

from bridge.cards import CardTemplates
from bridge.ruleset import Outcome, Ruleset, visible_card
from bridge.wire import AuditColumns, BridgeMessage, Card, Error, Name, UserRequest, Visibility

RULESET_ID = "coin"
FACES = ("heads", "tails")  # d2: 1 heads, 2 tails
Face = Literal["heads", "tails"]

render_card = CardTemplates(__package__).render


class CoinFlip(UserRequest, tag="coin_flip", kw_only=True):
    """A user calls a face and flips (``event_id`` and ``user_id`` come with ``UserRequest``)."""

    actor_name: Name
    call: Face
    visibility: Visibility = "public"


class CoinFlipped(BridgeMessage, tag="coin_flipped", kw_only=True):
    """The face that came up and whether the call won."""

    event_id: str
    face: Face
    won: bool
    card: Card


def _flip(message: CoinFlip, state, dice) -> Outcome:
    face = FACES[dice.roll(2) - 1]
    won = face == message.call
    card = render_card("coin.html.j2", title="Coin flip", ruleset=RULESET_ID, who=message.actor_name,
                       call=message.call, face=face, won=won)
    reply = CoinFlipped(event_id=message.event_id, face=face, won=won, card=card)
    columns = AuditColumns(ruleset=RULESET_ID, actor_name=message.actor_name, test_name="coin flip",
                           outcome="won" if won else "lost")
    return Outcome(reply, columns, visible_card(message, reply), {"face": face, "won": won})


def _refused(message: CoinFlip, error: Error, state) -> AuditColumns:
    return AuditColumns(ruleset=RULESET_ID, actor_name=message.actor_name, outcome=error.code)


RULESET = Ruleset(id=RULESET_ID, client=(CoinFlip,), bridge=(CoinFlipped,), handlers={CoinFlip: _flip},
                  refused=_refused)


def flip(event_id: str, call: str = "heads") -> dict:
    """A ``coin_flip`` as the module would send it."""
    return {"type": "coin_flip", "v": 1, "event_id": event_id, "user_id": "user-ada", "actor_name": "Ada",
            "call": call}
