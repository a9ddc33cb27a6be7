"""The sohl ruleset: Song of Heroic Lands (DECISIONS.md S1-S12).

It covers Fate on a Success Test.

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
from . import rules, wire, decide, cards, report  # rules first: the shared wire reads its tables

RULESET = Ruleset(
    id=rules.RULESET,
    client=wire.CLIENT,
    bridge=wire.BRIDGE,
    handlers=decide.HANDLERS,
    refused=decide.refused,
    title=N_("Song of Heroic Lands"),
    outcome_names=decide.OUTCOME_NAMES,
    report=report.REPORT,
    card_text=cards.card_text,
    settings=(wire.Settings,),
    # The zstd dictionaries of its stored rows (bridge/store/blobs.py). 32769 and 32770 were
    # trained on the four rulesets' example plays, SoHL's six times over, and shipped by the
    # store before rulesets shipped their own. Rows every ruleset wrote then name them, so they
    # stay here, read forever.
    dictionaries=(Dictionary(32769, "audit", __name__, "0.1.0"),
                  Dictionary(32770, "records", __name__, "0.1.0")),
)
