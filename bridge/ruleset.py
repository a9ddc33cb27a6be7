"""The plug-in interface of a ruleset: one typed :class:`Ruleset` value per game.

A ruleset lives in one folder, ``bridge/rulesets/<id>/``:

- ``rules.py``: pure tables and functions.
- ``wire.py``: its messages.
- ``decide.py``: its handlers.
- ``cards.py`` and ``templates/``: its chat cards.
- ``__init__.py``: exports ``RULESET``, a :class:`Ruleset`.

:mod:`bridge.registry` lists the installed rulesets. The wire union
(:func:`bridge.registry.decode_client`) is built from that list. So are the routes of the decision
core (:mod:`bridge.core`), the schemas and ``welcome``. Adding a ruleset is one folder and one line.
This module is the top of what a ruleset may import: nothing above it.

One decision is one call. A :data:`Handler` takes the request, the world's state and the dice. It
returns one :class:`Outcome`: the reply, its audit columns, the card overlay viewers may see, and
the keys of the decision's log line. Or it raises a :class:`~bridge.errors.Refusal` before writing
anything. Then :attr:`Ruleset.refused` gives the audit columns of that refusal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec

from .dice import Dice, DiceExhausted
from .errors import BadMessage
from .state import WorldState
from .wire import AuditColumns, BridgeMessage, Card, ClientMessage, Error, Query as QueryMessage, Request

class Outcome(msgspec.Struct, frozen=True):
    """Everything one decision produced, returned by its handler in one piece.

    It is a Struct, never encoded. It is made once per decision and is several times cheaper than a
    frozen dataclass.

    - ``reply``: the message sent back, stored under the request's ``event_id``.
    - ``columns``: what its audit record is listed and filtered by.
    - ``card``: the card the world's overlay viewers may see. None when whispered, blind, GM-only,
      or there is no card.
    - ``log``: the keys of the decision's one log line, ruleset-specific. The session adds
      ``event_id``, ``type``, ``replayed``...
    - ``card_key``: the overlay slot the card fills. A later card with the same key replaces it.
      sohl keys a Fate card by its ChatMessage, so the final card of a Fate Test CS replaces the
      pending one. None: the request's ``event_id``.
    - ``refused``: the reply is an ``error`` that :func:`bridge.core.refused` made from a Refusal. The
      decision's writes are undone."""

    reply: BridgeMessage
    columns: AuditColumns
    card: Card | None = None
    log: Mapping[str, object] = msgspec.field(default_factory=dict)
    card_key: str | None = None
    refused: bool = False


Handler = Callable[[Any, "WorldState", "Dice"], Outcome]
"""``(request, state, dice) -> Outcome``; raises a Refusal (nothing written) to refuse."""

Decider = Callable[[Any, "WorldState", "Dice"], "BridgeMessage"]
"""``(request, state, dice) -> reply``: a decision whose columns and card follow from the request
and the reply alone (:func:`handler` makes its :data:`Handler`)."""

Query = Callable[[Any, "WorldState"], "BridgeMessage"]
"""A read-only request (e.g. the Fate Chart dialog's catalog): answered from the world's state
without a decision: no event_id replay, no audit record, no dice, nothing written."""

Refused = Callable[[Any, "Error", "WorldState"], "AuditColumns"]
"""``(request, error, state) -> AuditColumns``: the columns of a refused request; it reads the
state only with ``state.peek`` (describing the refusal is not part of deciding it)."""


DICTIONARY_KINDS = ("audit", "records")  # the compressed columns: audit records, records' values


@dataclass(frozen=True, slots=True)
class Dictionary:
    """A zstd dictionary a ruleset ships for the stored rows of its decisions.

    What compression learns from a ruleset's records is the ruleset's (:mod:`bridge.store.blobs`).

    - ``id``: 32768..65535; zstd reserves those below. Unique among the installed rulesets. Every
      frame made with it names it. So it must stay shipped as long as such rows may be read.
    - ``kind``: the column it is for, one of :data:`DICTIONARY_KINDS`.
    - ``package``: the dotted name of the package whose ``dictionaries/<id>.zdict`` holds it, as
      package data. A ruleset passes its ``__name__``. The store reads the file; a ruleset touches
      none. ``python -m bridge.store.dictionary`` trains one.
    - ``since``: the first bridge version writing with it."""

    id: int
    kind: str
    package: str
    since: str

    def __post_init__(self) -> None:
        if not 32768 <= self.id <= 65535:
            raise ValueError(f"dictionary of {self.package}: id {self.id} is not in 32768..65535")
        if self.kind not in DICTIONARY_KINDS:
            raise ValueError(f"dictionary {self.id}: kind {self.kind!r} is not one of {', '.join(DICTIONARY_KINDS)}")


