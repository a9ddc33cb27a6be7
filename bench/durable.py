"""The durable limit: the least a server must do for a decision to be durable and audited.

``python -m bench.durable --port P --db FILE`` serves WebSockets with the bridge's own connection
settings (as ``bench.echo``) and, for every frame but ``hello``:

1. decodes it with msgspec (the whole frame, as the bridge must);
2. extends one SHA-256 chain: ``hash = SHA-256(previous hash || frame)``;
3. queues one row (sequence number, event_id, frame, hash) for the current event-loop tick;

then once per loop tick inserts every queued row in one SQLite transaction (WAL,
``synchronous = NORMAL``, like the bridge's store; on the event loop's own thread, so no hand-off
between threads) and, only after COMMIT, replies
``{"type":"ack","event_id":...,"seq":N}`` to each. ``hello`` is answered ``welcome`` and not
stored. No rules, no reads, no card, no log line: the bridge's decisions can come close to this
but not beat it in Python, so ``python -m bench`` measures the bridge against it.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import sqlite3
from pathlib import Path

import msgspec
from websockets.asyncio.server import ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from bridge.server import MAX_FRAME_BYTES, MAX_QUEUE_FRAMES, stop_on_signals

SCHEMA = """
CREATE TABLE IF NOT EXISTS decisions (
    seq INTEGER PRIMARY KEY, event_id TEXT NOT NULL, frame BLOB NOT NULL, hash BLOB NOT NULL
)"""
WELCOME = b'{"type":"welcome","v":1}'


class Ack(msgspec.Struct):
    """The reply sent once a decision's row is committed."""

    type: str
    event_id: str
    seq: int


class DurableLog:
    """Rows queued during one loop tick, committed together, each future resolved after COMMIT
    with its reply frame."""

    def __init__(self, db: Path) -> None:
        self._conn = sqlite3.connect(db, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = NORMAL")
        self._conn.execute(SCHEMA)
        last = self._conn.execute("SELECT seq, hash FROM decisions ORDER BY seq DESC LIMIT 1").fetchone()
        self._seq: int
        self._head: bytes
        self._seq, self._head = (0, bytes(32)) if last is None else (last[0], last[1])
        self._rows: list[tuple[int, str, bytes, bytes]] = []
        self._waiting: list[tuple[asyncio.Future[bytes], bytes]] = []
        self._encode = msgspec.json.Encoder().encode
        self._loop = asyncio.get_running_loop()

    def submit(self, frame: bytes) -> asyncio.Future[bytes] | None:
        """Decode, chain and queue one decision; the future gives its reply after COMMIT.
        None for ``hello`` (nothing stored)."""
        message = msgspec.json.decode(frame)
        if message["type"] == "hello":
            return None
        self._seq += 1
        self._head = hashlib.sha256(self._head + frame).digest()
        self._rows.append((self._seq, message["event_id"], frame, self._head))
        future = self._loop.create_future()
        self._waiting.append((future, self._encode(Ack("ack", message["event_id"], self._seq))))
        if len(self._rows) == 1:
            self._loop.call_soon(self._commit)
        return future

    def _commit(self) -> None:
        rows, waiting = self._rows, self._waiting
        self._rows, self._waiting = [], []
        self._conn.execute("BEGIN")
        self._conn.executemany("INSERT INTO decisions VALUES (?, ?, ?, ?)", rows)
        self._conn.execute("COMMIT")
        for future, reply in waiting:
            future.set_result(reply)

    def close(self) -> None:
        self._conn.close()


async def _main(host: str, port: int, db: Path) -> None:
    stop = stop_on_signals()
    durable = DurableLog(db)

    async def handler(ws: ServerConnection) -> None:
        try:
            while True:
                frame = await ws.recv(decode=False)
                reply = durable.submit(frame)
                await ws.send(WELCOME if reply is None else await reply, text=True)
        except ConnectionClosed:
            pass

    async with serve(handler, host, port, max_size=MAX_FRAME_BYTES, max_queue=MAX_QUEUE_FRAMES,
                     compression=None):
        print("ready", flush=True)
        await stop
    durable.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--db", type=Path, required=True, help="SQLite file (created if absent)")
    args = parser.parse_args()
    try:
        import uvloop
    except ImportError:
        asyncio.run(_main(args.host, args.port, args.db))
    else:
        uvloop.run(_main(args.host, args.port, args.db))


if __name__ == "__main__":
    main()
