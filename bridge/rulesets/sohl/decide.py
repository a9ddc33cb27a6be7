"""sohl decisions: grade a Success Test, roll and apply a Fate Test (DECISIONS.md S1-S12).

Pure: the world's state comes in as a :class:`~bridge.state.WorldState`, dice as an injected
:class:`~bridge.dice.Dice`. A refusal is raised as a :class:`~bridge.errors.Refusal` before
anything is written, so a refused request changes nothing.

Records (kinds):

- ``sohl.graded``, by ChatMessage id: the graded test and its snapshot.
- ``sohl.fate``, by ChatMessage id: the Fate Test rolled against it. Its existence marks the
  result fated (S11).
- ``sohl.spends``, by actor and point: the decision numbers that consumed a charge. So charges
  the module has not applied yet are counted.

One test, several messages (S11). SoHL's GM edit reposts a test as a new ChatMessage.
``test_rolled.test_of`` names the test's first message. It may name an earlier edit; that is
followed to the first and kept as the first (:func:`_first_message`). The test is fated when its
first message is (its ``sohl.fate``). It is also fated when its first message's graded record
names the message that was (``fated_by``). ``fated_by`` is written when a later message of the
test is fated. A message without ``test_of`` reads exactly what it read before ``test_of``
existed, so old trails re-derive.

Fated outside the bridge (S11). SoHL's own Fate, run where the module does not close it, is
reported by ``fated_outside``. The message it names gets ``fated_by`` and ``outside``. So does
the test's first message, for the others. ``fated_by`` is the message showing it: the raised
repost itself, or SoHL's Fate card. ``outside`` is the evidence. So the test reads fated exactly
as after a Fate of ours.
"""

from __future__ import annotations

from typing import TypedDict

import msgspec

from . import cards, wire
from ... import wire as shared
from ...ruleset import Handler, Outcome, rolling
from ...dice import Dice
from ...errors import AlreadyFated, BadMessage, Forbidden, Joined, NoCharges, NotEligible, NotFound, Text
from ...i18n import N_
from . import rules as sohl
from ...state import WorldState

RULESET = sohl.RULESET

# S5 in words, for a refusal (the codes stay in the reply's ``reasons``): the module's own words
# (foundry-module/lang FATE_BRIDGE.Reason.*).
REASON_NAMES = {
    "fate_off": N_("Fate is off in this world"), "not_pc": N_("not a player character"),
    "no_aura": N_("no usable Aura"), "aural_shock": N_("Aural Shock"), "aura_governed": N_("Aura-governed test"),
    "mystical": N_("Mystical Ability"), "fate_test": N_("a Fate Test"), "already_fated": N_("already fated"),
    "no_points": N_("no Fate Point left"),
}
# The audit ``outcome`` values of sohl's decisions in words (bridge.ruleset.Ruleset.outcome_names).
OUTCOME_NAMES = {
    "spent": N_("spent"), "kept": N_("kept"), "lost": N_("lost"), "choice": N_("choice pending"),
    "graded": N_("graded"), "fated_outside": N_("fated in SoHL"), "settings": N_("settings"),
}
FATED_FLAG = "fated"  # the module's flag on a fated ChatMessage (scope ``fate-bridge``)
CHARGES_PATH = "system.charges.value"  # where SoHL keeps a Mystery's charges
GRADED, FATE, SPENDS = "sohl.graded", "sohl.fate", "sohl.spends"


class GradedRecord(msgspec.Struct, kw_only=True, frozen=True, omit_defaults=True):
    """A graded ``test_rolled`` (S1-S3): the snapshot it was graded from, and the reply sent.

    - ``seq``: the world's decision sequence number when the snapshot arrived.
    - ``basis``: the Skill Base basis the bridge used (S6).
    - ``test_of``: the test's first message, when this one is a later message of it. None: this
      message is the first.
    - ``fated_by``: another message of the same test, whose Fate Test fated the test (S11 across
      messages). None when none is known here.
    - ``outside``: set with ``fated_by`` when SoHL's own Fate fated the test outside the bridge
      (``fated_outside``). It is the evidence the module saw.

    The last three are left out of the stored JSON when None. So a single-message test's record is
    stored as before.
    """

    message_id: str
    seq: int
    actor: wire.SohlActor
    test: wire.SohlTest
    visibility: wire.Visibility
    basis: list[str]
    level: int
    reply: wire.TestGraded
    test_of: str | None = None
    fated_by: str | None = None
    outside: wire.Evidence | None = None


