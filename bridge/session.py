"""One client connection's protocol state: frames in, frames out; no sockets.

The server feeds every received frame to :meth:`Session.receive` and sends what it returns.
``fate-bridge resolve`` does the same with lines of stdin.

A session is ``new`` until one of three things. A good ``hello`` makes it the world's ``forwarder``
(``token``), or a read-only overlay ``viewer`` (``viewer_key``). Or it is told to close. A
``register`` (a world registered through an invite code) is always answered and closed.
:class:`SessionState` and the tables below it hold every rule of that machine: :data:`ACCEPTS`,
:data:`REFUSED`, :data:`HELLO_OPENS`. A viewer may only ``ping``. What it is sent besides (public
cards) comes from the forwarder's replies. :class:`Reply` says what the server must pass on to the
world's viewers.

Nothing here knows a ruleset or assembles a decision. The session decodes
(:func:`bridge.registry.decode_client`) and admits (the tables below). Then it makes one lookup in
the route table of every message (:func:`bridge.core.routes`). The route calls back one of its
coroutines (:class:`bridge.core.Shell`). For a decision, that runs :func:`bridge.core.decide` once
inside ``Store.decide``. What it returns goes to the store (reply frame, audit entry, state writes)
and to the sockets (the overlay frame, the log keys).

Every frame gets exactly one reply frame, with one exception. A decision may be refused because
another bridge process took the world's lease (:class:`~bridge.errors.LeaseLost`). Then nothing was
applied, and the connection is closed 4003 unanswered, as a superseded forwarder is.

Decode and validation errors are answered with ``error``; the connection stays open. Only
authentication failures close it. Errors map to the contract in one place (:func:`error_frame`).
Anything unexpected is logged with its traceback, and answered ``internal`` with no detail.
"""

from __future__ import annotations

import enum
import hmac
import math
import hashlib
import secrets
from collections.abc import Awaitable, Callable
from typing import Protocol

import msgspec
import structlog

from . import __version__, core, i18n, registry, times, wire
from .credentials import hash_token, new_token, parse_invite_code, token_matches
from .dice import Dice
from .metrics import Metrics
from .errors import (LeaseLost, WorldNotRegistered, BadMessage, Forbidden, Internal, NotFound, RateLimited,
                     Refusal, StorageUnavailable, Text, Unauthorized, Unavailable)
from .receipts import check_receipts
from .replies import error_frame
from .record import sorted_json
from .state import WorldState
from .store.base import AuditFilter, AuditRow, Decided, Decision, Registration, Store, World

# Draws the audit report page of a world's rows (world_id, since); the shell's, so the session
# itself needs no thread or clock: the server passes bridge.report.draw.
Reporter = Callable[[list[AuditRow], str, str | None], Awaitable[str]]

log = structlog.get_logger("fate_bridge")

CLOSE_UNAUTHORIZED = 4001  # bad or missing token, or first message not ``hello``
CLOSE_HELLO_TIMEOUT = 4002  # no ``hello`` within the server's hello timeout
CLOSE_SUPERSEDED = 4003  # another connection authenticated for the same world
CLOSE_VIEWER_TOO_SLOW = 4004  # an overlay viewer fell behind its queue or send timeout
CLOSE_DONE = 1000  # a ``register`` answered: the connection did what it came for
OVERLAY_PATH = "overlay"  # the overlay page, relative to the bridge's address (server.py serves it)
REQUEST_POLL_SECONDS = 30  # a waiting request's browser asks again this often: the host decides
# in minutes, and a connection every 30 s per waiting GM costs nothing


class RegistrationGate(Protocol):
    """What its server tells a session of registrations through invite codes.

    See :class:`bridge.limits.RegistrationGate`. ``address`` is the connection's. ``wait()`` gives
    the seconds before it may try one; 0 means now. ``take()`` counts a try."""

    address: str

    def wait(self) -> float: ...

    def take(self) -> None: ...


