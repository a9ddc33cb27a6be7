"""sohl: Fate on a Song of Heroic Lands Success Test (DECISIONS.md S1-S12)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from msgspec import Meta

from . import rules as _sohl_rules
from ...wire.control import FateOption, WorldSettings
from ...wire.base import BridgeMessage, Card, Code, D100, Id, Name, OutPart, Part, Request, UserRequest, Visibility

# Bounds far beyond any real test, so that numbers stay exact in JavaScript and on cards.
Eml = Annotated[int, Meta(ge=-1000, le=1000, description="A Mastery Level, as on the card (S1: not clamped to 5..95).")]
LevelShift = Annotated[int, Meta(ge=-20, le=20, description="Success levels.")]
Charges = Annotated[int, Meta(ge=0, le=10_000, description="Charges left.")]

TestKind = Literal["skill", "attribute", "mystical", "fate"]
Outcome = _sohl_rules.FateOutcome
Choice = Literal["spend", "keep"]
Evidence = Literal["raised_level", "fate_card"]  # what SoHL posted when it fated a test itself
# A Literal built from a rules table: msgspec and the schemas read it at run time; to a type
# checker, which cannot evaluate it, the value is a str.
if TYPE_CHECKING:
    WithheldReason = str
else:
    WithheldReason = Literal[_sohl_rules.WITHHELD_REASONS]  # S5, in the order reasons are reported
# S12: the world settings ``welcome`` carries are the shared wire's (``WorldSettings``, its
# ``FateOption``); their options are these rules' (tests/test_wire.py checks they agree).


class Aura(Part, kw_only=True, frozen=True):
    """The actor's Aura attribute: its EML and whether it is disabled (S5 ``no_aura``)."""

    eml: Eml
    disabled: bool = False


class FatePoint(Part, kw_only=True, frozen=True):
    """One Fate Point source (a SoHL Fate Mystery).

    ``skill_code`` null = general point. ``charges`` null = unlimited (S7). ``spend_seq`` is the
    ``spend_seq`` of the last ``update_item`` the module applied to this item (its flag
    ``fate-bridge.spend_seq``); null when none. The bridge subtracts the charges it spent after it.
    So a snapshot taken before the module applied a spend never gives that charge back.
    """

    point_id: Id
    name: Name
    skill_code: Code | None = None
    charges: Charges | None = None
    spend_seq: Annotated[int, Meta(ge=0, le=2**53)] | None = None


class SohlActor(Part, kw_only=True, frozen=True):
    """Snapshot of the rolling actor, taken by the module when the test is sent.

    ``owner_user_ids`` lists every Foundry user with OWNER permission on the actor, GMs included, as
    in Foundry. ``player_owned`` is Foundry's ``actor.hasPlayerOwner`` (S5 ``not_pc``). ``aura``
    null means the actor has no Aura attribute.
    """

    actor_id: Id
    name: Name
    player_owned: bool = False
    owner_user_ids: Annotated[list[Id], Meta(max_length=64)] = []
    aura: Aura | None = None
    aural_shock: bool = False
    fate_points: Annotated[list[FatePoint], Meta(max_length=64)] = []


class SohlTest(Part, kw_only=True, frozen=True):
    """The rolled Success Test, as on the chat card.

    - ``eml``: the target the test was rolled at (S1: graded as is, not clamped).
    - ``roll``: the d100.
    - ``level_mod``: SoHL ``successLevelMod``, added after grading.
    - ``basis``: the Skill Base basis attribute codes. When ``skill_base_formula`` is given, the
      bridge derives them from it (S6) and ignores ``basis``.
    - ``reported_level``: the level SoHL itself put on the card, if any. A difference is recorded (S1).
    - ``item_id``: the tested item on the actor.
    """

    kind: TestKind
    code: Code
    name: Name
    eml: Eml
    roll: D100
    level_mod: LevelShift = 0
    basis: Annotated[list[Code], Meta(max_length=32)] = []
    skill_base_formula: Annotated[str, Meta(max_length=512)] | None = None
    basic: bool = False
    reported_level: LevelShift | None = None
    item_id: Id | None = None


class TestRolled(Request, tag="test_rolled", kw_only=True, frozen=True):
    """A Success Test appeared in chat; the bridge grades it and says whether Fate may touch it.

    Answered with ``test_graded``. Sent again for an unfated ``message_id``, it refreshes the
    snapshot (fresh charges). For a fated one, the stored grading comes back with
    ``already_fated``.

    ``test_of``: the id of the first chat message of the same test, when this message is a later
    one. SoHL's GM edit posts the edited result as a new message. Absent, or equal to
    ``message_id``: the message is its test's first.

    Every message of one test is one result for S11. Once any of them is fated, the others grade
    with ``already_fated``, and a ``fate_spend`` on them is refused ``already_fated``.

    ``test_of`` must name a message the bridge graded. One it never graded links nothing; the
    message is then a test of its own. It may name an earlier later message, an edit of an edit.
    The bridge follows that message's own ``test_of`` to the first, however many edits stand
    between (S11: one test, one Fate). A message once graded with a ``test_of`` keeps that test.
    """

    ruleset: Literal["sohl"]
    message_id: Id
    test_of: Id | None = None
    actor: SohlActor
    test: SohlTest
    visibility: Visibility = "public"


