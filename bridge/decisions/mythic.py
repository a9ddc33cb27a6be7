"""mythic decisions (to be built): handlers ``(message, state, dice) -> reply`` and audit columns."""

from __future__ import annotations

from .. import wire
from ..state import WorldState

RULESET = "mythic"
HANDLERS: dict[type, object] = {}


def summarize(message: wire.ClientMessage, reply: wire.BridgeMessage, state: WorldState) -> wire.AuditColumns:
    """The audit columns of a mythic decision."""
    raise TypeError(f"not a mythic reply: {type(reply).__name__}")
