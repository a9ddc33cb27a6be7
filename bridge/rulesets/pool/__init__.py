"""The pool ruleset: the dice pool (P1-P16).

It covers checks, saves, rerolls bought with Fate, and the ledger.

- ``rules``: pure tables and functions.
- ``wire``: its messages.
- ``decide``: its handlers.
- ``cards`` and ``templates/``: its chat cards.
- ``report``: what it adds to the audit report.

:data:`RULESET` plugs it into the bridge.
"""

from __future__ import annotations

from ...i18n import N_
from ...ruleset import Dictionary, Ruleset
from . import rules, wire, decide, report  # rules first: the shared wire reads its tables

RULESET = Ruleset(
    id=rules.RULESET,
    client=wire.CLIENT,
    bridge=wire.BRIDGE,
    handlers=decide.HANDLERS,
    refused=decide.refused,
    title=N_("dice pool"),
    outcome_names=decide.OUTCOME_NAMES,
    report=report.REPORT,
    # The zstd dictionaries of its stored rows (bridge/store/blobs.py), trained on its example
    # session (python -m bridge.store.dictionary pool KIND).
    dictionaries=(Dictionary(32775, "audit", __name__, "0.1.0"),
                  Dictionary(32776, "records", __name__, "0.1.0")),
)
