"""The WebSocket server: one asyncio server (websockets' asyncio API).

Each of its connections is a :class:`~bridge.connection.Connection`. They share one
:class:`~bridge.connection.ServerContext`.

Plain HTTP without a WebSocket upgrade is :mod:`bridge.http`. That is health, the overlay page, the
dice check page ``/verify``, the module manifest and zip, status, metrics, and the landing page.

Connections are counted from the TCP accept (:func:`admitted_connection`). One over a
:class:`~bridge.limits.Limits` count gets a 503 before its handshake, logged once
(:class:`RefusalLog`). The counts are per address, in total, not yet past ``hello``, and new per
second.

What one connection does, from its hello to its close, is :mod:`bridge.connection`. The forwarders,
viewers and drain its links join are :mod:`bridge.links`. Other processes' notices (``cluster``)
reach this process's links through :func:`_notice_handler`.

``serve_until`` stops on SIGTERM/SIGINT (see ``stop_on_signals``) by draining
(:class:`~bridge.links.Drain`). The port is closed. Every connection is closed with 1012 (service
restart) once the frame it is handling is answered, within ``DRAIN_SECONDS``. The module reconnects
at once, to another process behind the load balancer. Then the store is closed.
"""

from __future__ import annotations

import asyncio
import signal
import ssl
from collections.abc import Awaitable, Callable, Hashable
from http import HTTPStatus
from pathlib import Path

import msgspec
import structlog
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.http11 import Request, Response

from .cluster import Cluster, Notice
from .connection import Connection, ServerContext, peer_address, rate_refusal
from .dice import Dice, SecretDice
from .errors import ConfigError
from .http import Pages
from .limits import RATE_BURST_SECONDS, RATE_PER_SECOND, Admission, Limits, RegistrationRates, WorldRates
from .link_guard import LinkGuard
from .links import DEFAULT_VIEWER_LIMITS, Drain, Forwarders, Viewers, closer_in_background, in_background
from .metrics import Metrics
from .startup import listen_base
from .status import Link, Presence
from .store import Store
from .wire.guard import MAX_FRAME_BYTES

log = structlog.get_logger("fate_bridge")

# Limits, each with its reason (restated for operators in docs/security.md).
MAX_QUEUE_FRAMES = 16  # frames received but not yet handled per connection, then TCP backpressure
HELLO_TIMEOUT_SECONDS = 10.0  # a browser sends hello right after connecting
DEFAULT_RATE = (RATE_PER_SECOND, int(RATE_PER_SECOND * RATE_BURST_SECONDS))
DRAIN_SECONDS = 15.0  # SIGTERM to closed store at most: a decision in flight takes milliseconds, a
# close 5 s at most; inside systemd's TimeoutStopSec=30 (docs/deploy.md) with room for the store


SERVICE_UNAVAILABLE = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
                       b"Connection: close\r\nContent-Length: 34\r\n\r\ntoo many connections: retry later\n")


REFUSAL_LOG_WINDOW_SECONDS = 10.0


