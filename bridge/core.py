"""The decision core: one decoded request + the world's state + dice -> everything the shells need.

Sans-I/O, in the manner of python-websockets' ``protocol.py`` and h11 (``shared/STYLE.md``): no
network, no clock, no randomness of its own. :func:`decide` is the one call a decision makes. The
session decodes and admits a request. It runs :func:`decide` inside ``Store.decide``, on the world's
state in memory. It hands the :class:`~bridge.record.Decision` to the store (state writes, audit
entry, reply frame). It hands it to the sockets too: the overlay frame, and the log keys in
``kept``. Inside :func:`decide`, in this order:

1. The request's dice table (:func:`bridge.fairness.decide.table_for`): a provable world's fair
   dice, physical dice, the secret fallback. It reads the plain state; the seed is never read
   through the recording.
2. :func:`rule`, the routed handler, on a :class:`~bridge.record.RecordingState` and
   :class:`~bridge.record.RecordingDice`. Every read and die is recorded. A
   :class:`~bridge.errors.Refusal` (its words as data) becomes the refused
   :class:`~bridge.ruleset.Outcome`. Its message is translated then (:func:`refused`).
3. Every die used (``check_all_used``), and the "Physical dice" line on the card
   (:func:`bridge.fairness.decide.with_physical_mark`).
4. The audit entry, the overlay frame and the reply frame (:func:`bridge.replies.decision_frame`).

``fate-bridge audit verify`` re-derives a record through :func:`decide` too
(:func:`bridge.audit.rederive`). It uses the record's reads, and the record's dice as the dice table
(``dice_table``). The table's output is what the record holds. A fair die needs its session's seed,
which the record does not hold. So :func:`bridge.fairness.trail.check_dice` recomputes those from a
revealed seed. Steps 2 to 4 run as they ran live.

:func:`routes` is the one route table of every client message. It holds:

- the installed rulesets' decisions and queries (:mod:`bridge.registry`).
- the dice layer's (:mod:`bridge.fairness.decide`). Dice sessions, settings and overrides belong
  to every ruleset, not to one.
- the shared messages the session answers itself (:data:`SHARED`).

The session admits a message by its state, then makes one lookup:
``routes()[type(message)].serve(session, message, dice)``.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from . import i18n, registry, wire
from .dice import Dice
from .errors import Refusal
from .fairness import decide as fairness
from .fairness.provable import TableDice
from .replies import decision_frame, error_reply
from .record import AuditEntry, Decision, RecordingDice, RecordingState, sorted_json
from .ruleset import Handler, Outcome, Query, Refused
from .state import WorldState


class Shell(Protocol):
    """What answers a message once its route is known: the session (:class:`bridge.session.Session`).

    It has one coroutine per kind of route. Each returns what the session sends (its ``Reply``)."""

    async def decide(self, message: wire.Request, dice: Dice) -> Any: ...

    async def answer(self, message: wire.ClientMessage, route: Answers) -> Any: ...

    async def hello(self, message: wire.Hello) -> Any: ...

    async def register(self, message: wire.Register) -> Any: ...

    async def pong(self, message: wire.Ping) -> Any: ...

    async def audit_page(self, message: wire.AuditQuery) -> Any: ...

    async def check_receipts(self, message: wire.ReceiptsCheck) -> Any: ...

    async def report(self, message: wire.AuditReport) -> Any: ...

    async def overlay_info(self, message: wire.OverlayInfo) -> Any: ...

    async def overlay_control(self, message: wire.OverlayControl) -> Any: ...


@dataclass(frozen=True, slots=True)
class Decides:
    """A decision, a ruleset's or the dice layer's.

    :func:`decide` runs ``handler`` inside ``Store.decide``, recorded. ``refused`` gives a refusal's
    audit columns."""

    handler: Handler
    refused: Refused

    def serve(self, shell: Shell, message: Any, dice: Dice) -> Awaitable[Any]:
        """The shell's answer: the decision, recorded (:meth:`Shell.decide`)."""
        return shell.decide(message, dice)


@dataclass(frozen=True, slots=True)
class Answers:
    """A read-only query, a ruleset's or the dice layer's.

    The shell runs ``query`` on the world's state inside ``Store.read``. It is never recorded."""

    query: Query

    def serve(self, shell: Shell, message: Any, dice: Dice) -> Awaitable[Any]:
        """The shell's answer: the query run on the world's state (:meth:`Shell.answer`)."""
        return shell.answer(message, self)


