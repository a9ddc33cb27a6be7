"""Bridge processes sharing one PostgreSQL database tell each other what their sockets must know.

That is: overlay cards, ``clear``/``replay``, forwarder take-overs, and who holds each world's link
(for ``/status``). They use PostgreSQL LISTEN/NOTIFY.

Why LISTEN/NOTIFY (docs/deploy.md says more): the processes share PostgreSQL already. So fan-out
needs no second service to run, secure and watch. And a notice reaches every listening process in
commit order. Its limits:

- a payload of at most 8000 bytes. Bigger ones, rare, go through the ``notices`` table, and the
  notice carries their id.
- one notification queue per database (8 GB).
- one listening connection per process.
- every notice reaches every listening process.

So cards go only where they are watched. A process tells the others when a world gets its first
overlay viewer there (``watch``), and when it loses its last (``unwatch``). It publishes a world's
cards, ``clear`` and ``replay`` only while another process watches it
(:meth:`Cluster.watched_elsewhere`). A process that starts, or whose connection was made again, asks
the others what they watch (``hello``). Until :data:`LEARN_SECONDS` have passed, it publishes every
world's cards. One that stops says ``bye``.

A viewer's welcome waits until its ``watch`` has come back to this process's listener. The others'
listeners get it at the same time. A card another process decides just before it reads that notice
can still miss the viewer. That is best effort, as the overlay is. A process killed outright leaves
its worlds marked watched elsewhere. Their cards are published for nobody, as every card was before.

Each process listens on one channel (``fate_bridge_<schema>``) with a connection of its own. It
publishes from another, in order. One publisher task sends them; notices queued meanwhile go in one
statement, one transaction. A lost connection is made again. A notice names its sender, so a process
skips its own; its sockets were served directly.

Delivery is best-effort, like the overlay itself. A notice lost while a connection is re-made loses
a card on screen, never a decision. Decisions live in the database, and the lease's fencing token
also enforces a forwarder's take-over.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
from collections.abc import Callable
from typing import Any

import msgspec
import structlog

from .config import db_label

log = structlog.get_logger("fate_bridge")

CHANNEL = "fate_bridge"
MAX_PAYLOAD = 7900  # bytes; PostgreSQL's NOTIFY takes at most 8000
NOTICE_KEEP_SECONDS = 60  # a large notice stays in ``notices`` this long for late readers
RECONNECT_SECONDS = 0.5  # wait before making a lost connection again
CLOSE_FLUSH_SECONDS = 2.0  # at shutdown, how long notices still queued may take to go out
LEARN_SECONDS = 2.0  # after opening, every world's cards are published while the others answer hello
HEARD_SECONDS = 1.0  # at most this long a viewer's welcome waits for its watch notice to come back


class Notice(msgspec.Struct, omit_defaults=True):
    """One message between processes.

    ``kind`` is one of:

    - ``card``. ``frame``: an encoded ``overlay_card``.
    - ``clear``.
    - ``replay``. ``frame``: the sender's last card of the world, if it has one.
    - ``watch``/``unwatch``. The sender's first overlay viewer of the world came, or its last went.
    - ``hello``. The sender started: say what you watch.
    - ``bye``. The sender stops: forget what it watched.
    - ``lease``. ``token``: the new fencing token. ``holder``: who connected.
    - ``link``. ``link``: the encoded ``bridge.status.Link`` of the world's forwarder, for
      ``/status``. None: nobody holds it any more.

    ``origin`` is the sending process's id. ``ref`` is the row of a large notice kept in
    ``notices``; the other fields are then empty."""

    origin: str
    kind: str = ""
    world_id: str = ""
    frame: str | None = None
    token: int | None = None
    holder: str | None = None
    link: str | None = None
    ref: int | None = None


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(Notice).decode

Handler = Callable[[Notice], None]


class Cluster:
    """This process's link to the others.

    :meth:`publish` queues a notice and never waits. ``on_notice`` is called on the event loop with
    every other process's notice, in order. The server sets it; until then notices are dropped.
    ``name`` (``host:pid``) is how this process is named to people. It appears in a superseded
    forwarder's 4003 reason and the lease's ``holder``. ``origin``, random, tells processes apart in
    notices. Use :meth:`open` to construct, :meth:`close` to stop."""

    def __init__(self, url: str, on_notice: Handler = lambda notice: None) -> None:
        self.url, self.on_notice = url, on_notice
        self.origin = secrets.token_hex(6)
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self.channel = CHANNEL  # + the schema's name, once connected
        self._queue: asyncio.Queue[Notice | asyncio.Future[None]] = asyncio.Queue()
        self._viewed: dict[str, int] = {}  # world -> overlay viewers here (watch/unwatch)
        self._watchers: dict[str, set[str]] = {}  # world -> origins of the processes watching it
        self._heard: dict[str, asyncio.Future[None]] = {}  # world -> its watch notice back here
        self._learning_until = 0.0  # the loop's time until which every world counts as watched
        self._listen: Any = None
        self._send: Any = None
        self._tasks: list[asyncio.Task[None]] = []

    @classmethod
    async def open(cls, url: str, on_notice: Handler = lambda notice: None) -> Cluster:
        """Connect (two connections), LISTEN, and start the listener and publisher tasks.
        Raises ``ConfigError`` when the database cannot be reached."""
        import psycopg

        from .errors import ConfigError

        cluster = cls(url, on_notice)
        try:
            cluster._send = await cluster._connect()
            cur = await cluster._send.execute("SELECT current_schema()")
            # one channel per schema: bridges of other schemas in the same database stay apart
            cluster.channel = f"{CHANNEL}_{(await cur.fetchone())[0]}"[:63]
            cluster._listen = await cluster._listening()
        except psycopg.Error as exc:
            await cluster.close()
            raise ConfigError(f"cannot listen for other bridge processes on {db_label(url)}: {exc}") from None
        cluster._tasks = [asyncio.create_task(cluster._listener()),
                          asyncio.create_task(cluster._publisher())]
        cluster._learning_until = asyncio.get_running_loop().time() + LEARN_SECONDS
        cluster.publish("hello", "")
        return cluster

    async def _connect(self) -> Any:
        import psycopg

        return await psycopg.AsyncConnection.connect(self.url, autocommit=True,
                                                     application_name=f"fate-bridge-cluster-{self.origin}")

    async def _listening(self) -> Any:
        from psycopg import sql

        conn = await self._connect()
        await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
        return conn

    def publish(self, kind: str, world_id: str, **fields: Any) -> None:
        """Queue a notice for every other process (sent in the order published)."""
        self._queue.put_nowait(Notice(origin=self.origin, kind=kind, world_id=world_id, **fields))

    def watched_elsewhere(self, world_id: str) -> bool:
        """Whether another process has overlay viewers of ``world_id``.

        Also True when this one started less than :data:`LEARN_SECONDS` ago. Then its cards,
        ``clear`` and ``replay`` are worth publishing."""
        return bool(self._watchers.get(world_id)) or asyncio.get_running_loop().time() < self._learning_until

    async def watch(self, world_id: str) -> None:
        """Count an overlay viewer of ``world_id`` here; the first one is announced to the others
        (``watch``).

        Returns once that notice has come back to this process's own listener. PostgreSQL delivers a
        notice to every listener at once, so the others have it too. The wait is at most
        :data:`HEARD_SECONDS`: a reconnecting listener welcomes the viewer without it. A second
        viewer arriving meanwhile waits for the same notice."""
        self._viewed[world_id] = self._viewed.get(world_id, 0) + 1
        heard = self._heard.get(world_id)
        if self._viewed[world_id] == 1 and heard is None:
            heard = self._heard[world_id] = asyncio.get_running_loop().create_future()
            self.publish("watch", world_id)
        if heard is not None:
            try:
                await asyncio.wait_for(asyncio.shield(heard), HEARD_SECONDS)
            except TimeoutError:
                pass
            finally:
                if self._heard.get(world_id) is heard:
                    del self._heard[world_id]

    def unwatch(self, world_id: str) -> None:
        """Count an overlay viewer of ``world_id`` here gone; the last one's going is announced."""
        left = self._viewed.get(world_id, 0) - 1
        if left > 0:
            self._viewed[world_id] = left
        elif self._viewed.pop(world_id, None) is not None:
            self.publish("unwatch", world_id)

    async def flush(self) -> None:
        """Wait until every notice published so far has been sent."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(done)
        await done

    async def _publisher(self) -> None:
        """Send the queued notices in order.

        Every notice queued by the time the last statement returned goes in one statement, one
        transaction. So a batch of cards costs one round trip and one commit. It wakes each
        listening process once: PostgreSQL signals its listeners once per commit. They are delivered
        one by one, in that order. Identical ones within a transaction reach listeners once
        (PostgreSQL's NOTIFY rule). For a repeated ``clear`` or ``link`` that is the same."""
        while True:
            queued = [await self._queue.get()]
            while not self._queue.empty():
                queued.append(self._queue.get_nowait())
            notices: list[Notice] = []
            for item in queued:
                if isinstance(item, asyncio.Future):  # a flush: what came before it is sent first
                    await self._send_all(notices)
                    notices = []
                    item.set_result(None)
                else:
                    notices.append(item)
            await self._send_all(notices)

    async def _send_all(self, notices: list[Notice]) -> None:
        """NOTIFY ``notices`` in one statement (none: nothing). A lost connection is made again
        once, then they are dropped (logged)."""
        if not notices:
            return
        payloads = [_encode(notice).decode() for notice in notices]
        for attempt in (1, 2):
            try:
                for i, payload in enumerate(payloads):
                    if len(payload) > MAX_PAYLOAD:
                        payloads[i] = await self._keep_large(payload)
                # %b: the array goes in binary; psycopg's text form escapes every quote of every
                # payload in Python (~1 ms per 2 kB card, against ~5 us)
                await self._send.execute("SELECT pg_notify(%s, payload) FROM unnest(%b::text[]) AS payload",
                                         (self.channel, payloads))
                return
            except Exception as exc:
                # One line per failure, without a traceback: a database away is the storage's
                # outage, logged by the store once when it starts and once when it ends.
                log.warning("cluster_publish_failed", notices=len(notices), kind=notices[0].kind,
                            world_id=notices[0].world_id, error=str(exc).strip() or type(exc).__name__)
                if attempt == 1 and self._send.closed:
                    await asyncio.sleep(RECONNECT_SECONDS)
                    self._send = await self._reconnect(self._connect)
                    self._relearn()  # (a watch among notices dropped would be lost for good)

    async def _keep_large(self, payload: str) -> str:
        """Store a notice too large for NOTIFY; the notice sent instead names its row."""
        cur = await self._send.execute(
            "INSERT INTO notices (payload, at) VALUES (%s, now()) RETURNING id", (payload,))
        (ref,) = await cur.fetchone()
        await self._send.execute("DELETE FROM notices WHERE at < now() - make_interval(secs => %s)",
                                 (NOTICE_KEEP_SECONDS,))
        return _encode(Notice(origin=self.origin, ref=ref)).decode()

    async def _listener(self) -> None:
        import psycopg

        while True:
            try:
                async for note in self._listen.notifies():
                    await self._deliver(note.payload, note.pid)
            except psycopg.OperationalError:  # the connection was lost: listen again
                log.warning("cluster_listen_lost", retry_s=RECONNECT_SECONDS)
                await asyncio.sleep(RECONNECT_SECONDS)
                self._listen = await self._reconnect(self._listening)
                self._relearn()

    def _relearn(self) -> None:
        """After a connection of ours was made again: notices may have been lost meanwhile.

        Ask the others what they watch. Publish every world's cards while they answer. Say again
        what this process watches."""
        self._learning_until = asyncio.get_running_loop().time() + LEARN_SECONDS
        self.publish("hello", "")
        for world_id in self._viewed:
            self.publish("watch", world_id)

    async def _reconnect(self, make: Callable[[], Any]) -> Any:
        """A new connection from ``make``, tried every ``RECONNECT_SECONDS`` until it works."""
        import psycopg

        while True:
            try:
                return await make()
            except psycopg.Error:
                await asyncio.sleep(RECONNECT_SECONDS)

    async def _deliver(self, payload: str, pid: int) -> None:
        if self._send is not None and pid == self._send.info.backend_pid:
            # this process's own notice: not decoded (most are cards, ~2 kB of JSON each), unless
            # a viewer's welcome waits for its watch notice to come back (watch)
            if self._heard and (own := _decode(payload)).kind == "watch":
                heard = self._heard.get(own.world_id)
                if heard is not None and not heard.done():
                    heard.set_result(None)
            return
        try:
            notice = _decode(payload)
            if notice.origin == self.origin:
                return
            if notice.ref is not None:
                cur = await self._send.execute("SELECT payload FROM notices WHERE id = %s", (notice.ref,))
                row = await cur.fetchone()
                if row is None:
                    return
                notice = _decode(row[0])
            if not self._watching(notice):
                self.on_notice(notice)
        except Exception:
            log.exception("cluster_notice_failed")

    def _watching(self, notice: Notice) -> bool:
        """Keep track of who watches what: ``watch``, ``unwatch``, ``hello``, ``bye``.

        True when the notice was one of those, handled here."""
        if notice.kind == "watch":
            self._watchers.setdefault(notice.world_id, set()).add(notice.origin)
        elif notice.kind == "unwatch":
            self._forget_watcher(notice.world_id, notice.origin)
        elif notice.kind == "hello":
            for world_id in self._viewed:
                self.publish("watch", world_id)
        elif notice.kind == "bye":
            for world_id in list(self._watchers):
                self._forget_watcher(world_id, notice.origin)
        else:
            return False
        return True

    def _forget_watcher(self, world_id: str, origin: str) -> None:
        origins = self._watchers.get(world_id)
        if origins is not None:
            origins.discard(origin)
            if not origins:
                del self._watchers[world_id]

    async def close(self) -> None:
        """Send what was published, stop the tasks and close both connections; idempotent.

        Sending waits up to ``CLOSE_FLUSH_SECONDS``: the links this process held are going away."""
        if self._tasks and not self._tasks[-1].done():
            self.publish("bye", "")
            try:
                await asyncio.wait_for(self.flush(), CLOSE_FLUSH_SECONDS)
            except TimeoutError:
                pass
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        self._tasks = []
        for conn in (self._listen, self._send):
            if conn is not None:
                await conn.close()
        self._listen = self._send = None
