"""Dice decisions: dice sessions, dice settings, GM overrides, and each decision's dice table.

Every decision of any ruleset rolls with the dice table :func:`table_for` gives. This is not a
ruleset but a layer of the decision core (:mod:`bridge.core`) that every ruleset gets. It
imports no ruleset and no registry. The core routes its messages (:func:`handlers`,
:data:`QUERIES`, :func:`refused`) and wraps every ruleset's decision in its dice table.

Pure like every handler: ``(request, state, dice) -> Outcome``. The one thing a handler cannot
make is the secret seed. It has no randomness of its own, and anything it reads is recorded in
the audit trail. So :func:`table_for` draws the seed, called by the core on the plain,
unrecorded state. It uses the injected ``new_seed`` and stores the seed under ``dice.secret``.
The start handler reads only the public offer (``dice.offer``: session id and commitment). So
the seed is read through the recording state exactly once, by ``dice_session_end``. Its record
is the reveal.

When is "the commitment posted"? The bridge counts it as posted once the ``dice_session_start``
decision is committed to the world's chain. Its reply, the commitment, goes only to the GM's
module, which posts it to chat and the overlay. From then on every die is derived. Before that,
with no open session, a world with ``provable`` dice refuses every roll (``forbidden``, field
``dice_session``). Any other world rolls the bridge's secret dice, marked ``secret`` in the
trail.

Record kinds (world state):

- ``dice.settings``/``world``: :class:`~bridge.fairness.wire.DiceSettings`.
- ``dice.session``/``current``: :class:`CurrentSession`.
- ``dice.offer``/``next``.
- ``dice.secret``/session id: the seed. Never sent, never logged, never recorded before the reveal.
- ``dice.override``/target event id.
"""

from __future__ import annotations

import functools
import html
from collections.abc import Callable, Sequence

import msgspec

from .. import wire as shared
from ..errors import BadMessage, Forbidden, NotEligible, NotFound, Text
from ..i18n import N_, _
from ..ruleset import Handler, Outcome, Query, log_fields
from ..state import WorldState
from ..dice import Dice
from ..cards import CardTemplates
from . import wire
from .provable import Draw, OpenSession, SEED_BYTES, TableDice, commitment, fingerprint, session_id

RULESET_ID = "dice"  # the audit columns' ruleset of dice decisions
TITLE = N_("dice sessions")  # what the audit report heads its decisions with
# The audit ``outcome`` values of dice decisions in words (as bridge.ruleset.Ruleset.outcome_names).
OUTCOME_NAMES = {"committed": N_("Dice session started"), "revealed": N_("Dice session revealed"),
                 "settings": N_("settings"), "override": N_("GM override")}
SETTINGS_KIND, CURRENT_KIND, OFFER_KIND, SECRET_KIND, OVERRIDE_KIND = (
    "dice.settings", "dice.session", "dice.offer", "dice.secret", "dice.override")

render_card = CardTemplates(__package__).render


class CurrentSession(msgspec.Struct, kw_only=True, frozen=True):
    """The world's open dice session (``session_id`` None: none open)."""

    session_id: str | None = None
    commitment: str | None = None


class Offer(msgspec.Struct, kw_only=True, frozen=True):
    """The commitment the shell made for a ``dice_session_start`` (public: no seed)."""

    session_id: str
    commitment: str


class SecretSeed(msgspec.Struct, kw_only=True, frozen=True):
    """A dice session's seed (hex). Read only by :func:`table_for` and the reveal."""

    seed: str


class Override(msgspec.Struct, kw_only=True, frozen=True):
    """The last GM override of a decision: who, what, why. The time is its audit record's."""

    by_user_id: str
    result: str
    values: list[int]
    reason: str
    session_id: str | None


DEFAULT_SETTINGS = wire.DiceSettings()  # frozen: one shared instance, not one per decision
_NO_SESSION = CurrentSession()