@dataclass(frozen=True, slots=True)
class Serves:
    """A shared message the shell answers itself, through the :class:`Shell` coroutine ``handle`` calls.

    These are ``hello``, ``register``, ``ping``, and the audit window's and the overlay's queries."""

    handle: Callable[[Shell, Any], Awaitable[Any]]

    def serve(self, shell: Shell, message: Any, dice: Dice) -> Awaitable[Any]:
        """The shell's answer: its own coroutine for the message (``handle``); no dice."""
        return self.handle(shell, message)


Route = Decides | Answers | Serves
"""How one client message class is answered; ``route.serve(shell, message, dice)`` answers it."""

SHARED: dict[type, Serves] = {
    wire.Hello: Serves(lambda shell, message: shell.hello(message)),
    wire.Register: Serves(lambda shell, message: shell.register(message)),
    wire.Ping: Serves(lambda shell, message: shell.pong(message)),
    wire.AuditQuery: Serves(lambda shell, message: shell.audit_page(message)),
    wire.ReceiptsCheck: Serves(lambda shell, message: shell.check_receipts(message)),
    wire.AuditReport: Serves(lambda shell, message: shell.report(message)),
    wire.OverlayInfo: Serves(lambda shell, message: shell.overlay_info(message)),
    wire.OverlayControl: Serves(lambda shell, message: shell.overlay_control(message)),
}
"""The shared messages (no ruleset's, nor the dice layer's) and the shell's coroutine for each."""


@functools.lru_cache(maxsize=1)
def _routes_of(protocol: registry.Protocol) -> dict[type, Route]:
    rulesets = registry.installed()
    dice_handlers = fairness.handlers([r.id for r in rulesets])
    table: dict[type, Route] = dict(SHARED)
    for ruleset in rulesets:
        table.update({kind: Decides(handler, ruleset.refused) for kind, handler in ruleset.handlers.items()})
        table.update({kind: Answers(query) for kind, query in ruleset.queries.items()})
    table.update({kind: Decides(handler, fairness.refused) for kind, handler in dice_handlers.items()})
    table.update({kind: Answers(query) for kind, query in fairness.QUERIES.items()})
    return table


def routes() -> dict[type, Route]:
    """The route table: every client message class of the wire union -> its :data:`Route`.

    The union is :mod:`bridge.registry`'s. The table is built once per list of installed rulesets.
    It comes from their handlers and queries, the dice layer's (:mod:`bridge.fairness.decide`) and
    :data:`SHARED`."""
    return _routes_of(registry.protocol())


def named_decision(message: wire.Request) -> tuple[str, Refusal] | None:
    """The earlier decision ``message`` names, as ``(target, refusal)``; None for a request naming none.

    For ``gm_override`` it is ``target_event_id``: a decision's event id, or the id of the chat
    message showing it. The refusal is ``not_found``
    (:func:`bridge.fairness.decide.named_decision`).

    The world must hold that decision (:meth:`bridge.store.base.Store.holds_decision`). A decision
    cannot ask. Its state is the world's records, not its trail, and every read it makes is replayed
    from its record. So the shell asks the store before :func:`decide`, and answers the refusal
    itself. Nothing is decided or recorded, as for a frame that does not decode. And a trail written
    before the check replays as it was decided."""
    return fairness.named_decision(message)


def rule(message: wire.Request, state: WorldState, dice: Dice) -> Outcome:
    """The handler's :class:`~bridge.ruleset.Outcome` of one request.

    The request is of any installed ruleset, or of the dice layer (sohl's ``settings`` included).
    Its :class:`~bridge.errors.Refusal` propagates. :func:`decide` makes it the refused Outcome
    (:func:`refused`) and undoes what the handler wrote. Raises ``TypeError`` for a message that is
    not a decision: ``hello``, ``ping``, ``audit_query``. The session answers those."""
    return _decides(message).handler(message, state, dice)


def _decides(message: wire.ClientMessage) -> Decides:
    """The route of a decision message; ``TypeError`` for any other message."""
    route = routes().get(type(message))
    if not isinstance(route, Decides):
        raise TypeError(f"{type(message).__name__} is not a decision message")
    return route