@dataclass(frozen=True, slots=True)
class Era:
    """Rules a ruleset applied before a ruling changed them.

    They are kept so that audit trails decided then still re-derive (``audit verify``). ``name``
    says which ruling, e.g. ``"before H14"``. ``rules()`` is a context manager. Inside it the
    ruleset's handlers decide as they did.

    A record is re-derived under an era only when it does not follow from the current rules. It
    passes only when its signed reply and writes follow from that era's. The era is read from the
    record itself, never chosen by a request."""

    name: str
    rules: Callable[[], AbstractContextManager[None]]


@dataclass(frozen=True, slots=True)
class Recorded:
    """One decision of a ruleset, as the audit report reads it from the trail.

    ``seq`` is the record's number, in time order. ``columns`` are its audit columns: ``outcome``,
    ``actor_id``... ``reply`` is the reply it sent, as decoded JSON; ``{}`` when there was none."""

    seq: int
    columns: AuditColumns
    reply: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Tally:
    """A count the audit report keeps per actor and per session, in its "Fate spent and kept" tables.

    - ``key``: unique in its ruleset.
    - ``name``: the column's header and the chart's legend. An English msgid marked ``N_``.
    - ``count(decision)``: how much one of its ruleset's decisions (a :class:`Recorded`) adds. 0 for
      most.
    - ``color``: its bars in the per-actor chart, ``#rrggbb``. None: a table column only."""

    key: str
    name: str
    count: Callable[[Recorded], int]
    color: str | None = None


@dataclass(frozen=True, slots=True)
class ReportSection:
    """A section of the audit report a ruleset draws from its own decisions.

    - ``id``: the page's ``<section id>``, unique in its ruleset.
    - ``collect(decisions)``: its ruleset's :class:`Recorded` decisions, oldest first, maybe none ->
      its numbers, any value.
    - ``render(numbers)``: -> the section's HTML, ``<section id="...">...</section>``, in the current
      language. A ruleset renders a template of its ``templates/`` with
      :meth:`bridge.cards.CardTemplates.html`, and its charts with :mod:`bridge.charts`.

    It is rendered whether or not the period holds any of its decisions. It says so."""

    id: str
    collect: Callable[[Sequence[Recorded]], Any]
    render: Callable[[Any], str]


@dataclass(frozen=True, slots=True)
class ReportPart:
    """What a ruleset adds to the audit report (:mod:`bridge.report`).

    Every ruleset's decisions are counted there anyway: in its records and sessions, by outcome
    under its :attr:`Ruleset.title`. This is what comes beyond that.

    - ``d100``: its decisions roll the bridge's d100. Each die of a record, 1-100, joins the fair-d100
      test. ``d100(n)`` names n of them in the current language ("3 SoHL Fate Tests"). None: its
      dice are not d100s.
    - ``tallies``: its columns of the per-actor and per-session Fate tables (:class:`Tally`).
    - ``tally_note``: the sentence saying what they count. An English msgid marked ``N_``.
    - ``sections``: its own sections (:class:`ReportSection`), after the shared ones, in order."""

    d100: Callable[[int], str] | None = None
    tallies: tuple[Tally, ...] = ()
    tally_note: str = ""
    sections: tuple[ReportSection, ...] = ()


CardText = Callable[[BridgeMessage], "str | None"]
"""``reply -> text``: one of a ruleset's replies as lines of text for a terminal (``fate-bridge
resolve --cards``), or None for the usual text (its ``card`` and ``notice``; a refusal's line)."""


