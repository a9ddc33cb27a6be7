"""The decision core's router: one client message + the world's state + dice -> the reply.

No network, no clock, no randomness of its own: the server and ``fate-bridge resolve`` both call
:func:`decide` inside ``Store.decide`` (one transaction per decision), and ``fate-bridge audit
verify`` calls it again on recorded inputs. Each ruleset's handlers live in
``bridge.decisions.<ruleset>`` and register their message classes in ``HANDLERS``; a ruleset whose
requests do not carry their own ``visibility`` defines ``public_card`` (see :func:`public_card`).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

from . import wire
from .decisions import hmtw, mythic, pool, sohl
from .dice import Dice
from .state import WorldState

RULESET_DECISIONS: tuple[ModuleType, ...] = (sohl, hmtw, mythic, pool)
RULESETS = [m.RULESET for m in RULESET_DECISIONS if m.HANDLERS]  # announced in ``welcome``

Handler = Callable[[wire.ClientMessage, WorldState, Dice], wire.BridgeMessage]
Query = Callable[[wire.ClientMessage, WorldState], wire.BridgeMessage]
"""A read-only request (e.g. the Fate Chart dialog's catalog): answered from the world's state
without a decision: no event_id replay, no audit record, no dice, nothing written."""


def _settings(message: wire.Settings, state: WorldState, dice: Dice) -> wire.SettingsApplied:
    """S12: the GM's client sets the world option."""
    settings = wire.WorldSettings(fate_option=message.fate_option)
    state.put_settings(settings)
    return wire.SettingsApplied(ref=message.event_id, settings=settings)


PublicCard = Callable[[wire.ClientMessage, wire.BridgeMessage, WorldState], wire.Card | None]


def _visible_card(message: wire.ClientMessage, reply: wire.BridgeMessage,
                  state: WorldState) -> wire.Card | None:
    """The default :data:`PublicCard`: the reply's ``card`` when the request says its result is
    ``public``; nothing for a request without ``visibility`` (private unless a ruleset says so)."""
    if getattr(message, "visibility", None) != "public":
        return None
    card = getattr(reply, "card", None)
    return card if isinstance(card, wire.Card) else None


HANDLERS: dict[type, Handler] = {wire.Settings: _settings}
QUERIES: dict[type, Query] = {}
SUMMARIZERS: dict[type, Callable[..., wire.AuditColumns]] = {}
PUBLIC_CARDS: dict[type, PublicCard] = {}
for _module in RULESET_DECISIONS:
    HANDLERS.update(_module.HANDLERS)
    QUERIES.update(getattr(_module, "QUERIES", {}))
    SUMMARIZERS.update(dict.fromkeys(_module.HANDLERS, _module.summarize))
    PUBLIC_CARDS.update(dict.fromkeys(_module.HANDLERS, getattr(_module, "public_card", _visible_card)))


def answer(message: wire.ClientMessage, state: WorldState) -> wire.BridgeMessage:
    """Answer a read-only query (``QUERIES``); raises ``TypeError`` for any other message."""
    query = QUERIES.get(type(message))
    if query is None:
        raise TypeError(f"{type(message).__name__} is not a query")
    return query(message, state)


def decide(message: wire.ClientMessage, state: WorldState, dice: Dice) -> wire.BridgeMessage:
    """Decide one work message (``settings`` and every ruleset's requests).

    Returns the reply; raises a :class:`~bridge.errors.Refusal` subclass for a refusal (nothing
    written), or ``TypeError`` for a message that is not work (``hello``, ``ping``, ``audit_query``:
    the session answers those).
    """
    handler = HANDLERS.get(type(message))
    if handler is None:
        raise TypeError(f"{type(message).__name__} is not a decision message")
    return handler(message, state, dice)


def summarize(message: wire.ClientMessage, reply: wire.BridgeMessage, state: WorldState) -> wire.AuditColumns:
    """The audit columns of a decided message (its ruleset's summarizer; ``settings`` for the
    world option). ``state`` is read only: call it with the plain state, not a recording one."""
    summarizer = SUMMARIZERS.get(type(message))
    if summarizer is None:
        return wire.AuditColumns(outcome="settings" if isinstance(reply, wire.SettingsApplied) else reply.code)  # type: ignore[union-attr]
    return summarizer(message, reply, state)


def public_card(message: wire.ClientMessage, reply: wire.BridgeMessage, state: WorldState) -> wire.Card | None:
    """The card overlay viewers may see for a decided message, or None (the result is whispered,
    blind, self or GM-only, or the reply has no card). Call it only for a decision that passed
    (not a refusal), with the state after it; it only reads.

    A ruleset's ``public_card(message, reply, state)`` decides for its messages (sohl: the
    visibility of the graded test a Fate Test was rolled on); otherwise the request's own
    ``visibility`` does (:func:`_visible_card`).
    """
    return PUBLIC_CARDS.get(type(message), _visible_card)(message, reply, state)
