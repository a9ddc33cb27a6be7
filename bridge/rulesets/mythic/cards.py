"""mythic's chat cards, rendered from this package's ``templates/`` (autoescaped, strict).

They are in the current language (``bridge.i18n``). The words come from the rules' tables:
ranks, odds, answers, named questions (M1, M5-M7). They are extracted into the catalog from
``rules.py`` (babel.cfg) and translated here, on the card. The wire keeps the English.
"""

from __future__ import annotations

from ...cards import CardTemplates
from ...i18n import _
from . import rules as mythic

render_card = CardTemplates(__package__).render


def rank_name(rank: int) -> str:
    """M1/M3: a rank's name (``rules.rank_name``) in the current language.

    The ``N+`` of the ranks beyond the chart is kept as it is.
    """
    words, space, beyond = mythic.rank_name(rank).rpartition(" ")
    if space and beyond.endswith("+"):
        return f"{_(words)} {beyond}"
    return _(mythic.rank_name(rank))


def shift_label(label: str) -> str:
    """A shift's label on the card (M4, M7): the rules' words translated, a modifier's ``(xN)`` kept."""
    words, space, times = label.rpartition(" ")
    if space and times.startswith("(x"):
        return f"{_(words)} {times}"
    return _(label)