class FateRecord(msgspec.Struct, kw_only=True, frozen=True):
    """The Fate Test rolled against a result (S9-S11). Its existence marks the result fated.

    ``pending`` is true while a Fate Test CS waits for ``fate_choice``. Then ``outcome`` is
    ``choice``, and ``gain`` and ``level_after`` are None. ``charges_before`` is the point's charges
    as the bridge counted them when the Fate Test was rolled (None = unlimited).

    Facts only: the card is rendered from them when a reply is made, in the asking world's language.
    Older bridges also kept the ``fate_resolved`` reply, card included, as ``reply``. Such a row
    still reads as this record; msgspec ignores the field. ``audit verify`` compares it by these
    fields (``bridge.derive.facts``).
    """

    message_id: str
    seq: int
    actor_id: str
    point_id: str
    charges_before: int | None
    fate_roll: int
    fate_ml: int
    fate_level: int
    outcome: wire.Outcome
    gain: int | None
    level_before: int
    level_after: int | None
    charges_after: int | None
    user_id: str
    pending: bool


class SpendLog(msgspec.Struct, kw_only=True, frozen=True):
    """The decision numbers that consumed a charge of one actor's point."""

    seqs: list[int] = []


def _spends_key(actor_id: str, point_id: str) -> str:
    return f"{actor_id}/{point_id}"


def _graded(state: WorldState, message_id: str) -> GradedRecord | None:
    return state.get(GRADED, message_id, GradedRecord)


def _fate(state: WorldState, message_id: str) -> FateRecord | None:
    return state.get(FATE, message_id, FateRecord)


def _test_of(message: wire.TestRolled) -> str | None:
    """The first message of the test ``message`` belongs to, None when it is that first one."""
    return None if message.test_of == message.message_id else message.test_of


def _first_message(state: WorldState, test_of: str) -> tuple[str, GradedRecord | None]:
    """The first message of the test a later message names as ``test_of``, and its grading.

    The grading is None when never graded. ``test_of`` may name another later message, a GM's edit
    of an edit. Its own ``test_of`` is followed to the first, however many edits stand between
    (S11: one test, one Fate). Reads ``test_of``'s grading, and more only along such a chain.
    """
    first = _graded(state, test_of)
    seen = {test_of}
    while first is not None and first.test_of is not None and first.test_of not in seen:
        test_of = first.test_of
        seen.add(test_of)
        first = _graded(state, test_of)
    return test_of, first


def _fated_elsewhere(state: WorldState, record: GradedRecord | None,
                     test_of: str | None) -> tuple[str | None, str | None]:
    """The message of the same test, other than ``record``'s own, that fated it; or None. S11 across messages.

    Also returns the test's first message: ``test_of`` followed to it (:func:`_first_message`).
    ``record`` is the message's stored grading; None: never graded. ``test_of`` is its test's first
    message or another earlier one; None: it is the first. For a first message it reads nothing
    more: its own record says when a later message was fated.
    """
    if record is not None and record.fated_by is not None:
        return record.fated_by, test_of
    if test_of is None:
        return None, None
    test_of, first = _first_message(state, test_of)
    if first is None:
        return None, test_of
    if first.fated_by is not None:
        return first.fated_by, test_of
    return (test_of if _fate(state, test_of) is not None else None), test_of


def _spent_since(state: WorldState, actor_id: str, point_id: str, seq: int) -> int:
    log = state.get(SPENDS, _spends_key(actor_id, point_id), SpendLog)
    return 0 if log is None else sum(1 for s in log.seqs if s > seq)


