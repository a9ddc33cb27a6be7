"""The process's open WebSocket links, by role, and how each is closed.

One forwarder per world (:class:`Forwarders`): a newer authenticated connection closes the older
with 4003, in the background (a half-open older link never delays it); across processes the
world's lease decides which one holds it. Overlay viewers (:class:`Viewers`) get each public card
of their world through their own bounded queue and sender task, so a stuck viewer never delays a
decision or another viewer; it is closed with 4004. On SIGTERM :class:`Drain` closes every link
with 1012 once the frame it is handling is answered. A link closed by someone else than its own
connection (superseded, revoked, drained) is closed in a task of its own, cut off when its peer
does not answer the close in time.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import structlog
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.frames import CloseCode

from . import wire
from .cluster import Cluster
from .link_guard import close_reason
from .metrics import Metrics
from .session import CLOSE_SUPERSEDED, CLOSE_VIEWER_TOO_SLOW
from .store import Store

log = structlog.get_logger("fate_bridge")

# Limits, each with its reason (restated for operators in docs/security.md).
VIEWER_QUEUE_FRAMES = 32  # cards waiting for one viewer: a table shows a few a minute, so 32
# unsent cards means the viewer stopped reading (the page needs no backlog: it reconnects fresh)
VIEWER_SEND_TIMEOUT_SECONDS = 10.0  # a card is a few KiB: a viewer not taking one in 10 s is stuck
MAX_VIEWERS_PER_WORLD = 20  # OBS, a preview tab or two per streamer; a leaked key cannot pile up
DEFAULT_VIEWER_LIMITS = (VIEWER_QUEUE_FRAMES, VIEWER_SEND_TIMEOUT_SECONDS)
SUPERSEDED_CLOSE_SECONDS = 10.0  # a superseded (or revoked: bridge/link_guard.py) link's closing
# handshake, in the background: a half-open one (its peer gone without a word) never answers, and
# is cut off after this
DRAIN_CLOSE_SECONDS = 5.0  # a drained link's closing handshake: a peer answers in milliseconds; a
# half-open one never does and is cut off after this
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
    two forwarders racing on two processes holds the world, whatever the timing: the
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
        self._store: Store | None = store if cluster is not None else None
        self._cluster: Cluster | None = cluster
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
    """SIGTERM's hand-over of a process's connections. Once :meth:`start` is called,
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
class Viewer:
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
        self._by_world: dict[str, set[Viewer]] = {}
        self._last: dict[str, bytes] = {}
        self._decided_here: set[str] = set()  # worlds whose last card this process decided

    def add(self, world_id: str, ws: ServerConnection) -> Viewer | None:
        """Register ``ws`` as a viewer of ``world_id``; None when the world has
        ``max_per_world`` viewers already."""
        viewers = self._by_world.setdefault(world_id, set())
        if len(viewers) >= self.max_per_world:
            return None
        viewer = Viewer(world_id, ws)
        viewers.add(viewer)
        return viewer

    def remove(self, viewer: Viewer) -> None:
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

    def act(self, world_id: str, action: str, frame: bytes | None = None) -> None:
        """The GM's overlay ``action`` (``clear``, or ``replay`` of ``frame`` if given, else of the
        last card seen here) done for this process's viewers of ``world_id``."""
        if action == "clear":
            self.clear(world_id)
        elif action == "replay":
            self.replay(world_id, frame)

    def _send_all(self, world_id: str, frame: bytes) -> None:
        for viewer in self._by_world.get(world_id, ()):
            if len(viewer.frames) >= self.queue_frames:
                viewer.overflowed = True
            else:
                viewer.frames.append(frame)
            viewer.ready.set()

    async def pump(self, viewer: Viewer) -> None:
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



def closer_in_background() -> Callable[[ServerConnection, int, str], None]:
    """A close that never waits (:class:`~bridge.link_guard.LinkGuard`'s, for revoked links):
    ``ws`` closed with ``code`` and ``reason`` in a task of its own, cut off after
    ``SUPERSEDED_CLOSE_SECONDS`` as a superseded link is (its peer may be gone without a word)."""
    closing: set[asyncio.Task[None]] = set()  # links closing (kept referenced)

    def close(ws: ServerConnection, code: int, reason: str) -> None:
        in_background(closing, close_within(ws, SUPERSEDED_CLOSE_SECONDS, code, reason))

    return close