def viewer_key_matches(key: str, stored: str | None) -> bool:
    """Constant-time check of an overlay viewer key against the world's (None never matches).
    Viewer keys are stored in clear text: the overlay URL carries them (docs/security.md)."""
    if stored is None:
        return False
    return hmac.compare_digest(key.encode(), stored.encode())


def ref_of_message(message: wire.ClientMessage) -> str | None:
    """What an ``error`` answering ``message`` carries as ``ref``.

    A request's ``event_id``, a query's ``query_id``, else None (``hello``, ``ping``)."""
    if isinstance(message, wire.Request):
        return message.event_id
    if isinstance(message, wire.Query):
        return message.query_id
    return None


class SessionState(enum.Enum):
    """Where a connection stands.

    Everything that moves a session lives in the tables below, in the manner of h11's ``_state.py``.
    They say what each state accepts and what it says to the rest."""

    NEW = "new"  # connected, no good hello yet
    FORWARDER = "forwarder"  # the world's GM client (hello with the token; resolve starts here)
    VIEWER = "viewer"  # a read-only overlay page (hello with the viewer key)


ACCEPTS: dict[SessionState, tuple[type[wire.ClientMessage], ...]] = {
    SessionState.NEW: (wire.Hello, wire.Register),
    SessionState.FORWARDER: (wire.Ping, wire.Query, wire.Request, wire.Hello),  # a 2nd hello: trusted only
    SessionState.VIEWER: (wire.Ping,),
}
"""The message families each state accepts (``wire.Request``: every ruleset's decisions and
queries; ``wire.Query``: the audit window's and the overlay's questions)."""

REFUSED: dict[SessionState, tuple[type[Refusal], str, int | None]] = {
    SessionState.NEW: (Unauthorized, i18n.N_("the first message must be hello with the world's token"),
                       CLOSE_UNAUTHORIZED),
    SessionState.FORWARDER: (BadMessage, i18n.N_("hello was sent already on this connection"), None),
    SessionState.VIEWER: (Forbidden, i18n.N_("an overlay viewer may only send ping"), None),
}
"""What a message a state does not accept is answered: the refusal, its text (English, shown in
the connection's language), the close code (None: the connection stays open). ``field`` is
``type`` except for NEW (nothing was wrong with the message's fields: its place was)."""

HELLO_OPENS: dict[str, SessionState] = {"token": SessionState.FORWARDER, "viewer_key": SessionState.VIEWER}
"""A good ``hello`` moves NEW to the state its credential opens."""


INTERNAL_MESSAGE = i18n.N_("the bridge failed to handle this message; the GM can find details in its log")
UNAVAILABLE_MESSAGE = i18n.N_("the bridge cannot store results right now; nothing was applied, and the request "
                              "is sent again once it can (the GM can find the reason in its log)")


class Reply(msgspec.Struct, frozen=True):
    """What to do after a frame: send ``frames`` in order, then close with ``close_code`` if set.

    For the world's overlay viewers (the server's fan-out; ``resolve`` has none):

    - ``overlay_card``: an encoded ``overlay_card`` to send to each of them. It is kept as the
      world's last card.
    - ``overlay_action``: the GM's ``clear`` (send ``overlay_clear``) or ``replay`` (send the last
      card again).

    ``replayed``: the frame is a decision's stored reply, sent again for a repeated ``event_id``.
    Nothing was decided; ``resolve`` counts these."""

    frames: list[bytes]
    close_code: int | None = None
    overlay_card: bytes | None = None
    overlay_action: wire.OverlayAction | None = None
    replayed: bool = False


