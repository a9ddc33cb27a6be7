"""Control messages of a link: hello/welcome, ping/pong, error, and the world settings ``welcome`` carries.

:class:`WorldSettings` holds SoHL's S12 option today. The ``settings`` message that changes them,
and the rule that reads them, live in the sohl package, which imports this type. The shared wire
imports no ruleset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

import msgspec
from msgspec import Meta

from .base import BridgeMessage, ClientMessage, ErrorCode, Id, Name, OutPart, Part

FATE_OPTIONS = ("everyone", "pc_only", "off")  # S12: sohl's rules.FATE_OPTIONS (tests/test_wire.py)
# A Literal built from a rules table: msgspec and the schemas read it at run time; to a type
# checker, which cannot evaluate it, the value is a str.
if TYPE_CHECKING:
    FateOption = str
else:
    FateOption = Literal[FATE_OPTIONS]


class WorldSettings(OutPart, kw_only=True, frozen=True):
    """A world's settings as the bridge applies them. ``fate_option`` is S12."""

    fate_option: FateOption = "everyone"


Language = Annotated[str, Meta(max_length=35, pattern=r"^[A-Za-z]{2,8}([-_][A-Za-z0-9]{1,8})*$",
                                description="A language tag as Foundry writes it: 'en', 'de', 'pt-BR'.")]


class ClientInfo(Part, kw_only=True, frozen=True):
    """What the connecting module reports about itself and its Foundry world."""

    module_version: Annotated[str, Meta(max_length=64)]
    foundry_version: Annotated[str, Meta(max_length=64)]
    system_id: Annotated[str, Meta(max_length=64)]
    system_version: Annotated[str, Meta(max_length=64)]
    user_name: Name | None = None
    """The Foundry user holding the link (shown to a superseded browser)."""
    language: Language | None = None
    """The world's language, Foundry's ``game.i18n.lang`` (``"de"``, ``"pt-BR"``): the cards,
    notices and refusal messages of this world's decisions are written in it; a language the
    bridge has no catalog for (or none) gives English."""


class Hello(ClientMessage, tag="hello", kw_only=True, frozen=True):
    """First message of every connection. A forwarder (the GM's client) sends ``token``; an
    overlay viewer sends ``viewer_key`` instead. Wrong or missing credentials:
    ``error{code: "unauthorized"}`` and the connection is closed (close code 4001)."""

    world_id: Id
    token: Annotated[str, Meta(max_length=256)] | None = None
    viewer_key: Annotated[str, Meta(max_length=256)] | None = None
    client: ClientInfo | None = None


WorldId = Annotated[str, Meta(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_-]+$", description=(
    "A Foundry world id (game.world.id, the world's folder name under Data/worlds): letters, digits, "
    "'-' and '_', as Foundry's BasePackage.validateId allows."))]
InviteCodeText = Annotated[str, Meta(min_length=1, max_length=256, description=(
    "An invite code as the bridge's host handed it out (`fate-bridge world invite`): ID.SECRET."))]
RequestSecret = Annotated[str, Meta(min_length=22, max_length=256, description=(
    "A random value of the requesting browser (at least 128 bits, as base64url text), the same each "
    "time it asks: only the browser holding it collects the token once the host approves."))]


class Register(ClientMessage, tag="register", kw_only=True, frozen=True):
    """First message of a connection that registers ``world_id`` through an invite code, instead of ``hello``.

    See docs/protocol.md, Registration. It is answered with one of:

    - ``registered``: the world's token, to this connection alone.
    - ``registration_pending``: the code needs the host's approval. Send the same ``register``
      again, with the same ``request_secret``, after ``retry_seconds``.
    - ``error``.

    The bridge then closes the connection: 1000, or 4001 for a code it refuses. A world id the
    bridge knows is never registered or given a new token this way
    (``error{code: "forbidden", field: "world_id"}``).
    """

    world_id: WorldId
    invite_code: InviteCodeText
    request_secret: RequestSecret
    client: ClientInfo | None = None


class Registered(BridgeMessage, tag="registered", kw_only=True, frozen=True):
    """Answer to a ``register`` that registered ``world_id``.

    ``token`` is the world's token, for ``hello`` from now on. It is shown once; only its hash is
    stored.
    """

    world_id: str
    token: str


class RegistrationPending(BridgeMessage, tag="registration_pending", kw_only=True, frozen=True):
    """Answer to a ``register`` whose request waits for the host's approval (``fate-bridge world pending``).

    Ask again after ``retry_seconds`` with the same ``request_secret``.
    """

    world_id: str
    retry_seconds: int


class Welcome(BridgeMessage, tag="welcome", kw_only=True, frozen=True):
    """Answer to a good ``hello``.

    ``protocol_version`` is the wire protocol this bridge speaks (:data:`PROTOCOL_VERSION`, the
    ``v`` of every frame). ``max_frame_bytes`` is the largest frame it accepts; a larger one is
    closed with 1009. It is null when frames have no limit (``resolve``). The module refuses a
    larger request itself, and warns the GM when the protocol differs.
    """

    world_id: str
    bridge_version: str
    protocol_version: int
    max_frame_bytes: int | None
    rulesets: list[str]
    settings: WorldSettings


class Ping(ClientMessage, tag="ping", kw_only=True, frozen=True):
    """Application heartbeat; answered with ``pong``."""


class Pong(BridgeMessage, tag="pong", kw_only=True, frozen=True):
    """Answer to ``ping``."""


RetryAfter = Annotated[int, Meta(ge=0, description=(
    "Milliseconds to wait before sending the same request (same event_id) again; only on "
    "`unavailable`."))]


class Error(BridgeMessage, tag="error", kw_only=True, frozen=True):
    """A refusal.

    ``ref`` is the ``event_id`` it answers, or null. ``field`` names the offending field as a dotted
    path (``"test.eml"``) when there is one. ``retry_after_ms`` says when to send the request again.
    It is on ``unavailable`` alone, absent from every other error, so their frames are as before.
    """

    code: ErrorCode
    message: str
    ref: str | None = None
    field: str | None = None
    retry_after_ms: RetryAfter | msgspec.UnsetType = msgspec.UNSET


CLIENT = (Hello, Register, Ping)
BRIDGE = (Welcome, Registered, RegistrationPending, Pong, Error)