def settings_of(state: WorldState) -> wire.DiceSettings:
    """The world's dice settings (defaults when never set)."""
    return state.get(SETTINGS_KIND, "world", wire.DiceSettings) or DEFAULT_SETTINGS


def current_of(state: WorldState) -> CurrentSession:
    """The world's open dice session (``session_id`` None when none)."""
    return state.get(CURRENT_KIND, "current", CurrentSession) or _NO_SESSION


def table_for(message: shared.ClientMessage, state: WorldState, *, seq: Callable[[], int], fallback: Dice,
              new_seed: Callable[[int], bytes],
              ruleset_of: Callable[[shared.ClientMessage], str | None]) -> tuple[TableDice, str | None]:
    """The dice one decision rolls with, and the open dice session's id (or None).

    It runs in the core (:func:`bridge.core.decide`) on the plain state, inside the decision's
    transaction, before the handler. ``seq()`` gives the audit record number the decision will get.
    For ``dice_session_start`` it draws the seed (``new_seed(32)``) and stores it with its public
    offer. Both are rolled back if the start is refused. ``ruleset_of(message)`` gives the id of the
    ruleset the request belongs to; the core's registry knows it. It is asked only for physical
    dice. Raises :class:`~bridge.errors.Forbidden` (field ``physical``) for physical dice in a
    ruleset the world does not allow them for.
    """
    if isinstance(message, wire.DiceSessionStart):
        seed = new_seed(SEED_BYTES)
        committed = commitment(seed)
        sid = session_id(committed)
        state.put(SECRET_KIND, sid, SecretSeed(seed=seed.hex()))
        state.put(OFFER_KIND, "next", Offer(session_id=sid, commitment=committed))
    settings = settings_of(state)
    physical: list[int] | None = getattr(message, "physical", None)
    check_physical(message, settings, ruleset_of)
    current = current_of(state)
    open_session = None
    if current.session_id is not None:
        secret = state.get(SECRET_KIND, current.session_id, SecretSeed)
        assert secret is not None, "an open dice session always has its seed"
        open_session = OpenSession(session_id=current.session_id, seed=bytes.fromhex(secret.seed))
    table = TableDice(world_id=state.world_id, seq=seq, client_seed=getattr(message, "client_seed", None),
                      session=open_session, physical=physical, fallback=fallback,
                      required=settings.provable)
    return table, current.session_id


def check_physical(message: shared.ClientMessage, settings: wire.DiceSettings,
                   ruleset_of: Callable[[shared.ClientMessage], str | None]) -> None:
    """Refuse physical dice (``message.physical``) in a ruleset the world's dice ``settings`` do not allow.

    Raises :class:`~bridge.errors.Forbidden` (field ``physical``). Nothing happens for a request
    without physical dice. The live dice table checks it (:func:`table_for`). So does a replay of
    the record against the chain's settings (``bridge.audit.rederive``).
    """
    if getattr(message, "physical", None) is None:
        return
    ruleset = ruleset_of(message)
    if ruleset not in settings.physical_rulesets:
        allowed = ", ".join(settings.physical_rulesets) or Text(N_("none"))
        raise Forbidden(N_("physical: this world does not allow physical dice for %(ruleset)s "
                           "(allowed for: %(allowed)s); the GM can allow them in the dice settings"),
                        {"ruleset": ruleset or Text(N_("this request")), "allowed": allowed}, field="physical")


def _require_gm(message: wire._GmRequest, refusal: str) -> None:
    """Refuse ``forbidden`` (field ``user_id``) with the msgid ``refusal`` unless a GM asks."""
    if not message.user_is_gm:
        raise Forbidden(refusal, field="user_id")


def _columns(message: shared.ClientMessage, outcome: str, detail: str | None = None) -> shared.AuditColumns:
    return shared.AuditColumns(ruleset=RULESET_ID, outcome=outcome, detail=detail,
                               message_id=getattr(message, "message_id", None))


