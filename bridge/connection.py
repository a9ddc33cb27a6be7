"""One WebSocket connection, from its first frame to its close (:class:`Connection`).

Also what every connection of a server shares (:class:`ServerContext`).

The first frame must come within ``hello_timeout`` seconds, else close 4002. It is ``hello``, or
``register``: a world registered through an invite code. A ``register`` is answered and closed. It
is rate limited per address and in total by :class:`~bridge.limits.RegistrationRates`.

``hello``s from an address locked out for the world after failed ones are refused (``rate_limited``,
1013) before the store is read. An admitted ``hello`` makes the connection its world's forwarder
(:class:`~bridge.links.Forwarders`); the older one is closed 4003. With the viewer key, it makes it
one of its overlay viewers (:class:`~bridge.links.Viewers`).

Frames are handled one at a time, in order, each answered before the next is read. Each world has
one rate bucket, whichever connection. Past the world's rate limit, a frame is answered
``rate_limited`` and not handled. The connection's next frame is read only when the bucket has a
token again. So a connection that pumps frames without waiting waits in its own socket buffers, not
in the others' turn. A binary frame is answered ``bad_message``.

While the process drains (:class:`~bridge.links.Drain`), a connection is closed 1012 once the frame
it is handling is answered. Every refused connection is logged once with its reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import socket
from dataclasses import dataclass

import msgspec
import structlog
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode

from .cluster import Cluster
from .dice import Dice
from .errors import BadMessage, RateLimited, StorageUnavailable
from . import i18n
from .i18n import N_
from .limits import Admission, HelloWaitReason, RegistrationRates, WorldRates
from .link_guard import LinkGuard
from .links import Drain, Forwarders, Viewer, Viewers, superseded_reason
from .metrics import Metrics
from .report import draw as draw_report
from .session import CLOSE_DONE, CLOSE_HELLO_TIMEOUT, CLOSE_SUPERSEDED, CLOSE_UNAUTHORIZED, Reply, Session, error_frame
from .status import Presence
from .store import Store
from .wire import ref_of
from .wire.guard import MAX_FRAME_BYTES
from .wire.guard import check as check_frame

log = structlog.get_logger("fate_bridge")

# Limits, each with its reason (restated for operators in docs/security.md).
MAX_PACE_SECONDS = 1.0  # past its world's rate, a connection's next frame is read within this
VIEWER_SEND_BUFFER_BYTES = 64 * 1024  # kernel send buffer of a viewer's socket: cards are a few
# KiB a minute, and without a cap Linux grows it to 4 MiB, so a stuck viewer would swallow ~1500
# cards before its send times out; with 64 KiB it is noticed after a few dozen

CLOSE_REASONS = {CLOSE_DONE: "registration answered"}  # a session's close, else "unauthorized"
HELLO_WAITS: dict[HelloWaitReason, tuple[str, str]] = {  # hello_delay's reason -> refusal msgid, close reason
    "failed_hellos": (N_("too many failed hellos: try again in %(seconds)s s"), "too many failed hellos"),
    "failed_hello_budget": (N_("too many failed hellos on this bridge just now: try again in %(seconds)s s"),
                            "too many failed hellos on this bridge"),
    "hellos_in_flight": (N_("too many hellos from this address at once: try again in %(seconds)s s"),
                         "too many hellos at once"),
}
def rate_refusal(per_second: float) -> RateLimited:
    """The ``rate_limited`` refusal of a frame past a world's rate of ``per_second`` frames."""
    return RateLimited(N_("more than %(rate)s messages a second: this one was not handled; send it "
                          "again later with the same event_id"), {"rate": f"{per_second:g}"})


BINARY_FRAME = BadMessage(N_("binary frames are not accepted: send each JSON message as a text frame"))


@dataclass(frozen=True)
class ServerContext:
    """What every connection of one server shares, built once (:func:`bridge.server.start`).

    - ``hello_timeout``: seconds for the first frame.
    - ``worlds``: the forwarders' buckets, one per world whatever the connection; an overlay
      viewer connection gets a bucket of the same rate of its own. None: no limit.
    - ``rate_refusal``: the answer to a frame past its rate (None with no limit), made once.
    - ``admission``: the address and connection limits. Every connection's hellos are throttled by
      it.
    - ``registrations``: the rates of registrations through invite codes.
    - ``guard``: closes open links whose credential changed.
    - ``cluster``: the other bridge processes on the same PostgreSQL database. Cards, overlay actions
      and take-overs go both ways.
    - ``metrics``: where decisions and take-overs are counted."""

    store: Store
    dice: Dice
    hello_timeout: float
    worlds: WorldRates | None
    rate_refusal: RateLimited | None
    viewers: Viewers
    presence: Presence
    admission: Admission
    registrations: RegistrationRates
    forwarders: Forwarders
    guard: LinkGuard
    drain: Drain
    cluster: Cluster | None
    metrics: Metrics | None


