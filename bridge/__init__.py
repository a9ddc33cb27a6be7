"""fate-bridge: a companion service for Foundry VTT that resolves the Fate rules of tabletop RPGs.

The pure core:

- ``bridge.rulesets``: one package per game (rules, messages, handlers, cards).
- ``bridge.wire``: the shared messages.
- ``bridge.registry``: the installed rulesets and the wire union.
- ``bridge.core``: request + state + dice -> one ``Decision`` (reply frame, audit entry,
  overlay card, log keys).
- ``bridge.fairness``: provable, physical and overridden dice, a layer of the core.

``bridge.session``, ``bridge.server``, ``bridge.store`` and ``bridge.cli`` are the shell around it.
They import downwards only (docs/architecture.md, Layers).
"""

__version__ = "0.1.0"
