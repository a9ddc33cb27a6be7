"""Stream overlay messages: what overlay viewers receive, and the GM's overlay controls.

A viewer is a browser showing ``GET /overlay`` (OBS's browser source). It says
``hello {world_id, viewer_key}`` (see :class:`~bridge.wire.control.Hello`) and gets ``welcome``.
From then on it only receives. It gets ``overlay_card`` for each public result of its world, and
``overlay_clear`` when the GM clears the overlay. It may send ``ping``; anything else is refused
with ``forbidden``.

The GM's module (the forwarder) asks for the overlay's address with ``overlay_info``. It drives
the viewers with ``overlay_control``. Both are read-only for the world's state. So they carry a
``query_id``, matched by the reply, rather than an ``event_id``.
"""

from __future__ import annotations

from typing import Literal

from .base import BridgeMessage, Card, Query

OverlayAction = Literal["clear", "replay"]


class OverlayCard(BridgeMessage, tag="overlay_card", kw_only=True, frozen=True):
    """A public result of ``world_id`` for overlay viewers.

    ``card`` is the result's chat card. Its ``html`` has every outside string escaped;
    ``speaker_actor_id`` is always null here. A card whose ``key`` equals one on screen replaces it:
    a Fate Test Critical Success shown as pending, then its final card; or the GM's ``replay`` of a
    card still shown.
    """

    world_id: str
    ruleset: str
    card: Card
    key: str | None = None


class OverlayClear(BridgeMessage, tag="overlay_clear", kw_only=True, frozen=True):
    """The GM cleared the overlay: viewers of ``world_id`` take every card off screen."""

    world_id: str


class OverlayInfo(Query, tag="overlay_info", kw_only=True, frozen=True):
    """The GM's module asks for the overlay's address (forwarder only). The bridge makes the
    world's viewer key on first use. Answered with ``overlay_info_reply``."""



class OverlayInfoReply(BridgeMessage, tag="overlay_info_reply", kw_only=True, frozen=True):
    """The world's read-only ``viewer_key`` and the overlay page's ``path``.

    ``path`` is relative to the bridge's address: ``ws://host:8765`` serves
    ``http://host:8765/overlay`` for ``overlay``.
    """

    query_id: str
    world_id: str
    viewer_key: str
    path: str


class OverlayControl(Query, tag="overlay_control", kw_only=True, frozen=True):
    """The GM's module drives the world's overlay viewers (forwarder only). Answered ``overlay_controlled``.

    ``clear`` takes every card off screen. ``replay`` shows the world's last public card again:
    the last one since the bridge started; nothing when there is none.
    """

    action: OverlayAction


class OverlayControlled(BridgeMessage, tag="overlay_controlled", kw_only=True, frozen=True):
    """The bridge has passed ``action`` on to the world's viewers."""

    query_id: str
    action: OverlayAction


CLIENT = (OverlayInfo, OverlayControl)
BRIDGE = (OverlayCard, OverlayClear, OverlayInfoReply, OverlayControlled)
