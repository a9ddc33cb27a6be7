"""The hmtw ruleset: the tarot rules of fate (H1-H14).

It covers tests, group tests, pushes, Challenge Actions and the decks.

- ``rules``: pure tables and functions.
- ``wire``: its messages.
- ``decide``: its handlers.
- ``cards`` and ``templates/``: its chat cards.
- ``report``: what it adds to the audit report.

:data:`RULESET` plugs it into the bridge.
"""

from __future__ import annotations

from ...i18n import N_
from ...ruleset import Dictionary, Era, Ruleset
from . import rules, wire, decide, report  # rules first: the shared wire reads its tables

RULESET = Ruleset(
    id=rules.RULESET,
    client=wire.CLIENT,
    bridge=wire.BRIDGE,
    handlers=decide.HANDLERS,
    refused=decide.refused,
    title=N_("His Majesty the Worm"),
    outcome_names=decide.OUTCOME_NAMES,
    report=report.REPORT,
    # Trails decided before H14 (cards on the table) re-derive under the rules of then.
    eras=(Era("before H14", decide.before_h14),),
    # The zstd dictionaries of its stored rows (bridge/store/blobs.py), trained on its example
    # session (python -m bridge.store.dictionary hmtw KIND).
    dictionaries=(Dictionary(32771, "audit", __name__, "0.1.0"),
                  Dictionary(32772, "records", __name__, "0.1.0")),
)