class Session:
    """The protocol state of one connection.

    ``trusted`` sessions (``fate-bridge resolve``) accept ``hello`` without a token, register the
    world on first use and start open on ``default_world``. ``reporter`` draws ``audit_report``
    pages (the server passes :func:`bridge.report.draw`; without it the query is refused). ``new_seed(n)``: n secret
    bytes, the seed of a dice session (``secrets.token_bytes``; tests may fix it). ``metrics``: the
    server's :class:`~bridge.metrics.Metrics`, told of each decision (None: nothing counted).
    ``registrations``: the connection's :class:`RegistrationGate` (the server's rate limits of
    registrations through invite codes); None refuses ``register`` (``resolve``).
    """

    def __init__(
        self,
        store: Store,
        dice: Dice,
        *,
        trusted: bool = False,
        default_world: str | None = None,
        max_frame_bytes: int | None = None,
        reporter: Reporter | None = None,
        new_seed: Callable[[int], bytes] = secrets.token_bytes,
        metrics: Metrics | None = None,
        registrations: RegistrationGate | None = None,
    ) -> None:
        self.store = store
        self.registrations = registrations
        self.metrics = metrics  # counts each decision and its latency (bridge/metrics.py)
        self.max_frame_bytes = max_frame_bytes  # the server's limit, told in ``welcome``
        self.dice = dice
        self.reporter = reporter
        self.new_seed = new_seed  # a dice session's secret seed (bridge.fairness)
        self.trusted = trusted
        self.world_id: str | None = default_world if trusted else None
        self.state = SessionState.FORWARDER if self.world_id is not None else SessionState.NEW
        self.holder = "another connection"  # who holds the link, as hello described it
        self.client: wire.ClientInfo | None = None  # what the forwarder's hello said of itself
        self.language = i18n.DEFAULT  # the world's, from the forwarder's hello (bridge.i18n)
        # what the hello matched: the token's hash (forwarder) or the viewer key; the server
        # closes the link once the world's no longer is (bridge/link_guard.py)
        self.credential: str | None = None
        self.log = log.bind(world_id=self.world_id) if self.world_id else log

    @property
    def is_open(self) -> bool:
        """True once the session is bound to a world (after ``hello``)."""
        return self.state is not SessionState.NEW

    @property
    def viewer(self) -> bool:
        """True once a hello with the viewer key opened it read-only."""
        return self.state is SessionState.VIEWER

    async def receive(self, frame: bytes | str, dice: Dice | None = None) -> Reply:
        """Handle one frame; returns the reply. ``dice`` overrides the session's dice for this
        frame only (``resolve`` lines with ``"dice"``). Never raises for bad input."""
        try:
            message = registry.decode_client(frame)
        except Refusal as refusal:
            self.log.info("bad_frame", code=refusal.code, field=refusal.field)
            close = None if self.is_open else CLOSE_UNAUTHORIZED
            return Reply([error_frame(refusal, wire.ref_of(frame), self.language)], close)
        try:
            return await self._handle(message, dice or self.dice)
        except LeaseLost:
            # another process serves the world now: nothing was applied; closed 4003 unanswered,
            # as a superseded forwarder is (the module rejects the request as superseded)
            self.log.info("lease_lost")
            return Reply([], CLOSE_SUPERSEDED)
        except StorageUnavailable as down:
            # the store logged the outage once when it began: no line (nor traceback) per request
            if self.metrics is not None:
                self.metrics.failed(registry.ruleset_of(message), Unavailable.code)
            unavailable = Unavailable(UNAVAILABLE_MESSAGE, retry_after_ms=down.retry_after_ms)
            return Reply([error_frame(unavailable, ref_of_message(message), self.language)])
        except WorldNotRegistered as gone:
            self.log.info("world_not_registered")
            return Reply([error_frame(Unauthorized(str(gone)), ref_of_message(message), self.language)],
                         CLOSE_UNAUTHORIZED)
        except Refusal as refusal:
            return Reply([error_frame(refusal, ref_of_message(message), self.language)])
        except Exception:
            self.log.exception("internal_error", type=type(message).__name__)
            if self.metrics is not None:
                self.metrics.failed(registry.ruleset_of(message))
            return Reply([error_frame(Internal(INTERNAL_MESSAGE), ref_of_message(message), self.language)])

    async def _handle(self, message: wire.ClientMessage, dice: Dice) -> Reply:
        accepted = isinstance(message, ACCEPTS[self.state])
        if isinstance(message, wire.Hello) and self.state is SessionState.FORWARDER:
            accepted = self.trusted  # resolve may name another world; a socket says hello once
        if not accepted:
            refusal_type, msgid, close = REFUSED[self.state]
            refusal = refusal_type(msgid) if self.state is SessionState.NEW else refusal_type(msgid, field="type")
            if self.state is SessionState.NEW:
                self.log.info("hello_refused", reason="not_hello", type=message.__struct_config__.tag)
            return Reply([error_frame(refusal, ref_of_message(message), self.language)], close)
        return await core.routes()[type(message)].serve(self, message, dice)

    # The coroutines of the route table (bridge.core.Shell), one per kind of route.

    async def answer(self, message: wire.ClientMessage, route: core.Answers) -> Reply:
        """A read-only query of a ruleset or of the dice layer: a Request or a Query.

        The store answers it on the world's state. It is never recorded."""
        assert self.world_id is not None
        language = self.language  # the store reads on its own thread: the language goes along

        def query(state: WorldState) -> wire.BridgeMessage:
            with i18n.using(language):
                return route.query(message, state)

        return Reply([wire.encode(await self.store.read(self.world_id, query))])

    async def pong(self, message: wire.Ping) -> Reply:
        """``ping`` -> ``pong``."""
        return Reply([wire.encode(wire.Pong())])

    async def audit_page(self, message: wire.AuditQuery) -> Reply:
        """``audit_query``: a page of the world's audit rows.

        Its times are read as the trail's instants (:func:`bridge.times.query_times`)."""
        assert self.world_id is not None
        since, until = times.query_times(message.since, message.until)
        query = msgspec.structs.replace(message, since=since, until=until)
        return Reply([wire.encode(await self.store.audit_page(self.world_id, query))])

    async def overlay_info(self, message: wire.OverlayInfo) -> Reply:
        """``overlay_info``: the world's viewer key (made on first ask) and the overlay's path."""
        assert self.world_id is not None
        key = await self.store.viewer_key(self.world_id, new_token())
        info = wire.OverlayInfoReply(query_id=message.query_id, world_id=self.world_id,
                                     viewer_key=key, path=OVERLAY_PATH)
        return Reply([wire.encode(info)])

    async def overlay_control(self, message: wire.OverlayControl) -> Reply:
        """``overlay_control``: the GM's ``clear`` or ``replay``, passed on to the viewers."""
        self.log.info("overlay_control", action=message.action)
        done = wire.OverlayControlled(query_id=message.query_id, action=message.action)
        return Reply([wire.encode(done)], overlay_action=message.action)

    async def check_receipts(self, query: wire.ReceiptsCheck) -> Reply:
        """Answer ``receipts_check`` against this world's audit rows (read-only, never recorded):
        see :func:`bridge.receipts.check_receipts`. Refused ``not_found`` when the bridge has no
        receipt key to check signatures with."""
        assert self.world_id is not None
        key = self.store.signing_key
        if key is None:
            raise NotFound(i18n.N_("this bridge has no receipt signing key, so it cannot check receipts: "
                                   "start it with `fate-bridge serve` (which makes one)"), field="receipts")
        stored = await self.store.audit_hashes(self.world_id, [r.seq for r in query.receipts], registered=True)
        return Reply([wire.encode(wire.ReceiptsChecked(query_id=query.query_id, results=check_receipts(
            key.public_key(), self.world_id, query.receipts, stored)))])

    async def report(self, query: wire.AuditReport) -> Reply:
        """Answer ``audit_report`` with the world's report page, drawn by the session's ``reporter``.

        Refused ``not_found`` without one (``resolve``). Refused ``bad_message`` naming ``since`` or
        ``until`` when it is not a time (:func:`bridge.times.query_times`)."""
        assert self.world_id is not None
        since, until = times.query_times(query.since, query.until)
        if self.reporter is None:
            raise NotFound(i18n.N_("this bridge does not draw reports here: use `fate-bridge audit report`"),
                           field="type")
        if await self.store.world(self.world_id) is None:
            raise WorldNotRegistered(f"world {self.world_id!r} is no longer registered")
        rows = await self.store.audit_rows(AuditFilter(world_id=self.world_id, since=since, until=until))
        with i18n.using(self.language):  # the page in the world's language
            html = await self.reporter(rows, self.world_id, since)
        return Reply([wire.encode(wire.AuditReportPage(query_id=query.query_id, html=html))])

    async def hello(self, hello: wire.Hello) -> Reply:
        """Open the connection for ``hello``'s world, as its forwarder (the token) or an overlay
        viewer (the viewer key): ``welcome``; else ``unauthorized`` and close 4001. A trusted
        session (``resolve``) registers an unknown world on the spot."""
        world = await self.store.world(hello.world_id)
        if self.trusted:
            if world is None:
                await self.store.add_world(hello.world_id, None)
                world = await self.store.world(hello.world_id)
        elif hello.token is None and hello.viewer_key is not None:
            return self._viewer_hello(hello, world)
        elif world is None or hello.token is None or not token_matches(hello.token, world.token_hash):
            return self._refuse_hello(
                hello, world, "hello_refused", "token",
                i18n.N_("unknown world or wrong token: register the world with `fate-bridge world add "
                        "WORLD_ID` and paste its token into the module settings"))
        assert world is not None
        self.world_id, self.state = world.world_id, HELLO_OPENS["token"]
        self.credential = world.token_hash
        self.log = log.bind(world_id=self.world_id)
        client = self.client = hello.client
        if client is not None and client.user_name:
            self.holder = f"{client.user_name} (Foundry {client.foundry_version})"
        self.language = i18n.normalize(client and client.language)
        if world.language != self.language:  # kept for what is made without this connection (audit report)
            await self.store.set_language(world.world_id, self.language)
        self.log.info(
            "hello",
            module_version=client and client.module_version,
            system_id=client and client.system_id,
            language=self.language,
        )
        return Reply([_welcome(world, self.max_frame_bytes)])

    def _refuse_hello(self, hello: wire.Hello, world: World | None, event: str, field: str,
                      message: str) -> Reply:
        """Log ``event`` with its reason, answer ``unauthorized`` naming ``field``, then close 4001.

        The log never holds the token or key. The client is not told which reason. ``message`` is a
        msgid, shown in the language the hello asks for (``client.language``)."""
        reason = "unknown_world" if world is None else f"wrong_{field}" if getattr(hello, field) else f"no_{field}"
        self.log.info(event, world_id=hello.world_id, reason=reason)
        language = i18n.normalize(hello.client.language if hello.client else None)
        return Reply([error_frame(Unauthorized(message, field=field), None, language)], CLOSE_UNAUTHORIZED)

    async def register(self, message: wire.Register) -> Reply:
        """Register a world through an invite code (docs/protocol.md, Registration).

        Or answer a browser asking again about its waiting request; no try is counted then. The
        answer goes to this connection alone, which is then closed. A try past the gate's rate is
        refused ``rate_limited`` before the store is read for it. The store decides the rest in one
        transaction (:meth:`Store.register_world`). One log line, never a secret."""
        gate = self.registrations
        if gate is None:
            raise NotFound(i18n.N_("this bridge takes no registrations here: use `fate-bridge world add`"),
                           field="type")
        world_id, token, code = message.world_id, new_token(), parse_invite_code(message.invite_code)
        language = i18n.normalize(message.client.language if message.client else None)
        outcome = await self.store.collect_registration(world_id, message.request_secret, hash_token(token))
        if outcome is None:
            if (wait := gate.wait()) > 0:
                log.info("registration_refused", world_id=world_id, reason="rate_limited", address=gate.address)
                seconds = math.ceil(round(wait, 3))  # 54.000000001 s of float arithmetic is 54
                text = Text(i18n.N_("too many registrations just now: try again in {seconds} s"),
                                 {"seconds": seconds}, braces=True)
                return Reply([error_frame(RateLimited(text), None, language)], CLOSE_DONE)
            gate.take()
            outcome = Registration.NO_CODE if code is None else await self.store.register_world(
                world_id, code, hash_token(token), hash_token(message.request_secret), gate.address)
        log.info("registration", world_id=world_id, outcome=outcome.value, address=gate.address,
                 invite_id=code and code.invite_id)
        return _registration_reply(world_id, outcome, token, language)

    def _viewer_hello(self, hello: wire.Hello, world: World | None) -> Reply:
        """A read-only overlay viewer: the world's viewer key opens it; anything else closes it."""
        assert hello.viewer_key is not None
        if world is None or not viewer_key_matches(hello.viewer_key, world.viewer_key):
            return self._refuse_hello(
                hello, world, "viewer_refused", "viewer_key",
                i18n.N_("unknown world or wrong viewer key: copy the overlay URL again from the module, "
                        "or print it with `fate-bridge world viewer-key WORLD_ID`"))
        self.world_id, self.state = world.world_id, HELLO_OPENS["viewer_key"]
        self.credential = world.viewer_key
        self.log = log.bind(world_id=self.world_id)
        self.log.info("viewer_hello")
        return Reply([_welcome(world, self.max_frame_bytes)])

    async def decide(self, message: wire.Request, dice: Dice) -> Reply:
        """A decision of a ruleset or of the dice layer.

        Run it in the store (:func:`bridge.core.decide`), log one line for it, and count it in the
        server's metrics. The metrics get its result, refusal code and seconds, when given.

        A new request may name an earlier decision the world does not hold
        (:func:`bridge.core.named_decision`). It is refused ``not_found`` before, unrecorded. A
        decision that passed with a public card also goes to the world's overlay viewers. A replayed
        ``event_id`` does not go again."""
        assert self.world_id is not None
        started = self.metrics.clock() if self.metrics is not None else 0.0
        event_id = message.event_id
        message_bytes = sorted_json(message)
        tag = message.__struct_config__.tag
        language, new_seed = self.language, self.new_seed
        named = core.named_decision(message)
        if (named is not None and not await self.store.holds_decision(self.world_id, named[0])
                and not await self.store.decided(self.world_id, event_id)):  # a repeat: its stored reply
            refusal = named[1]  # nothing decided, nothing recorded (bridge.core.named_decision)
            self.log.info("decision", event_id=event_id, type=tag, replayed=False, overlay=False,
                          code=refusal.code, field=refusal.field)
            if self.metrics is not None:
                self.metrics.decided(registry.ruleset_of(message), refusal.code, False,
                                     self.metrics.clock() - started)
            return Reply([error_frame(refusal, event_id, language)])

        def decision(state: WorldState) -> Decision:
            # runs on this event loop against the world's state in memory (Store.decide)
            return core.decide(message, state, dice, message_bytes=message_bytes, new_seed=new_seed,
                               language=language)

        request_hash = hashlib.sha256(message_bytes).hexdigest()
        decided = await self.store.decide(self.world_id, event_id, decision, request_hash)
        if decided.other_request:
            # The contract returns the stored reply for a repeated event_id whatever it carries;
            # a different request under an old event_id is a client bug worth a warning.
            self.log.warning("event_id_reused", event_id=event_id, type=tag)
        overlay, details = decided.kept if decided.kept is not None else (None, {})
        self.log.info("decision", event_id=event_id, type=tag, replayed=decided.replayed,
                      overlay=overlay is not None, **details)
        if self.metrics is not None:
            code = details.get("code")  # only a refusal's log keys hold one (bridge.core.refused)
            self.metrics.decided(registry.ruleset_of(message), code if isinstance(code, str) else None,
                                 decided.replayed, self.metrics.clock() - started)
        return Reply([self._with_receipt(decided)], overlay_card=overlay, replayed=decided.replayed)

    def _with_receipt(self, decided: Decided) -> bytes:
        """The reply frame with its ``receipt`` (docs/protocol.md, Receipts), when the store signed one.

        The store signs it with the decision's committed batch. A replay's is signed with the
        replay's batch. The record holds the reply without it: a reply cannot hold its own hash."""
        if decided.receipt is None or not decided.reply.endswith(b"}"):
            return decided.reply
        return decided.reply[:-1] + b',"receipt":' + wire.encode(decided.receipt) + b"}"


