"""The decision core's router: one client message + the world's state + dice -> one Outcome.

No network, no clock, no randomness of its own: the server and ``fate-bridge resolve`` both call
:func:`decide` inside ``Store.decide`` (on the world's state in memory; its rows committed before
the reply goes out), and ``fate-bridge audit
verify`` calls it again on recorded inputs. The routes are built from the installed rulesets
(``bridge.rulesets.installed()``): each :class:`~bridge.ruleset.Ruleset` brings its handlers, its
refusal columns and its read-only queries.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from . import wire
from .dice import Dice
from .errors import Refusal
from .ruleset import Handler, Outcome, Query, Refused, Ruleset
from .state import WorldState


@dataclass(frozen=True, slots=True)
class _Routes:
    handlers: dict[type, Handler]
    refused: dict[type, Refused]  # the refusal columns of each handled message's ruleset
    queries: dict[type, Query]
    ids: list[str]


@functools.cache
def _routes() -> _Routes:
    from . import fairness
    from .rulesets import installed

    games: tuple[Ruleset, ...] = installed()
    rulesets = (*games, fairness.RULESET)  # dice sessions, settings, overrides: not a game
    return _Routes(
        handlers={kind: h for r in rulesets for kind, h in r.handlers.items()},
        refused={kind: r.refused for r in rulesets for kind in r.handlers},
        queries={kind: q for r in rulesets for kind, q in r.queries.items()},
        ids=[r.id for r in games if r.handlers],
    )


def rebuild() -> None:
    """Forget the routes built from the installed rulesets (``bridge.rulesets.register``)."""
    _routes.cache_clear()


def rulesets() -> list[str]:
    """The ids of the installed rulesets, as ``welcome.rulesets`` announces them."""
    return list(_routes().ids)


def is_query(message: wire.ClientMessage) -> bool:
    """True for a read-only query (answered by :func:`answer`, never recorded)."""
    return type(message) in _routes().queries


def answer(message: wire.ClientMessage, state: WorldState) -> wire.BridgeMessage:
    """Answer a read-only query; raises ``TypeError`` for any other message."""
    query = _routes().queries.get(type(message))
    if query is None:
        raise TypeError(f"{type(message).__name__} is not a query")
    return query(message, state)


def decide(message: wire.Request, state: WorldState, dice: Dice) -> Outcome:
    """Decide one request of any installed ruleset (sohl's ``settings`` included): the one call
    a decision makes into the core.

    Returns its :class:`~bridge.ruleset.Outcome`. A handler's :class:`~bridge.errors.Refusal`
    becomes an Outcome too: ``refused`` set, the ``error`` reply (``ref`` = the ``event_id``), its
    ruleset's refusal columns (:attr:`Ruleset.refused`) and the code and field as log keys; the
    caller must undo what the handler wrote. Raises ``TypeError`` for a message that is not a
    decision (``hello``, ``ping``, ``audit_query``: the session answers those).
    """
    routes = _routes()
    handler = routes.handlers.get(type(message))
    if handler is None:
        raise TypeError(f"{type(message).__name__} is not a decision message")
    try:
        return handler(message, state, dice)
    except Refusal as refusal:
        return refused(message, refusal, state)


def refused(message: wire.Request, refusal: Refusal, state: WorldState) -> Outcome:
    """The :class:`~bridge.ruleset.Outcome` of ``message`` refused with ``refusal`` (by its
    handler, or by the shell before it ran, e.g. a die of a provable world with no dice session):
    the ``error`` reply, its ruleset's refusal columns, the code and field as log keys."""
    error = wire.error_reply(refusal, message.event_id)
    columns = _routes().refused[type(message)](message, error, state)
    return Outcome(error, columns, None, {"code": error.code, "field": error.field}, refused=True)


def __getattr__(name: str) -> object:
    """``RULESETS`` (the ids ``welcome`` announces) and ``HANDLERS`` (message class -> handler),
    built from the installed rulesets."""
    if name == "RULESETS":
        return rulesets()
    if name == "HANDLERS":
        return dict(_routes().handlers)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
