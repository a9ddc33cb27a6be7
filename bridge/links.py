"""The process's open WebSocket links, by role, and how each is closed.

One forwarder per world (:class:`Forwarders`). A newer authenticated connection closes the older
with 4003, in the background; a half-open older link never delays it. Across processes, the world's
lease decides which one holds it.

Overlay viewers (:class:`Viewers`) get each public card of their world through their own bounded
queue and sender task. So a stuck viewer never delays a decision or another viewer. It is closed
with 4004.

On SIGTERM, :class:`Drain` closes every link with 1012 once the frame it is handling is answered. A
link closed by someone other than its own connection is closed in a task of its own: superseded,
revoked, drained. It is cut off when its peer does not answer the close in time.
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
    """The one forwarder connection of each world.

    A newer one supersedes the older: the GM reloaded, or another GM's browser took over. The older
    is closed with 4003 in the background, within ``SUPERSEDED_CLOSE_SECONDS``, then cut off. The
    newer link never waits for the old one's peer. That peer may be gone without a word (a half-open
    TCP link).

    Across processes (``cluster``, on the PostgreSQL store), claiming a world takes its lease
    (:meth:`~bridge.store.postgres.PostgresStore.take_lease`). It tells the other processes, which
    close their forwarder of the world (:meth:`taken_elsewhere`). The lease's fencing token keeps a
    process that has not heard yet from writing.

    The token alone decides which of two forwarders racing on two processes holds the world,
    whatever the timing. The one whose lease was taken later wins. A world's claims, and the other
    processes' lease notices of it, are carried out here one at a time, in the order they came
    (:meth:`_turn`). So a claim has its token before a notice of a newer one (taken after it began)
    is looked at. A notice of an older one, arriving while a claim waits for its token, is looked at
    after it and changes nothing. The loser is closed 4003, naming who holds the world and on which
    process (``holder on host:pid``, :attr:`bridge.cluster.Cluster.name`)."""

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
        """Hold ``world_id``'s turn: one claim or lease notice of a world at a time.

        First come, first served: asyncio.Lock wakes its waiters in order. The turn is forgotten
        when nobody waits."""
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
        """Make ``ws`` the forwarder of ``world_id``, closing the previous one.

        The previous one may be here or in another process. Here it is closed without waiting.
        ``holder``: who connected, as the 4003 reason names them."""
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
        """Another process took ``world_id``'s lease with ``token``.

        Close this process's forwarder of it if its token is older. The 4003 names ``holder``."""
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
        """Who holds ``world_id`` now, for the 4003 of a forwarder the lease's fencing refused.

        That refusal is ``LeaseLost``: its process had not heard of the take-over yet."""
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
    """Run ``work`` in a task of its own, kept in ``tasks`` until it is done.

    asyncio keeps only a weak reference to a running task. One nobody holds may be collected
    mid-way."""
    task = asyncio.ensure_future(work)
    tasks.add(task)
    task.add_done_callback(tasks.discard)


def superseded_reason(holder: str) -> str:
    """A 4003's close reason: ``superseded by HOLDER``.

    The module shows HOLDER to the GM (foundry-module/scripts/logic/connection.js ``supersededBy``).
    It is cut to a close frame's room (:func:`~bridge.link_guard.close_reason`)."""
    return close_reason(f"superseded by {holder}")