class Connection:
    """One WebSocket connection: :meth:`run` is websockets' handler for it.

    Its phases, in order:

    1. :meth:`first_frame`, within the hello timeout.
    2. For each frame, :meth:`answer`. A hello goes through :meth:`locked_out`, :meth:`admit`, then
       :meth:`open` as forwarder or viewer. Any other frame goes to :meth:`handle`, rate limited.
       Then :meth:`pace` and :meth:`next_frame`.
    3. :meth:`close`, with the code and reason of whatever ends it.
    4. :meth:`release` of everything it held, in one place, however it ended."""

    def __init__(self, context: ServerContext, ws: ServerConnection) -> None:
        self.context, self.ws = context, ws
        self.address = peer_address(ws.transport)
        self.session = Session(context.store, context.dice, max_frame_bytes=MAX_FRAME_BYTES, reporter=draw_report,
                               metrics=context.metrics, registrations=context.registrations.gate(self.address))
        worlds = context.worlds  # a viewer's own bucket; a forwarder's is its world's (open)
        self.limit = None if worlds is None else worlds.own()
        self.pump: asyncio.Task[None] | None = None  # a viewer's sender task
        self.viewer: Viewer | None = None
        self.watched: str | None = None  # the world whose overlay this viewer made this process watch
        self.limited = False  # logged once per connection
        self.paced = 0.0  # seconds before the next frame is read, once past the rate

    async def run(self) -> None:
        """Serve the connection until it closes; always returns, never raises."""
        frame = await self.first_frame()
        if frame is None:
            return
        try:
            while await self.answer(frame):
                await self.pace()
                if (following := await self.next_frame()) is None:
                    return
                frame = following
        except ConnectionClosed as closed:
            _log_refused_frame(closed, self.address, self.session.world_id)
        finally:
            self.release()

    async def first_frame(self) -> str | bytes | None:
        """The first frame, within ``hello_timeout``; None when the connection is closed.

        It is closed 4002 when too late. One opened as the process began draining is closed 1012, to
        reconnect elsewhere."""
        try:
            async with asyncio.timeout(self.context.hello_timeout):
                first = await self.context.drain.recv(self.ws)
        except TimeoutError:
            log.info("connection_refused", reason="hello_timeout", address=self.address)
            await self.close(CLOSE_HELLO_TIMEOUT, "hello not received in time")
            return None
        except ConnectionClosed as closed:
            _log_refused_frame(closed, self.address, None)
            return None
        if first is None:
            await self.context.drain.close(self.ws)
        return first

    async def next_frame(self) -> str | bytes | None:
        """The next frame; None when the process drains.

        The connection is then closed 1012: the frame just answered was its last."""
        if (frame := await self.context.drain.recv(self.ws)) is None:
            await self.context.drain.close(self.ws)
        return frame

    async def answer(self, frame: str | bytes) -> bool:
        """Answer ``frame``: its reply is passed on to the world's viewers and sent.

        Then comes the close it asks for, or, for an admitted hello, the link opened. False once the
        connection is closed."""
        hello = not self.session.is_open
        named, language = _first_frame_names(frame) if hello else ("", i18n.DEFAULT)  # the lockout's key
        if hello and await self.locked_out(named, language):
            return False
        reply = await (self.admit(frame, named) if hello else self.handle(frame))
        cluster = self.context.cluster
        _fan_out(self.context.viewers, self.session.world_id, reply, cluster)
        if hello and self.session.viewer and self.session.is_open and cluster is not None:
            assert self.session.world_id is not None
            self.watched = self.session.world_id  # announced before the welcome: see bridge/cluster.py
            await cluster.watch(self.watched)
        for out in reply.frames:
            await self.ws.send(out, text=True)  # UTF-8 JSON as it is: no decode and re-encode
        if reply.close_code is not None:
            if hello and reply.close_code == CLOSE_UNAUTHORIZED:
                self.context.admission.hello_failed(self.address, named)
                if isinstance(frame, bytes):
                    log.info("connection_refused", reason="binary_frame", address=self.address)
            await self.close(reply.close_code)
            return False
        return not (hello and self.session.is_open) or await self.open()

    async def locked_out(self, named: str, language: str) -> bool:
        """Refuse the hello if this address must wait before a hello for the world ``named``
        (:meth:`bridge.limits.Admission.hello_delay`: locked out after failed hellos, the
        bridge-wide failure budget spent, or too many of its hellos being checked at once).

        The refusal is ``rate_limited`` in ``language`` (the hello's), then 1013. True when it
        was refused."""
        wait, reason = self.context.admission.hello_delay(self.address, named)
        if not reason:  # no wait (then wait is 0)
            return False
        log.info("connection_refused", reason=reason, address=self.address,
                 world_id=named or None, retry_after=round(wait, 1))
        text, close_reason = HELLO_WAITS[reason]
        refusal = RateLimited(text, {"seconds": math.ceil(wait)})
        await self.ws.send(error_frame(refusal, None, language), text=True)
        await self.close(CloseCode.TRY_AGAIN_LATER, close_reason)
        return True

    async def admit(self, frame: str | bytes, named: str) -> Reply:
        """The reply to the first frame: a hello, a register, or anything else (refused 4001).

        It is counted in the address's hellos in flight while the session checks it."""
        if isinstance(frame, bytes):
            return Reply([error_frame(BINARY_FRAME, None, i18n.DEFAULT)], CLOSE_UNAUTHORIZED)  # no language named
        admission = self.context.admission
        admission.hello_begin(self.address, named)
        try:
            return await self.session.receive(frame)
        finally:
            admission.hello_end(self.address, named)

    async def handle(self, frame: str | bytes) -> Reply:
        """The reply to a frame after the hello.

        Past the rate it is ``rate_limited`` (not handled), and the connection is paced
        (:meth:`pace`)."""
        language = self.session.language
        if isinstance(frame, bytes):
            return Reply([error_frame(BINARY_FRAME, None, language)])
        if self.limit is None or self.limit.allow():
            return await self.session.receive(frame)
        if not self.limited:
            log.info("rate_limited", world_id=self.session.world_id, address=self.address)
            self.limited = True
        assert self.context.rate_refusal is not None  # set whenever there is a limit
        reply = Reply([error_frame(self.context.rate_refusal, ref_of(frame), language)])
        self.paced = self.limit.wait()
        return reply

    async def pace(self) -> None:
        """Past its rate, wait until the bucket has a token again.

        The wait is ``MAX_PACE_SECONDS`` at most, or until the connection closes. A pumping
        connection waits in its own socket buffers. It gets about ``rate`` refusals a second, not
        the others' turn."""
        if self.paced:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.ws.wait_closed(), min(self.paced, MAX_PACE_SECONDS))
            self.paced = 0.0

    async def open(self) -> bool:
        """The hello was admitted: the link becomes its world's forwarder or one of its
        viewers. False when it could not (then it is closed)."""
        context, world_id = self.context, self.session.world_id
        assert world_id is not None
        context.admission.hello_succeeded(self.address)
        context.admission.said_hello(self.ws)
        context.guard.opened(self.ws, world_id, viewer=self.session.viewer, credential=self.session.credential,
                             language=self.session.language)
        return await (self.become_viewer(world_id) if self.session.viewer else self.become_forwarder(world_id))

    async def become_forwarder(self, world_id: str) -> bool:
        """Take ``world_id``'s bucket and its forwarder's place.

        The hello is counted in the bucket. The older forwarder is closed 4003. False, closed 1013,
        when its lease cannot be taken."""
        context = self.context
        if context.worlds is not None:
            self.limit = context.worlds.of(world_id)
            self.limit.allow()
        try:
            await context.forwarders.claim(world_id, self.ws, self.session.holder)
        except StorageUnavailable:  # its lease not taken (the store logged the outage)
            await self.close(CloseCode.TRY_AGAIN_LATER, "storage unavailable")  # the module reconnects
            return False
        context.presence.linked(world_id, self.ws, self.session.client)
        if context.cluster is not None:
            context.cluster.publish("link", world_id, link=msgspec.json.encode(context.presence.link(world_id)).decode())
        return True

    async def become_viewer(self, world_id: str) -> bool:
        """Join ``world_id``'s viewers, with a sender task of its own.

        False, closed 1013, when the world has as many as it may."""
        self.viewer = self.context.viewers.add(world_id, self.ws)
        if self.viewer is None:
            log.info("viewer_refused_full", world_id=world_id)
            await self.close(CloseCode.TRY_AGAIN_LATER, "too many overlay viewers")
            return False
        _cap_send_buffer(self.ws)
        self.pump = asyncio.create_task(self.context.viewers.pump(self.viewer))
        return True

    async def close(self, code: int, reason: str | None = None) -> None:
        """Close with ``code`` and ``reason``.

        A reason of None means a session's close. Its reason then comes from ``CLOSE_REASONS``
        ("unauthorized" else). For 4003 (a decision the lease refused: ``LeaseLost``) it names who
        holds the world now."""
        if reason is None:
            reason = CLOSE_REASONS.get(code, "unauthorized")
            if code == CLOSE_SUPERSEDED:
                assert self.session.world_id is not None
                reason = superseded_reason(await self.context.forwarders.holder(self.session.world_id))
        await self.ws.close(code, reason)

    def release(self) -> None:
        """Forget the connection wherever it is held; never waits.

        That is its world's link, the viewers, and the cluster's watch of the overlay."""
        context, world_id = self.context, self.session.world_id
        context.guard.closed(self.ws)
        context.forwarders.release(world_id, self.ws)
        if context.presence.unlinked(world_id, self.ws) and world_id is not None and context.cluster is not None:
            context.cluster.publish("link", world_id)  # no link: nobody holds it now
        if self.viewer is not None:
            context.viewers.remove(self.viewer)
        if self.watched is not None and context.cluster is not None:
            context.cluster.unwatch(self.watched)
        if self.pump is not None:
            self.pump.cancel()


