"""fate-bridge: a companion service for Foundry VTT that resolves the Fate rules of tabletop RPGs.

The pure core is ``bridge.rules`` (one module per ruleset), ``bridge.wire`` (every message) and
``bridge.dispatch`` (message + state + dice -> reply); ``bridge.session``, ``bridge.server``,
``bridge.store`` and ``bridge.cli`` are the shell around it.
"""

__version__ = "0.1.0"