def _add_spend(state: WorldState, actor_id: str, point_id: str, seq: int) -> None:
    key = _spends_key(actor_id, point_id)
    log = state.get(SPENDS, key, SpendLog) or SpendLog()
    state.put(SPENDS, key, SpendLog(seqs=[*log.seqs, seq]))


# --- test_rolled -------------------------------------------------------------------------------


def _basis(test: wire.SohlTest) -> list[str]:
    """S6: the basis from the Skill Base formula when sent, else the client's ``basis``."""
    if test.skill_base_formula is not None:
        return sohl.skill_base_basis(test.skill_base_formula)
    return list(test.basis)


def _context(
    actor: wire.SohlActor,
    test: wire.SohlTest,
    basis: list[str],
    settings: wire.WorldSettings,
    already_fated: bool,
    points: list[wire.FatePoint],
) -> sohl.FateContext:
    aura = actor.aura
    return sohl.FateContext(
        fate_option=settings.fate_option,
        player_owned=actor.player_owned,
        aura_eml=None if aura is None else aura.eml,
        aura_disabled=aura is not None and aura.disabled,
        aural_shock=actor.aural_shock,
        test_kind=test.kind,
        test_code=test.code,
        basis=basis,
        already_fated=already_fated,
        points=points,
    )


def _offer(ctx: sohl.FateContext, actor: wire.SohlActor) -> wire.FateOffer:
    """S4, S5, S8: the Fate offer for a graded test."""
    reasons = sohl.withheld_reasons(ctx)
    usable_aura = None if "no_aura" in reasons else actor.aura
    return wire.FateOffer(
        eligible=not reasons,
        reasons=reasons,
        fate_ml=None if usable_aura is None else sohl.fate_ml(usable_aura.eml),
        points=[p.point_id for p in sohl.suggested_points(ctx.points, ctx.test_code)],
    )


def _current_points(actor: wire.SohlActor, state: WorldState) -> list[wire.FatePoint]:
    """The snapshot's points, less the charges the bridge consumed but the snapshot does not show.

    That is every spend after the last one the module applied to the item (its ``spend_seq``). All
    of them when the item shows none. This holds whenever the snapshot was taken.
    """
    points = []
    for point in actor.fate_points:
        if point.charges is not None:
            shown = point.spend_seq or 0
            spent = _spent_since(state, actor.actor_id, point.point_id, shown)
            if spent:
                point = msgspec.structs.replace(point, charges=max(0, point.charges - spent))
        points.append(point)
    return points


def _test_rolled(message: wire.TestRolled, state: WorldState, dice: Dice) -> wire.TestGraded:
    """S1-S8: grade the test, say whether Fate may touch it, remember the snapshot.

    A message of a test fated on another of its messages is graded afresh with ``already_fated`` (S11).
    """
    stored = _graded(state, message.message_id)
    if stored is not None and _fate(state, message.message_id) is not None:
        # S11: a fated result keeps the grading it was fated on; only the offer is re-stated.
        ctx = _context(stored.actor, stored.test, stored.basis, state.settings(), True,
                       _current_points(stored.actor, state))
        return msgspec.structs.replace(
            stored.reply, event_id=message.event_id, fate=_offer(ctx, stored.actor)
        )
    test_of = _test_of(message)
    if stored is not None and stored.test_of is not None:
        test_of = stored.test_of  # once graded as a later message of a test, it stays one
    fated_by, test_of = _fated_elsewhere(state, stored, test_of)  # test_of: the first message, kept
    test = message.test
    level = sohl.grade(test.roll, test.eml, test.level_mod)
    basis = _basis(test)
    seq = state.next_seq()
    ctx = _context(message.actor, test, basis, state.settings(), fated_by is not None,
                   _current_points(message.actor, state))
    mismatch = None
    if test.reported_level is not None and test.reported_level != level:
        mismatch = wire.LevelMismatch(reported=test.reported_level, graded=level)
    reply = wire.TestGraded(
        event_id=message.event_id,
        message_id=message.message_id,
        level=level,
        label=sohl.label(level, test.basic),
        success=sohl.is_success(level),
        critical=sohl.is_critical(level),
        fate=_offer(ctx, message.actor),
        mismatch=mismatch,
    )
    state.put(
        GRADED,
        message.message_id,
        GradedRecord(
            message_id=message.message_id,
            seq=seq,
            actor=message.actor,
            test=test,
            visibility=message.visibility,
            basis=basis,
            level=level,
            reply=reply,
            test_of=test_of,
            fated_by=fated_by,
            outside=stored.outside if stored is not None and stored.fated_by == fated_by else None,
        )
    )
    return reply


