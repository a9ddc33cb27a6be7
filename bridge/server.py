"""The WebSocket server: moves frames between sockets and :class:`~bridge.session.Session`.

One asyncio server (websockets' asyncio API). ``GET /healthz`` answers ``200 ok`` without a
WebSocket upgrade. Each connection: the first frame must come within ``hello_timeout`` seconds
(else close 4002); frames are handled one at a time, in order, each answered before the next is
read. ``serve_until`` stops on SIGTERM/SIGINT (see ``stop_on_signals``): clients are closed with 1001 (going away) after
in-flight decisions finish, then the store is closed.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from http import HTTPStatus

import structlog
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from .dice import Dice, SecretDice
from .session import CLOSE_HELLO_TIMEOUT, Session
from .store import Store

log = structlog.get_logger("fate_bridge")

MAX_FRAME_BYTES = 64 * 1024  # a test_rolled with a full actor is ~4 KiB; 64 KiB leaves room
HELLO_TIMEOUT_SECONDS = 10.0  # a browser sends hello right after connecting
HEALTH_PATH = "/healthz"


def _health(connection: ServerConnection, request: Request) -> Response | None:
    if request.path == HEALTH_PATH:
        return connection.respond(HTTPStatus.OK, "ok\n")
    return None


def make_handler(
    store: Store, dice: Dice, hello_timeout: float
) -> Callable[[ServerConnection], Awaitable[None]]:
    """The per-connection coroutine for ``websockets.serve``: always returns, never raises."""

    async def handler(ws: ServerConnection) -> None:
        session = Session(store, dice)
        try:
            async with asyncio.timeout(hello_timeout):
                first = await ws.recv()
        except TimeoutError:
            await ws.close(CLOSE_HELLO_TIMEOUT, "hello not received in time")
            return
        except ConnectionClosed:
            return
        frame: str | bytes | None = first
        try:
            while frame is not None:
                reply = await session.receive(frame)
                for out in reply.frames:
                    await ws.send(out.decode())
                if reply.close_code is not None:
                    await ws.close(reply.close_code, "unauthorized")
                    return
                frame = await ws.recv()
        except ConnectionClosed:
            return

    return handler


async def start(
    store: Store,
    host: str,
    port: int,
    *,
    dice: Dice | None = None,
    hello_timeout: float = HELLO_TIMEOUT_SECONDS,
) -> Server:
    """Start listening; returns the running server (``server.sockets`` tell the bound port).

    Raises ``OSError`` when the address is taken or not available.
    """
    return await serve(
        make_handler(store, dice or SecretDice(), hello_timeout),
        host,
        port,
        process_request=_health,
        max_size=MAX_FRAME_BYTES,
        compression=None,
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
