"""``python -m bench --race N``: two forwarders of one world racing on two processes.

Two ``fate-bridge serve`` processes on one fresh PostgreSQL schema (bench/scale.py's helpers),
one world. Each trial opens one forwarder of the world on each process and sends both ``hello``s
at once, as an attacker with the token (or two GMs' browsers) would; each forwarder then sends a
decision, and each one still open a second one. The fencing token decides: the process whose
lease was taken later holds the world; the other's forwarder must be closed with 4003, its reason
naming who holds the world and on which process (``host:pid``), never both. Counted per trial:

- ``one_holds``: exactly one forwarder open, its second decision answered; the other closed 4003
  naming the holding process (the target: all of them);
- ``both_closed``: neither forwarder holds the world (before the fencing token: 72 of 100);
- ``both_open``: both answered their second decision (two owners: must never happen);
- ``unnamed``: the loser's 4003 reason does not name the holder's process.

Every reply received is then looked up in the audit trail (0 lost), the decisions recorded whose
reply never came are counted (decided as the 4003 closed the link: the module's repeat of that
``event_id`` gets the stored reply), and ``audit verify`` runs on the database. ``tests/test_cluster.py`` runs 20 trials on its cluster; ``python -m bench --race 100``
the full 100 on its own two processes.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from .failover import audit_rows
from .load import ACTOR, TEST
from .scale import LOAD_LIMITS, PgSchema, register_worlds, start_bridges, stop_bridges

CLOSE_SUPERSEDED = 4003  # bridge.session.CLOSE_SUPERSEDED: the bench speaks the wire, not the package
REPLY_SECONDS = 10.0  # bounds a hang only: a reply on a quiet loopback comes in milliseconds


@dataclass
class Side:
    """One racing forwarder of a trial: where it raced and what it got."""

    port: int
    user: str
    ws: ClientConnection | None = None
    answered: list[str] = field(default_factory=list)  # event ids whose decision it received
    close_code: int | None = None
    close_reason: str = ""


@dataclass
class Tally:
    """What ``trials`` found: the counts of each outcome, and the event ids of every decision answered."""

    one_holds: int = 0
    both_closed: int = 0
    both_open: int = 0
    unnamed: int = 0
    later_won: int = 0  # trials held by the forwarder whose hello was sent second
    answered: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)  # the losers' 4003 reasons, in trial order


def process_name(pid: int) -> str:
    """How a bridge process names itself in a 4003 reason: ``host:pid`` (bridge.cluster.Cluster.name)."""
    return f"{socket.gethostname()}:{pid}"


def rolled(event_id: str) -> str:
    """A public ``test_rolled`` (a decision that goes through the lease's fencing check)."""
    return json.dumps({"type": "test_rolled", "v": 1, "event_id": event_id, "ruleset": "sohl",
                       "message_id": event_id, "actor": ACTOR, "test": TEST, "visibility": "public"})


async def _decide(side: Side, event_id: str) -> None:
    """Send one decision on ``side`` and wait for its reply, or for the bridge to close it."""
    assert side.ws is not None
    try:
        await side.ws.send(rolled(event_id))
        reply = json.loads(await asyncio.wait_for(side.ws.recv(), REPLY_SECONDS))
    except ConnectionClosed:
        await side.ws.wait_closed()
        side.close_code, side.close_reason = side.ws.close_code, side.ws.close_reason or ""
        side.ws = None
        return
    assert reply.get("event_id") == event_id, reply
    side.answered.append(event_id)


async def trial(number: int, world_id: str, token: str, ports: tuple[int, int], names: dict[int, str],
                tally: Tally) -> None:
    """One race (see the module's docstring), counted in ``tally``; ``names``: port -> process name."""
    sides = [Side(port, f"GM racer {i}") for i, port in enumerate(ports)]
    for side in sides:
        side.ws = await connect(f"ws://127.0.0.1:{side.port}", open_timeout=REPLY_SECONDS)
    for side in sides:  # both hellos back to back: the two processes take the lease at once
        await side.ws.send(json.dumps({  # type: ignore[union-attr]
            "type": "hello", "v": 1, "world_id": world_id, "token": token,
            "client": {"module_version": "bench", "foundry_version": "13", "system_id": "sohl",
                       "system_version": "1", "user_name": side.user}}))
    for side in sides:
        welcome = json.loads(await asyncio.wait_for(side.ws.recv(), REPLY_SECONDS))  # type: ignore[union-attr]
        assert welcome["type"] == "welcome", welcome
    for step in (1, 2):  # both claims are over once a decision was handled: the loser's 2nd is fenced
        await asyncio.gather(*(_decide(side, f"race{number}-{i}-{step}") for i, side in enumerate(sides)
                               if side.ws is not None))
    held = [side for side in sides if side.ws is not None]  # answered its second decision
    for side in held:  # a 4003 that came meanwhile is what the close reads back, not our 1000
        await side.ws.close()  # type: ignore[union-attr]
        side.close_code, side.close_reason = side.ws.close_code, side.ws.close_reason or ""  # type: ignore[union-attr]
    held = [side for side in held if side.close_code != CLOSE_SUPERSEDED]
    for side in sides:
        tally.answered += side.answered
    if len(held) == 2:
        tally.both_open += 1
    elif not held:
        tally.both_closed += 1
    else:
        winner = held[0]
        loser = next(side for side in sides if side is not winner)
        tally.reasons.append(loser.close_reason)
        if loser.close_code == CLOSE_SUPERSEDED:
            tally.one_holds += 1
            tally.later_won += winner is sides[1]
            if winner.user not in loser.close_reason or names[winner.port] not in loser.close_reason:
                tally.unnamed += 1


async def trials(count: int, world_id: str, token: str, ports: tuple[int, int], names: dict[int, str]) -> Tally:
    """``count`` races of ``world_id``'s forwarders on the processes at ``ports`` (alternating
    which one's hello goes first)."""
    tally = Tally()
    for number in range(count):
        order = ports if number % 2 == 0 else (ports[1], ports[0])
        await trial(number, world_id, token, order, names, tally)
    return tally


def main(count: int = 100) -> int:
    """Run ``count`` trials on two fresh processes and print the counts; exit status 1 when any
    trial did not end with exactly one holder named in the other's 4003, or a decision is lost."""
    with tempfile.TemporaryDirectory(prefix="fate-bridge-race-") as tmp, PgSchema() as schema:
        key = Path(tmp) / "audit.key"
        (world,) = asyncio.run(register_worlds(schema.url, 1, "race"))
        bridges = start_bridges(schema.url, key, 2, *LOAD_LIMITS)
        try:
            ports = (bridges[0][1], bridges[1][1])
            names = {port: process_name(process.pid) for process, port in bridges}
            tally = asyncio.run(trials(count, world["world_id"], world["token"], ports, names))
        finally:
            stop_bridges(bridges)
        recorded = {event_id for _, event_id, *_ in audit_rows(schema.url, [world["world_id"]]) if event_id}
        lost = sorted(set(tally.answered) - recorded)
        cut_off = sorted(recorded - set(tally.answered))  # decided, its answer cut off by the 4003
        verified = subprocess.run([sys.executable, "-m", "bridge", "audit", "verify", "--db", schema.url,
                                   "--audit-key", str(key)], capture_output=True, text=True, timeout=300)
    print(f"\nTwo forwarders of one world racing on two processes: {count} trials")
    print(f"  exactly one holds, the other closed 4003 naming it: {tally.one_holds}")
    print(f"  both closed: {tally.both_closed}   both open: {tally.both_open}   "
          f"4003 not naming the holder's process: {tally.unnamed}")
    print(f"  held by the forwarder whose hello was sent second: {tally.later_won} of {tally.one_holds} "
          "(the database's commit order of the two leases decides, not the send order)")
    print(f"  decisions answered: {len(tally.answered)}, lost: {len(lost)}, decided with the answer cut off by "
          f"the 4003: {len(cut_off)}; audit verify: {'PASS' if verified.returncode == 0 else 'FAIL'}")
    if tally.reasons:
        print(f"  a loser's close reason: {tally.reasons[-1]!r}")
    ok = tally.one_holds == count and tally.unnamed == 0 and not lost and verified.returncode == 0
    return 0 if ok else 1