# --- fate_spend --------------------------------------------------------------------------------


def _require_owner(actor: wire.SohlActor, user_id: str, user_is_gm: bool) -> None:
    """Only the actor's owners (and GMs) may spend its Fate."""
    if not user_is_gm and user_id not in actor.owner_user_ids:
        raise Forbidden(
            N_("user %(user)s does not own %(actor)r and may not spend its Fate"),
            {"user": user_id, "actor": actor.name},
            field="user_id",
        )


def _fate_spend(message: wire.FateSpend, state: WorldState, dice: Dice) -> Outcome:
    """S5, S7-S11: check, roll the Fate Test, apply what it says."""
    record = _graded(state, message.message_id)
    if record is None:
        raise NotFound(N_("message %(message)s was never graded"), {"message": message.message_id},
                       field="message_id")
    actor, test = record.actor, record.test
    _require_owner(actor, message.user_id, message.user_is_gm)
    if _fate(state, message.message_id) is not None:
        raise AlreadyFated(N_("this result has been fated already (S11)"), field="message_id")
    fated_by = _fated_elsewhere(state, record, record.test_of)[0]
    if fated_by is not None:
        raise AlreadyFated(
            N_("this test has been fated already, on chat message %(message)s (S11)"), {"message": fated_by},
            field="message_id",
        )

    points = _current_points(record.actor, state)
    ctx = _context(actor, test, record.basis, state.settings(), False, points)
    reasons = [r for r in sohl.withheld_reasons(ctx) if r != "no_points"]
    if reasons:
        raise NotEligible(N_("Fate is withheld: %(reasons)s"),
                          {"reasons": Joined(tuple(Text(REASON_NAMES[r]) for r in reasons))}, field="message_id")
    point = next((p for p in points if p.point_id == message.point_id), None)
    if point is None:
        raise NotEligible(N_("%(actor)r holds no Fate Point %(point)s"),
                          {"actor": actor.name, "point": message.point_id}, field="point_id")
    if not sohl.point_covers(point, test.code):
        raise NotEligible(
            N_("%(point)r is specific to %(skill)r, not %(test)r (S7)"),
            {"point": point.name, "skill": point.skill_code, "test": test.code},
            field="point_id",
        )
    if not sohl.point_applies(point, test.code):
        raise NoCharges(N_("%(point)r has no charge left"), {"point": point.name}, field="point_id")

    assert actor.aura is not None  # no_aura would have been a reason
    fate_ml = sohl.fate_ml(actor.aura.eml)
    fate_roll = rolling(lambda: dice.roll(sohl.D100_FACES))
    fate_level = sohl.grade(fate_roll, fate_ml)
    effect = sohl.fate_test_effect(fate_level)
    seq = state.next_seq()
    pending = FateRecord(
        message_id=message.message_id,
        seq=seq,
        actor_id=actor.actor_id,
        point_id=point.point_id,
        charges_before=point.charges,
        fate_roll=fate_roll,
        fate_ml=fate_ml,
        fate_level=fate_level,
        outcome="choice",
        gain=None,
        level_before=record.level,
        level_after=None,
        charges_after=point.charges,
        user_id=message.user_id,
        pending=True,
    )
    reply = _settle(pending, effect, record, point.name, message.event_id, message.user_name, state)
    _mark_test_fated(state, record)
    return _fate_outcome(message, reply, record)


