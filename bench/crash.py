"""Kill -9 rounds: the bridge killed mid-load loses no acknowledged decision, keeps
its audit trail verifiable and never spends a charge twice.

Each round starts ``fate-bridge serve`` on the same database, drives it with :data:`FLOWS`
connections of test_rolled -> fate_spend (-> fate_choice) flows on an unlimited Fate Point and
:data:`RACERS` connections racing to fate the same results with the round's own Mystery of
:data:`CHARGES` charges (S7, S11), SIGKILLs the process a random delay after it acknowledged its
first decision of the round (a restart re-derives the world's state from its chain first, which
takes longer as the chain grows: counted from the start, the late rounds would kill a bridge
that served nothing), starts it again and checks:

- every reply a client received (an acknowledged decision) is stored under its event_id, byte
  for byte, with its audit record (a reply is sent only after its commit);
- ``PRAGMA integrity_check`` is ok and ``fate-bridge audit verify`` passes;
- no double spend: each result fated at most once (S11), no point's charges spent beyond what it
  had (S7), counted both from the replies the racers received and from the audit trail.

``tests/test_crash.py`` runs a few rounds; ``python -m bench --kill-rounds 30`` the full 30.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import msgspec
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from bridge.audit import AuditRecord
from bridge.replies import replayed_frame
from bridge.store.audit_rows import row_summary
from bridge.store.blobs import unpack
from bridge.store.schema import read_as_one

from .load import ACTOR, TEST

WORLD = "crash-world"
FLOWS = 4  # connections fating results with the unlimited point
RACERS = 3  # connections racing for the same results and the same charges
CHARGES = 2  # charges of each round's Mystery
STARTUP_SECONDS = 15
SERVING_TIMEOUT = 120.0  # seconds a restarted bridge may take to acknowledge its first decision
UNLIMITED = "wellspring000001"
PLAYER = "benchPlayer00001"
FATE_OUTCOMES = {"lost", "kept", "spent", "choice"}  # an accepted Fate Test's audit outcome (else an error code)
TAKES_CHARGE = {"lost", "spent"}  # S9: a Fate Test CF or MS, or a CS answered spend, uses a charge


def mystery(round_no: int) -> str:
    """The point id of round ``round_no``'s charged Mystery (16 characters, like Foundry ids)."""
    return f"racestar{round_no:08d}"


@dataclass
class Round:
    """What one round saw: the seconds from its first acknowledged decision to the kill, the
    decisions acknowledged in all rounds so far and in this one, and the checks."""

    round_no: int
    delay: float
    acked: int
    acked_in_round: int
    raced_spends: int
    verify_ok: bool
    verify_output: str
    integrity: str


@dataclass
class Report:
    """Every round's findings and the totals over all rounds; :attr:`ok` when nothing was lost,
    changed or spent twice and every round verified."""

    rounds: list[Round] = field(default_factory=list)
    acked: int = 0
    missing: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unaudited: list[str] = field(default_factory=list)
    fated_twice: list[str] = field(default_factory=list)
    overspent: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return (not (self.missing or self.changed or self.unaudited or self.fated_twice or self.overspent)
                and all(r.verify_ok and r.integrity == "ok" for r in self.rounds))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bridge(*args: str) -> subprocess.CompletedProcess:
    """Run one ``fate-bridge`` CLI command."""
    return subprocess.run([sys.executable, "-m", "bridge", *args], capture_output=True, text=True, timeout=60)


