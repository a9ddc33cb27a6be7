"""hmtw's chat cards: rendered from this package's ``templates/`` (autoescaped, strict), in the
current language (``bridge.i18n``). Tarot names and suits are the rules' (``rules.py``, H2),
translated here on the card; the wire keeps the English ``name``."""

from __future__ import annotations

from ... import wire
from ...cards import CardTemplates
from ...i18n import N_, _
from . import rules as hmtw

# The rules' words shown on cards, marked for the catalog (tests/test_i18n.py checks they are
# every word of rules.py's tables). Roman numerals have no catalog entry: they stay.
WORDS = (
    N_("Swords"), N_("Pentacles"), N_("Cups"), N_("Wands"),
    N_("Ace"), N_("Page"), N_("Knight"), N_("Queen"), N_("King"), N_("The Fool"),
    N_("The Magician"), N_("The High Priestess"), N_("The Empress"), N_("The Emperor"),
    N_("The Hierophant"), N_("The Lovers"), N_("The Chariot"), N_("Strength"), N_("The Hermit"),
    N_("Wheel of Fortune"), N_("Justice"), N_("The Hanged Man"), N_("Death"), N_("Temperance"),
    N_("The Devil"), N_("The Tower"), N_("The Star"), N_("The Moon"), N_("The Sun"),
    N_("Judgement"), N_("The World"),
    N_("Great success"), N_("Success"), N_("Failure"), N_("Great failure"),
    N_("Falls short"), N_("Disaster"),
)


def suit_name(suit: str) -> str:
    """H3: a suit (``"swords"``) as the card shows it, in the current language."""
    return _(hmtw.SUIT_NAMES[suit])


def card_name(face: wire.HmtwCardFace) -> str:
    """H2: a tarot card's printed name in the current language ("Knight of Wands", "The Fool",
    "XIII Death"), from its code and value."""
    if face.code == hmtw.FOOL:
        return _(hmtw.FOOL_NAME)
    if face.suit is None:
        numeral, title = hmtw.MAJOR_ARCANA[face.value]
        return f"{numeral} {_(title)}"
    return _("%(rank)s of %(suit)s") % {"rank": _(hmtw.RANK_NAMES[face.value]), "suit": suit_name(face.suit)}


render_card = CardTemplates(__package__, {"card_name": card_name, "suit_name": suit_name}).render