def _mark_test_fated(state: WorldState, record: GradedRecord) -> None:
    """A later message of a test was fated: its first message's record says so (``fated_by``).

    Every other message of the test reads it there (S11 across a test's messages).
    """
    if record.test_of is None:
        return
    first = _graded(state, record.test_of)
    if first is not None:
        state.put(GRADED, record.test_of, msgspec.structs.replace(first, fated_by=record.message_id))


def _raised_over_first(record: GradedRecord, first: GradedRecord) -> bool:
    """S11, ours: is ``record`` SoHL's own Fate raising the test, rather than a GM edit?

    SoHL's own Fate raises a test's stored level and reposts it otherwise unchanged. See SoHL 0.8.2
    fate-host.ts ``performFateTest``: ``bumpSuccessLevel``, then ``toChat``; and
    samples/sohl/captured ``fate-reposted-test``. It has the same d100, EML and level modifier as the
    test's first message, and a higher reported level. SoHL's GM edit changes the EML or the level
    modifier (``skill-test-edit-repost``: EML 55 -> 35, its reported level kept). ``record`` is the
    repost's grading; ``first`` is its test's first message's.
    """
    later, earlier = record.test, first.test
    if later.reported_level is None or earlier.reported_level is None:
        return False
    same = (later.roll, later.eml, later.level_mod) == (earlier.roll, earlier.eml, earlier.level_mod)
    return same and later.reported_level > earlier.reported_level


def _fated_outside(message: wire.FatedOutside, state: WorldState, dice: Dice) -> Outcome:
    """S11: SoHL fated a graded test itself.

    Unless the test is fated already, record it: ``fated_by`` and ``outside`` on the message and on
    its test's first message. Re-state the message's grading with ``already_fated``. Refusals:

    - ``not_found`` for a message never graded;
    - ``not_eligible`` for a ``raised_level`` the bridge's own gradings do not show;
    - ``bad_message`` for a ``fate_card`` without ``card_message_id``.
    """
    record = _graded(state, message.message_id)
    if record is None:
        raise NotFound(N_("message %(message)s was never graded"), {"message": message.message_id},
                       field="message_id")
    if message.evidence == "fate_card":
        if message.card_message_id is None:
            raise BadMessage(N_("a fate_card needs card_message_id, the chat message of SoHL's Fate card"),
                             field="card_message_id")
        shown_by = message.card_message_id
    else:
        first = None if record.test_of is None else _graded(state, record.test_of)
        if first is None or not _raised_over_first(record, first):
            raise NotEligible(
                N_("message %(message)s shows no level raised over its test's first message on the same roll"),
                {"message": message.message_id},
                field="evidence",
            )
        shown_by = message.message_id
    fated = _fate(state, message.message_id) is not None or _fated_elsewhere(state, record, record.test_of)[0] is not None
    if not fated:
        record = msgspec.structs.replace(record, fated_by=shown_by, outside=message.evidence)
        state.put(GRADED, message.message_id, record)
        if record.test_of is not None:
            first = _graded(state, record.test_of)
            if first is not None:
                state.put(GRADED, record.test_of, msgspec.structs.replace(first, fated_by=shown_by, outside=message.evidence))
    ctx = _context(record.actor, record.test, record.basis, state.settings(), True,
                   _current_points(record.actor, state))
    reply = msgspec.structs.replace(record.reply, event_id=message.event_id, fate=_offer(ctx, record.actor))
    columns = shared.AuditColumns(**_columns(message, record), outcome="fated_outside",
                                  level_before=record.level, label_before=record.reply.label,
                                  detail=message.evidence)
    log: dict[str, object] = {"message_id": message.message_id, "evidence": message.evidence,
                              "shown_by": shown_by, "recorded": not fated}
    return Outcome(reply, columns, None, log)