def start_bridge(db: Path | str, key: Path, port: int, *options: str, log: IO | None = None) -> subprocess.Popen:
    """``fate-bridge serve`` on ``db`` (with ``options``), once /healthz answers; its stderr (the
    log, JSON lines) goes to ``log`` (default: discarded)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "bridge", "serve", "--port", str(port), "--db", str(db), "--audit-key", str(key),
         "--log-format", "json", "--rate-limit", "0", *options],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL if log is None else log)
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as response:
                if response.status == 200:
                    return process
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"the bridge exited with {process.returncode} before listening") from None
            time.sleep(0.02)
    process.kill()
    raise RuntimeError(f"the bridge did not answer /healthz within {STARTUP_SECONDS} s")


def _actor(round_no: int) -> dict:
    return {**ACTOR, "fate_points": [
        {"point_id": UNLIMITED, "name": "Wellspring", "skill_code": None, "charges": None},
        {"point_id": mystery(round_no), "name": "Race Star", "skill_code": None, "charges": CHARGES}]}


def rolled_message(event_id: str, message_id: str, round_no: int) -> dict:
    """A public ``test_rolled`` of ``message_id`` by an actor holding the unlimited point and
    round ``round_no``'s Mystery."""
    return {"type": "test_rolled", "v": 1, "event_id": event_id, "ruleset": "sohl", "message_id": message_id,
            "actor": _actor(round_no), "test": TEST, "visibility": "public"}


def spend_message(event_id: str, message_id: str, point_id: str) -> dict:
    """A ``fate_spend`` of ``message_id``'s result with ``point_id``."""
    return {"type": "fate_spend", "v": 1, "event_id": event_id, "message_id": message_id,
            "point_id": point_id, "user_id": PLAYER}


async def _ask(ws: ClientConnection, message: dict, acked: dict[str, str]) -> dict:
    await ws.send(json.dumps(message))
    reply = await ws.recv(decode=True)
    acked[message["event_id"]] = reply
    return json.loads(reply)


async def _connect(port: int, token: str) -> ClientConnection:
    """A forwarder for WORLD; a hello answered ``rate_limited`` (several hellos from one address
    right after a restart: docs/security.md) is tried again after a second, as the module does."""
    for _ in range(10):
        ws = await connect(f"ws://127.0.0.1:{port}")
        await ws.send(json.dumps({"type": "hello", "v": 1, "world_id": WORLD, "token": token}))
        welcome = json.loads(await ws.recv())
        if welcome["type"] == "welcome":
            return ws
        await ws.close()
        if welcome.get("code") != "rate_limited":
            break
        await asyncio.sleep(1.0)
    raise RuntimeError(f"hello refused: {welcome}")


async def _flows(port: int, token: str, round_no: int, conn_no: int, acked: dict[str, str]) -> None:
    """Fate results with the unlimited point until the connection dies."""
    async with await _connect(port, token) as ws:
        for n in range(1_000_000):
            mid = f"f{round_no}-{conn_no}-{n}"
            await _ask(ws, rolled_message(f"r{mid}", mid, round_no), acked)
            if (await _ask(ws, spend_message(f"s{mid}", mid, UNLIMITED), acked)).get("outcome") == "choice":
                await _ask(ws, {"type": "fate_choice", "v": 1, "event_id": f"c{mid}", "message_id": mid,
                                "choice": "keep", "user_id": PLAYER}, acked)


def _charge_taken(reply: dict, point_id: str) -> bool:
    """Whether a ``fate_resolved`` took a charge of ``point_id`` (it says so by an update_item)."""
    return any(e.get("kind") == "update_item" and e.get("item_id") == point_id for e in reply.get("effects", ()))


async def _racer(port: int, token: str, round_no: int, racer: int, acked: dict[str, str],
                 won: list[tuple[str, str]]) -> None:
    """Race the other racers: roll the same results, try to fate each with the round's Mystery
    (answering a Critical Success with ``spend``), and keep trying once its charges are gone.
    ``won`` gets ("fated", message id) for each Fate Test accepted and ("charge", point id) for
    each charge taken."""
    point = mystery(round_no)
    async with await _connect(port, token) as ws:
        for n in range(1_000_000):
            mid = f"x{round_no}-{n}"
            await _ask(ws, rolled_message(f"r{mid}-{racer}", mid, round_no), acked)
            reply = await _ask(ws, spend_message(f"s{mid}-{racer}", mid, point), acked)
            if reply["type"] == "fate_resolved":
                won.append(("fated", mid))
                if reply["outcome"] == "choice":
                    reply = await _ask(ws, {"type": "fate_choice", "v": 1, "event_id": f"c{mid}-{racer}",
                                            "message_id": mid, "choice": "spend", "user_id": PLAYER}, acked)
                if _charge_taken(reply, point):
                    won.append(("charge", point))
            await asyncio.sleep(0)