def _fan_out(viewers: Viewers, world_id: str | None, reply: Reply, cluster: Cluster | None = None) -> None:
    """Pass what ``reply`` says on to the world's overlay viewers; never waits.

    It reaches viewers here, and (``cluster``) in the other processes that have viewers of it. A
    ``replay`` carries this process's last card of the world if this process decided it. The others'
    may be older, as they get cards only while watching. Else each replays the last card it saw."""
    if world_id is None:
        return
    elsewhere = cluster if cluster is not None and cluster.watched_elsewhere(world_id) else None
    if reply.overlay_card is not None:
        viewers.publish(world_id, reply.overlay_card)
        if elsewhere is not None:
            elsewhere.publish("card", world_id, frame=reply.overlay_card.decode())
    if reply.overlay_action is not None:
        viewers.act(world_id, reply.overlay_action)
        if elsewhere is not None:
            last = viewers.last_decided_here(world_id) if reply.overlay_action == "replay" else None
            elsewhere.publish(reply.overlay_action, world_id, frame=None if last is None else last.decode())


class _FirstFrame(msgspec.Struct):
    world_id: object = None
    client: object = None


_first_frame_decoder = msgspec.json.Decoder(_FirstFrame)


def _first_frame_names(frame: str | bytes) -> tuple[str, str]:
    """The world a connection's first frame names (the failed-hello lockout's key, with the
    address) and the language it asks for (``client.language``, normalized).

    The world is its ``world_id``, a string of at most 128 characters, ``""`` when it names none:
    bytes, not a JSON object, or too deep to read safely. The language is
    :data:`bridge.i18n.DEFAULT` when it names none."""
    if isinstance(frame, bytes):
        return "", i18n.DEFAULT
    try:
        check_frame(frame)
        first = _first_frame_decoder.decode(frame)
    except (BadMessage, msgspec.DecodeError, msgspec.ValidationError):
        return "", i18n.DEFAULT
    world = first.world_id if isinstance(first.world_id, str) and len(first.world_id) <= 128 else ""
    asked = first.client.get("language") if isinstance(first.client, dict) else None
    return world, i18n.normalize(asked if isinstance(asked, str) else None)