class FatedOutside(Request, tag="fated_outside", kw_only=True, frozen=True):
    """SoHL fated a graded test itself, outside the bridge (S11).

    That happens with a client without the module, a message posted before it was enabled, or a GM
    on purpose. The module saw it in what SoHL posted. The bridge records it on the trail. The test,
    and every message of it, is then fated: graded with ``already_fated``, and a ``fate_spend`` on
    any of them is refused ``already_fated``. Answered with ``test_graded`` for ``message_id``, its
    offer re-stated.

    ``message_id``: the graded message of the test that SoHL's Fate touched. ``evidence`` is one of:

    - ``raised_level``: ``message_id`` is a later message of its test (``test_of``). It has the same
      d100, EML and level modifier as the test's first message, and a higher level reported by
      SoHL. SoHL's own Fate reposts the test with its level raised. The bridge checks this from
      what it graded, and refuses ``not_eligible`` otherwise.
    - ``fate_card``: SoHL's own Fate card was posted for the test, as ChatMessage
      ``card_message_id`` (required then).
    """

    message_id: Id
    evidence: Evidence
    card_message_id: Id | None = None


class FateOffer(OutPart, kw_only=True, frozen=True):
    """Whether Fate may touch the result (S5), the Fate ML (S4), and the applicable points in suggested order (S8).

    ``reasons`` is empty exactly when ``eligible``.
    """

    eligible: bool
    reasons: list[WithheldReason]
    fate_ml: int | None
    points: list[str]


class LevelMismatch(OutPart, kw_only=True, frozen=True):
    """S1: the level SoHL reported differs from the bridge's grading; the bridge's stands."""

    reported: int
    graded: int


class TestGraded(BridgeMessage, tag="test_graded", kw_only=True, frozen=True):
    """The bridge's grading of a ``test_rolled`` (S1-S3) and its Fate offer (S4-S8)."""

    event_id: str
    message_id: str
    level: int
    label: str
    success: bool
    critical: bool
    fate: FateOffer
    mismatch: LevelMismatch | None = None


class FateSpend(UserRequest, tag="fate_spend", kw_only=True, frozen=True):
    """A user asks to spend ``point_id`` on the graded result ``message_id``.

    ``user_id`` is the Foundry user who clicked. The module relays Foundry's sender id, never a
    client claim. ``user_is_gm`` is Foundry's ``user.isGM`` for that user, looked up by the GM's
    module. Allowed for the actor's owners and GMs. Answered with ``fate_resolved`` or ``error``
    (not_found, not_eligible, already_fated, no_charges, forbidden).
    """

    message_id: Id
    point_id: Id
    user_name: Name | None = None
    user_is_gm: bool = False


class FateChoice(UserRequest, tag="fate_choice", kw_only=True, frozen=True):
    """The answer to a pending Fate Test Critical Success (S9): ``spend`` for +2 or ``keep`` for +1.

    By the player who spent, or a GM (``user_is_gm``). Answered with ``fate_resolved``, outcome
    ``spent`` or ``kept``.
    """

    message_id: Id
    choice: Choice
    user_name: Name | None = None
    user_is_gm: bool = False


class PointAfter(OutPart, kw_only=True, frozen=True):
    """The point used and what it holds after the Fate Test; ``charges_after`` null = unlimited."""

    point_id: str
    name: str
    charges_after: int | None


class UpdateItem(OutPart, tag="update_item", tag_field="kind", kw_only=True, frozen=True):
    """Set ``path`` on the actor's embedded item to ``value``, e.g. a Mystery's charges.

    The same update sets the item's flag ``fate-bridge.spend_seq`` to ``spend_seq``. That is the
    bridge's number for this spend; it comes back in the point's snapshot.
    """

    actor_id: str
    item_id: str
    path: str
    value: int
    spend_seq: int


class FatedFlag(OutPart, kw_only=True, frozen=True):
    """The value of the ``fated`` flag on a fated ChatMessage (S11).

    The Fate Test's ``outcome``; whether a CS choice is ``pending``; the level after (null while
    pending); and the ``event_id`` that fated it.
    """

    outcome: Outcome
    pending: bool
    level_after: int | None
    event_id: str


class FlagMessage(OutPart, tag="flag_message", tag_field="kind", kw_only=True, frozen=True):
    """Set the module's flag ``key`` on ChatMessage ``message_id`` (scope ``fate-bridge``)."""

    message_id: str
    key: str
    value: FatedFlag


Effect = UpdateItem | FlagMessage


class FateResolved(BridgeMessage, tag="fate_resolved", kw_only=True, frozen=True):
    """The Fate Test and what it did (S9-S11).

    On ``outcome: "choice"`` (a Fate Test CS), ``level_after`` is null until a ``fate_choice``
    arrives. ``fate_level`` is the Fate Test's own success level. ``gain`` is the success levels
    added to the original test.
    """

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


class Settings(Request, tag="settings", kw_only=True, frozen=True):
    """The GM's client sets the world's settings (S12); answered with ``settings_applied``.
    ``event_id`` is optional here: settings are idempotent by nature."""

    event_id: Id | None = None
    fate_option: FateOption


class SettingsApplied(BridgeMessage, tag="settings_applied", kw_only=True, frozen=True):
    """The world's settings after a ``settings`` message."""

    ref: str | None
    settings: WorldSettings


CLIENT = (Settings, TestRolled, FateSpend, FateChoice, FatedOutside)
BRIDGE = (SettingsApplied, TestGraded, FateResolved)