def _fate_choice(message: wire.FateChoice, state: WorldState, dice: Dice) -> Outcome:
    """S9: answer a pending Fate Test CS with spend (+2, charge) or keep (+1)."""
    fated = _fate(state, message.message_id)
    if fated is None or not fated.pending:
        raise NotFound(N_("no Fate choice is pending on message %(message)s"), {"message": message.message_id},
                       field="message_id")
    record = _graded(state, message.message_id)
    assert record is not None  # a Fate record is only written for a graded message
    if not message.user_is_gm and message.user_id != fated.user_id:
        raise Forbidden(
            N_("only the player who spent the Fate Point, or a GM, may choose spend or keep (S9)"),
            field="user_id",
        )
    point = next(p for p in _current_points(record.actor, state) if p.point_id == fated.point_id)
    effect = sohl.choice_effect(message.choice)
    if effect.consumes_charge and not sohl.point_applies(point, record.test.code):
        raise NoCharges(
            N_("%(point)r has no charge left to spend: choose keep (+1)"), {"point": point.name},
            field="choice",
        )
    fated = msgspec.structs.replace(fated, charges_before=point.charges)
    reply = _settle(fated, effect, record, point.name, message.event_id, message.user_name, state)
    return _fate_outcome(message, reply, record)


def _settle(
    fated: FateRecord,
    effect: sohl.FateEffect,
    record: GradedRecord,
    point_name: str,
    event_id: str,
    user_name: str | None,
    state: WorldState,
) -> wire.FateResolved:
    """Apply a Fate effect (S9, S10): charges, the new level, the card, the effects.

    Stores its facts; the card is in the reply only.
    """
    actor, test = record.actor, record.test
    effects: list[wire.Effect] = []
    charges = fated.charges_before
    gain = effect.gain
    if gain is None:  # a pending choice (S9): nothing applied yet
        level_after = None
    else:
        level_after = sohl.apply_gain(record.level, gain)
        charges = sohl.charges_after(fated.charges_before, bool(effect.consumes_charge))
        if charges is not None and charges != fated.charges_before:  # unlimited (None) never changes
            spend_seq = state.next_seq()
            _add_spend(state, actor.actor_id, fated.point_id, spend_seq)
            effects.append(wire.UpdateItem(actor_id=actor.actor_id, item_id=fated.point_id,
                                           path=CHARGES_PATH, value=charges, spend_seq=spend_seq))
    effects.append(
        wire.FlagMessage(
            message_id=record.message_id,
            key=FATED_FLAG,
            value=wire.FatedFlag(outcome=effect.outcome, pending=effect.outcome == "choice",
                                 level_after=level_after, event_id=event_id),
        )
    )
    card = cards.sohl_fate_card(
        cards.SohlFateCardData(
            message_id=record.message_id,
            actor_id=actor.actor_id,
            actor_name=actor.name,
            test_name=test.name,
            basic=test.basic,
            level_before=record.level,
            level_after=level_after,
            fate_roll=fated.fate_roll,
            fate_ml=fated.fate_ml,
            fate_level=fated.fate_level,
            outcome=effect.outcome,
            gain=gain,
            point_name=point_name,
            charges_after=charges,
            user_name=user_name,
            target=test.eml,
        )
    )
    reply = wire.FateResolved(
        event_id=event_id,
        message_id=record.message_id,
        fate_roll=fated.fate_roll,
        fate_ml=fated.fate_ml,
        fate_level=fated.fate_level,
        fate_label=sohl.label(fated.fate_level),
        outcome=effect.outcome,
        gain=gain,
        level_before=record.level,
        label_before=sohl.label(record.level, test.basic),
        level_after=level_after,
        label_after=None if level_after is None else sohl.label(level_after, test.basic),
        point=wire.PointAfter(point_id=fated.point_id, name=point_name, charges_after=charges),
        card=card,
        effects=effects,
        choice_by=[fated.user_id] if effect.outcome == "choice" else [],
    )
    state.put(
        FATE,
        record.message_id,
        msgspec.structs.replace(
            fated,
            outcome=effect.outcome,
            gain=gain,
            level_after=level_after,
            charges_after=charges,
            pending=effect.outcome == "choice",
        )
    )
    return reply


