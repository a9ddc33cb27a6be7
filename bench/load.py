"""The load client: C connections (one world each) drive realistic Fate flows for a fixed time.

``python -m bench.load --url ws://127.0.0.1:P --worlds worlds.json --conns C --duration S``
prints one JSON object: round trips, seconds, latency percentiles (µs), the client's own CPU
seconds and every latency (µs, for merging runs of several client processes). Each connection
sends ``hello``, then loops test_rolled -> fate_spend (-> fate_choice keep when the bridge asks),
awaiting every reply (a round trip). Against the echo and durable servers the same frames go
out; their replies never ask for a choice, so every server sees the same message mix but for
the rare choice.

The client is built not to be the bottleneck: raw WebSocket frames on uvloop, one
``asyncio.Protocol`` per connection, frames made by formatting prepared bytes, a zero mask key
(RFC 6455 allows any key; masking with zeros leaves the payload as it is, so the client copies
nothing) and replies only split into frames, never decoded. ``--first N`` uses the worlds from
index N, so several client processes can share one worlds file. With ``--wait-go`` the client
opens its connections, prints ``ready`` and starts when a line arrives on stdin (``python -m
bench`` starts several processes at once that way).

``--idle`` instead opens C authenticated connections and holds them (for RSS per connection),
printing ``ready`` once all are open; it exits on stdin EOF.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from websockets.asyncio.client import connect

ACTOR = {
    "actor_id": "benchActor000001", "name": "Basic Folk", "player_owned": True,
    "owner_user_ids": ["benchPlayer00001", "benchGM000000001"], "aura": {"eml": 55, "disabled": False},
    "aural_shock": False,
    "fate_points": [{"point_id": "wellspring000001", "name": "Wellspring", "skill_code": None, "charges": None},
                    {"point_id": "luckystar0000001", "name": "Lucky Star", "skill_code": None, "charges": 3}],
}
TEST = {"kind": "skill", "code": "archery", "name": "Archery Test", "eml": 55, "roll": 88, "level_mod": 0,
        "basis": [], "skill_base_formula": "sb(attr.per, attr.dex)", "basic": False, "reported_level": 0,
        "item_id": "PLACEHOLDERarc01"}


def hello(world: dict) -> str:
    return json.dumps({"type": "hello", "v": 1, "world_id": world["world_id"], "token": world["token"]})


def _compact(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


# The flow's frames as prepared bytes: ``% (event_id, message_id)`` makes one.
ROLLED = (b'{"type":"test_rolled","v":1,"event_id":"r%s","ruleset":"sohl","message_id":"%s","actor":'
          + _compact(ACTOR) + b',"test":' + _compact(TEST) + b',"visibility":"public"}')
SPEND = (b'{"type":"fate_spend","v":1,"event_id":"s%s","message_id":"%s",'
         b'"point_id":"wellspring000001","user_id":"benchPlayer00001"}')
CHOICE = (b'{"type":"fate_choice","v":1,"event_id":"c%s","message_id":"%s","choice":"keep",'
          b'"user_id":"benchPlayer00001"}')
ASKS_CHOICE = b'"outcome":"choice"'
HANDSHAKE = ("GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
ZERO_MASK = bytes(4)


def client_frame(payload: bytes, opcode: int = 0x1) -> bytes:
    """One final client frame (text by default), masked with a zero key (RFC 6455 5.3)."""
    n = len(payload)
    if n < 126:
        header = bytes((0x80 | opcode, 0x80 | n))
    elif n < 65536:
        header = bytes((0x80 | opcode, 0x80 | 126)) + n.to_bytes(2, "big")
    else:
        header = bytes((0x80 | opcode, 0x80 | 127)) + n.to_bytes(8, "big")
    return header + ZERO_MASK + payload


class RawConnection(asyncio.Protocol):
    """A WebSocket client connection reduced to what the load needs: the opening handshake,
    unmasked server frames split out of the stream (answering pings and the close), one reply awaited at a time."""

    transport: asyncio.Transport  # set by connection_made, before any frame goes or comes

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._open = False
        self._waiter: asyncio.Future[bytes] | None = None
        self._lost: BaseException | None = None
        self._loop = asyncio.get_running_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        if not self._open:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            status = bytes(buffer[:buffer.find(b"\r\n")])
            del buffer[:end + 4]
            if b" 101 " not in status:
                self._fail(ConnectionError(f"handshake refused: {status.decode(errors='replace')}"))
                return
            self._open = True
            self._deliver(b"")
        while len(buffer) >= 2:
            opcode, length, offset = buffer[0] & 0x0F, buffer[1] & 0x7F, 2
            if length == 126:
                if len(buffer) < 4:
                    return
                length, offset = int.from_bytes(buffer[2:4], "big"), 4
            elif length == 127:
                if len(buffer) < 10:
                    return
                length, offset = int.from_bytes(buffer[2:10], "big"), 10
            if len(buffer) < offset + length:
                return
            payload = bytes(buffer[offset:offset + length])
            del buffer[:offset + length]
            if opcode == 0x9:
                self.transport.write(client_frame(payload, 0xA))
            elif opcode == 0x8:  # answered with a close frame (RFC 6455 5.5.1): a stopping server waits for it
                self.transport.write(client_frame(payload[:2], 0x8))
                self.transport.close()
                self._fail(ConnectionError(f"server closed the connection: {payload[2:]!r}"))
            elif opcode in (0x1, 0x2):
                self._deliver(payload)

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = exc or ConnectionError("connection lost")
        self._fail(self._lost)

    def _deliver(self, payload: bytes) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(payload)

    def _fail(self, exc: BaseException) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)

    def expect(self) -> asyncio.Future[bytes]:
        """The next data frame's payload (the handshake's completion first: ``b""``)."""
        self._waiter = self._loop.create_future()
        if self._lost is not None:  # a request after the connection went fails at once
            self._waiter.set_exception(self._lost)
        return self._waiter

    def close(self) -> None:
        """Send a close frame (1000) and drop the connection."""
        self.transport.write(client_frame(b"\x03\xe8", 0x8))
        self.transport.close()

    async def round_trip(self, frame: bytes) -> bytes:
        """Send one prepared frame, await the reply's payload."""
        waiter = self.expect()
        self.transport.write(frame)
        return await waiter


