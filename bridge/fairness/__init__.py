"""Dice everyone can trust (issue 19): provably fair dice sessions (commit and reveal), physical
dice and GM overrides on the record.

``dice`` (the pure derivation and one decision's dice table), ``wire`` (its messages),
``decide`` (its handlers), ``trail`` (recomputing a session's dice from an exported trail,
counting overrides), ``templates/`` (its cards), ``page/`` (the ``/verify`` page).
:data:`RULESET` plugs its messages into the router; it is not a game, so ``welcome`` does not
announce it.
"""

from __future__ import annotations

from ..ruleset import Ruleset
from . import decide, wire

RULESET = Ruleset(
    id=decide.RULESET_ID,
    client=wire.CLIENT,
    bridge=wire.BRIDGE,
    handlers=decide.HANDLERS,
    refused=decide.refused,
    queries=decide.QUERIES,
)
