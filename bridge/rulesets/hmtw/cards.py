"""hmtw's chat cards, rendered from this package's ``templates/`` (autoescaped, strict).

They are in the current language (``bridge.i18n``). Tarot names, suits and outcomes are the
rules' tables (``rules.py``, H2, H3, H5, H10). They are extracted into the catalog from there
(babel.cfg) and translated here, on the card. The wire keeps the English ``name``. Roman
numerals have no catalog entry.
"""

from __future__ import annotations

from ...cards import CardTemplates
from ...i18n import _
from . import rules as hmtw
from .wire import HmtwCardFace

def suit_name(suit: str) -> str:
    """H3: a suit (``"swords"``) as the card shows it, in the current language."""
    return _(hmtw.SUIT_NAMES[suit])


def card_name(face: HmtwCardFace) -> str:
    """H2: a tarot card's printed name in the current language, from its code and value.

    E.g. "Knight of Wands", "The Fool", "XIII Death".
    """
    if face.code == hmtw.FOOL:
        return _(hmtw.FOOL_NAME)
    if face.suit is None:
        numeral, title = hmtw.MAJOR_ARCANA[face.value]
        return f"{numeral} {_(title)}"
    return _("%(rank)s of %(suit)s") % {"rank": _(hmtw.RANK_NAMES[face.value]), "suit": suit_name(face.suit)}


TEMPLATES = CardTemplates(__package__, {"card_name": card_name, "suit_name": suit_name})
render_card = TEMPLATES.render
