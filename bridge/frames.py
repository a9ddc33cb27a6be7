"""A decision's reply frame: as it is sent, and as an ``event_id`` replay rebuilds it.

The audit record keeps the reply once (key-sorted, inside the chain's canonical bytes) with the
dice and their draws; :func:`replayed_frame` makes the frame that was sent from those, byte for
byte, because :func:`decision_frame` is the one way a frame is made (msgspec encodes a message's
fields in one fixed order; ``tests/test_store_memory.py`` checks every example session).
"""

from __future__ import annotations

from . import wire
from .audit import AuditRecord
from .fairness import wire as dice_wire
from .fairness.dice import Draw


def decision_frame(reply: wire.BridgeMessage, dice: list[int], draws: list[Draw] | None) -> bytes:
    """The frame sent for a decision's ``reply``: its JSON, with the ``rolls`` every client shows
    when the decision drew dice (``draws``, parallel to the rolled values ``dice``; issue 19)."""
    frame = wire.encode(reply)
    if draws:
        frame = dice_wire.attach_rolls(frame, dice, draws)
    return frame


def replayed_frame(record: AuditRecord) -> bytes:
    """The frame that was sent for the decision ``record`` holds (its reply decoded and made into
    a frame again, as :func:`decision_frame` made it)."""
    reply = wire.bridge_decoder().decode(bytes(record.reply))
    return decision_frame(reply, record.dice, record.draws)