@dataclass(frozen=True, slots=True)
class Ruleset:
    """One game's plug-in: its id, its messages and how each is answered.

    - ``id``: the name announced in ``welcome.rulesets`` and stored in audit columns (``"sohl"``).
    - ``client``/``bridge``: the message classes it adds to the wire union. Each client one must be
      handled by ``handlers`` or ``queries``.
    - ``handlers``: decision messages -> :data:`Handler`.
    - ``refused``: the audit columns of a refusal.
    - ``queries``: read-only messages -> :data:`Query`.
    - ``settings``: the world-settings messages among ``client`` (e.g. sohl's S12 ``settings``). They
      are answered like any other decision.
    - ``dictionaries``: the zstd dictionaries its stored rows are compressed with
      (:class:`Dictionary`). The last of each kind writes; all of them read. None: its rows are
      compressed without one.
    - ``title``: the game's name as people read it, in the audit report's headings.
    - ``eras``: its earlier rules (:class:`Era`), newest first, for trails decided under them.
    - ``outcome_names``: each value its decisions put in the audit ``outcome`` column -> its words.
      A refusal's error code is aside (:data:`bridge.report.CODE_NAMES`). The words are English
      msgids marked ``N_``, shown translated. Codes stay in machine fields.
    - ``report``: what it adds to the audit report (:class:`ReportPart`). By default nothing; its
      decisions are still counted there.
    - ``card_text``: its replies as terminal text (:data:`CardText`), or None.
    - ``locale``: for a ruleset kept outside the bridge. The dotted name of the package whose
      ``locale/<lang>/LC_MESSAGES/messages.po`` translates its words (:func:`bridge.i18n.add_catalogs`).
      The built-in rulesets' words are in the bridge's catalog (docs/translating.md).

    Raises ``ValueError`` when a client message has no handler or query, or is not a
    ``wire.Request``. The session accepts nothing else from a ruleset."""

    id: str
    client: tuple[type[ClientMessage], ...]
    bridge: tuple[type[BridgeMessage], ...]
    handlers: Mapping[type, Handler]
    refused: Refused
    queries: Mapping[type, Query] = field(default_factory=dict)
    settings: tuple[type[ClientMessage], ...] = ()
    dictionaries: tuple[Dictionary, ...] = ()
    title: str = ""
    outcome_names: Mapping[str, str] = field(default_factory=dict)
    eras: tuple[Era, ...] = ()
    report: ReportPart = ReportPart()
    card_text: CardText | None = None
    locale: str | None = None

    def __post_init__(self) -> None:
        for kind, names in (("tally", [t.key for t in self.report.tallies]),
                            ("report section", [s.id for s in self.report.sections])):
            if len(set(names)) != len(names):
                raise ValueError(f"ruleset {self.id!r}: each {kind} needs its own id, got {', '.join(names)}")
        unhandled = [c.__name__ for c in self.client if c not in self.handlers and c not in self.queries]
        if unhandled:
            raise ValueError(f"ruleset {self.id!r}: no handler or query for {', '.join(unhandled)}")
        if not set(self.settings) <= set(self.handlers):
            raise ValueError(f"ruleset {self.id!r}: its settings messages must be among its handlers")
        loose = [c.__name__ for c in self.client
                 if not issubclass(c, Request) and not (c in self.queries and issubclass(c, QueryMessage))]
        if loose:
            raise ValueError(f"ruleset {self.id!r}: {', '.join(loose)} must derive from wire.Request "
                             "(or UserRequest): a ruleset's messages are requests with an event_id "
                             "(a read-only query may be a wire.Query, answered by its query_id)")


def log_fields(columns: AuditColumns) -> dict[str, object]:
    """The default log keys of a decision: its audit columns that are set (outcome, actor...)."""
    return {key: value for key, value in msgspec.structs.asdict(columns).items() if value is not None}


def visible_card(message: Any, reply: BridgeMessage) -> Card | None:
    """The usual public card: the reply's ``card`` when the request says its result is ``public``.

    Nothing for a request without ``visibility``: private unless a ruleset says so."""
    if getattr(message, "visibility", None) != "public":
        return None
    return getattr(reply, "card", None)


Columns = Callable[[Any, "BridgeMessage"], "AuditColumns"]

T = TypeVar("T")


def rolling(roll: Callable[[], T], hint: str = "") -> T:
    """What ``roll()``, a decision's use of its dice, returns.

    The production dice never fail. Scripted dice (``resolve`` lines, tests) may run out
    (``DiceExhausted``) or not fit the die (``ValueError``). That is the request's fault: a
    :class:`~bridge.errors.BadMessage` naming the field ``dice``. Its message is the dice's,
    followed by ``hint``."""
    try:
        return roll()
    except (DiceExhausted, ValueError) as exc:
        raise BadMessage(f"{exc}{hint}", field="dice") from None


def handler(reply_of: Decider, columns: Columns,
            card: Callable[[Any, BridgeMessage], Card | None] = visible_card) -> Handler:
    """A :data:`Handler` for a decision whose columns and card follow from the request and reply alone.

    ``reply_of(request, state, dice)`` decides. ``columns(request, reply)`` and ``card(request,
    reply)`` describe it. Its log keys are its columns (:func:`log_fields`)."""

    def handle(message: Any, state: WorldState, dice: Dice) -> Outcome:
        reply = reply_of(message, state, dice)
        listed = columns(message, reply)
        return Outcome(reply, listed, card(message, reply), log_fields(listed))

    handle.__doc__ = reply_of.__doc__
    handle.__wrapped__ = reply_of  # type: ignore[attr-defined]
    return handle
