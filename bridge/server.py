"""The WebSocket server: moves frames between sockets and :class:`~bridge.session.Session`.

One asyncio server (websockets' asyncio API). Plain HTTP without a WebSocket upgrade (health,
overlay page, the dice check page ``/verify``, module manifest and zip, status, metrics, landing page) is :mod:`bridge.http`. Each connection:
the first frame (``hello``, or ``register``: a world registered through an invite code, rate
limited per address and in total by :class:`~bridge.limits.RegistrationRates`, answered and
closed) must come within ``hello_timeout`` seconds (else close 4002); frames are handled
one at a time, in order, each answered before the next is read; past the world's rate limit (one
bucket per world, whichever connection) a frame is answered ``rate_limited`` and not handled, and
the connection's next frame is read only when the bucket has a token again (a connection that
pumps frames without waiting waits in its own socket buffers, not in the others' turn); a
binary frame is answered ``bad_message``. Connections are counted from the TCP accept
(:func:`admitted_connection`): one over a :class:`~bridge.limits.Limits` count (per address, in
total, not yet past ``hello``, new per second) gets a 503 before its handshake; ``hello``s from an
address locked out for the world after failed ones are refused (``rate_limited``, 1013) before
the store is read. Every refused connection is logged once with its reason. One forwarder per
world: a newer authenticated connection closes the older with 4003, in the background (a
half-open older link never delays it). Overlay viewers (``hello`` with the viewer key) get each
public card of their world through their own bounded queue and sender task (:class:`Viewers`),
so a stuck viewer never delays a decision or another viewer; it is closed with 4004.
``serve_until`` stops on SIGTERM/SIGINT (see ``stop_on_signals``) by draining (:class:`Drain`,
issue 28): the port is closed, every connection is closed with 1012 (service restart: the module
reconnects at once, to another process behind the load balancer) once the frame it is handling is
answered, within ``DRAIN_SECONDS``, then the store is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import signal
import socket
import ssl
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from pathlib import Path
from http import HTTPStatus

import msgspec
import structlog
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode
from websockets.http11 import Request, Response

from . import wire
from .cluster import Cluster, Notice
from .dice import Dice, SecretDice
from .errors import BadMessage, ConfigError, RateLimited, StorageUnavailable
from .http import Pages
from .limits import RATE_BURST_SECONDS, RATE_PER_SECOND, Admission, Limits, RateLimit, RegistrationRates, WorldRates
from .link_guard import LinkGuard, close_reason
from .metrics import Metrics
from .session import (CLOSE_DONE, CLOSE_HELLO_TIMEOUT, CLOSE_SUPERSEDED, CLOSE_UNAUTHORIZED,
                      CLOSE_VIEWER_TOO_SLOW, Reply, Session, error_frame)
from .startup import listen_base
from .report import draw as draw_report
from .status import Link, Presence
from .store import Store
from .wire import ref_of
from .wire.guard import MAX_FRAME_BYTES
from .wire.guard import check as check_frame

log = structlog.get_logger("fate_bridge")

# Limits, each with its reason (restated for operators in docs/security.md).
MAX_QUEUE_FRAMES = 16  # frames received but not yet handled per connection, then TCP backpressure
MAX_PACE_SECONDS = 1.0  # past its world's rate, a connection's next frame is read within this
HELLO_TIMEOUT_SECONDS = 10.0  # a browser sends hello right after connecting
DEFAULT_RATE = (RATE_PER_SECOND, int(RATE_PER_SECOND * RATE_BURST_SECONDS))
VIEWER_QUEUE_FRAMES = 32  # cards waiting for one viewer: a table shows a few a minute, so 32
# unsent cards means the viewer stopped reading (the page needs no backlog: it reconnects fresh)
VIEWER_SEND_TIMEOUT_SECONDS = 10.0  # a card is a few KiB: a viewer not taking one in 10 s is stuck
VIEWER_SEND_BUFFER_BYTES = 64 * 1024  # kernel send buffer of a viewer's socket: cards are a few
# KiB a minute, and without a cap Linux grows it to 4 MiB, so a stuck viewer would swallow ~1500
# cards before its send times out; with 64 KiB it is noticed after a few dozen
MAX_VIEWERS_PER_WORLD = 20  # OBS, a preview tab or two per streamer; a leaked key cannot pile up
DEFAULT_VIEWER_LIMITS = (VIEWER_QUEUE_FRAMES, VIEWER_SEND_TIMEOUT_SECONDS)
SUPERSEDED_CLOSE_SECONDS = 10.0  # a superseded (or revoked: bridge/link_guard.py) link's closing
# handshake, in the background: a half-open one (its peer gone without a word) never answers, and
# is cut off after this
DRAIN_CLOSE_SECONDS = 5.0  # a drained link's closing handshake: a peer answers in milliseconds; a
# half-open one never does and is cut off after this
DRAIN_SECONDS = 15.0  # SIGTERM to closed store at most: a decision in flight takes milliseconds, a
# close 5 s at most; inside systemd's TimeoutStopSec=30 (docs/deploy.md) with room for the store
CLOSE_SERVICE_RESTART = CloseCode.SERVICE_RESTART  # 1012: the module reconnects at once (another process)
DRAIN_REASON = "bridge restarting: reconnect now"




class Forwarders:
    """The one forwarder connection of each world: a newer one supersedes the older (the GM
    reloaded, or another GM's browser took over), which is closed with 4003 in the background
    (within ``SUPERSEDED_CLOSE_SECONDS``, then cut off): the newer link never waits for the old
    one's peer, which may be gone without a word (a half-open TCP link).

    Across processes (``cluster``, on the PostgreSQL store): claiming a world takes its lease
    (:meth:`~bridge.store.postgres.PostgresStore.take_lease`) and tells the other processes,
    which close their forwarder of the world (:meth:`taken_elsewhere`); the lease's fencing
    token keeps a process that has not heard yet from writing. The token alone decides which of
    two forwarders racing on two processes holds the world, whatever the timing (issue 28): the
    one whose lease was taken later. A world's claims and the other processes' lease notices of
    it are carried out here one at a time, in the order they came (:meth:`_turn`), so a claim has
    its token before a notice of a newer one (taken after it began) is looked at, and a notice of
    an older one, arriving while a claim waits for its token, is looked at after it and changes
    nothing. The loser is closed 4003 naming who holds the world and on which process
    (``holder on host:pid``, :attr:`bridge.cluster.Cluster.name`)."""

    def __init__(self, store: Store | None = None, cluster: Cluster | None = None,
                 metrics: Metrics | None = None) -> None:
        self.metrics = metrics  # counts the take-overs of this process's worlds
        self._by_world: dict[str, ServerConnection] = {}
        self._store, self._cluster = (store, cluster) if cluster is not None else (None, None)
        self._tokens: dict[str, int] = {}  # world -> newest fencing token seen (ours or not)
        self._turns: dict[str, tuple[asyncio.Lock, list[int]]] = {}  # world -> its lock, [users]
        self._closing: set[asyncio.Task[None]] = set()  # superseded links closing (kept referenced)

    @contextlib.asynccontextmanager
    async def _turn(self, world_id: str) -> AsyncIterator[None]:
        """Hold ``world_id``'s turn: one claim or lease notice of a world at a time, first come
        first served (asyncio.Lock wakes its waiters in order); forgotten when nobody waits."""
        lock, users = self._turns.setdefault(world_id, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if not users[0]:
                del self._turns[world_id]

    async def claim(self, world_id: str, ws: ServerConnection, holder: str) -> None:
        """Make ``ws`` the forwarder of ``world_id``, closing the previous one (here, or in
        another process; here without waiting for its close). ``holder``: who connected, as
        the 4003 reason names them."""
        if self._cluster is None:
            self._replace(world_id, ws, holder)
            return
        holder = f"{holder} on {self._cluster.name}"
        async with self._turn(world_id):
            # no notice of a newer token can have been looked at: it was taken after this one
            self._tokens[world_id] = await self._store.take_lease(world_id, holder)  # type: ignore[union-attr]
            self._cluster.publish("lease", world_id, token=self._tokens[world_id], holder=holder)
            self._replace(world_id, ws, holder)

    def _replace(self, world_id: str, ws: ServerConnection, holder: str) -> None:
        """Make ``ws`` this process's forwarder of ``world_id``; the previous one is superseded."""
        previous = self._by_world.get(world_id)
        self._by_world[world_id] = ws
        if previous is not None and previous is not ws:
            self._supersede(world_id, previous, holder)

    async def taken_elsewhere(self, world_id: str, token: int, holder: str) -> None:
        """Another process took ``world_id``'s lease with ``token``: close this process's
        forwarder of it (4003 naming ``holder``) if its token is older."""
        async with self._turn(world_id):
            if token <= self._tokens.get(world_id, 0):
                return
            self._tokens[world_id] = token
            ws = self._by_world.pop(world_id, None)
            if ws is not None:
                if self.metrics is not None:
                    self.metrics.lease_taken()
                self._supersede(world_id, ws, holder)
            await self._store.drop_lease(world_id, token)  # type: ignore[union-attr]

    async def holder(self, world_id: str) -> str:
        """Who holds ``world_id`` now, for the 4003 of a forwarder whose decision the lease's
        fencing refused (``LeaseLost``: its process had not heard of the take-over yet)."""
        held = None
        if self._cluster is not None:
            try:
                held = await self._store.lease_holder(world_id)  # type: ignore[union-attr]
            except Exception:  # the database went away meanwhile: the 4003 goes out all the same
                log.warning("lease_holder_unread", world_id=world_id, exc_info=True)
        return held or "another bridge process"

    def _supersede(self, world_id: str, ws: ServerConnection, holder: str) -> None:
        """Close ``ws`` with 4003 naming ``holder``, in a task of its own (never waits)."""
        log.info("forwarder_superseded", world_id=world_id, holder=holder)
        in_background(self._closing, close_within(ws, SUPERSEDED_CLOSE_SECONDS, CLOSE_SUPERSEDED,
                                                  superseded_reason(holder)))

    def release(self, world_id: str | None, ws: ServerConnection) -> None:
        """Forget ``ws`` if it still is the forwarder of ``world_id``."""
        if world_id is not None and self._by_world.get(world_id) is ws:
            del self._by_world[world_id]


def in_background(tasks: set[asyncio.Task[None]], work: Awaitable[None]) -> None:
    """Run ``work`` in a task of its own, kept in ``tasks`` until it is done (asyncio keeps only
    a weak reference to a running task: one nobody holds may be collected mid-way)."""
    task = asyncio.ensure_future(work)
    tasks.add(task)
    task.add_done_callback(tasks.discard)


def superseded_reason(holder: str) -> str:
    """A 4003's close reason: ``superseded by HOLDER`` (the module shows HOLDER to the GM:
    foundry-module/scripts/logic/connection.js ``supersededBy``), cut to a close frame's room
    (:func:`~bridge.link_guard.close_reason`)."""
    return close_reason(f"superseded by {holder}")


class Drain:
    """SIGTERM's hand-over of a process's connections (issue 28). Once :meth:`start` is called,
    every connection is closed with 1012 (service restart; the module reconnects at once and the
    load balancer, or the kernel with ``--reuse-port``, sends it to another process) as soon as it
    is not handling a frame: one waiting for a frame at once, one handling a frame once that
    frame's reply is sent, so a decision in flight is committed and answered. A frame received
    after the drain began is left unhandled (the module sends it again, same ``event_id``, on its
    next link) and a connection opened meanwhile is closed before its hello is handled."""

    def __init__(self) -> None:
        self.draining = False
        self._waiting: set[ServerConnection] = set()  # in ``recv``: nothing in flight
        self._closing: set[asyncio.Task[None]] = set()  # drained links closing (kept referenced)

    async def recv(self, ws: ServerConnection) -> str | bytes | None:
        """``ws``'s next frame; None when the process is draining (before the wait, or a frame
        that came as it began): the caller then closes ``ws`` with :meth:`close`. Raises
        ``ConnectionClosed`` as ``ws.recv()`` does (a drain closes a waiting link by itself)."""
        if self.draining:
            return None
        self._waiting.add(ws)
        try:
            frame = await ws.recv()
        finally:
            self._waiting.discard(ws)
        return None if self.draining else frame

    def start(self) -> None:
        """Begin draining: close every link waiting for a frame now (in the background); the
        others close themselves after their frame in flight (:meth:`recv` returns None)."""
        self.draining = True
        for ws in self._waiting:
            in_background(self._closing, self.close(ws))

    @staticmethod
    async def close(ws: ServerConnection) -> None:
        """Close ``ws`` with 1012, cut off after ``DRAIN_CLOSE_SECONDS`` (a half-open peer)."""
        await close_within(ws, DRAIN_CLOSE_SECONDS, CLOSE_SERVICE_RESTART, DRAIN_REASON)


@dataclass(eq=False)
class _Viewer:
    """One overlay viewer: its connection and the frames waiting for its sender task."""

    world_id: str
    ws: ServerConnection
    frames: deque[bytes] = field(default_factory=deque)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    overflowed: bool = False


class Viewers:
    """The overlay viewers of each world, and each world's last public card (for ``replay``;
    kept in memory since the bridge started).

    Fan-out never waits: :meth:`publish` (and :meth:`clear`, :meth:`replay`) only append to each
    viewer's queue of at most ``queue_frames`` frames; each viewer's own task (:meth:`pump`)
    sends them in order, each within ``send_timeout`` seconds. A viewer whose queue overflowed
    (seen when its send in flight ends) or whose send timed out is forgotten and closed with
    4004, within ``send_timeout`` (a stuck peer, which cannot take the close frame, is then cut
    off); the page reconnects by itself.
    """

    def __init__(self, queue_frames: int, send_timeout: float,
                 max_per_world: int = MAX_VIEWERS_PER_WORLD) -> None:
        self.queue_frames, self.send_timeout, self.max_per_world = queue_frames, send_timeout, max_per_world
        self._by_world: dict[str, set[_Viewer]] = {}
        self._last: dict[str, bytes] = {}
        self._decided_here: set[str] = set()  # worlds whose last card this process decided

    def add(self, world_id: str, ws: ServerConnection) -> _Viewer | None:
        """Register ``ws`` as a viewer of ``world_id``; None when the world has
        ``max_per_world`` viewers already."""
        viewers = self._by_world.setdefault(world_id, set())
        if len(viewers) >= self.max_per_world:
            return None
        viewer = _Viewer(world_id, ws)
        viewers.add(viewer)
        return viewer

    def remove(self, viewer: _Viewer) -> None:
        """Forget ``viewer`` (idempotent)."""
        viewers = self._by_world.get(viewer.world_id)
        if viewers is not None:
            viewers.discard(viewer)
            if not viewers:
                del self._by_world[viewer.world_id]

    def count(self, world_id: str) -> int:
        """How many viewers ``world_id`` has."""
        return len(self._by_world.get(world_id, ()))

    def publish(self, world_id: str, frame: bytes, *, here: bool = True) -> None:
        """Queue an ``overlay_card`` frame for every viewer of ``world_id``, and keep it as the
        world's last card; ``here``: decided by this process (False: another's, by a notice)."""
        self._last[world_id] = frame
        if here:
            self._decided_here.add(world_id)
        else:
            self._decided_here.discard(world_id)
        self._send_all(world_id, frame)

    def clear(self, world_id: str) -> None:
        """Tell every viewer of ``world_id`` to take its cards off screen."""
        self._send_all(world_id, wire.encode(wire.OverlayClear(world_id=world_id)))

    def replay(self, world_id: str, frame: bytes | None = None) -> None:
        """Queue the world's last card again for its viewers (nothing when there is none);
        ``frame``: that card, as another process knows it (kept as the last one here too)."""
        if frame is not None:
            self._last[world_id] = frame
            self._decided_here.discard(world_id)
        last = self._last.get(world_id)
        if last is not None:
            self._send_all(world_id, last)

    def last_decided_here(self, world_id: str) -> bytes | None:
        """The world's last card if this process decided it (None: it came from another process,
        which may have missed newer ones while nobody here watched, or there is none)."""
        return self._last.get(world_id) if world_id in self._decided_here else None

    def _send_all(self, world_id: str, frame: bytes) -> None:
        for viewer in self._by_world.get(world_id, ()):
            if len(viewer.frames) >= self.queue_frames:
                viewer.overflowed = True
            else:
                viewer.frames.append(frame)
            viewer.ready.set()

    async def pump(self, viewer: _Viewer) -> None:
        """Send ``viewer`` its queued frames, one at a time, until its connection closes or it
        falls behind (then it is forgotten and closed with 4004). Run it as the viewer's own
        task; never raises ``ConnectionClosed``."""
        try:
            while not viewer.overflowed:
                if not viewer.frames:
                    viewer.ready.clear()
                    await viewer.ready.wait()
                    continue
                async with asyncio.timeout(self.send_timeout):
                    await viewer.ws.send(viewer.frames.popleft(), text=True)
            reason = "queue_full"
        except TimeoutError:
            reason = "send_timeout"
        except ConnectionClosed:
            return
        self.remove(viewer)
        log.info("viewer_dropped", world_id=viewer.world_id, reason=reason)
        await close_within(viewer.ws, self.send_timeout, CLOSE_VIEWER_TOO_SLOW, "too slow for the overlay: reconnect")


async def close_within(ws: ServerConnection, seconds: float, code: int, reason: str) -> None:
    """Close ``ws`` with ``code`` and ``reason``; a peer that has not completed the closing
    handshake within ``seconds`` (stuck, or gone without a word) is cut off (TCP abort)."""
    try:
        async with asyncio.timeout(seconds):
            await ws.close(code, reason)
    except TimeoutError:
        ws.transport.abort()  # the close frame cannot get through, or no answer comes


CLOSE_REASONS = {CLOSE_DONE: "registration answered"}  # a session's close, else "unauthorized"
BINARY_FRAME = BadMessage("binary frames are not accepted: send each JSON message as a text frame")


def make_handler(
    store: Store,
    dice: Dice,
    hello_timeout: float,
    rate: tuple[float, int] | None = DEFAULT_RATE,
    viewers: Viewers | None = None,
    presence: Presence | None = None,
    admission: Admission | None = None,
    cluster: Cluster | None = None,
    metrics: Metrics | None = None,
    drain: Drain | None = None,
    registrations: RegistrationRates | None = None,
) -> Callable[[ServerConnection], Awaitable[None]]:
    """The per-connection coroutine for ``websockets.serve``: always returns, never raises.
    ``rate``: (frames per second, burst) per world for its forwarder (one bucket whatever the
    connection) and per overlay viewer connection, or None for no limit. ``viewers``: the
    overlay fan-out (default limits when None). ``presence``: told which forwarder holds
    each world's link (for ``/status``). ``admission``: the address and connection
    limits (default :class:`Limits`); connections made by :func:`admitted_connection` are
    counted in it, and every connection's hellos are throttled by it. ``cluster``: the other
    bridge processes on the same PostgreSQL database (cards, overlay actions and take-overs go
    both ways). ``metrics``: where decisions and take-overs are counted (:mod:`bridge.metrics`).
    ``drain``: tells when to hand the connections over (:class:`Drain`; SIGTERM, ``serve_until``).
    ``registrations``: the rates of registrations through invite codes (default
    :class:`RegistrationRates` on the loop's clock; one table per process)."""
    presence = Presence() if presence is None else presence
    drain = Drain() if drain is None else drain
    forwarders = Forwarders(store, cluster, metrics)
    viewers = Viewers(*DEFAULT_VIEWER_LIMITS) if viewers is None else viewers
    if cluster is not None:
        cluster.on_notice = _notice_handler(viewers, forwarders, presence)
    clock = asyncio.get_running_loop().time
    admission = Admission(Limits(), clock) if admission is None else admission
    worlds = None if rate is None else WorldRates(rate[0], rate[1], clock)
    registrations = RegistrationRates(clock) if registrations is None else registrations
    rate_message = (f"more than {rate[0]:g} messages a second: this one was not handled; send it "
                    "again later with the same event_id") if rate else ""
    revoking: set[asyncio.Task[None]] = set()  # links closed for a changed credential (kept referenced)
    guard = LinkGuard(store.worlds_of, lambda ws, code, reason: in_background(
        revoking, close_within(ws, SUPERSEDED_CLOSE_SECONDS, code, reason)))

    async def handler(ws: ServerConnection) -> None:
        address = _address(ws.transport)
        session = Session(store, dice, max_frame_bytes=MAX_FRAME_BYTES, reporter=draw_report, metrics=metrics,
                          registrations=registrations.gate(address))
        limit = None if rate is None else RateLimit(rate[0], rate[1], clock)
        pump: asyncio.Task[None] | None = None
        viewer: _Viewer | None = None
        watched: str | None = None  # the world whose overlay this viewer made this process watch
        limited = False  # logged once per connection
        paced = 0.0  # seconds before the next frame is read, once past the rate
        try:
            async with asyncio.timeout(hello_timeout):
                first = await drain.recv(ws)
        except TimeoutError:
            log.info("connection_refused", reason="hello_timeout", address=address)
            await ws.close(CLOSE_HELLO_TIMEOUT, "hello not received in time")
            return
        except ConnectionClosed as closed:
            _log_refused_frame(closed, address, None)
            return
        if first is None:  # opened as the process began draining: reconnect elsewhere
            await drain.close(ws)
            return
        frame: str | bytes = first
        try:
            while True:
                was_open = session.is_open
                named = "" if was_open else _world_named(frame)  # the lockout's key, with address
                if not was_open and (wait := admission.hello_wait(address, named)) > 0:
                    log.info("connection_refused", reason="failed_hellos", address=address,
                             world_id=named or None, retry_after=round(wait, 1))
                    refusal = RateLimited(f"too many failed hellos: try again in {math.ceil(wait)} s")
                    await ws.send(error_frame(refusal, None).decode())
                    await ws.close(CloseCode.TRY_AGAIN_LATER, "too many failed hellos")
                    return
                if isinstance(frame, bytes):
                    reply = Reply([error_frame(BINARY_FRAME, None)], None if was_open else CLOSE_UNAUTHORIZED)
                elif not was_open:  # the hello (or whatever came first), counted while checked
                    admission.hello_begin(address, named)
                    try:
                        reply = await session.receive(frame)
                    finally:
                        admission.hello_end(address, named)
                elif limit is None or limit.allow():
                    reply = await session.receive(frame)
                else:
                    if not limited:
                        log.info("rate_limited", world_id=session.world_id, address=address)
                        limited = True
                    reply = Reply([error_frame(RateLimited(rate_message), ref_of(frame))])
                    paced = limit.wait()
                _fan_out(viewers, session.world_id, reply, cluster)
                if session.viewer and session.is_open and not was_open and cluster is not None:
                    assert session.world_id is not None
                    watched = session.world_id  # announced before the welcome: see bridge/cluster.py
                    await cluster.watch(watched)
                for out in reply.frames:
                    await ws.send(out, text=True)  # UTF-8 JSON as it is: no decode and re-encode
                if reply.close_code is not None:
                    if not was_open and reply.close_code == CLOSE_UNAUTHORIZED:
                        admission.hello_failed(address, named)
                        if isinstance(frame, bytes):
                            log.info("connection_refused", reason="binary_frame", address=address)
                    reason = CLOSE_REASONS.get(reply.close_code, "unauthorized")
                    if reply.close_code == CLOSE_SUPERSEDED:  # a decision the lease refused (LeaseLost)
                        assert session.world_id is not None
                        reason = superseded_reason(await forwarders.holder(session.world_id))
                    await ws.close(reply.close_code, reason)
                    return
                if session.is_open and not was_open:
                    assert session.world_id is not None
                    admission.hello_succeeded(address)
                    admission.said_hello(ws)
                    guard.opened(ws, session.world_id, viewer=session.viewer, credential=session.credential,
                                 language=session.language)
                    if not session.viewer:
                        if worlds is not None:  # the world's bucket, the hello counted in it
                            limit = worlds.of(session.world_id)
                            limit.allow()
                        try:
                            await forwarders.claim(session.world_id, ws, session.holder)
                        except StorageUnavailable:  # its lease not taken (the store logged the outage)
                            await ws.close(CloseCode.TRY_AGAIN_LATER, "storage unavailable")  # the module reconnects
                            return
                        presence.linked(session.world_id, ws, session.client)
                        if cluster is not None:
                            cluster.publish("link", session.world_id,
                                            link=msgspec.json.encode(presence.link(session.world_id)).decode())
                    elif (viewer := viewers.add(session.world_id, ws)) is None:
                        log.info("viewer_refused_full", world_id=session.world_id)
                        await ws.close(CloseCode.TRY_AGAIN_LATER, "too many overlay viewers")
                        return
                    else:
                        _cap_send_buffer(ws)
                        pump = asyncio.create_task(viewers.pump(viewer))
                if paced:  # past its rate, this connection reads its next frame when the bucket
                    # has a token again (or a second at most): a pumping connection waits in its own
                    # socket buffers and gets about ``rate`` refusals a second, not the others' turn
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(ws.wait_closed(), min(paced, MAX_PACE_SECONDS))
                    paced = 0.0
                if (following := await drain.recv(ws)) is None:  # draining: this frame's reply was sent
                    await drain.close(ws)
                    return
                frame = following
        except ConnectionClosed as closed:
            _log_refused_frame(closed, address, session.world_id)
            return
        finally:
            guard.closed(ws)
            forwarders.release(session.world_id, ws)
            if presence.unlinked(session.world_id, ws) and cluster is not None:
                cluster.publish("link", session.world_id)  # no link: nobody holds it now
            if viewer is not None:
                viewers.remove(viewer)
            if watched is not None and cluster is not None:
                cluster.unwatch(watched)
            if pump is not None:
                pump.cancel()

    return handler


class _WorldNamed(msgspec.Struct):
    world_id: object = None


_world_named_decoder = msgspec.json.Decoder(_WorldNamed)


def _world_named(frame: str | bytes) -> str:
    """The world a connection's first frame names (its ``world_id``, a string of at most 128
    characters), for the failed-hello lockout's key; ``""`` when it names none (bytes, not a JSON
    object, too deep to read safely)."""
    if isinstance(frame, bytes):
        return ""
    try:
        check_frame(frame)
        world = _world_named_decoder.decode(frame).world_id
    except (BadMessage, msgspec.DecodeError, msgspec.ValidationError):
        return ""
    return world if isinstance(world, str) and len(world) <= 128 else ""


def _address(transport: asyncio.BaseTransport) -> str:
    """The peer's IP address as text ("?" when the transport does not say)."""
    peer = transport.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) and peer else "?"