class Drain:
    """SIGTERM's hand-over of a process's connections.

    Once :meth:`start` is called, every connection is closed with 1012 (service restart) as soon as
    it is not handling a frame. The module reconnects at once. The load balancer, or the kernel with
    ``--reuse-port``, sends it to another process. A connection waiting for a frame closes at once.
    One handling a frame closes once that frame's reply is sent. So a decision in flight is
    committed and answered.

    A frame received after the drain began is left unhandled. The module sends it again, same
    ``event_id``, on its next link. A connection opened meanwhile is closed before its hello is
    handled."""

    def __init__(self) -> None:
        self.draining = False
        self._waiting: set[ServerConnection] = set()  # in ``recv``: nothing in flight
        self._closing: set[asyncio.Task[None]] = set()  # drained links closing (kept referenced)

    async def recv(self, ws: ServerConnection) -> str | bytes | None:
        """``ws``'s next frame; None when the process is draining.

        None comes before the wait, or for a frame that came as draining began. The caller then
        closes ``ws`` with :meth:`close`. Raises ``ConnectionClosed`` as ``ws.recv()`` does. A drain
        closes a waiting link by itself."""
        if self.draining:
            return None
        self._waiting.add(ws)
        try:
            frame = await ws.recv()
        finally:
            self._waiting.discard(ws)
        return None if self.draining else frame

    def start(self) -> None:
        """Begin draining: close every link waiting for a frame now, in the background.

        The others close themselves after their frame in flight: :meth:`recv` returns None."""
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
    """The overlay viewers of each world, and each world's last public card.

    The last card is for ``replay``; it is kept in memory since the bridge started.

    Fan-out never waits. :meth:`publish` (and :meth:`clear`, :meth:`replay`) only append to each
    viewer's queue of at most ``queue_frames`` frames. Each viewer's own task (:meth:`pump`) sends
    them in order, each within ``send_timeout`` seconds. A viewer is forgotten and closed with 4004
    when its queue overflowed, or its send timed out. An overflow is seen when its send in flight
    ends. The close happens within ``send_timeout``. A stuck peer, which cannot take the close
    frame, is then cut off. The page reconnects by itself."""

    def __init__(self, queue_frames: int, send_timeout: float,
                 max_per_world: int = MAX_VIEWERS_PER_WORLD) -> None:
        self.queue_frames, self.send_timeout, self.max_per_world = queue_frames, send_timeout, max_per_world
        self._by_world: dict[str, set[Viewer]] = {}
        self._last: dict[str, bytes] = {}
        self._decided_here: set[str] = set()  # worlds whose last card this process decided

    def add(self, world_id: str, ws: ServerConnection) -> Viewer | None:
        """Register ``ws`` as a viewer of ``world_id``.

        None when the world has ``max_per_world`` viewers already."""
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
        """Queue an ``overlay_card`` frame for every viewer of ``world_id``, and keep it as the last card.

        ``here``: decided by this process. False: another process decided it, and a notice told us."""
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
        """Queue the world's last card again for its viewers; nothing when there is none.

        ``frame``: that card, as another process knows it. It is kept as the last one here too."""
        if frame is not None:
            self._last[world_id] = frame
            self._decided_here.discard(world_id)
        last = self._last.get(world_id)
        if last is not None:
            self._send_all(world_id, last)

    def last_decided_here(self, world_id: str) -> bytes | None:
        """The world's last card if this process decided it.

        None when there is none, or it came from another process. That process may have missed newer
        ones while nobody here watched."""
        return self._last.get(world_id) if world_id in self._decided_here else None

    def act(self, world_id: str, action: str, frame: bytes | None = None) -> None:
        """Do the GM's overlay ``action`` for this process's viewers of ``world_id``.

        The action is ``clear``, or ``replay``. A replay shows ``frame`` if given, else the last
        card seen here."""
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
        """Send ``viewer`` its queued frames, one at a time, until its connection closes or it falls
        behind.

        One that falls behind is forgotten and closed with 4004. Run it as the viewer's own task. It
        never raises ``ConnectionClosed``."""
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
    """Close ``ws`` with ``code`` and ``reason``.

    A peer that has not completed the closing handshake within ``seconds`` is cut off (TCP abort).
    It may be stuck, or gone without a word."""
    try:
        async with asyncio.timeout(seconds):
            await ws.close(code, reason)
    except TimeoutError:
        ws.transport.abort()  # the close frame cannot get through, or no answer comes



def closer_in_background() -> Callable[[ServerConnection, int, str], None]:
    """A close that never waits: :class:`~bridge.link_guard.LinkGuard`'s, for revoked links.

    ``ws`` is closed with ``code`` and ``reason`` in a task of its own. It is cut off after
    ``SUPERSEDED_CLOSE_SECONDS``, as a superseded link is. Its peer may be gone without a word."""
    closing: set[asyncio.Task[None]] = set()  # links closing (kept referenced)

    def close(ws: ServerConnection, code: int, reason: str) -> None:
        in_background(closing, close_within(ws, SUPERSEDED_CLOSE_SECONDS, code, reason))

    return close