async def _load_until_killed(port: int, token: str, round_no: int, process: subprocess.Popen, delay: float,
                             acked: dict[str, str], won: list[tuple[str, str]]) -> None:
    clients = [asyncio.create_task(_flows(port, token, round_no, i, acked)) for i in range(FLOWS)]
    clients += [asyncio.create_task(_racer(port, token, round_no, i, acked, won)) for i in range(RACERS)]
    first = len(acked)
    serving_by = time.monotonic() + SERVING_TIMEOUT
    while len(acked) == first:  # the kill's delay counts once the restarted bridge serves
        if time.monotonic() > serving_by or process.poll() is not None:
            for task in clients:
                task.cancel()
            raise RuntimeError(f"round {round_no}: the bridge acknowledged nothing in {SERVING_TIMEOUT:g} s"
                               f" (exit code {process.poll()})")
        await asyncio.sleep(0.01)
    await asyncio.sleep(delay)
    process.send_signal(signal.SIGKILL)
    done, pending = await asyncio.wait(clients, timeout=10)
    for task in pending:
        task.cancel()
    for task in done:
        error = task.exception()
        if error is not None and not isinstance(error, (ConnectionClosed, OSError)):
            raise error


def _check(db: Path, key: Path, round_no: int, delay: float, acked: dict[str, str]) -> Round:
    """Right after a kill, before anything opens the file again: its integrity and its audit
    trail as the kill left them (the next round's start is the restart)."""
    conn = sqlite3.connect(db)
    try:
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()
    verified = bridge("audit", "verify", "--db", str(db), "--audit-key", str(key))
    return Round(round_no=round_no, delay=delay, acked=len(acked), acked_in_round=0, raced_spends=0,
                 verify_ok=verified.returncode == 0 and f"PASS {WORLD}:" in verified.stdout,
                 verify_output=(verified.stdout + verified.stderr).strip(), integrity=integrity)


_record_decoder = msgspec.json.Decoder(AuditRecord)


def _without_receipt(reply: str) -> str:
    """A sent reply without the ``receipt`` the session puts after the stored reply (a reply
    cannot hold its own record's hash, so the receipt travels beside it)."""
    at = reply.rfind(',"receipt":')
    return reply if at < 0 else reply[:at] + "}"


def _final_checks(db: Path, acked: dict[str, str], won: list[tuple[str, str]], report: Report) -> None:
    conn = sqlite3.connect(db)
    read_as_one(conn)  # the records the killed bridge had not folded yet are in audit_tail
    try:
        audit_rows = [(event_id, kind, summary, unpack(record)) for event_id, kind, summary, record in conn.execute(
            "SELECT event_id, type, summary, record FROM audit WHERE world_id = ?", (WORLD,))]
        # what a replay of each event_id returns: the reply in its audit record (rebuilt as sent),
        # or an events row (decisions of older bridges)
        stored = {e: replayed_frame(_record_decoder.decode(record)).decode()
                  for e, _, _, record in audit_rows if e is not None}
        stored.update({e: bytes(r).decode() for e, r in
                       conn.execute("SELECT event_id, reply FROM events WHERE world_id = ?", (WORLD,))})
    finally:
        conn.close()
    summaries = [(event_id, kind, msgspec.json.encode(row_summary(summary, record)))
                 for event_id, kind, summary, record in audit_rows]
    audited = {row[0] for row in summaries}
    report.acked = len(acked)
    report.missing = [e for e in acked if e not in stored]
    report.changed = [e for e, reply in acked.items() if e in stored and stored[e] != _without_receipt(reply)]
    report.unaudited = [e for e in acked if e not in audited]
    report.fated_twice, report.overspent = double_spends(won, summaries)


