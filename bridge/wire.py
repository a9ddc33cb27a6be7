"""Every wire message between the Foundry module and the bridge: the protocol is this file.

The names follow ``shared/contract.md`` (wire contract v1); ``docs/protocol.md`` explains the flow
and ``schemas/`` holds the JSON Schema generated from these classes (``fate-bridge schema``).

Framing: one JSON object per text frame, tagged by ``"type"``, always with ``"v": 1``. Client
messages refuse unknown fields (``forbid_unknown_fields``); bridge messages are only encoded.
Every class is ``kw_only`` and ``frozen``.

Decoding goes through :func:`decode_client`, which turns every msgspec error into
:class:`~bridge.errors.BadMessage` or :class:`~bridge.errors.UnknownMessage` with the offending
field named (``error.field``), so one place maps decode failures to the contract.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, Union

import msgspec
from msgspec import Meta

from .errors import BadMessage, Refusal, UnknownMessage

PROTOCOL_VERSION = 1

# Limits on strings a client sends, so one frame cannot make us store or render megabytes.
Id = Annotated[str, Meta(min_length=1, max_length=128, description="An opaque identifier.")]
Name = Annotated[str, Meta(max_length=256, description="A display name; escaped wherever shown.")]
Code = Annotated[str, Meta(max_length=64, description="A SoHL shortcode such as 'aur' or 'archery'.")]
D100 = Annotated[int, Meta(ge=1, le=100, description="A d100 result, 1..100.")]

Visibility = Literal["public", "gm", "blind", "self"]
FateOption = Literal["everyone", "pc_only", "off"]
TestKind = Literal["skill", "attribute", "mystical", "fate"]
Outcome = Literal["lost", "kept", "spent", "choice"]
Choice = Literal["spend", "keep"]
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
    "internal",
]
WithheldReason = Literal[
    "fate_off",
    "not_pc",
    "no_aura",
    "aural_shock",
    "aura_governed",
    "mystical",
    "fate_test",
    "already_fated",
    "no_points",
]


class Part(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """Base of nested objects inside client messages (unknown fields refused)."""


class OutPart(msgspec.Struct, kw_only=True, frozen=True):
    """Base of nested objects the bridge sends."""


class ClientMessage(
    msgspec.Struct, tag_field="type", kw_only=True, frozen=True, forbid_unknown_fields=True
):
    """Base of messages a client sends; ``v`` must be 1."""

    v: Literal[1] = 1


class BridgeMessage(msgspec.Struct, tag_field="type", kw_only=True, frozen=True):
    """Base of messages the bridge sends; ``v`` is always 1."""

    v: Literal[1] = 1


# --- session -----------------------------------------------------------------------------------


class ClientInfo(Part, kw_only=True):
    """What the connecting module reports about itself and its Foundry world."""

    module_version: Annotated[str, Meta(max_length=64)]
    foundry_version: Annotated[str, Meta(max_length=64)]
    system_id: Annotated[str, Meta(max_length=64)]
    system_version: Annotated[str, Meta(max_length=64)]
    user_name: Name | None = None
    """The Foundry user holding the link (shown to a superseded browser)."""


class Hello(ClientMessage, tag="hello", kw_only=True):
    """First message of every connection. A forwarder (the GM's client) sends ``token``; an
    overlay viewer sends ``viewer_key`` instead. Wrong or missing credentials:
    ``error{code: "unauthorized"}`` and the connection is closed (close code 4001)."""

    world_id: Id
    token: Annotated[str, Meta(max_length=256)] | None = None
    viewer_key: Annotated[str, Meta(max_length=256)] | None = None
    client: ClientInfo | None = None


class WorldSettings(OutPart, kw_only=True):
    """A world's settings as the bridge applies them. ``fate_option`` is S12."""

    fate_option: FateOption = "everyone"


class Welcome(BridgeMessage, tag="welcome", kw_only=True):
    """Answer to a good ``hello``."""

    world_id: str
    bridge_version: str
    rulesets: list[str]
    settings: WorldSettings


class Settings(ClientMessage, tag="settings", kw_only=True):
    """The GM's client sets the world's settings (S12); answered with ``settings_applied``.
    ``event_id`` is optional here: settings are idempotent by nature."""

    event_id: Id | None = None
    fate_option: FateOption


class SettingsApplied(BridgeMessage, tag="settings_applied", kw_only=True):
    """The world's settings after a ``settings`` message."""

    ref: str | None
    settings: WorldSettings


class Ping(ClientMessage, tag="ping", kw_only=True):
    """Application heartbeat; answered with ``pong``."""


class Pong(BridgeMessage, tag="pong", kw_only=True):
    """Answer to ``ping``."""


class Error(BridgeMessage, tag="error", kw_only=True):
    """A refusal. ``ref`` is the ``event_id`` it answers (or null); ``field`` names the offending
    field as a dotted path (``"test.eml"``) when there is one."""

    code: ErrorCode
    message: str
    ref: str | None = None
    field: str | None = None


def error_reply(refusal: Refusal, ref: str | None) -> Error:
    """The ``error`` answering ``refusal`` (the one map from exception to contract)."""
    return Error(code=refusal.code, message=refusal.message, ref=ref, field=refusal.field)  # type: ignore[arg-type]


# --- sohl: Fate on a Success Test (DECISIONS.md S1-S12) ----------------------------------------


class Aura(Part, kw_only=True):
    """The actor's Aura attribute: its EML and whether it is disabled (S5 ``no_aura``)."""

    eml: int
    disabled: bool = False


class FatePoint(Part, kw_only=True):
    """One Fate Point source (a SoHL Fate Mystery). ``skill_code`` null = general point;
    ``charges`` null = unlimited (S7)."""

    point_id: Id
    name: Name
    skill_code: Code | None = None
    charges: Annotated[int, Meta(ge=0)] | None = None


class SohlActor(Part, kw_only=True):
    """Snapshot of the rolling actor, taken by the module when the test is sent.

    ``owner_user_ids`` lists every Foundry user with OWNER permission on the actor (GMs included,
    as in Foundry); ``player_owned`` is Foundry's ``actor.hasPlayerOwner`` (S5 ``not_pc``).
    ``aura`` null means the actor has no Aura attribute."""

    actor_id: Id
    name: Name
    player_owned: bool = False
    owner_user_ids: Annotated[list[Id], Meta(max_length=64)] = []
    aura: Aura | None = None
    aural_shock: bool = False
    fate_points: Annotated[list[FatePoint], Meta(max_length=64)] = []


class SohlTest(Part, kw_only=True):
    """The rolled Success Test, as on the chat card.

    ``eml``: the target the test was rolled at (S1: graded as is, not clamped). ``roll``: the d100.
    ``level_mod``: SoHL ``successLevelMod``, added after grading. ``basis``: the Skill Base basis
    attribute codes; when ``skill_base_formula`` is given the bridge derives them from it (S6) and
    ``basis`` is ignored. ``reported_level``: the level SoHL itself put on the card, if any (a
    difference is recorded, S1). ``item_id``: the tested item on the actor."""

    kind: TestKind
    code: Code
    name: Name
    eml: int
    roll: D100
    level_mod: int = 0
    basis: Annotated[list[Code], Meta(max_length=32)] = []
    skill_base_formula: Annotated[str, Meta(max_length=512)] | None = None
    basic: bool = False
    reported_level: int | None = None
    item_id: Id | None = None


class TestRolled(ClientMessage, tag="test_rolled", kw_only=True):
    """A Success Test appeared in chat; the bridge grades it and says whether Fate may touch it.
    Answered with ``test_graded``. Sending it again for an unfated ``message_id`` refreshes the
    snapshot (fresh charges); for a fated one, the stored grading comes back with
    ``already_fated``."""

    event_id: Id
    ruleset: Literal["sohl"]
    message_id: Id
    actor: SohlActor
    test: SohlTest
    visibility: Visibility = "public"


class FateOffer(OutPart, kw_only=True):
    """Whether Fate may touch the result (S5), the Fate ML (S4) and the applicable points in
    suggested order (S8). ``reasons`` is empty exactly when ``eligible``."""

    eligible: bool
    reasons: list[WithheldReason]
    fate_ml: int | None
    points: list[str]


class LevelMismatch(OutPart, kw_only=True):
    """S1: the level SoHL reported differs from the bridge's grading; the bridge's stands."""

    reported: int
    graded: int


class TestGraded(BridgeMessage, tag="test_graded", kw_only=True):
    """The bridge's grading of a ``test_rolled`` (S1-S3) and its Fate offer (S4-S8)."""

    event_id: str
    message_id: str
    level: int
    label: str
    success: bool
    critical: bool
    fate: FateOffer
    mismatch: LevelMismatch | None = None


class FateSpend(ClientMessage, tag="fate_spend", kw_only=True):
    """A user asks to spend ``point_id`` on the graded result ``message_id``. ``user_id`` is the
    Foundry user who clicked (the module relays Foundry's sender id, never a client claim);
    ``user_is_gm`` is Foundry's ``user.isGM`` for that user, looked up by the GM's module.
    Allowed for the actor's owners and GMs. Answered with ``fate_resolved`` or ``error``
    (not_found, not_eligible, already_fated, no_charges, forbidden)."""

    event_id: Id
    message_id: Id
    point_id: Id
    user_id: Id
    user_name: Name | None = None
    user_is_gm: bool = False


class FateChoice(ClientMessage, tag="fate_choice", kw_only=True):
    """The answer to a pending Fate Test Critical Success (S9): ``spend`` for +2 or ``keep`` for
    +1, by the player who spent or a GM (``user_is_gm``). Answered with ``fate_resolved``
    (outcome ``spent`` / ``kept``)."""

    event_id: Id
    message_id: Id
    choice: Choice
    user_id: Id
    user_name: Name | None = None
    user_is_gm: bool = False


class PointAfter(OutPart, kw_only=True):
    """The point used and what it holds after the Fate Test; ``charges_after`` null = unlimited."""

    point_id: str
    name: str
    charges_after: int | None


class Card(OutPart, kw_only=True):
    """A chat card ready to post: ``html`` has every outside string escaped. ``speaker_actor_id``
    and ``speaker_alias`` give the ChatMessage speaker; ``ruleset`` says who made it."""

    title: str
    html: str
    ruleset: str
    speaker_actor_id: str | None = None
    speaker_alias: str | None = None


class UpdateItem(OutPart, tag="update_item", tag_field="kind", kw_only=True):
    """Set ``path`` on the actor's embedded item to ``value`` (e.g. a Mystery's charges)."""

    actor_id: str
    item_id: str
    path: str
    value: int


class FatedFlag(OutPart, kw_only=True):
    """The value of the ``fated`` flag on a fated ChatMessage: the Fate Test's ``outcome``,
    whether a CS choice is ``pending``, the level after (null while pending) and the
    ``event_id`` that fated it (S11)."""

    outcome: Outcome
    pending: bool
    level_after: int | None
    event_id: str


class FlagMessage(OutPart, tag="flag_message", tag_field="kind", kw_only=True):
    """Set the module's flag ``key`` on ChatMessage ``message_id`` (scope ``fate-bridge``)."""

    message_id: str
    key: str
    value: FatedFlag


Effect = Union[UpdateItem, FlagMessage]


class FateResolved(BridgeMessage, tag="fate_resolved", kw_only=True):
    """The Fate Test and what it did (S9-S11). On ``outcome: "choice"`` (a Fate Test CS)
    ``level_after`` is null until a ``fate_choice`` arrives. ``fate_level`` is the Fate Test's own
    success level; ``gain`` the success levels added to the original test."""

    event_id: str
    message_id: str
    fate_roll: int
    fate_ml: int
    fate_level: int
    fate_label: str
    outcome: Outcome
    gain: int | None
    level_before: int
    label_before: str
    level_after: int | None
    label_after: str | None
    point: PointAfter
    card: Card
    effects: list[Effect]
    choice_by: list[str] = []


# --- audit (issue 3): the GM's "Fate audit" window ---------------------------------------------


class AuditQuery(ClientMessage, tag="audit_query", kw_only=True):
    """Ask for a page of the world's audit trail, newest first. Filters are optional and
    combine; ``since``/``until`` are ISO-8601 UTC timestamps (inclusive/exclusive);
    ``before_seq`` continues from a previous page's ``next_before``. Answered ``audit_page``."""

    query_id: Id
    actor_id: Id | None = None
    ruleset: Annotated[str, Meta(max_length=32)] | None = None
    outcome: Annotated[str, Meta(max_length=32)] | None = None
    since: Annotated[str, Meta(max_length=40)] | None = None
    until: Annotated[str, Meta(max_length=40)] | None = None
    before_seq: Annotated[int, Meta(ge=1)] | None = None
    limit: Annotated[int, Meta(ge=1, le=200)] = 50


class AuditSummary(OutPart, kw_only=True):
    """One audit record as the audit window lists it. ``seq`` is the world's audit sequence
    number; ``outcome`` is the Fate outcome, ``graded``, ``settings`` or the error code of a
    refusal; ``message_id`` links to the ChatMessage."""

    seq: int
    ts: str
    type: str
    event_id: str | None
    user_id: str | None
    ruleset: str | None
    message_id: str | None
    actor_id: str | None
    actor_name: str | None
    test_name: str | None
    outcome: str
    level_before: int | None
    level_after: int | None
    label_before: str | None
    label_after: str | None
    fate_roll: int | None
    point_name: str | None


class AuditPage(BridgeMessage, tag="audit_page", kw_only=True):
    """A page of audit records, newest first; ``next_before`` is the ``before_seq`` of the next
    (older) page, or null at the end."""

    query_id: str
    records: list[AuditSummary]
    next_before: int | None


# --- the unions --------------------------------------------------------------------------------

ClientMessages = Union[Hello, Ping, Settings, TestRolled, FateSpend, FateChoice, AuditQuery]
BridgeMessages = Union[Welcome, Pong, Error, SettingsApplied, TestGraded, FateResolved, AuditPage]
CLIENT_TYPES: tuple[type[ClientMessage], ...] = ClientMessages.__args__
BRIDGE_TYPES: tuple[type[BridgeMessage], ...] = BridgeMessages.__args__

_decoder = msgspec.json.Decoder(ClientMessages)
_encoder = msgspec.json.Encoder()
_probe = msgspec.json.Decoder(dict)

# msgspec puts the path at the end of its messages: "Expected `int`, got `str` - at `$.test.eml`".
_PATH = re.compile(r" - at `\$((?:\.[^.\[`]+|\[\d+\])*)`$")


def error_field(error_text: str) -> str | None:
    """The offending field of a msgspec error message as a dotted path.

    ``"Expected `int`, got `str` - at `$.test.eml`"`` -> ``"test.eml"``;
    ``"... - at `$.actor.fate_points[1].charges`"`` -> ``"actor.fate_points[1].charges"``;
    ``"Object missing required field `roll` - at `$.test`"`` -> ``"test.roll"``;
    ``"Object contains unknown field `x` - at `$.actor`"`` -> ``"actor.x"``; no path -> None
    (or the named field at top level).
    """
    path: str | None = None
    match = _PATH.search(error_text)
    if match:
        path = match.group(1).lstrip(".")
        error_text = error_text[: match.start()]
    named = re.match(r"Object (?:missing required|contains unknown) field `([^`]+)`", error_text)
    if named:
        return f"{path}.{named.group(1)}" if path else named.group(1)
    return path or None


def _tag_of(error_text: str) -> str:
    """The rejected tag quoted in ``"Invalid value 'nope' - at `$.type`"``."""
    match = re.match(r"Invalid value (.*) - at `\$\.type`$", error_text)
    return match.group(1) if match else "?"


def decode_client(frame: bytes | str) -> ClientMessages:
    """Decode one client frame into its message class.

    Raises :class:`BadMessage` (not JSON, not an object, missing/invalid ``type`` or a field that
    fails validation; ``field`` names it) or :class:`UnknownMessage` (a ``type`` the bridge does
    not know). Never raises anything else.
    """
    try:
        return _decoder.decode(frame)
    except msgspec.ValidationError as exc:
        text = str(exc)
        if "Invalid value" in text and text.endswith("- at `$.type`"):
            raise UnknownMessage(f"unknown message type {_tag_of(text)}", field="type") from None
        raise BadMessage(text, field=error_field(text)) from None
    except msgspec.DecodeError as exc:
        raise BadMessage(f"frame is not a JSON object: {exc}") from None


def encode(message: BridgeMessage | ClientMessage) -> bytes:
    """Encode one message as a JSON frame (UTF-8 bytes)."""
    return _encoder.encode(message)


def ref_of(frame: bytes | str) -> str | None:
    """Best-effort ``event_id`` of a frame that failed to decode, for ``error.ref``; None when
    the frame is not an object or carries no string ``event_id``."""
    try:
        value = _probe.decode(frame).get("event_id")
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return value if isinstance(value, str) and len(value) <= 128 else None
