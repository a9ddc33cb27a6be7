"""The decision core's router: one client message + the world's state + dice -> one Outcome.

No network, no clock, no randomness of its own: the server and ``fate-bridge resolve`` both call
:func:`decide` inside ``Store.decide`` (one transaction per decision), and ``fate-bridge audit
verify`` calls it again on recorded inputs. The routes are built from the installed rulesets
(``bridge.rulesets.installed()``): each :class:`~bridge.ruleset.Ruleset` brings its handlers, its
refusal columns and its read-only queries.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from . import wire
from .dice import Dice
from .ruleset import Handler, Outcome, Query, Refused, Ruleset
from .state import WorldState


@dataclass(frozen=True, slots=True)
class _Routes:
    handlers: dict[type, Handler]
    refused: dict[type, Refused]
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


def decide(message: wire.ClientMessage, state: WorldState, dice: Dice) -> Outcome:
    """Decide one request of any installed ruleset (sohl's ``settings`` included).

    Returns its :class:`~bridge.ruleset.Outcome`; raises a :class:`~bridge.errors.Refusal`
    subclass for a refusal (nothing written), or ``TypeError`` for a message that is not work
    (``hello``, ``ping``, ``audit_query``: the session answers those).
    """
    handler = _routes().handlers.get(type(message))
    if handler is None:
        raise TypeError(f"{type(message).__name__} is not a decision message")
    return handler(message, state, dice)


def refused(message: wire.ClientMessage, error: wire.Error, state: WorldState) -> wire.AuditColumns:
    """The audit columns of a refused request (its ruleset's :attr:`Ruleset.refused`); ``state``
    is read only, after the refusal: call it with the plain state, not a recording one."""
    return _routes().refused[type(message)](message, error, state)


def __getattr__(name: str) -> object:
    """``RULESETS`` (the ids ``welcome`` announces) and ``HANDLERS`` (message class -> handler),
    built from the installed rulesets."""
    if name == "RULESETS":
        return rulesets()
    if name == "HANDLERS":
        return dict(_routes().handlers)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