async def open_raw(url: str) -> RawConnection:
    """Connect and finish the opening handshake to ``ws://host:port/path``."""
    parts = urlsplit(url)
    if parts.hostname is None or parts.port is None:
        raise ValueError(f"no host and port in {url!r}")
    loop = asyncio.get_running_loop()
    _, conn = await loop.create_connection(RawConnection, parts.hostname, parts.port)
    handshake = conn.expect()
    conn.transport.write(HANDSHAKE.format(path=parts.path or "/", host=parts.netloc).encode())
    await handshake
    return conn


async def _drive(url: str, world: dict, tag: str, start: asyncio.Event, deadline: list[float],
                 latencies: list[int], opened: asyncio.Semaphore) -> None:
    conn = await open_raw(url)
    await conn.round_trip(client_frame(hello(world).encode()))
    opened.release()
    await start.wait()
    clock, n, prefix = time.perf_counter_ns, 0, tag.encode()
    end = deadline[0]
    record = latencies.append
    while time.perf_counter() < end:
        ids = (prefix + b"-%d" % n,) * 2
        began = clock()
        await conn.round_trip(client_frame(ROLLED % ids))
        mid = clock()
        reply = await conn.round_trip(client_frame(SPEND % ids))
        done = clock()
        record(mid - began)
        record(done - mid)
        if ASKS_CHOICE in reply:
            began = clock()
            await conn.round_trip(client_frame(CHOICE % ids))
            record(clock() - began)
        n += 1
    conn.close()


def percentile(sorted_us: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted latencies in µs (0 for none)."""
    return float(sorted_us[min(len(sorted_us) - 1, int(q * len(sorted_us)))]) if sorted_us else 0.0


async def run(url: str, worlds: list[dict], conns: int, duration: float, tag: str, wait_go: bool = False) -> dict:
    """Drive ``conns`` connections for ``duration`` seconds; returns the measurements."""
    start, deadline = asyncio.Event(), [0.0]
    latencies: list[int] = []
    opened = asyncio.Semaphore(0)
    tasks = [asyncio.create_task(_drive(url, worlds[i], f"{tag}{i}", start, deadline, latencies, opened))
             for i in range(conns)]
    for _ in range(conns):
        await opened.acquire()
    if wait_go:
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    cpu_before = time.process_time()
    began = time.perf_counter()
    deadline[0] = began + duration
    start.set()
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - began
    ordered = sorted(v // 1000 for v in latencies)
    return {"conns": conns, "round_trips": len(ordered), "seconds": elapsed,
            "round_trips_per_s": len(ordered) / elapsed,
            "p50_us": percentile(ordered, 0.50), "p99_us": percentile(ordered, 0.99),
            "max_us": float(ordered[-1]) if ordered else 0.0,
            "client_cpu_s": time.process_time() - cpu_before, "latencies_us": ordered}


async def idle(url: str, worlds: list[dict], conns: int) -> None:
    """Open ``conns`` authenticated connections, say ``ready``, hold them until stdin closes."""
    sockets = []
    for i in range(conns):
        ws = await connect(url, compression=None)
        await ws.send(hello(worlds[i]))
        reply = json.loads(await ws.recv())
        if reply["type"] != "welcome":
            raise SystemExit(f"connection {i} refused: {reply}")
        sockets.append(ws)
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    for ws in sockets:
        await ws.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--worlds", required=True, help="JSON file: [{world_id, token}, ...]")
    parser.add_argument("--conns", type=int, required=True)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--tag", default="b", help="prefix making message ids unique per run")
    parser.add_argument("--first", type=int, default=0, help="index of the first world to use (default 0)")
    parser.add_argument("--wait-go", action="store_true", help="print ready, start on a line from stdin")
    parser.add_argument("--result", type=Path, help="write the JSON result to this file instead of stdout")
    parser.add_argument("--idle", action="store_true")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with open(args.worlds) as file:
        worlds = json.load(file)[args.first:]
    try:
        import uvloop
    except ImportError:
        runner = asyncio.run
    else:
        runner = uvloop.run
    if args.idle:
        runner(idle(args.url, worlds, args.conns))
    else:
        result = json.dumps(runner(run(args.url, worlds, args.conns, args.duration, args.tag, args.wait_go)))
        if args.result is None:
            print(result)
        else:
            args.result.write_text(result)


if __name__ == "__main__":
    main()
