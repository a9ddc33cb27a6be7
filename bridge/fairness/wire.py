"""Dice messages: dice sessions (commit and reveal), the world's dice settings, GM overrides, and
the dice status query.

Every ruleset shares them; ``bridge.wire`` adds them to the union. Every decision request of any
ruleset may also carry ``client_seed`` and ``physical`` (``bridge.wire.base.ClientMessage``).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from ..wire.base import BridgeMessage, Card, Id, OutPart, Part, Query, UserRequest
from .provable import Draw

Reason = Annotated[str, Meta(min_length=1, max_length=500,
                             description="Why the GM set this result by hand (shown in the audit trail).")]
ResultText = Annotated[str, Meta(min_length=1, max_length=256, description="The result as the GM sets it.")]
HandDie = Annotated[int, Meta(ge=1, le=10_000, description="A die value set by hand.")]
RulesetId = Annotated[str, Meta(min_length=1, max_length=32)]
OverrideMark = Literal["everyone", "gm"]


class DiceSettings(Part, kw_only=True, frozen=True):
    """A world's dice settings.

    ``provable``: every die must come from an open dice session, or be a physical die. A roll with
    no open session is refused. ``physical_rulesets``: the rulesets whose rolls may be real dice
    entered by the roller (``physical`` on the request). ``override_mark``: who sees the "GM
    override" mark on an overridden card, ``everyone`` or only the ``gm``. The audit trail always
    shows it.
    """

    provable: bool = False
    physical_rulesets: Annotated[list[RulesetId], Meta(max_length=16)] = []
    override_mark: OverrideMark = "everyone"


class _GmRequest(UserRequest, kw_only=True, frozen=True):
    """A GM-only decision; anyone else is refused ``forbidden`` (field ``user_id``).

    ``user_is_gm`` is Foundry's ``user.isGM`` of ``user_id``, looked up by the GM's module.
    """
    user_is_gm: bool = False


class DiceSessionStart(_GmRequest, tag="dice_session_start", kw_only=True, frozen=True):
    """Start a dice session: the bridge draws a secret seed and commits to it.

    Answered ``dice_session_started``. Post its card: the commitment must be public before any roll.
    Refused ``not_eligible`` while a session is open.
    """


class DiceSessionStarted(BridgeMessage, tag="dice_session_started", kw_only=True, frozen=True):
    """The commitment.

    ``commitment`` is SHA-256 of the secret seed (hex). ``fingerprint`` is its short form.
    ``session_id`` is its first 16 hex digits. ``card``: the chat card to post.
    """

    event_id: str
    session_id: str
    commitment: str
    fingerprint: str
    card: Card


class DiceSessionEnd(_GmRequest, tag="dice_session_end", kw_only=True, frozen=True):
    """End the open dice session and reveal its seed. Answered ``dice_session_revealed``;
    refused ``not_found`` when no session is open."""


class DiceSessionRevealed(BridgeMessage, tag="dice_session_revealed", kw_only=True, frozen=True):
    """The reveal: ``seed`` (64 hex digits) hashes to ``commitment``.

    With an exported trail, anyone recomputes every die of the session (``fate-bridge audit
    verify``, ``/verify``).
    """

    event_id: str
    session_id: str
    commitment: str
    fingerprint: str
    seed: str
    card: Card


class SetDiceSettings(_GmRequest, tag="dice_settings", kw_only=True, frozen=True):
    """Replace the world's dice settings (GM only). Answered ``dice_settings_saved``; an unknown
    ruleset in ``physical_rulesets`` is refused naming it."""

    settings: DiceSettings


class DiceSettingsSaved(BridgeMessage, tag="dice_settings_saved", kw_only=True, frozen=True):
    """The dice settings now in force."""

    event_id: str
    settings: DiceSettings


class GmOverride(_GmRequest, tag="gm_override", kw_only=True, frozen=True):
    """A GM sets a result by hand (a "fudge"), as a decision of its own.

    ``target_event_id`` is the decision whose result it replaces. ``message_id`` is the ChatMessage
    showing it. ``result`` is the result as set; ``values`` the dice as set, if any. ``reason`` says
    why; it is required. Answered ``override_applied``. Refused ``not_found`` (field
    ``target_event_id``) when the world holds no passed decision under that event id or linked to
    that ChatMessage.
    """

    target_event_id: Id
    message_id: Id | None = None
    result: ResultText
    values: Annotated[list[HandDie], Meta(max_length=64)] = []
    reason: Reason


class OverrideApplied(BridgeMessage, tag="override_applied", kw_only=True, frozen=True):
    """The override on the record: who (``by_user_id``), what and why.

    ``session_id``: the open dice session, or null. ``marked``: players see the override mark (world
    setting ``override_mark``). ``card``: the card players see. ``gm_card``: the GM's, always marked.
    """

    event_id: str
    target_event_id: str
    message_id: str | None
    result: str
    values: list[int]
    reason: str
    by_user_id: str
    session_id: str | None
    marked: bool
    card: Card
    gm_card: Card


class DiceStatus(Query, tag="dice_status", kw_only=True, frozen=True):
    """Ask for the world's dice settings and open session (read-only). Answered ``dice_status_reply``."""


class DiceStatusReply(BridgeMessage, tag="dice_status_reply", kw_only=True, frozen=True):
    """The open session's commitment (all null when none is open) and the dice settings."""

    query_id: str
    session_id: str | None
    commitment: str | None
    fingerprint: str | None
    settings: DiceSettings


class RolledDie(OutPart, kw_only=True, frozen=True):
    """One die a decision rolled, as every decision reply that rolled dice lists it under ``rolls``.

    With it the module attaches one real Foundry Roll to the card. ``faces``, ``value`` and
    ``source`` (``fair``, ``physical`` or ``secret``).
    """

    faces: int
    value: int
    source: Literal["fair", "physical", "secret"]


CLIENT = (DiceSessionStart, DiceSessionEnd, SetDiceSettings, GmOverride, DiceStatus)
BRIDGE = (DiceSessionStarted, DiceSessionRevealed, DiceSettingsSaved, OverrideApplied, DiceStatusReply)


_rolls_encoder = msgspec.json.Encoder()


def attach_rolls(frame: bytes, values: list[int], draws: list[Draw]) -> bytes:
    """A decision's reply frame (a JSON object) with ``"rolls": [RolledDie...]`` added.

    These are the dice it rolled, in order. So every client shows these values and never rolls its
    own. Only the frame carries it. The audit record keeps the same dice as ``dice`` and ``draws``.
    """
    rolls = [RolledDie(faces=d.faces, value=v, source=d.source) for v, d in zip(values, draws)]
    return frame[:-1] + b',"rolls":' + _rolls_encoder.encode(rolls) + b"}"