def refused(message: wire.Request, refusal: Refusal, state: WorldState, language: str) -> Outcome:
    """The :class:`~bridge.ruleset.Outcome` of ``message`` refused with ``refusal``.

    The refusal comes from its handler, or from the dice table before it ran. An example: a die of a
    provable world with no dice session. The Outcome holds:

    - the ``error`` reply: ``ref`` is the ``event_id``, its message is in ``language``
      (:func:`bridge.replies.error_reply`).
    - its ruleset's refusal columns (:attr:`Ruleset.refused <bridge.ruleset.Ruleset.refused>`).
    - the code and field, as log keys."""
    error = error_reply(refusal, message.event_id, language)
    columns = _decides(message).refused(message, error, state)
    return Outcome(error, columns, None, {"code": error.code, "field": error.field}, refused=True)


def decide(message: wire.Request, state: WorldState, dice: Dice, *, message_bytes: bytes,
           new_seed: Callable[[int], bytes], language: str,
           dice_table: Callable[[WorldState], tuple[TableDice, str | None]] | None = None) -> Decision:
    """Decide one request: the one call a decision makes into the core.

    - ``state``: the world's state. ``state.audit_seq()`` gives the audit record number the decision
      will get.
    - ``dice``: the bridge's secret dice. A dice session's fair dice and physical dice replace them
      (:func:`bridge.fairness.decide.table_for`).
    - ``message_bytes``: the request as the trail keeps it (:func:`bridge.record.sorted_json`). The
      caller hashed it already.
    - ``new_seed(n)``: n secret bytes, a dice session's seed.
    - ``language``: the world's, for the cards and refusal texts. This is presentation: the audit
      ignores it.
    - ``dice_table(state)``: replaces step 1, inside the decision. It makes the decision's dice table
      and the id of its dice session. A :class:`~bridge.errors.Refusal` it raises refuses the request,
      as the live table's does. None is the live path: :func:`bridge.fairness.decide.table_for` makes
      them. ``audit verify`` passes one that makes a :class:`bridge.audit.ReplayTable` of the
      record's dice. It checks them against the chain's dice settings. ``dice`` and ``new_seed`` are
      then not used.

    Returns the :class:`~bridge.record.Decision`. It holds the reply frame and ``ok``; False means a
    refusal, whose writes are dropped. It holds the audit entry: reads, dice, draws, reply, columns.
    ``kept`` is a pair: the encoded ``overlay_card`` frame or None, and the log keys of the
    decision's line. Raises ``TypeError`` for a message that is not a decision."""
    recording, rolled = RecordingState(state), RecordingDice(dice)
    table, dice_session = None, None
    with i18n.using(language):
        try:
            # the dice table reads the open dice session on the plain state: its seed is never
            # recorded before the reveal (bridge.fairness.decide)
            if dice_table is None:
                table, dice_session = fairness.table_for(message, state, seq=state.audit_seq,  # type: ignore[attr-defined]
                                                         fallback=dice, new_seed=new_seed,
                                                         ruleset_of=registry.ruleset_of)
            else:
                table, dice_session = dice_table(state)
            rolled = RecordingDice(table)
            outcome = rule(message, recording, rolled)
            if not outcome.refused:
                table.check_all_used()
                outcome = fairness.with_physical_mark(outcome, rolled.rolled, table.draws)
        except Refusal as refusal:
            outcome = refused(message, refusal, state, language)
    ok = not outcome.refused
    draws = table.draws if table is not None and table.draws else None
    event_id = message.event_id
    audit = AuditEntry(type=str(message.__struct_config__.tag), event_id=event_id,
                       user_id=message.user_id if isinstance(message, wire.UserRequest) else None,
                       message=message_bytes, reads=recording.reads, dice=rolled.rolled,
                       reply=sorted_json(outcome.reply), ok=ok, summary=outcome.columns,
                       draws=draws, dice_session=dice_session)
    overlay = None if outcome.card is None else _overlay_frame(state.world_id, outcome.card_key or event_id,
                                                               outcome.card)
    # every client builds its Foundry Roll from the rolls it carries; a replay
    # rebuilds the same bytes from the audit record (bridge.replies)
    frame = decision_frame(outcome.reply, rolled.rolled, draws)
    return Decision(frame, ok, audit, kept=(overlay, outcome.log))


def _overlay_frame(world_id: str, key: str | None, card: wire.Card) -> bytes:
    """The encoded ``overlay_card`` of a public result under ``key``.

    A later card with the same key replaces it on the overlay. The speaker's actor id stays with the
    GM."""
    shown = msgspec.structs.replace(card, speaker_actor_id=None)
    return wire.encode(wire.OverlayCard(world_id=world_id, ruleset=card.ruleset, card=shown, key=key))
