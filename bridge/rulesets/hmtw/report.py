"""hmtw's section of the audit report (``templates/hmtw_report.html.j2``).

The tarot cards the bridge drew, against a fair shuffle (H1). The player deck by suit and the
Fool; the GM deck card by card.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from ... import charts
from ...chi_square import MIN_EXPECTED, fit_test
from ...i18n import _
from ...ruleset import Recorded, ReportPart, ReportSection
from . import rules as hmtw
from .cards import TEMPLATES

GROUPS = (*hmtw.SUITS, "fool")  # the player deck's groups the test counts: the suits and the Fool
GROUP_NAMES = {**hmtw.SUIT_NAMES, "fool": hmtw.FOOL_NAME}  # their words, in the catalog from the rules (babel.cfg)
DRAWN_KEYS = ("first", "pushed", "drawn")  # where a reply shows a drawn card


@dataclass
class Draws:
    """The cards drawn in a period: card code -> times drawn, per deck."""

    player: Counter[str] = field(default_factory=Counter)
    gm: Counter[str] = field(default_factory=Counter)


def drawn_cards(reply: object) -> list[str]:
    """Codes of the tarot cards a reply shows drawn (:data:`DRAWN_KEYS`).

    At any depth: a group test's members too.
    """
    found: list[str] = []
    if isinstance(reply, dict):
        for key, value in reply.items():
            if key in DRAWN_KEYS and isinstance(value, dict) and isinstance(value.get("code"), str):
                found.append(value["code"])
            elif isinstance(value, (dict, list)):
                found.extend(drawn_cards(value))
    elif isinstance(reply, list):
        for value in reply:
            found.extend(drawn_cards(value))
    return found


def collect(decisions: Sequence[Recorded]) -> Draws:
    """The cards hmtw's ``decisions`` drew, by deck."""
    draws = Draws()
    for decision in decisions:
        for code in drawn_cards(decision.reply):
            (draws.gm if code in hmtw.GM_DECK else draws.player)[code] += 1
    return draws


def _group(code: str) -> str:
    suit = hmtw.card(code).suit
    return suit if suit in hmtw.SUITS else "fool"


def groups(cards: Counter[str]) -> tuple[list[int], list[float]]:
    """Player-deck draws by suit and the Fool (:data:`GROUPS`), and what a fair shuffle makes each.

    That is its share of the 57 cards (H1).
    """
    size = Counter(_group(code) for code in hmtw.PLAYER_DECK)
    observed = Counter[str]()
    for code, count in cards.items():
        observed[_group(code)] += count
    total = sum(observed.values())
    return [observed[g] for g in GROUPS], [total * size[g] / len(hmtw.PLAYER_DECK) for g in GROUPS]


def _chart(draws: Draws, observed: list[int], expected: list[float]) -> str | None:
    if not draws.player and not draws.gm:
        return None
    player = charts.column_panel([_(GROUP_NAMES[group]) for group in GROUPS], observed, color=charts.INK,
                                 markers=expected, marker_color=charts.FAIR, width=380, height=300,
                                 title=_("player deck ({count} cards)").format(count=len(hmtw.PLAYER_DECK)),
                                 legend_entries=[(_("drawn"), charts.INK, "box"), (_("expected"), charts.FAIR, "line")])
    gm_total = sum(draws.gm.values())
    gm = charts.column_panel([hmtw.card(code).name.split(" ")[0] for code in hmtw.GM_DECK],
                             [draws.gm[code] for code in hmtw.GM_DECK], color=charts.INK,
                             reference=gm_total / len(hmtw.GM_DECK), marker_color=charts.FAIR, width=480, height=300,
                             rotate_labels=True,
                             title=_("GM deck ({count} major arcana)").format(count=len(hmtw.GM_DECK)))
    return charts.figure([player, gm], label=_("tarot cards drawn against their expected counts"), across=True)


def _gm_card_name(code: str) -> str:
    """A GM deck card (a major arcanum, H1) as its numeral and its name in the current language.

    E.g. "XIII Death", "XIII Der Tod".
    """
    numeral, title = hmtw.MAJOR_ARCANA[hmtw.card(code).value]
    return f"{numeral} {_(title)}"


def render(draws: Draws) -> str:
    """The section's HTML in the current language.

    The charts, the tables, and the player deck's chi-square test (:func:`bridge.chi_square.fit_test`).
    """
    observed, expected = groups(draws.player)
    gm_total = sum(draws.gm.values())
    return TEMPLATES.html(
        "hmtw_report.html.j2", chart=_chart(draws, observed, expected),
        groups=list(zip(GROUPS, observed, expected)), group_names=GROUP_NAMES,
        fit=fit_test(observed, expected) if sum(observed) else None, min_expected=MIN_EXPECTED,
        gm_cards=[(_gm_card_name(code), draws.gm[code]) for code in hmtw.GM_DECK if draws.gm[code]],
        gm_expected=gm_total / len(hmtw.GM_DECK))


REPORT = ReportPart(sections=(ReportSection("tarot", collect, render),))
"""What hmtw adds to the audit report: the tarot section."""