def _done(message: shared.ClientMessage, reply: shared.BridgeMessage, outcome: str,
          detail: str | None = None, card: shared.Card | None = None) -> Outcome:
    """The outcome of a dice decision; ``card`` goes to the world's overlay viewers too."""
    columns = _columns(message, outcome, detail)
    return Outcome(reply, columns, card, log_fields(columns))


def start(message: wire.DiceSessionStart, state: WorldState, dice: Dice) -> Outcome:
    """Open a dice session on the offer the shell made (:func:`table_for`).

    Refused ``not_eligible`` while one is open.
    """
    _require_gm(message, N_("only a GM may start a dice session"))
    current = current_of(state)
    if current.session_id is not None:
        raise NotEligible(N_("a dice session is open already (commitment %(fingerprint)s): end it first "
                             "(dice_session_end)"), {"fingerprint": fingerprint(current.commitment or "")},
                          field="type")
    offer = state.get(OFFER_KIND, "next", Offer)
    assert offer is not None, "the session makes the offer before the decision"
    state.put(CURRENT_KIND, "current", CurrentSession(session_id=offer.session_id, commitment=offer.commitment))
    short = fingerprint(offer.commitment)
    card = render_card("commitment.html.j2", title=_("Dice session started"), ruleset=RULESET_ID,
                       session_id=offer.session_id, fingerprint=short)
    reply = wire.DiceSessionStarted(event_id=message.event_id, session_id=offer.session_id,
                                    commitment=offer.commitment, fingerprint=short, card=card)
    return _done(message, reply, "committed", f"commitment {short}", card)  # on the overlay too


def end(message: wire.DiceSessionEnd, state: WorldState, dice: Dice) -> Outcome:
    """Close the open dice session and reveal its seed; refused ``not_found`` when none is open."""
    _require_gm(message, N_("only a GM may end a dice session"))
    current = current_of(state)
    if current.session_id is None or current.commitment is None:
        raise NotFound(N_("no dice session is open (start one with dice_session_start)"), field="type")
    secret = state.get(SECRET_KIND, current.session_id, SecretSeed)
    assert secret is not None, "an open dice session always has its seed"
    state.put(CURRENT_KIND, "current", CurrentSession())
    short = fingerprint(current.commitment)
    card = render_card("reveal.html.j2", title=_("Dice session revealed"), ruleset=RULESET_ID,
                       session_id=current.session_id, fingerprint=short, seed=secret.seed)
    reply = wire.DiceSessionRevealed(event_id=message.event_id, session_id=current.session_id,
                                     commitment=current.commitment, fingerprint=short,
                                     seed=secret.seed, card=card)
    return _done(message, reply, "revealed", f"commitment {short}", card)


def save_settings(message: wire.SetDiceSettings, state: WorldState, dice: Dice, *,
                  installed: Sequence[str]) -> Outcome:
    """Replace the world's dice settings (GM only).

    An id not among the ``installed`` rulesets' is refused, naming it. The core passes them.
    """
    _require_gm(message, N_("only a GM may change the dice settings"))
    known = list(installed)
    for i, ruleset in enumerate(message.settings.physical_rulesets):
        if ruleset not in known:
            raise BadMessage(N_("settings.physical_rulesets[%(index)s]: unknown ruleset %(ruleset)r "
                                "(installed: %(installed)s)"),
                             {"index": i, "ruleset": ruleset, "installed": ", ".join(known)},
                             field=f"settings.physical_rulesets[{i}]")
    state.put(SETTINGS_KIND, "world", message.settings)
    reply = wire.DiceSettingsSaved(event_id=message.event_id, settings=message.settings)
    return _done(message, reply, "settings")


