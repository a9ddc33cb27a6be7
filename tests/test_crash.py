"""Kill -9 (issue 3): a bridge process killed at random moments while a client fates results
never loses an acknowledged decision; the file stays intact and the audit trail verifies.

Each round starts ``fate-bridge serve`` as a child process on the same database, drives
test_rolled -> fate_spend (-> fate_choice) flows, and SIGKILLs the process after a random delay.
Afterwards every reply the client received is in the database under its event_id, byte for byte,
``PRAGMA integrity_check`` says ok, and ``fate-bridge audit verify`` passes.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from .sohl_messages import actor, fate_choice, fate_spend, point, rolled, sohl_test

ROUNDS = 30
WORLD = "crash-world"
SEED = int(os.environ.get("FATE_BRIDGE_CRASH_SEED", "20261129"))
UNLIMITED = actor(fate_points=[point("wellspring", "Wellspring", None, None)])
STARTUP_SECONDS = 15


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bridge(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bridge", *args], capture_output=True, text=True,
                          timeout=60, **kwargs)


def start_bridge(db: Path, key: Path, port: int) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-m", "bridge", "serve", "--port", str(port), "--db", str(db), "--audit-key", str(key),
         "--log-format", "json", "--rate-limit", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as response:
                if response.status == 200:
                    return process
        except OSError:
            if process.poll() is not None:
                raise AssertionError(f"the bridge exited with {process.returncode} before listening")
            time.sleep(0.02)
    process.kill()
    raise AssertionError(f"the bridge did not answer /healthz within {STARTUP_SECONDS} s")


async def drive(port: int, token: str, round_no: int, acked: dict[str, str]) -> None:
    """Fate results until the connection dies; every reply received goes into ``acked``."""
    async with connect(f"ws://127.0.0.1:{port}") as ws:
        await ws.send(json.dumps({"type": "hello", "v": 1, "world_id": WORLD, "token": token}))
        assert json.loads(await ws.recv())["type"] == "welcome"
        for n in range(10_000):
            mid = f"m{round_no}-{n}"
            flow = [rolled(f"r{round_no}-{n}", mid, actor_part=UNLIMITED, test=sohl_test(roll=88)),
                    fate_spend(f"s{round_no}-{n}", mid, point_id="wellspring")]
            for message in flow:
                await ws.send(json.dumps(message))
                reply = await ws.recv()
                if json.loads(reply).get("code") == "rate_limited":
                    break  # not handled, not acknowledged: this flow is abandoned
                acked[message["event_id"]] = reply
                if json.loads(reply).get("outcome") == "choice":
                    choice = fate_choice("keep", f"c{round_no}-{n}", mid)
                    await ws.send(json.dumps(choice))
                    acked[choice["event_id"]] = await ws.recv()


async def round_trip(db: Path, key: Path, token: str, round_no: int, delay: float, acked: dict[str, str]) -> None:
    port = free_port()
    process = start_bridge(db, key, port)
    try:
        client = asyncio.create_task(drive(port, token, round_no, acked))
        await asyncio.sleep(delay)
        process.send_signal(signal.SIGKILL)
        try:
            await asyncio.wait_for(client, timeout=10)
        except (ConnectionClosed, OSError):
            pass
    finally:
        process.kill()
        process.wait(timeout=10)


def without_receipt(reply: str) -> str:
    """A sent reply without the ``receipt`` the session appends to the stored one."""
    at = reply.rfind(',"receipt":')
    return reply if at < 0 else reply[:at] + "}"


def test_no_acknowledged_decision_is_lost_when_the_bridge_is_killed(tmp_path):
    db, key = tmp_path / "bridge.sqlite3", tmp_path / "audit.key"
    added = bridge("world", "add", WORLD, "--db", str(db), "--token-only")
    assert added.returncode == 0, added.stderr
    token = added.stdout.strip()
    rng = random.Random(SEED)
    acked: dict[str, str] = {}
    for round_no in range(ROUNDS):
        asyncio.run(round_trip(db, key, token, round_no, rng.uniform(0.05, 0.4), acked))

    fated = [e for e in acked if e.startswith("s")]
    assert len(fated) >= ROUNDS, f"too few decisions to mean anything ({len(fated)}); seed {SEED}"
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    stored = dict(conn.execute("SELECT event_id, reply FROM events WHERE world_id = ?", (WORLD,)).fetchall())
    missing = [e for e in acked if e not in stored]
    assert missing == [], f"acknowledged but missing after kill -9 (seed {SEED}): {missing[:5]}"
    # the reply sent carries its receipt beside the stored reply (issue 15; appended last)
    changed = [e for e, reply in acked.items() if bytes(stored[e]).decode() != without_receipt(reply)]
    assert changed == [], f"stored reply differs from the one sent (seed {SEED}): {changed[:5]}"
    audited = conn.execute("SELECT count(*) FROM audit WHERE world_id = ?", (WORLD,)).fetchone()[0]
    assert audited == len(stored)  # one audit record per decision, committed together
    conn.close()

    verified = bridge("audit", "verify", "--db", str(db), "--audit-key", str(key))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert f"PASS {WORLD}: {audited} records" in verified.stdout
