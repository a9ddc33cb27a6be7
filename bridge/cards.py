"""Chat cards the bridge renders: Jinja2 templates with autoescaping, never string concatenation.

Every string that came from outside (actor, test, point and user names, ids) is escaped by the
template engine; a name like ``<img src=x onerror=alert(1)>`` shows as text.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

import jinja2
import msgspec

from . import wire
from .rules import sohl

_env = jinja2.Environment(
    loader=jinja2.PackageLoader("bridge", "templates"),
    autoescape=True,  # every template is HTML: escape all of them, whatever the file name
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    auto_reload=False,  # templates ship with the package: no stat() per card
)


def render_card(
    template: str,
    *,
    title: str,
    ruleset: str,
    speaker_actor_id: str | None = None,
    speaker_alias: str | None = None,
    **context: object,
) -> wire.Card:
    """Render ``bridge/templates/<template>`` (autoescaped, strict: a missing variable raises)
    with ``title`` and ``context`` into a chat card. Every ruleset's cards go through here."""
    html = _env.get_template(template).render(title=title, **context)
    return wire.Card(title=title, html=html, ruleset=ruleset, speaker_actor_id=speaker_actor_id,
                     speaker_alias=speaker_alias)

# What the card says the Fate Test did to the point, by outcome (S9).
OUTCOME_TEXT = {
    "lost": "lost, no gain",
    "kept": "kept, no gain",
    "spent": "spent",
    "choice": "Critical Success: spend for +2 or keep for +1",
}


@dataclass(frozen=True, slots=True)
class SohlFateCardData:
    """Everything a SoHL Fate card shows. Levels are success levels (ints); ``level_after`` None
    while a Fate Test CS waits for the player's choice; ``charges_after`` None = unlimited;
    ``target`` the EML the fated test was rolled against (shown as is, e.g. 135), None to leave
    the line out."""

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


def sohl_fate_card(data: SohlFateCardData) -> wire.Card:
    """Render the chat card of a SoHL Fate Test (S9, S10): original level -> new level with both
    labels, the Fate Test roll vs Fate ML, the point used and its charges left, who asked."""
    title = f"{data.test_name}: Fate"
    outcome_text = OUTCOME_TEXT[data.outcome]
    if data.outcome == "spent" and data.gain:
        outcome_text = f"{outcome_text}, +{data.gain}"
    elif data.outcome == "kept" and data.gain:
        # A Critical Success kept (S9): the point is kept AND the level gains; never "no gain".
        outcome_text = f"kept, gain +{data.gain}"
    return render_card(
        "sohl_fate.html.j2",
        title=title,
        ruleset=sohl.RULESET,
        speaker_actor_id=data.actor_id,
        speaker_alias=data.actor_name,
        message_id=data.message_id,
        outcome=data.outcome,
        label_before=sohl.label(data.level_before, data.basic),
        name_before=sohl.name(data.level_before, data.basic),
        level_after=data.level_after,
        label_after=None if data.level_after is None else sohl.label(data.level_after, data.basic),
        name_after=None if data.level_after is None else sohl.name(data.level_after, data.basic),
        success_after=data.level_after is not None and sohl.is_success(data.level_after),
        fate_roll=data.fate_roll,
        fate_ml=data.fate_ml,
        fate_label=sohl.label(data.fate_level),
        fate_name=sohl.name(data.fate_level),
        point_name=data.point_name,
        outcome_text=outcome_text,
        charges_after=data.charges_after,
        actor_name=data.actor_name,
        user_name=data.user_name,
        target=data.target,
    )


_bridge_decoder = msgspec.json.Decoder(wire.BridgeMessages)
_TAG = re.compile(r"<[^>]+>")
_BLOCK = re.compile(r"</?(?:div|header|footer|h3)\b[^>]*>")


def card_text(frame: bytes) -> str | None:
    """A reply frame as readable text for a terminal (``fate-bridge resolve --cards``): the
    grading of a ``test_graded``, a refusal (``error``, any ruleset) as
    ``[refused REF] CODE: message (field F)``, the ``card`` and ``notice`` cards of any reply
    carrying them; None for other replies."""
    reply = _bridge_decoder.decode(frame)
    match reply:
        case wire.Error():
            where = f" (field {reply.field})" if reply.field else ""
            return f"[refused {reply.ref or '-'}] {reply.code}: {reply.message}{where}"
        case wire.TestGraded():
            fate = reply.fate
            offer = (
                f"ML {fate.fate_ml}, points {', '.join(fate.points)}"
                if fate.eligible
                else "withheld: " + ", ".join(fate.reasons)
            )
            return f"[graded {reply.message_id}] {reply.label} ({'success' if reply.success else 'failure'}); Fate {offer}"
    shown = [
        _as_text(label, card)
        for label, card in (("card", getattr(reply, "card", None)), ("notice", getattr(reply, "notice", None)))
        if isinstance(card, wire.Card)
    ]
    if not shown:
        return None
    ref = getattr(reply, "message_id", None)
    return "\n".join(f"[{label} {ref or title}]\n{body}" for label, title, body in shown)


def _as_text(label: str, card: wire.Card) -> tuple[str, str, str]:
    """A card's HTML as indented lines of text, one per block element."""
    blocks = (html.unescape(_TAG.sub(" ", b)) for b in _BLOCK.split(card.html))
    return label, card.title, "\n".join("  " + " ".join(b.split()) for b in blocks if b.strip())