def double_spends(won: list[tuple[str, str]], audit_rows: list[tuple]) -> tuple[list[str], dict[str, int]]:
    """Results fated more than once and Mysteries charged beyond :data:`CHARGES`, from the
    racers' replies (``won``) and from the audit trail (rows of event_id, type, summary)."""
    counted = Counter(won)
    fated_twice = sorted(mid for (kind, mid), count in counted.items() if kind == "fated" and count > 1)
    overspent = {point: count for (kind, point), count in counted.items() if kind == "charge" and count > CHARGES}
    by_message: Counter[str] = Counter()
    by_mystery: Counter[str] = Counter()
    for _, kind, summary in audit_rows:
        columns = json.loads(bytes(summary))
        if kind == "fate_spend" and columns.get("outcome") in FATE_OUTCOMES:
            by_message[columns["message_id"]] += 1
        if columns.get("outcome") in TAKES_CHARGE and (columns.get("message_id") or "").startswith("x"):
            by_mystery[mystery(int(columns["message_id"][1:].split("-")[0]))] += 1
    fated_twice += sorted(f"{mid} (audit)" for mid, count in by_message.items() if count > 1)
    overspent.update({f"{point} (audit)": count for point, count in by_mystery.items() if count > CHARGES})
    return fated_twice, overspent


def run_rounds(folder: Path, rounds: int, seed: int, min_delay: float = 0.3, max_delay: float = 1.0) -> Report:
    """``rounds`` kill -9 rounds on a new database in ``folder``; the delay before each kill is
    drawn from ``random.Random(seed)`` between ``min_delay`` and ``max_delay`` seconds."""
    db, key = folder / "bridge.sqlite3", folder / "audit.key"
    added = bridge("world", "add", WORLD, "--db", str(db), "--token-only")
    if added.returncode != 0:
        raise RuntimeError(f"world add failed: {added.stderr}")
    token = added.stdout.strip()
    rng = random.Random(seed)
    acked: dict[str, str] = {}
    won: list[tuple[str, str]] = []
    report = Report()
    for round_no in range(rounds):
        delay = rng.uniform(min_delay, max_delay)
        port = free_port()
        process = start_bridge(db, key, port)
        before, acked_before = len(won), len(acked)
        try:
            asyncio.run(_load_until_killed(port, token, round_no, process, delay, acked, won))
        finally:
            process.kill()
            process.wait(timeout=10)
        found = _check(db, key, round_no, delay, acked)
        found.acked_in_round = len(acked) - acked_before
        found.raced_spends = sum(1 for kind, _ in won[before:] if kind == "charge")
        report.rounds.append(found)
    _final_checks(db, acked, won, report)
    return report


def main(rounds: int, seed: int = 20261201) -> int:
    """``python -m bench --kill-rounds N``: run the rounds, print each and the verdict; exit 1 if
    anything was lost, changed, spent twice or failed to verify."""
    with tempfile.TemporaryDirectory(prefix="fate-bridge-crash-") as tmp:
        report = run_rounds(Path(tmp), rounds, seed)
    for r in report.rounds:
        print(f"round {r.round_no + 1:>2}: killed {r.delay:.2f} s after its first reply, {r.acked_in_round} decisions "
              f"acknowledged in the round ({r.acked} so far), "
              f"{r.raced_spends} of {CHARGES} raced charges taken; integrity {r.integrity}; "
              f"audit verify {'PASS' if r.verify_ok else 'FAIL: ' + r.verify_output}")
    print(f"\n{len(report.rounds)} kill -9 rounds, {report.acked} acknowledged decisions: "
          f"{len(report.missing)} lost, {len(report.changed)} changed, {len(report.unaudited)} without audit record, "
          f"{len(report.fated_twice)} results fated twice, {len(report.overspent)} points overspent "
          f"(seed {seed}): {'PASS' if report.ok else 'FAIL'}")
    return 0 if report.ok else 1
