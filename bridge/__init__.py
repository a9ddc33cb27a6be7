"""fate-bridge: a companion service for Foundry VTT that resolves the Fate rules of tabletop RPGs.

The pure core is ``bridge.rulesets`` (one package per game: rules, messages, handlers, cards),
``bridge.wire`` (the shared messages) and ``bridge.dispatch`` (message + state + dice -> one
``Outcome``); ``bridge.session``, ``bridge.server``, ``bridge.store`` and ``bridge.cli`` are the
shell around it (docs/architecture.md).
"""

__version__ = "0.1.0"