def _log_refused_frame(closed: ConnectionClosed, address: str, world_id: str | None) -> None:
    """Log a connection websockets closed for a frame it refused: over ``MAX_FRAME_BYTES``
    (1009, with the frame's size) or a text frame that is not UTF-8 (1007)."""
    sent = closed.sent
    if sent is None or sent.code not in (CloseCode.MESSAGE_TOO_BIG, CloseCode.INVALID_DATA):
        return
    if sent.code == CloseCode.MESSAGE_TOO_BIG:
        size = re.search(r"with (\d+) bytes", sent.reason)
        log.info("connection_refused", reason="oversize_frame", address=address, world_id=world_id,
                 size=int(size.group(1)) if size else None, limit=MAX_FRAME_BYTES)
    else:
        log.info("connection_refused", reason="invalid_utf8", address=address, world_id=world_id)


SERVICE_UNAVAILABLE = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
                       b"Connection: close\r\nContent-Length: 34\r\n\r\ntoo many connections: retry later\n")


REFUSAL_LOG_WINDOW_SECONDS = 10.0


class RefusalLog:
    """Logs every connection refused before its handshake once, without a flood flooding the log:
    the first refusal of an (address, reason) is logged at once; the others within
    ``REFUSAL_LOG_WINDOW_SECONDS`` are counted and logged as one line with ``repeated=N`` when
    the window ends."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], int] = {}

    def refused(self, reason: str, address: str, event: str = "connection_refused") -> None:
        """Log (or count) one refused (or, ``event="connection_dropped"``, evicted) connection."""
        key = (event, reason, address)
        if key in self._counts:
            self._counts[key] += 1
            return
        log.info(event, reason=reason, address=address)
        self._counts[key] = 0
        asyncio.get_running_loop().call_later(REFUSAL_LOG_WINDOW_SECONDS, self._flush, key)

    def _flush(self, key: tuple[str, str, str]) -> None:
        repeated = self._counts.pop(key)
        if repeated:
            log.info(key[0], reason=key[1], address=key[2], repeated=repeated,
                     seconds=REFUSAL_LOG_WINDOW_SECONDS)


def admitted_connection(admission: Admission, refusals: RefusalLog) -> type[ServerConnection]:
    """websockets' ``create_connection``: a :class:`ServerConnection` counted in ``admission``
    from the moment TCP is accepted. One over a limit is answered ``503`` and closed before any
    byte of it is read (no handshake, no handler, no TLS session kept), after a tarpit delay
    (:meth:`Admission.tarpit`), and logged once in ``refusals``."""

    def answer(transport: asyncio.BaseTransport, tarpitted: bool) -> None:
        if tarpitted:
            admission.untarpit()
        if not transport.is_closing():
            transport.write(SERVICE_UNAVAILABLE)  # type: ignore[attr-defined]
            transport.close()

    class AdmittedConnection(ServerConnection):
        refused = False
        peer = "?"

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.peer = _address(transport)
            reason = admission.connect(self.peer, self)
            if reason is not None:
                self.refused = True
                refusals.refused(reason, self.peer)
                transport.pause_reading()  # type: ignore[attr-defined]
                if delay := admission.tarpit():
                    asyncio.get_running_loop().call_later(delay, answer, transport, True)
                else:
                    answer(transport, False)
                return
            super().connection_made(transport)

        def data_received(self, data: bytes) -> None:
            if not self.refused:
                super().data_received(data)

        def eof_received(self) -> bool | None:
            return None if self.refused else super().eof_received()

        def connection_lost(self, exc: Exception | None) -> None:
            if self.refused:
                return
            admission.disconnect(self.peer, self)
            super().connection_lost(exc)

    return AdmittedConnection


def _evicter(refusals: RefusalLog) -> Callable[[Hashable], None]:
    """:class:`Admission`'s ``evict``: drops the oldest connection still without ``hello`` to
    make room for a new one, logged as ``connection_dropped`` in ``refusals``."""

    def evict(connection: Hashable) -> None:
        assert isinstance(connection, ServerConnection)
        refusals.refused("pending_hello", _address(connection.transport), "connection_dropped")
        connection.transport.abort()

    return evict


def _logged(process_request: Callable[[ServerConnection, Request], Awaitable[Response | None]]
            ) -> Callable[[ServerConnection, Request], Awaitable[Response | None]]:
    """``process_request`` (:class:`bridge.http.Pages`) that logs each WebSocket upgrade it
    refuses (a foreign Origin: 403)."""

    async def logged(connection: ServerConnection, request: Request) -> Response | None:
        response = await process_request(connection, request)
        if response is not None and response.status_code == HTTPStatus.FORBIDDEN:
            log.info("connection_refused", reason="origin", origin=request.headers.get("Origin"),
                     address=_address(connection.transport))
        return response

    return logged


def _cap_send_buffer(ws: ServerConnection) -> None:
    """Give a viewer's socket a small kernel send buffer (``VIEWER_SEND_BUFFER_BYTES``)."""
    sock = ws.transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, VIEWER_SEND_BUFFER_BYTES)


