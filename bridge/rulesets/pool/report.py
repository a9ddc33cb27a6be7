"""pool's part of the audit report (``templates/pool_report.html.j2``).

The Fate its rerolls spent, a column of the Fate tables. Its ledger over time: each character's
Fate and Destiny.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ... import charts
from ...i18n import N_, _
from ...ruleset import Recorded, ReportPart, ReportSection, Tally
from .cards import TEMPLATES

Ledger = dict[str, list[tuple[int, int, int]]]
"""Character name -> (record number, Fate, Destiny) after each decision showing its ledger."""


def fate_spent(decision: Recorded) -> int:
    """The Fate points a check or reroll spent (its reply's ``fate_spent``, P8)."""
    spent = decision.reply.get("fate_spent")
    return sum(v for v in spent.values() if isinstance(v, int)) if isinstance(spent, dict) else 0


def _characters(reply: Mapping[str, Any]) -> list[dict]:
    """The ledger entries a reply carries (``characters``, or one ``character``)."""
    if isinstance(reply.get("characters"), list):
        return [c for c in reply["characters"] if isinstance(c, dict)]
    return [reply["character"]] if isinstance(reply.get("character"), dict) else []


def collect(decisions: Sequence[Recorded]) -> Ledger:
    """Each character's ledger over pool's ``decisions``, by its name (its id if unnamed)."""
    ledger: Ledger = {}
    for decision in decisions:
        for entry in _characters(decision.reply):
            name = str(entry.get("name") or entry.get("character_id"))
            fate, destiny = entry.get("fate"), entry.get("destiny")
            if isinstance(fate, int) and isinstance(destiny, int):
                ledger.setdefault(name, []).append((decision.seq, fate, destiny))
    return ledger


def _chart(ledger: Ledger) -> str | None:
    if not ledger:
        return None
    series = []
    for index, (name, points) in enumerate(sorted(ledger.items())):
        color = charts.PALETTE[index % len(charts.PALETTE)]
        seqs = [p[0] for p in points]
        series.append(charts.Series(_("{name}: Fate").format(name=name), [p[1] for p in points], color, xs=seqs))
        series.append(charts.Series(_("{name}: Destiny").format(name=name), [p[2] for p in points], color,
                                    dashed=True, xs=seqs))
    return charts.figure([charts.step_panel(series, width=760, x_name=_("audit record number (time order)"),
                                            value_name=_("points"))], label=_("pool ledger over time"))


def render(ledger: Ledger) -> str:
    """The ledger section's HTML in the current language."""
    return TEMPLATES.html("pool_report.html.j2", chart=_chart(ledger))


REPORT = ReportPart(
    tallies=(Tally("fate_spent", N_("pool Fate spent"), fate_spent, charts.MUTED),),
    tally_note=N_("pool Fate spent: Fate points spent on rerolls in the pool ruleset."),
    sections=(ReportSection("ledger", collect, render),),
)
"""What pool adds to the audit report: its Fate spent, its ledger section."""
