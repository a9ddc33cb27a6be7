"""The mythic ruleset: the Mythic Fate Chart (M1-M9).

It covers questions, odds questions and the Chaos Factor.

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
    title=N_("Mythic Fate Chart"),
    outcome_names=decide.OUTCOME_NAMES,
    report=report.REPORT,
    queries=decide.QUERIES,
    # The zstd dictionaries of its stored rows (bridge/store/blobs.py), trained on its example
    # session (python -m bridge.store.dictionary mythic KIND).
    dictionaries=(Dictionary(32773, "audit", __name__, "0.1.0"),
                  Dictionary(32774, "records", __name__, "0.1.0")),
)
