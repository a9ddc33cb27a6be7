"""Dice everyone can trust: provably fair dice sessions, physical dice, GM overrides on the record.

Fair dice sessions work by commit and reveal. This is not a ruleset: it is a layer of the
decision core (:mod:`bridge.core`) that every ruleset gets.

- ``provable``: the pure derivation, the commitment, and one decision's dice table.
- ``wire``: its messages, in the wire union beside the shared ones.
- ``decide``: its handlers, and the dice table each decision rolls with. The core routes to them.
- ``trail``: recompute a session's dice from an exported trail; count overrides.
- ``templates/``: its cards.
- ``page/``: the ``/verify`` page.

Nothing here imports a ruleset or the registry.
"""