class RefusalLog:
    """Logs every connection refused before its handshake once, without a flood flooding the log.

    The first refusal of an (address, reason) is logged at once. The others within
    ``REFUSAL_LOG_WINDOW_SECONDS`` are counted. They are logged as one line with ``repeated=N`` when
    the window ends."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str, str], int] = {}  # (event, reason, address) -> repeats

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
    """websockets' ``create_connection``: a :class:`ServerConnection` counted in ``admission``.

    It is counted from the moment TCP is accepted. One over a limit is answered ``503`` and closed
    before any byte of it is read: no handshake, no handler, no TLS session kept. That comes after a
    tarpit delay (:meth:`Admission.tarpit`). It is logged once in ``refusals``."""

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
            self.peer = peer_address(transport)
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

        def eof_received(self) -> None:
            if not self.refused:
                super().eof_received()

        def connection_lost(self, exc: Exception | None) -> None:
            if self.refused:
                return
            admission.disconnect(self.peer, self)
            super().connection_lost(exc)

    return AdmittedConnection


def _evicter(refusals: RefusalLog) -> Callable[[Hashable], None]:
    """:class:`Admission`'s ``evict``: drops the oldest connection still without ``hello``.

    That makes room for a new one. It is logged as ``connection_dropped`` in ``refusals``."""

    def evict(connection: Hashable) -> None:
        assert isinstance(connection, ServerConnection)
        refusals.refused("pending_hello", peer_address(connection.transport), "connection_dropped")
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
                     address=peer_address(connection.transport))
        return response

    return logged


_link_decoder = msgspec.json.Decoder(Link)


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
            viewers.act(notice.world_id, notice.kind, None if notice.frame is None else notice.frame.encode())

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


def server_context(
    store: Store,
    *,
    dice: Dice | None = None,
    hello_timeout: float = HELLO_TIMEOUT_SECONDS,
    rate: tuple[float, int] | None = DEFAULT_RATE,
    viewers: Viewers | None = None,
    presence: Presence | None = None,
    admission: Admission | None = None,
    cluster: Cluster | None = None,
    metrics: Metrics | None = None,
    drain: Drain | None = None,
    registrations: RegistrationRates | None = None,
) -> ServerContext:
    """What every connection of one server shares, the missing parts made with their defaults.

    The defaults are :class:`~bridge.dice.SecretDice`, :class:`Viewers` with the default limits,
    :class:`Limits`, and :class:`RegistrationRates` and the buckets on the loop's clock. There is
    one of each per process. ``cluster``'s notices are handled by this server's links.

    - ``rate``: (frames per second, burst), or None for no limit. It applies per world for its
      forwarder (one bucket whatever the connection), and per overlay viewer connection.
    - ``presence``: told which forwarder holds each world's link, for ``/status``.
    - ``drain``: tells when to hand the connections over (SIGTERM, :func:`serve_until`)."""
    presence = Presence() if presence is None else presence
    forwarders = Forwarders(store, cluster, metrics)
    viewers = Viewers(*DEFAULT_VIEWER_LIMITS) if viewers is None else viewers
    if cluster is not None:
        cluster.on_notice = _notice_handler(viewers, forwarders, presence)
    clock = asyncio.get_running_loop().time
    return ServerContext(
        store=store,
        dice=dice or SecretDice(),
        hello_timeout=hello_timeout,
        worlds=None if rate is None else WorldRates(rate[0], rate[1], clock),
        rate_refusal=None if rate is None else rate_refusal(rate[0]),
        viewers=viewers,
        presence=presence,
        admission=Admission(Limits(), clock) if admission is None else admission,
        registrations=RegistrationRates(clock) if registrations is None else registrations,
        forwarders=forwarders,
        guard=LinkGuard(store.worlds_of, closer_in_background()),
        drain=Drain() if drain is None else drain,
        cluster=cluster,
        metrics=metrics,
    )


def make_handler(context: ServerContext) -> Callable[[ServerConnection], Awaitable[None]]:
    """The per-connection coroutine for ``websockets.serve``: one :class:`Connection` each;
    always returns, never raises."""

    async def handler(ws: ServerConnection) -> None:
        await Connection(context, ws).run()

    return handler


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

    - ``origins``: when given, browsers may connect only from these Origin values (e.g.
      ``https://foundry.example.org``), or from the bridge's own overlay page. Clients sending no
      Origin (not browsers) are let through to authenticate.
    - ``tls``: serve ``wss://``.
    - ``rate``: (frames per second, burst) per world, and per overlay viewer. None for no limit.
    - ``viewers``: the overlay fan-out. Default: :class:`Viewers` with the default limits.
    - ``public_url``: the bridge's address as others reach it, for the module manifest. Default: the
      address it listens on (:func:`bridge.startup.listen_base`). Never a request's Host.
    - ``limits``: connections and hellos per address and in total. Default: :class:`Limits`.
    - ``cluster``: the other bridge processes on the same PostgreSQL store (see
      :mod:`bridge.cluster`).
    - ``reuse_port``: bind with SO_REUSEPORT, so several processes share the port. The kernel spreads
      connections.
    - ``drain``: what :func:`serve_until` starts on SIGTERM. Pass the same one to both.

    Raises ``OSError`` when the address is taken or cannot be listened on."""
    viewers = Viewers(*DEFAULT_VIEWER_LIMITS) if viewers is None else viewers
    presence = Presence()
    refusals = RefusalLog()
    admission = Admission(limits or Limits(), asyncio.get_running_loop().time, _evicter(refusals))
    metrics = Metrics(asyncio.get_running_loop().time, lambda: admission.total)
    metrics.watch(store)
    pages = Pages(store, presence, viewers.count, origins=origins, public_url=public_url, metrics=metrics)
    context = server_context(store, dice=dice, hello_timeout=hello_timeout, rate=rate, viewers=viewers,
                             presence=presence, admission=admission, cluster=cluster, metrics=metrics, drain=drain)
    server = await serve(
        make_handler(context),
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

    def stop_once() -> None:
        if not stop.done():
            stop.set_result(None)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop_once)
    return stop


async def serve_until(stop: asyncio.Future[None], server: Server, drain: Drain, store: Store,
                      cluster: Cluster | None = None) -> None:
    """Serve until ``stop`` resolves, then drain and shut down.

    The port is closed first. A load balancer's next connection, or the kernel's with
    ``--reuse-port``, goes to another process. A handshake caught midway is answered 503. ``drain``
    (the one given to :func:`start`) closes every connection with 1012, once its frame in flight is
    answered. Once all are closed, the cluster link and the store are closed; the store checkpoints
    its chains. The wait is at most ``DRAIN_SECONDS``; then the rest are cut off."""
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