def override(message: wire.GmOverride, state: WorldState, dice: Dice) -> Outcome:
    """Record a GM's hand-set result for ``target_event_id`` (GM only): who, what, why, in which session.

    The GM's card always carries the override mark. The players' card carries it when the world's
    ``override_mark`` is ``everyone``. The audit trail always holds it. The shell checks first that
    the world holds the target (:func:`named_decision`). The state a handler reads holds the world's
    records, not its trail.
    """
    _require_gm(message, N_("only a GM may override a result"))
    settings, current = settings_of(state), current_of(state)
    state.put(OVERRIDE_KIND, message.target_event_id,
              Override(by_user_id=message.user_id, result=message.result, values=list(message.values),
                       reason=message.reason, session_id=current.session_id))
    marked = settings.override_mark == "everyone"
    card_of = functools.partial(render_card, "override.html.j2", title=_("Result"), ruleset=RULESET_ID,
                                result=message.result, values=list(message.values), reason=message.reason,
                                by_user=message.user_id)
    card = card_of(marked=marked)
    gm_card = card_of(marked=True)
    reply = wire.OverrideApplied(
        event_id=message.event_id, target_event_id=message.target_event_id, message_id=message.message_id,
        result=message.result, values=list(message.values), reason=message.reason,
        by_user_id=message.user_id, session_id=current.session_id, marked=marked, card=card,
        gm_card=gm_card)
    return _done(message, reply, "override", f"{message.result}: {message.reason}")


def named_decision(message: shared.ClientMessage) -> tuple[str, NotFound] | None:
    """The earlier decision ``message`` names, with the refusal for a world that holds none.

    The refusal has field ``target_event_id`` and names it. This is ``gm_override``'s target: a
    decision's event id, or the id of the chat message showing it. None for any other message. The
    shell checks it before :func:`override` runs (see :func:`bridge.core.named_decision`).
    """
    if not isinstance(message, wire.GmOverride):
        return None
    target = message.target_event_id
    return target, NotFound(N_("target_event_id: this world holds no decision %(target)r to override: give the "
                               "event id of a decision that passed, or the id of the chat message showing its "
                               "result"), {"target": target}, field="target_event_id")


def status(message: wire.DiceStatus, state: WorldState) -> wire.DiceStatusReply:
    """The open session's commitment and the dice settings (a read-only query)."""
    current = current_of(state)
    return wire.DiceStatusReply(
        query_id=message.query_id, session_id=current.session_id, commitment=current.commitment,
        fingerprint=None if current.commitment is None else fingerprint(current.commitment),
        settings=settings_of(state))


def refused(message: shared.ClientMessage, error: shared.Error, state: WorldState) -> shared.AuditColumns:
    """The audit columns of a refused dice request: the error code."""
    return _columns(message, error.code)


def handlers(installed: Sequence[str]) -> dict[type, Handler]:
    """The dice decisions' handlers, for a bridge with the ``installed`` ruleset ids.

    The core builds its routes from these and the registry's.
    """
    return {wire.DiceSessionStart: start, wire.DiceSessionEnd: end,
            wire.SetDiceSettings: functools.partial(save_settings, installed=tuple(installed)),
            wire.GmOverride: override}


QUERIES: dict[type, Query] = {wire.DiceStatus: status}


def with_physical_mark(outcome: Outcome, values: list[int], draws: list[Draw]) -> Outcome:
    """``outcome`` with a "Physical dice" line under its card, when any of its dice was a real die.

    A real die is one the roller entered. Reply and overlay get the line alike; otherwise the
    outcome is unchanged. The line is card text, so re-deriving old records ignores it
    (``bridge.audit.verdict``). It is in the current language (``bridge.i18n.using``).
    """
    physical = [f"d{d.faces} {v}" for v, d in zip(values, draws) if d.source == "physical"]
    card = getattr(outcome.reply, "card", None)
    if not physical or not isinstance(card, shared.Card):
        return outcome
    line = html.escape(_("Physical dice: %(dice)s") % {"dice": ", ".join(physical)})
    marked = msgspec.structs.replace(card, html=card.html + f'<p class="fate-bridge dice-physical">{line}</p>')
    reply = msgspec.structs.replace(outcome.reply, card=marked)
    shown = None if outcome.card is None else msgspec.structs.replace(outcome.card, html=marked.html)
    return Outcome(reply, outcome.columns, shown, outcome.log)