def peer_address(transport: asyncio.BaseTransport) -> str:
    """The peer's IP address as text ("?" when the transport does not say).

    An IPv4 peer of a dual-stack socket (``serve --host ::``) reads ``::ffff:a.b.c.d``; it is
    named ``a.b.c.d``, as ``--trusted-address``, the limits and the logs write it."""
    peer = transport.get_extra_info("peername")
    if not (isinstance(peer, tuple) and peer):
        return "?"
    host = str(peer[0])
    return host.removeprefix("::ffff:") if host.startswith("::ffff:") and "." in host else host


def _log_refused_frame(closed: ConnectionClosed, address: str, world_id: str | None) -> None:
    """Log a connection websockets closed for a frame it refused.

    That is a frame over ``MAX_FRAME_BYTES`` (1009, with the frame's size), or a text frame that is
    not UTF-8 (1007)."""
    sent = closed.sent
    if sent is None or sent.code not in (CloseCode.MESSAGE_TOO_BIG, CloseCode.INVALID_DATA):
        return
    if sent.code == CloseCode.MESSAGE_TOO_BIG:
        size = re.search(r"with (\d+) bytes", sent.reason)
        log.info("connection_refused", reason="oversize_frame", address=address, world_id=world_id,
                 size=int(size.group(1)) if size else None, limit=MAX_FRAME_BYTES)
    else:
        log.info("connection_refused", reason="invalid_utf8", address=address, world_id=world_id)


def _cap_send_buffer(ws: ServerConnection) -> None:
    """Give a viewer's socket a small kernel send buffer (``VIEWER_SEND_BUFFER_BYTES``)."""
    sock = ws.transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, VIEWER_SEND_BUFFER_BYTES)
