"""Base classes and shared field types of every wire message (see ``bridge.wire``)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

PROTOCOL_VERSION = 1

# Limits on strings a client sends, so one frame cannot make us store or render megabytes.
Id = Annotated[str, Meta(min_length=1, max_length=128, description="An opaque identifier.")]
Name = Annotated[str, Meta(max_length=256, description="A display name; escaped wherever shown.")]
Code = Annotated[str, Meta(max_length=64, description="A SoHL shortcode such as 'aur' or 'archery'.")]
D100 = Annotated[int, Meta(ge=1, le=100, description="A d100 result, 1..100.")]

Visibility = Literal["public", "gm", "blind", "self"]
ErrorCode = Literal[
    "bad_message",
    "unknown_message",
    "unauthorized",
    "forbidden",
    "not_eligible",
    "already_fated",
    "no_charges",
    "not_found",
    "rate_limited",
    "unavailable",
    "internal",
]


class Part(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """Base of nested objects inside client messages (unknown fields refused)."""


class OutPart(msgspec.Struct, kw_only=True, frozen=True):
    """Base of nested objects the bridge sends."""


ClientSeed = Annotated[str, Meta(max_length=128, description=(
    "The asking player's browser's random value (crypto.getRandomValues, as text): in an open dice "
    "session every die of this request is derived from it too."))]
PhysicalDie = Annotated[int, Meta(ge=-1_000_000, le=1_000_000, description="A real die's value as read off the table.")]


class ClientMessage(
    msgspec.Struct, tag_field="type", kw_only=True, frozen=True, forbid_unknown_fields=True
):
    """Base of messages a client sends; ``v`` must be 1."""

    v: Literal[1] = 1


class Request(ClientMessage, kw_only=True, frozen=True):
    """Base of decision requests: work answered once per ``event_id`` and recorded in the audit trail.

    A repeat gets the stored reply; nothing runs again. A refusal's ``error.ref`` is the
    ``event_id``. Any request may carry ``client_seed``: its dice derive from it in an open dice
    session. It may carry ``physical``, where the world allows: the real dice the roller threw, in
    the order the decision rolls them. Each is checked against its die; ``physical[i]`` names a
    value that die cannot show.
    """

    event_id: Id
    client_seed: ClientSeed | None = None
    physical: Annotated[list[PhysicalDie], Meta(max_length=64)] | None = None


class UserRequest(Request, kw_only=True, frozen=True):
    """A request a Foundry user makes.

    ``user_id`` (the Foundry user id) is checked against the actor's owners and recorded with the
    decision.
    """

    user_id: Id


class Query(ClientMessage, kw_only=True, frozen=True):
    """Base of the session's read-only questions (audit window, overlay).

    Answered with the same ``query_id``, never recorded. A refusal's ``error.ref`` is the ``query_id``.
    """

    query_id: Id


class BridgeMessage(msgspec.Struct, tag_field="type", kw_only=True, frozen=True):
    """Base of messages the bridge sends; ``v`` is always 1."""

    v: Literal[1] = 1


class Card(OutPart, kw_only=True, frozen=True):
    """A chat card ready to post: ``html`` has every outside string escaped. ``speaker_actor_id``
    and ``speaker_alias`` give the ChatMessage speaker; ``ruleset`` says who made it."""

    title: str
    html: str
    ruleset: str
    speaker_actor_id: str | None = None
    speaker_alias: str | None = None