def _settings(message: wire.Settings, state: WorldState, dice: Dice) -> Outcome:
    """S12: the GM's client sets the world option."""
    settings = wire.WorldSettings(fate_option=message.fate_option)
    state.put_settings(settings)
    reply = wire.SettingsApplied(ref=message.event_id, settings=settings)
    return Outcome(reply, shared.AuditColumns(outcome="settings"), None, {"fate_option": settings.fate_option})


class _RecordColumns(TypedDict):
    """The audit columns :func:`_columns` gives, spread into ``AuditColumns``."""

    ruleset: str
    message_id: str | None
    actor_id: str | None
    actor_name: str | None
    test_name: str | None


def _columns(message: shared.ClientMessage, record: GradedRecord | None) -> _RecordColumns:
    """The audit columns every sohl record has: the ChatMessage, actor and test.

    From the request's snapshot, or the graded record a Fate request names.
    """
    source = message if isinstance(message, wire.TestRolled) else record
    actor = None if source is None else source.actor
    test = None if source is None else source.test
    return _RecordColumns(ruleset=sohl.RULESET, message_id=getattr(message, "message_id", None),
                          actor_id=None if actor is None else actor.actor_id,
                          actor_name=None if actor is None else actor.name,
                          test_name=None if test is None else test.name)


def _graded_outcome(message: wire.TestRolled, state: WorldState, dice: Dice) -> Outcome:
    """``test_rolled``'s Outcome: the grading, never a card; its log says the level and the offer."""
    reply = _test_rolled(message, state, dice)
    columns = shared.AuditColumns(**_columns(message, None), outcome="graded",
                                  level_before=reply.level, label_before=reply.label)
    log: dict[str, object] = {"message_id": reply.message_id, "level": reply.level,
                              "eligible": reply.fate.eligible, "reasons": reply.fate.reasons}
    if reply.mismatch is not None:
        log["reported_level"] = reply.mismatch.reported
    if _test_of(message) is not None:
        log["test_of"] = message.test_of
    return Outcome(reply, columns, None, log)


def _fate_outcome(message: wire.FateSpend | wire.FateChoice, reply: wire.FateResolved,
                  record: GradedRecord) -> Outcome:
    """A Fate Test's Outcome.

    Its card goes to the overlay when the test it was rolled on was posted ``public``
    (``GradedRecord.visibility``). A pending Fate Test CS card is shown, and its final card replaces
    it.
    """
    columns = shared.AuditColumns(
        **_columns(message, record), outcome=reply.outcome, level_before=reply.level_before,
        level_after=reply.level_after, label_before=reply.label_before,
        label_after=reply.label_after, fate_roll=reply.fate_roll, point_name=reply.point.name)
    log = {"message_id": reply.message_id, "fate_roll": reply.fate_roll, "fate_ml": reply.fate_ml,
           "outcome": reply.outcome, "level_before": reply.level_before,
           "level_after": reply.level_after, "point_id": reply.point.point_id,
           "charges_after": reply.point.charges_after}
    card = reply.card if record.visibility == "public" else None
    return Outcome(reply, columns, card, log, card_key=reply.message_id)


HANDLERS: dict[type, Handler] = {
    wire.Settings: _settings,
    wire.TestRolled: _graded_outcome,
    wire.FateSpend: _fate_spend,
    wire.FateChoice: _fate_choice,
    wire.FatedOutside: _fated_outside,
}


def refused(message: shared.ClientMessage, error: shared.Error, state: WorldState) -> shared.AuditColumns:
    """The audit columns of a refused sohl request: the graded record it names, and the error code.

    The record is peeked: it is not an input of the decision.
    """
    if isinstance(message, wire.Settings):
        return shared.AuditColumns(outcome=error.code)
    message_id = None if isinstance(message, wire.TestRolled) else getattr(message, "message_id", None)
    record = None if message_id is None else state.peek(GRADED, message_id, GradedRecord)
    return shared.AuditColumns(**_columns(message, record), outcome=error.code)
