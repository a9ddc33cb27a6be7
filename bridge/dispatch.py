"""The decision core's router: one client message + the world's state + dice -> the reply.

No network, no clock, no randomness of its own: the server and ``fate-bridge resolve`` both call
:func:`decide` inside ``Store.decide`` (one transaction per decision), and ``fate-bridge audit
verify`` calls it again on recorded inputs. Each ruleset's handlers live in
``bridge.decisions.<ruleset>`` and register their message classes in ``HANDLERS``.
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


def _settings(message: wire.Settings, state: WorldState, dice: Dice) -> wire.SettingsApplied:
    """S12: the GM's client sets the world option."""
    settings = wire.WorldSettings(fate_option=message.fate_option)
    state.put_settings(settings)
    return wire.SettingsApplied(ref=message.event_id, settings=settings)


HANDLERS: dict[type, Handler] = {wire.Settings: _settings}
SUMMARIZERS: dict[type, Callable[..., wire.AuditColumns]] = {}
for _module in RULESET_DECISIONS:
    HANDLERS.update(_module.HANDLERS)
    SUMMARIZERS.update(dict.fromkeys(_module.HANDLERS, _module.summarize))


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