REGISTRATION_REFUSALS: dict[Registration, tuple[type[Refusal], str, str, int]] = {
    Registration.NO_CODE: (Unauthorized, "invite_code", i18n.N_(
        "this invite code is not valid on this bridge: check it with the bridge's host"), CLOSE_UNAUTHORIZED),
    Registration.REVOKED: (Unauthorized, "invite_code", i18n.N_(
        "this invite code was revoked: ask the bridge's host for a new one"), CLOSE_UNAUTHORIZED),
    Registration.EXPIRED: (Unauthorized, "invite_code", i18n.N_(
        "this invite code has expired: ask the bridge's host for a new one"), CLOSE_UNAUTHORIZED),
    Registration.USED_UP: (Unauthorized, "invite_code", i18n.N_(
        "this invite code has been used as often as it may: ask the bridge's host for a new one"),
        CLOSE_UNAUTHORIZED),
    Registration.WORLD_KNOWN: (Forbidden, "world_id", i18n.N_(
        "world {world} is registered on this bridge already: an invite code cannot register it again or "
        "replace its token; paste the world's token (the bridge's host can give it a new one with "
        "`fate-bridge world rotate-token {world}`)"), CLOSE_DONE),
    Registration.WORLD_ASKED: (Forbidden, "world_id", i18n.N_(
        "a request to register world {world} waits for the host's approval already, made from another "
        "browser: the token goes to that browser alone"), CLOSE_DONE),
    Registration.DENIED: (Forbidden, "world_id", i18n.N_(
        "the bridge's host denied the registration of world {world}"), CLOSE_DONE),
    Registration.FULL: (RateLimited, "world_id", i18n.N_(
        "too many registration requests wait for the host's approval: try again later"), CLOSE_DONE),
}
"""Each refused registration: the refusal, the field it names, its text (English, shown in the
language of the ``register``'s ``client.language``; ``{world}`` is the world id) and the close
code (4001 for a code it refuses: counted as a failed hello, bridge/limits.py)."""


