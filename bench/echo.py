"""The bare WebSocket limit: an echo server on the same websockets + event loop as the bridge.

``python -m bench.echo --port P`` answers every frame with itself, with the bridge's own
connection settings (frame size, queue, no compression), so the only difference measured is the
bridge's decision path.
"""

from __future__ import annotations

import argparse
import asyncio

from websockets.asyncio.server import ServerConnection, serve

from bridge.server import MAX_FRAME_BYTES, MAX_QUEUE_FRAMES, stop_on_signals


async def _echo(ws: ServerConnection) -> None:
    async for frame in ws:
        await ws.send(frame)


async def _main(host: str, port: int) -> None:
    stop = stop_on_signals()
    async with serve(_echo, host, port, max_size=MAX_FRAME_BYTES, max_queue=MAX_QUEUE_FRAMES,
                     compression=None):
        print("ready", flush=True)
        await stop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    try:
        import uvloop
    except ImportError:
        asyncio.run(_main(args.host, args.port))
    else:
        uvloop.run(_main(args.host, args.port))


if __name__ == "__main__":
    main()