_link_decoder = msgspec.json.Decoder(Link)


def _fan_out(viewers: Viewers, world_id: str | None, reply: Reply, cluster: Cluster | None = None) -> None:
    """Pass what ``reply`` says on to the world's overlay viewers, here and (``cluster``) in the
    other processes that have viewers of it (never waits). A ``replay`` carries this process's
    last card of the world if this process decided it (the others' may be older, as they get
    cards only while watching); else each replays the last card it saw."""
    if world_id is None:
        return
    elsewhere = cluster is not None and cluster.watched_elsewhere(world_id)
    if reply.overlay_card is not None:
        viewers.publish(world_id, reply.overlay_card)
        if elsewhere:
            cluster.publish("card", world_id, frame=reply.overlay_card.decode())
    if reply.overlay_action is not None:
        _overlay_action(viewers, world_id, reply.overlay_action)
        if elsewhere:
            last = viewers.last_decided_here(world_id) if reply.overlay_action == "replay" else None
            cluster.publish(reply.overlay_action, world_id, frame=None if last is None else last.decode())


def _overlay_action(viewers: Viewers, world_id: str, action: str, frame: bytes | None = None) -> None:
    """The GM's ``clear`` or ``replay`` (of ``frame``, if given, else of the last card seen
    here) done for this process's viewers of ``world_id``."""
    if action == "clear":
        viewers.clear(world_id)
    elif action == "replay":
        viewers.replay(world_id, frame)


