"""Dice everyone can trust: provably fair dice sessions (commit and reveal), physical
dice and GM overrides on the record.

A layer of the decision core (:mod:`bridge.core`) that every ruleset gets, not a ruleset:
``dice`` (the pure derivation and one decision's dice table), ``wire`` (its messages, in the wire
union beside the shared ones), ``decide`` (its handlers and the dice table each decision rolls
with; the core routes to them), ``trail`` (recomputing a session's dice from an exported trail,
counting overrides), ``templates/`` (its cards), ``page/`` (the ``/verify`` page). Nothing here
imports a ruleset or the registry.
"""
