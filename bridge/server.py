"""The WebSocket server: moves frames between sockets and :class:`~bridge.session.Session`.

One asyncio server (websockets' asyncio API). ``GET /healthz`` answers ``200 ok`` without a
WebSocket upgrade. Each connection: the first frame must come within ``hello_timeout`` seconds
(else close 4002); frames are handled one at a time, in order, each answered before the next is
read; past the rate limit a frame is answered ``rate_limited`` and not handled. One forwarder per
world: a newer authenticated connection closes the older with 4003. ``serve_until`` stops on SIGTERM/SIGINT (see ``stop_on_signals``): clients are closed with 1001 (going away) after
in-flight decisions finish, then the store is closed.
"""

from __future__ import annotations

import asyncio
import signal
import ssl
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from pathlib import Path

import structlog
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from .dice import Dice, SecretDice
from .errors import ConfigError, RateLimited
from .session import CLOSE_HELLO_TIMEOUT, CLOSE_SUPERSEDED, Reply, Session, error_frame
from .store import Store
from .wire import ref_of

log = structlog.get_logger("fate_bridge")

# Limits, each with its reason (restated for operators in docs/security.md).
MAX_FRAME_BYTES = 64 * 1024  # a test_rolled with a full actor is ~4 KiB; 64 KiB leaves room
MAX_QUEUE_FRAMES = 16  # frames received but not yet handled per connection, then TCP backpressure
HELLO_TIMEOUT_SECONDS = 10.0  # a browser sends hello right after connecting
RATE_PER_SECOND = 20.0  # a table makes a few decisions a minute; a replay burst after reconnect
RATE_BURST_SECONDS = 5.0  # ... re-sends at most the queued messages at once: 100 frames
HEALTH_PATH = "/healthz"
DEFAULT_RATE = (RATE_PER_SECOND, int(RATE_PER_SECOND * RATE_BURST_SECONDS))


class RateLimit:
    """A token bucket: ``rate`` frames per second on average, bursts up to ``burst``.

    ``clock`` returns seconds (monotonic); ``allow()`` takes one token or says no."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float]) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self.tokens = float(burst)
        self.last = clock()

    def allow(self) -> bool:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


def _health(connection: ServerConnection, request: Request) -> Response | None:
    if request.path == HEALTH_PATH:
        return connection.respond(HTTPStatus.OK, "ok\n")
    return None


class Forwarders:
    """The one forwarder connection of each world: a newer one supersedes the older (the GM
    reloaded, or another GM's browser took over), which is closed with 4003."""

    def __init__(self) -> None:
        self._by_world: dict[str, ServerConnection] = {}

    async def claim(self, world_id: str, ws: ServerConnection, holder: str) -> None:
        """Make ``ws`` the forwarder of ``world_id``, closing the previous one."""
        previous = self._by_world.get(world_id)
        self._by_world[world_id] = ws
        if previous is not None and previous is not ws:
            log.info("forwarder_superseded", world_id=world_id, holder=holder)
            reason = f"superseded by {holder}".encode()[:MAX_CLOSE_REASON].decode(errors="ignore")
            await previous.close(CLOSE_SUPERSEDED, reason)

    def release(self, world_id: str | None, ws: ServerConnection) -> None:
        """Forget ``ws`` if it still is the forwarder of ``world_id``."""
        if world_id is not None and self._by_world.get(world_id) is ws:
            del self._by_world[world_id]


MAX_CLOSE_REASON = 123  # bytes: RFC 6455 close frames carry at most 125, 2 of them the code


def make_handler(
    store: Store,
    dice: Dice,
    hello_timeout: float,
    rate: tuple[float, int] | None = DEFAULT_RATE,
) -> Callable[[ServerConnection], Awaitable[None]]:
    """The per-connection coroutine for ``websockets.serve``: always returns, never raises.
    ``rate``: (frames per second, burst) per connection, or None for no limit."""
    forwarders = Forwarders()
    clock = asyncio.get_running_loop().time

    async def handler(ws: ServerConnection) -> None:
        session = Session(store, dice)
        limit = None if rate is None else RateLimit(rate[0], rate[1], clock)
        try:
            async with asyncio.timeout(hello_timeout):
                frame: str | bytes = await ws.recv()
        except TimeoutError:
            await ws.close(CLOSE_HELLO_TIMEOUT, "hello not received in time")
            return
        except ConnectionClosed:
            return
        try:
            while True:
                was_open = session.is_open
                if limit is None or limit.allow():
                    reply = await session.receive(frame)
                else:
                    reply = Reply([error_frame(RateLimited(RATE_MESSAGE), ref_of(frame))])
                for out in reply.frames:
                    await ws.send(out.decode())
                if reply.close_code is not None:
                    await ws.close(reply.close_code, "unauthorized")
                    return
                if session.is_open and not was_open:
                    await forwarders.claim(session.world_id, ws, session.holder)
                frame = await ws.recv()
        except ConnectionClosed:
            return
        finally:
            forwarders.release(session.world_id, ws)

    return handler


RATE_MESSAGE = (f"more than {RATE_PER_SECOND:g} messages a second: this one was not handled; "
                "send it again later with the same event_id")


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
) -> Server:
    """Start listening; returns the running server (``server.sockets`` tell the bound port).

    ``origins``: when given, browsers may connect only from these Origin values (e.g.
    ``https://foundry.example.org``); clients sending no Origin (not browsers) are let through
    to authenticate. ``tls``: serve ``wss://``. ``rate``: (frames per second, burst) per
    connection, None for no limit. Raises ``OSError`` when the address is taken.
    """
    return await serve(
        make_handler(store, dice or SecretDice(), hello_timeout, rate),
        host,
        port,
        process_request=_health,
        max_size=MAX_FRAME_BYTES,
        max_queue=MAX_QUEUE_FRAMES,
        compression=None,
        origins=None if origins is None else [*origins, None],
        ssl=tls,
    )


def stop_on_signals() -> asyncio.Future[None]:
    """A future resolved by the first SIGTERM or SIGINT. Call it before :func:`start`, so a
    signal arriving as soon as the port answers still shuts down gracefully."""
    loop = asyncio.get_running_loop()
    stop: asyncio.Future[None] = loop.create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: stop.done() or stop.set_result(None))
    return stop


async def serve_until(stop: asyncio.Future[None], server: Server, store: Store) -> None:
    """Serve until ``stop`` resolves, then shut down gracefully: every connection closed with
    1001 once its current frame is handled, then the store closed (its chains checkpointed)."""
    try:
        await stop
    finally:
        log.info("shutting_down")
        server.close()  # closes every connection with 1001 once its current frame is handled
        await server.wait_closed()
        await store.close()
