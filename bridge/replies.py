"""A reply frame: a decision's, and a refusal's.

A decision's frame is made as it is sent, and again when an ``event_id`` replay rebuilds it.
:func:`error_reply` makes a refusal's. It is the one place a refusal's words are translated.

The audit record keeps the reply once, with the dice and their draws. The reply is key-sorted,
inside the chain's canonical bytes. :func:`replayed_frame` makes the frame that was sent from those,
byte for byte. This works because :func:`decision_frame` is the one way a frame is made. msgspec
encodes a message's fields in one fixed order. ``tests/test_store_memory.py`` checks every example
session.

:func:`card_text` reads a frame as text for a terminal (``fate-bridge resolve --cards``).
"""

from __future__ import annotations

import html
import re

import msgspec

from . import i18n, registry, wire
from .errors import Refusal
from .fairness import wire as dice_wire
from .fairness.provable import Draw
from .record import AuditRecord


def error_reply(refusal: Refusal, ref: str | None, language: str) -> wire.Error:
    """The ``error`` answering ``refusal``: the one map from exception to contract.

    Its message is in ``language``: a world's, or the one a ``hello`` or ``register`` asks for."""
    return wire.Error(code=refusal.code, message=refusal.text.shown(i18n.translations(language).gettext), ref=ref,  # type: ignore[arg-type]
                      field=refusal.field, retry_after_ms=getattr(refusal, "retry_after_ms", msgspec.UNSET))


def error_frame(refusal: Refusal, ref: str | None, language: str) -> bytes:
    """The encoded ``error`` frame answering ``refusal`` (:func:`error_reply`)."""
    return wire.encode(error_reply(refusal, ref, language))


def decision_frame(reply: wire.BridgeMessage, dice: list[int], draws: list[Draw] | None) -> bytes:
    """The frame sent for a decision's ``reply``: its JSON.

    When the decision drew dice it adds the ``rolls`` every client shows. ``draws`` is parallel to
    the rolled values ``dice``."""
    frame = wire.encode(reply)
    if draws:
        frame = dice_wire.attach_rolls(frame, dice, draws)
    return frame


def replayed_frame(record: AuditRecord) -> bytes:
    """The frame that was sent for the decision ``record`` holds.

    Its reply is decoded and made into a frame again, as :func:`decision_frame` made it."""
    reply = registry.bridge_decoder().decode(bytes(record.reply))
    return decision_frame(reply, record.dice, record.draws)


_TAG = re.compile(r"<[^>]+>")
_BLOCK = re.compile(r"</?(?:div|header|footer|h3)\b[^>]*>")


def card_text(frame: bytes) -> str | None:
    """A reply frame as readable text for a terminal (``fate-bridge resolve --cards``).

    A refusal (``error``, any ruleset) reads ``[refused REF] CODE: message (field F)``. A ruleset's
    reply reads as its ruleset's :attr:`~bridge.ruleset.Ruleset.card_text` gives it. Else the
    ``card`` and ``notice`` cards of any reply carrying them are shown. None for other replies."""
    protocol = registry.protocol()
    reply = protocol.bridge_decoder.decode(frame)
    if isinstance(reply, wire.Error):
        where = f" (field {reply.field})" if reply.field else ""
        return f"[refused {reply.ref or '-'}] {reply.code}: {reply.message}{where}"
    own = protocol.card_text.get(type(reply))
    text = own(reply) if own is not None else None
    if text is not None:
        return text
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
