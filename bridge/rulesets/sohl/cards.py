"""sohl's chat card: the Fate Test card (S9, S10), rendered from ``templates/sohl_fate.html.j2``."""

from __future__ import annotations

import functools

import msgspec

from ... import i18n, wire
from ...cards import CardTemplates
from ...i18n import N_, _
from . import rules as sohl
from .wire import TestGraded

_templates = CardTemplates(__package__)
render_card = _templates.render

# What the card says the Fate Test did to the point, by outcome (S9).
OUTCOME_TEXT = {
    "lost": N_("lost, no gain"),
    "kept": N_("kept, no gain"),
    "spent": N_("spent"),
    "choice": N_("Critical Success: spend for +2 or keep for +1"),
}
# The words of levels are translated on the card: LEVEL_NAMES comes into the catalog from
# rules.py (babel.cfg), a basic test's labels (S3) are these; the labels CS, MS, MF, CF are the
# game's terms and have no catalog entry: they stay.
BASIC_LABELS = (N_("Success"), N_("Failure"))


class SohlFateCardData(msgspec.Struct, kw_only=True, frozen=True):
    """Everything a SoHL Fate card shows.

    Levels are success levels (ints). ``level_after`` is None while a Fate Test CS waits for the
    player's choice. ``charges_after`` None = unlimited. ``target`` is the EML the fated test was
    rolled against, shown as is (e.g. 135); None leaves the line out. A Struct, not a frozen
    dataclass: made once per Fate card, ten times cheaper.
    """

    message_id: str
    actor_id: str
    actor_name: str
    test_name: str
    basic: bool
    level_before: int
    level_after: int | None
    fate_roll: int
    fate_ml: int
    fate_level: int
    outcome: str
    gain: int | None
    point_name: str
    charges_after: int | None
    user_name: str | None
    target: int | None = None


def level_name(level: int, basic: bool = False) -> str:
    """A level's long name (``bridge.rulesets.sohl.rules.name``) in the current language.

    Its words are translated. A margin beyond CS or CF (``+1``, ``-2``) is kept as it is.
    """
    words, space, margin = sohl.name(level, basic).rpartition(" ")
    if space and margin[:1] in "+-":
        return f"{_(words)} {margin}"
    return _(sohl.name(level, basic))


def level_text(level: int, basic: bool = False) -> tuple[str, str]:
    """A level as the card shows it in the current language: its label and its :func:`level_name`.

    The label goes through ``_(label)``. A basic test's ``Success``/``Failure`` is translated; the
    game's ``CS``, ``MS``... stay as they are. Kept per language: a card shows three levels, from a
    handful.
    """
    return _level_text(i18n.current(), level, basic)


@functools.lru_cache(maxsize=256)  # (language, level, basic): levels beyond CS/CF are rare
def _level_text(language: str, level: int, basic: bool) -> tuple[str, str]:
    with i18n.using(language):
        return _(sohl.label(level, basic)), level_name(level, basic)


def sohl_fate_card(data: SohlFateCardData) -> wire.Card:
    """Render the chat card of a SoHL Fate Test (S9, S10).

    It shows the original level -> new level with both labels, the Fate Test roll vs Fate ML, the
    point used and its charges left, and who asked.
    """
    title = _("%(test)s: Fate") % {"test": data.test_name}
    outcome_text = _(OUTCOME_TEXT[data.outcome])
    if data.outcome == "spent" and data.gain:
        outcome_text = f"{outcome_text}, +{data.gain}"
    elif data.outcome == "kept" and data.gain:
        # A Critical Success kept (S9): the point is kept AND the level gains; never "no gain".
        outcome_text = _("kept, gain +%(gain)d") % {"gain": data.gain}
    label_before, name_before = level_text(data.level_before, data.basic)
    label_after, name_after = (None, None) if data.level_after is None else level_text(data.level_after, data.basic)
    variables: dict[str, object] = {
        "message_id": data.message_id,
        "outcome": data.outcome,
        "label_before": label_before,
        "name_before": name_before,
        "level_after": data.level_after,
        "label_after": label_after,
        "name_after": name_after,
        "success_after": data.level_after is not None and sohl.is_success(data.level_after),
        "fate_roll": data.fate_roll,
        "fate_ml": data.fate_ml,
        "fate_label": sohl.label(data.fate_level),
        "fate_name": level_text(data.fate_level)[1],
        "point_name": data.point_name,
        "outcome_text": outcome_text,
        "charges_after": data.charges_after,
        "actor_name": data.actor_name,
        "user_name": data.user_name,
        "target": data.target,
    }
    return _templates.render_variables("sohl_fate.html.j2", variables, title=title, ruleset=sohl.RULESET,
                                       speaker_actor_id=data.actor_id, speaker_alias=data.actor_name)


def card_text(reply: wire.BridgeMessage) -> str | None:
    """A ``test_graded`` as one line for a terminal (``fate-bridge resolve --cards``, before any card).

    Its level and its Fate offer, ``[graded MSG] MS (success); Fate ML 77, points P``; or the
    reasons Fate is withheld. None for sohl's other replies: their cards are shown.
    """
    if not isinstance(reply, TestGraded):
        return None
    fate = reply.fate
    offer = f"ML {fate.fate_ml}, points {', '.join(fate.points)}" if fate.eligible else "withheld: " + ", ".join(fate.reasons)
    return f"[graded {reply.message_id}] {reply.label} ({'success' if reply.success else 'failure'}); Fate {offer}"