def _notice_handler(viewers: Viewers, forwarders: Forwarders, presence: Presence) -> Callable[[Notice], None]:
    """What another process's notice does here (runs on the event loop, never waits)."""
    closing: set[asyncio.Task[None]] = set()  # take-overs being carried out (kept referenced)

    def on_notice(notice: Notice) -> None:
        if notice.kind == "link":  # for /status: who holds the world's link, wherever it is
            presence.elsewhere(notice.world_id, None if notice.link is None else _link_decoder.decode(notice.link),
                               notice.origin)
        elif notice.kind == "card" and notice.frame is not None:
            viewers.publish(notice.world_id, notice.frame.encode(), here=False)
        elif notice.kind == "lease" and notice.token is not None:
            in_background(closing, forwarders.taken_elsewhere(notice.world_id, notice.token,
                                                              notice.holder or "another connection"))
        else:
            _overlay_action(viewers, notice.world_id, notice.kind, None if notice.frame is None else notice.frame.encode())

    return on_notice


def tls_context(cert: Path, key: Path) -> ssl.SSLContext:
    """A server TLS context from a PEM certificate chain and key. Raises ``ConfigError`` when
    they cannot be loaded."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the TLS certificate {cert} / key {key}: {exc}") from None
    return context


async def start(
    store: Store,
    host: str,
    port: int,
    *,
    dice: Dice | None = None,
    hello_timeout: float = HELLO_TIMEOUT_SECONDS,
    origins: list[str] | None = None,
    tls: ssl.SSLContext | None = None,
    rate: tuple[float, int] | None = DEFAULT_RATE,
    viewers: Viewers | None = None,
    public_url: str | None = None,
    limits: Limits | None = None,
    cluster: Cluster | None = None,
    reuse_port: bool = False,
    drain: Drain | None = None,
) -> Server:
    """Start listening; returns the running server (``server.sockets`` tell the bound port).

    ``origins``: when given, browsers may connect only from these Origin values (e.g.
    ``https://foundry.example.org``) or from the bridge's own overlay page; clients sending no
    Origin (not browsers) are let through to authenticate. ``tls``: serve ``wss://``. ``rate``:
    (frames per second, burst) per world (and per overlay viewer), None for no limit.
    ``viewers``: the overlay fan-out (default: :class:`Viewers` with the default limits).
    ``public_url``: the bridge's address as others reach it, for the module manifest (default:
    the address it listens on, :func:`bridge.startup.listen_base`; never a request's Host).
    ``limits``: connections and hellos per address and in total (default :class:`Limits`).
    ``cluster``: the other bridge processes on the same PostgreSQL store (see
    :mod:`bridge.cluster`). ``reuse_port``: bind with SO_REUSEPORT, so several processes share
    the port (the kernel spreads connections). ``drain``: what
    :func:`serve_until` starts on SIGTERM (pass the same one to both). Raises ``OSError`` when
    the address is taken or cannot be listened on.
    """
    viewers = Viewers(*DEFAULT_VIEWER_LIMITS) if viewers is None else viewers
    presence = Presence()
    refusals = RefusalLog()
    admission = Admission(limits or Limits(), asyncio.get_running_loop().time, _evicter(refusals))
    metrics = Metrics(asyncio.get_running_loop().time, lambda: admission.total)
    metrics.watch(store)
    pages = Pages(store, presence, viewers.count, origins=origins, public_url=public_url, metrics=metrics)
    server = await serve(
        make_handler(store, dice or SecretDice(), hello_timeout, rate, viewers, presence, admission, cluster,
                     metrics, drain),
        host,
        port,
        create_connection=admitted_connection(admission, refusals),
        process_request=_logged(pages),
        max_size=MAX_FRAME_BYTES,
        max_queue=MAX_QUEUE_FRAMES,
        compression=None,
        ssl=tls,
        reuse_port=reuse_port or None,
        start_serving=False,  # bound, not accepting until the manifest's address is known
    )
    if public_url is None:
        pages.public_url = listen_base(host, server.sockets[0].getsockname()[1], tls is not None)
    await server.start_serving()
    return server


def stop_on_signals() -> asyncio.Future[None]:
    """A future resolved by the first SIGTERM or SIGINT. Call it before :func:`start`, so a
    signal arriving as soon as the port answers still shuts down gracefully."""
    loop = asyncio.get_running_loop()
    stop: asyncio.Future[None] = loop.create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: stop.done() or stop.set_result(None))
    return stop


async def serve_until(stop: asyncio.Future[None], server: Server, drain: Drain, store: Store,
                      cluster: Cluster | None = None) -> None:
    """Serve until ``stop`` resolves, then drain and shut down (issue 28): the port is closed (a
    load balancer's next connection, or the kernel's with ``--reuse-port``, goes to another
    process; a handshake caught midway is answered 503), ``drain`` (the one given to
    :func:`start`) closes every connection with 1012 once its frame in flight is answered, and
    once all are closed (at most ``DRAIN_SECONDS``, then the rest are cut off) the cluster link and
    the store are closed (its chains checkpointed)."""
    try:
        await stop
    finally:
        log.info("draining", connections=len(server.connections))
        server.close(close_connections=False)
        drain.start()
        try:
            await asyncio.wait_for(server.wait_closed(), DRAIN_SECONDS)
        except TimeoutError:
            log.warning("drain_timeout", seconds=DRAIN_SECONDS, cut_off=len(server.all_connections))
            for ws in server.all_connections:
                ws.transport.abort()
            await server.wait_closed()
        log.info("shutting_down")
        if cluster is not None:
            await cluster.close()
        await store.close()
