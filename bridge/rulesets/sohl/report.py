"""sohl's part of the audit report.

Its Fate Tests' d100 join the fair-d100 test. Its Fate Tests by outcome (S9: spent, kept, lost)
are columns of the Fate tables, per actor and session.
"""

from __future__ import annotations

from ... import charts
from ...i18n import N_, ngettext
from ...ruleset import Recorded, ReportPart, Tally
from .decide import OUTCOME_NAMES

FATE_OUTCOMES = {"spent": charts.INK, "kept": charts.ACCENT, "lost": charts.FAIR}  # S9, and their bars' colors


def fate_tests(count: int) -> str:
    """``count`` Fate Tests in words, in the current language (its dice in the fair-d100 test)."""
    return ngettext("%(num)s SoHL Fate Test", "%(num)s SoHL Fate Tests", count) % {"num": count}


def _outcome_tally(outcome: str, color: str) -> Tally:
    """The column of the Fate Tests that ended ``outcome``."""
    return Tally(outcome, OUTCOME_NAMES[outcome], lambda decision: int(decision.columns.outcome == outcome), color)


def _is_fate_test(decision: Recorded) -> int:
    return int(decision.columns.outcome in FATE_OUTCOMES)  # a CS's pending choice counts once chosen


REPORT = ReportPart(
    d100=fate_tests,
    tallies=(Tally("fate_tests", N_("Fate Tests"), _is_fate_test),
             *(_outcome_tally(outcome, color) for outcome, color in FATE_OUTCOMES.items())),
    tally_note=N_("SoHL Fate Tests by outcome (S9: spent = a charge is used and the result rises, +1 or +2; "
                  "kept = no charge is used, +0 on a marginal failure or +1 when a critical success is kept; "
                  "lost = a charge is used for nothing)."),
)
"""What sohl adds to the audit report: its d100s, its Fate Tests per actor and session."""
