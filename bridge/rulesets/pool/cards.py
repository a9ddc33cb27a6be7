"""pool's chat cards, rendered from this package's ``templates/`` (autoescaped, strict).

They are in the current language (``bridge.i18n``). The rules name modes, kinds and saves by
identifiers (``rules.py``). Their words on a card are here, keyed by those identifiers.
tests/test_i18n.py checks every identifier has one.
"""

from __future__ import annotations

from ...cards import CardTemplates
from ...i18n import N_, _

MODE_NAMES = {"normal": N_("normal"), "advantage": N_("advantage"), "disadvantage": N_("disadvantage")}
KIND_NAMES = {"pc": N_("player character"), "retainer": N_("retainer"), "follower": N_("follower")}
# P9: a save's default label (kept in English in the roll's record and reply, shown translated).
SAVE_LABELS = {"body": N_("Body save"), "mind": N_("Mind save"), "sense": N_("Sense save"),
               "heart": N_("Heart save"), "cunning": N_("Cunning save"), "fate": N_("Fate save")}
# P7: the d20 rolls Fate may reroll, as a rerolled card's title names one without a label.
ROLL_KIND_NAMES = {"attack": N_("attack"), "save": N_("save"), "ability_test": N_("ability test"),
                   "disruption_check": N_("disruption check"), "injury_roll": N_("injury roll")}


def mode_name(mode: str) -> str:
    """A roll mode (P6, P8) in the current language."""
    return _(MODE_NAMES[mode])


def kind_name(kind: str) -> str:
    """A character kind (P12) in the current language."""
    return _(KIND_NAMES[kind])


def roll_title(name: str, label: str | None, kind: str) -> str:
    """A d20 roll's card title, e.g. ``Aldric: Body save``.

    A default save label is translated; a label the table wrote stays. With no label, the title
    names the roll's kind.
    """
    return _("%(name)s: %(roll)s") % {"name": name, "roll": _(label) if label else _(ROLL_KIND_NAMES[kind])}


TEMPLATES = CardTemplates(__package__, {"mode_name": mode_name, "kind_name": kind_name})
render_card = TEMPLATES.render