def _registration_reply(world_id: str, outcome: Registration, token: str, language: str) -> Reply:
    """The answer to a ``register`` that came to ``outcome``, then the connection's close.

    ``token`` is the world's, sent only when ``REGISTERED``. A refusal is in ``language``."""
    if outcome is Registration.REGISTERED:
        return Reply([wire.encode(wire.Registered(world_id=world_id, token=token))], CLOSE_DONE)
    if outcome is Registration.WAITING:
        waiting = wire.RegistrationPending(world_id=world_id, retry_seconds=REQUEST_POLL_SECONDS)
        return Reply([wire.encode(waiting)], CLOSE_DONE)
    refusal, field, msgid, close = REGISTRATION_REFUSALS[outcome]
    text = Text(msgid, {"world": world_id}, braces=True)
    return Reply([error_frame(refusal(text, field=field), None, language)], close)


def _welcome(world: World, max_frame_bytes: int | None) -> bytes:
    """The encoded ``welcome`` for ``world``, for forwarders and viewers alike.

    ``max_frame_bytes`` is the connection's frame limit; None means no limit."""
    return wire.encode(wire.Welcome(world_id=world.world_id, bridge_version=__version__,
                                    protocol_version=wire.PROTOCOL_VERSION,
                                    max_frame_bytes=max_frame_bytes,
                                    rulesets=registry.rulesets(), settings=world.settings))

