"""Failover and rolling restart of bridge processes on one PostgreSQL database, under load.

``python -m bench --scale --failover`` kills one of three processes with SIGKILL while every
world's forwarder is deciding; ``python -m bench --scale --rolling`` stops each of the three in
turn with SIGTERM (it drains: bridge/links.py ``Drain``) and starts it again, the load running
throughout. Both print, per world handed over, the seconds from its link's close to its first
decided reply on another process (the module's reconnect wait included, and shown apart), and the
counts that must stay 0: acknowledged decisions lost, decisions audited twice, results fated twice,
failed requests; then ``audit verify``. ``tests/test_failover.py`` runs both small and asserts the
counts, never the seconds.

The clients are :class:`ModuleLink`: one world's forwarder driven by the rules of the Foundry
module's connection (foundry-module/scripts/logic/connection.js): replies matched by
``event_id``; a request made while the link is down waits in a queue and is sent once after the
next ``welcome``; requests in flight when the link drops are sent again, same ``event_id``; a
request answered ``unavailable`` (the bridge's storage is down) is sent again, same ``event_id``,
after the reply's ``retry_after_ms`` (bounded as the module bounds it); the reconnect waits ``BACKOFF_MIN_S`` doubled per failure, or, after a 1012 on a welcomed link, a random
0..``RESTART_JITTER_S``. In front of the processes, :class:`Balancer` is the load balancer: each
new connection goes to the next process in turn, a refused one (a process killed or draining
closed its port) to the one after, as nginx's round robin does with ``proxy_next_upstream error``
(docs/deploy.md), or the kernel with ``--reuse-port``.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.protocol import State

from bridge import wire
from bridge.store.audit_rows import row_summary
from bridge.store.blobs import unpack

from .crash import FATE_OUTCOMES, UNLIMITED, rolled_message, spend_message, start_bridge
from .load import percentile
from .scale import LOAD_LIMITS, PgSchema, register_worlds, start_bridges, stop_bridges

# foundry-module/scripts/logic/connection.js LIMITS, in seconds
BACKOFF_MIN_S = 1.0  # BACKOFF_MIN_MS: the first reconnect after a lost link
BACKOFF_MAX_S = 30.0  # BACKOFF_MAX_MS
RESTART_JITTER_S = 0.5  # RESTART_JITTER_MS: after a 1012 (a draining process) on a welcomed link
UNAVAILABLE_RETRY_S = 1.0  # UNAVAILABLE_RETRY_MS: an `unavailable` reply without retry_after_ms
UNAVAILABLE_RETRY_MIN_S, UNAVAILABLE_RETRY_MAX_S = 0.1, 30.0  # UNAVAILABLE_RETRY_MIN_MS, _MAX_MS
CLOSE_SERVICE_RESTART = 1012
REPLY_SECONDS = 15.0  # REQUEST_TIMEOUT_MS: a request sent on a live link and not answered fails
WELCOME_SECONDS = 10.0  # WELCOME_TIMEOUT_MS
PHASE_SECONDS = 60.0  # bound on each phase of a run (a hang, not a timing)
DRAIN_EXIT_SECONDS = 30.0  # a drained process exits well within this (bridge/server.py DRAIN_SECONDS)


class Balancer:
    """The load balancer in front of the processes at ``ports``: each new connection goes to
    the next port in turn; one refused (nothing listens: killed, or draining) to the one after."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self._next = 0

    async def connect(self) -> tuple[ClientConnection, int] | None:
        """An open WebSocket to the first process that accepts one, and its port; None when none
        does (the module sees its connection fail)."""
        first = self._next
        self._next = (first + 1) % len(self.ports)  # taken before waiting: links opened at once spread
        for i in range(len(self.ports)):
            port = self.ports[(first + i) % len(self.ports)]
            try:
                return await connect(f"ws://127.0.0.1:{port}", open_timeout=WELCOME_SECONDS), port
            except (OSError, InvalidHandshake, TimeoutError):
                continue
        return None


@dataclass
class Handover:
    """One world's link lost and its first decided reply after: ``seconds`` from the close to
    that reply, ``waited`` of them the module's reconnect wait, ``welcomed`` from the close to the
    new link's ``welcome``; the close code and both ports."""

    world_id: str
    seconds: float
    waited: float
    welcomed: float
    code: int | None
    port_from: int
    port_to: int


@dataclass
class _Pending:
    text: str
    reply: asyncio.Future[dict]
    sent: bool = False
    sent_at: float = 0.0  # time.monotonic() of its latest send


def unavailable_wait(reply: dict) -> float | None:
    """Seconds the module waits before sending a request answered ``unavailable`` again (its
    ``retry_after_ms`` bounded, else UNAVAILABLE_RETRY_S); None for any other reply."""
    if reply.get("type") != "error" or reply.get("code") != "unavailable":
        return None
    hint = reply.get("retry_after_ms")
    if not isinstance(hint, int):
        return UNAVAILABLE_RETRY_S
    return min(UNAVAILABLE_RETRY_MAX_S, max(UNAVAILABLE_RETRY_MIN_S, hint / 1000))


# a reply handed to a request: (link, event_id, reply, its text as received, its request's latest send)
OnReply = Callable[["ModuleLink", str, dict, str, float], None]


class ModuleLink:
    """One world's forwarder as the Foundry module drives it (see the module docstring). Call
    :meth:`start` once, then :meth:`request` as often as needed, :meth:`stop` once. Counts, per
    ``event_id``: ``sent`` (frames sent), ``resent`` (times it was in flight when a link
    dropped); ``queued``: the requests made while a lost link was being replaced; ``handovers``:
    each lost link's :class:`Handover`. ``on_down`` is called at each lost link, ``on_reply`` with
    every reply handed to a request (``unavailable`` ones included, before the request waits)."""

    def __init__(self, balancer: Balancer, world_id: str, token: str, rng: random.Random,
                 on_down: Callable[[ModuleLink], None] = lambda link: None,
                 on_reply: OnReply = lambda link, event_id, reply, text, sent_at: None) -> None:
        self.balancer, self.world_id, self.token, self.rng, self.on_down = balancer, world_id, token, rng, on_down
        self.on_reply = on_reply
        self.ws: ClientConnection | None = None
        self.port = 0
        self.pending: dict[str, _Pending] = {}
        self.sent: Counter[str] = Counter()
        self.resent: Counter[str] = Counter()
        self.queued: set[str] = set()
        self.handovers: list[Handover] = []
        self._lost: tuple[float, float, int | None, int] | None = None  # (at, waited, code, port)
        self._welcomed_at = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Connect, and keep reconnecting as the module does until :meth:`stop`."""
        self._task = asyncio.create_task(self._run())

    @property
    def handing_over(self) -> bool:
        """True from a lost link to the first decided reply after it."""
        return self._lost is not None

    async def stop(self) -> None:
        """Stop reconnecting and close the link (1000)."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        if self.ws is not None:
            await self.ws.close()

    def request(self, message: dict) -> asyncio.Future[dict]:
        """Send ``message`` (it has an ``event_id``) now if the link is up, else queue it; its
        reply. A request made while a lost link is being replaced is counted in ``queued``."""
        event_id = message["event_id"]
        entry = _Pending(json.dumps(message), asyncio.get_running_loop().create_future())
        self.pending[event_id] = entry
        if self.ws is None:
            if self._lost is not None:  # a click while the link is handed over (not before the first)
                self.queued.add(event_id)
        else:
            asyncio.create_task(self._send(event_id, entry, self.ws))
        return entry.reply

    async def _send(self, event_id: str, entry: _Pending, ws: ClientConnection) -> None:
        if entry.sent or ws.state is not State.OPEN:  # the module sends on an open socket only
            return
        entry.sent, entry.sent_at = True, time.monotonic()
        self.sent[event_id] += 1
        try:
            await ws.send(entry.text)
        except ConnectionClosed:
            pass  # in flight when the link dropped: sent again after the next welcome

    async def _run(self) -> None:
        failures = 0
        while True:
            linked = await self._link()
            if linked is None:  # the socket never opened, or no welcome: the backoff
                await asyncio.sleep(min(BACKOFF_MAX_S, BACKOFF_MIN_S * 2 ** failures))
                failures += 1
                continue
            failures = 0
            self.ws, self.port = linked
            self._welcomed_at = time.monotonic()
            for event_id, entry in list(self.pending.items()):  # the queue, in the order made
                await self._send(event_id, entry, linked[0])
            code = await self._read(linked[0])
            self.ws = None
            for event_id, entry in self.pending.items():
                if entry.sent:
                    self.resent[event_id] += 1
                entry.sent = False
            lost_at = time.monotonic()
            restart = code == CLOSE_SERVICE_RESTART
            wait = self.rng.uniform(0, RESTART_JITTER_S) if restart else min(BACKOFF_MAX_S, BACKOFF_MIN_S * 2 ** failures)
            failures += 0 if restart else 1
            if self._lost is None:  # the first loss since the last decided reply is the one timed
                self._lost = (lost_at, wait, code, self.port)
            self.on_down(self)
            await asyncio.sleep(wait)

    async def _link(self) -> tuple[ClientConnection, int] | None:
        """A new link past its ``welcome``, or None."""
        connected = await self.balancer.connect()
        if connected is None:
            return None
        ws, port = connected
        try:
            await ws.send(json.dumps({"type": "hello", "v": 1, "world_id": self.world_id, "token": self.token,
                                      "client": {"module_version": "bench", "foundry_version": "13",
                                                 "system_id": "sohl", "system_version": "1", "user_name": "GM"}}))
            welcome = json.loads(await asyncio.wait_for(ws.recv(), WELCOME_SECONDS))
        except (ConnectionClosed, TimeoutError):
            await ws.close()
            return None
        if welcome.get("type") != "welcome":
            await ws.close()
            return None
        return ws, port

    def _send_again(self, event_id: str, entry: _Pending) -> None:
        """A request answered ``unavailable``, its wait over: sent on the link if one is up (else
        after the next ``welcome``, with the queue)."""
        if self.pending.get(event_id) is entry and self.ws is not None:
            asyncio.create_task(self._send(event_id, entry, self.ws))

    async def _read(self, ws: ClientConnection) -> int | None:
        """Hand each reply to its request until the link closes; the close code (1006: none)."""
        try:
            async for frame in ws:
                assert isinstance(frame, str)  # the bridge sends text frames
                reply = json.loads(frame)
                event_id = reply.get("event_id") or reply.get("ref") or ""
                entry = self.pending.get(event_id)
                if entry is None:
                    continue
                self.on_reply(self, event_id, reply, frame, entry.sent_at)
                wait = unavailable_wait(reply)
                if wait is not None:  # nothing was applied: it waits as in an outage, then goes again
                    entry.sent = False
                    asyncio.get_running_loop().call_later(wait, self._send_again, event_id, entry)
                    continue
                del self.pending[event_id]
                if self._lost is not None:
                    at, waited, code, port = self._lost
                    self.handovers.append(Handover(self.world_id, time.monotonic() - at, waited,
                                                   self._welcomed_at - at, code, port, self.port))
                    self._lost = None
                if not entry.reply.done():  # (its asker may have given up: the run is ending)
                    entry.reply.set_result(reply)
        except ConnectionClosed:
            pass
        return ws.close_code


@dataclass
class Outcome:
    """What one run saw (see the module docstring): the hand-overs, the acknowledged decisions,
    and the findings that must stay empty."""

    handovers: list[Handover] = field(default_factory=list)
    acked: int = 0
    queued: int = 0  # clicks made while their world's link was down
    resent: int = 0  # requests sent again because their link dropped while they were in flight
    lost: list[str] = field(default_factory=list)  # acknowledged, not in the audit trail
    decided_twice: list[str] = field(default_factory=list)  # an event_id audited more than once
    fated_twice: list[str] = field(default_factory=list)  # a result fated more than once (S11)
    failed: list[str] = field(default_factory=list)  # a request answered with an error
    queued_sent_twice: list[str] = field(default_factory=list)  # sent more than once, not for a drop
    exits: list[int | None] = field(default_factory=list)  # drained processes' exit codes
    drain_seconds: list[float] = field(default_factory=list)  # SIGTERM to exit, per drained process
    latencies: list[float] = field(default_factory=list)  # seconds from request to reply, every one (sorted)
    verify_ok: bool = False
    verify_output: str = ""
    long_world: str | None = None  # the world given a long history first (``history``), if any
    history: int = 0  # its records before the first stop

    @property
    def ok(self) -> bool:
        return (self.verify_ok and not (self.lost or self.decided_twice or self.fated_twice or self.failed
                                        or self.queued_sent_twice) and all(code == 0 for code in self.exits))


def audit_rows(url: str, world_ids: list[str]) -> list[tuple[str, str, str, wire.AuditColumns]]:
    """(world_id, event_id, type, summary) of the worlds' audit rows, read as the bridge lists them."""
    import psycopg

    with psycopg.connect(url) as conn:
        return [(world_id, event_id, kind, row_summary(summary, unpack(record))) for world_id, event_id, kind, summary, record
                in conn.execute("SELECT world_id, event_id, type, summary, record FROM audit WHERE world_id = ANY(%s)",
                                (world_ids,))]


class Run:
    """Three (``processes``) bridges on a fresh schema of ``base``, ``worlds`` worlds, one
    :class:`ModuleLink` each deciding in a loop (test_rolled then fate_spend of each result with
    an unlimited Fate Point), and a GM's click made whenever a world's link goes down (queued
    by the module). Use as an async context manager; :meth:`kill` / :meth:`restart` a process,
    :meth:`settle` to wait for decisions, then :meth:`finish` for the :class:`Outcome`."""

    def __init__(self, base: str | None, folder: Path, worlds: int, pace: float = 0.0, processes: int = 3,
                 seed: int = 28) -> None:
        self.base, self.folder, self.world_count, self.process_count = base, folder, worlds, processes
        self.pace = pace  # seconds each world pauses after each result fated (0: as fast as replies come)
        self.rng = random.Random(seed)
        self.outcome = Outcome()
        self.acked: dict[tuple[str, str], dict] = {}
        self.replies: Counter[str] = Counter()  # by world
        self.clicks: list[asyncio.Future[dict]] = []
        self._stop = asyncio.Event()
        self._going = asyncio.Event()  # the flows run while set (cleared while one world is grown)
        self._going.set()

    async def __aenter__(self) -> Run:
        self.schema = PgSchema(self.base).__enter__()
        self.key = self.folder / "audit.key"
        self.bridges: list[tuple[subprocess.Popen, int]] = []
        try:
            worlds = await register_worlds(self.schema.url, self.world_count, "fo")
            # the first alone (it makes the audit key and the tables), the others at once
            self.bridges = await asyncio.to_thread(start_bridges, self.schema.url, self.key, 1, *LOAD_LIMITS)
            others = await asyncio.gather(*(
                asyncio.to_thread(start_bridges, self.schema.url, self.key, 1, *LOAD_LIMITS)
                for _ in range(self.process_count - 1)), return_exceptions=True)
            self.bridges += [bridge for started in others if isinstance(started, list) for bridge in started]
            for failed in others:
                if isinstance(failed, BaseException):
                    raise failed
        except BaseException:
            await asyncio.to_thread(stop_bridges, self.bridges)
            self.schema.__exit__(None, None, None)
            raise
        self.balancer = Balancer([port for _, port in self.bridges])
        self.links = [ModuleLink(self.balancer, w["world_id"], w["token"], self.rng, self._click) for w in worlds]
        for link in self.links:
            link.start()
        self.flows = [asyncio.create_task(self._flow(link)) for link in self.links]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        for task in self.flows:
            task.cancel()
        for link in self.links:
            await link.stop()
        await asyncio.to_thread(stop_bridges, self.bridges)
        self.schema.__exit__(None, None, None)

    async def _flow(self, link: ModuleLink) -> None:
        for n in range(10**9):
            await self._going.wait()
            mid = f"{link.world_id}-f{n}"
            await self._ask(link, rolled_message(f"r{mid}", mid, 0))
            await self._ask(link, spend_message(f"s{mid}", mid, UNLIMITED))
            await asyncio.sleep(self.pace)

    def _click(self, link: ModuleLink) -> None:
        """The GM rolls while the link is down: the module queues the request."""
        if not self._stop.is_set():
            mid = f"{link.world_id}-q{len(self.clicks)}"
            self.clicks.append(asyncio.ensure_future(self._ask(link, rolled_message(f"r{mid}", mid, 0))))

    async def _ask(self, link: ModuleLink, message: dict) -> dict:
        began = time.monotonic()
        reply = await asyncio.wait_for(link.request(message), PHASE_SECONDS)
        self.outcome.latencies.append(time.monotonic() - began)
        self.acked[(link.world_id, message["event_id"])] = reply
        self.replies[link.world_id] += 1
        if reply.get("type") == "error":
            self.outcome.failed.append(f"{link.world_id} {message['event_id']}: {reply.get('code')}")
        return reply

    async def grow(self, link: ModuleLink, records: int) -> None:
        """Give ``link``'s world about ``records`` audit records, as fast as its replies come,
        the other flows paused meanwhile: a table's long history, which a process taking the world
        over without a signed head at its chain's end re-verifies on its first decision
        (bridge/store/audit_rows.py ``_state_guard``)."""
        self._going.clear()
        for n in range((records - self.replies[link.world_id]) // 2):
            mid = f"{link.world_id}-h{n}"
            await self._ask(link, rolled_message(f"r{mid}", mid, 0))
            await self._ask(link, spend_message(f"s{mid}", mid, UNLIMITED))
        self.outcome.long_world, self.outcome.history = link.world_id, self.replies[link.world_id]
        self._going.set()

    def on(self, index: int) -> list[ModuleLink]:
        """The links now held by process ``index``."""
        return [link for link in self.links if link.ws is not None and link.port == self.bridges[index][1]]

    async def settle(self, links: list[ModuleLink] | None = None, decisions: int = 10) -> None:
        """Wait until each of ``links`` (default: all) has ``decisions`` more replies than now
        and none has a hand-over still untimed."""
        links = self.links if links is None else links
        start = {link.world_id: self.replies[link.world_id] for link in links}

        async def done() -> None:
            while not all(self.replies[link.world_id] >= start[link.world_id] + decisions and not link.handing_over
                          for link in links):
                await asyncio.sleep(0.02)

        await asyncio.wait_for(done(), PHASE_SECONDS)

    def kill(self, index: int) -> None:
        """SIGKILL process ``index`` (its port stays in the balancer, refusing: it is dead)."""
        process = self.bridges[index][0]
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)

    async def drain(self, index: int) -> None:
        """SIGTERM process ``index`` and wait for it to exit (its exit code and seconds kept)."""
        process = self.bridges[index][0]
        began = time.monotonic()
        process.send_signal(signal.SIGTERM)
        try:
            code = await asyncio.to_thread(process.wait, DRAIN_EXIT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            code = None
        self.outcome.drain_seconds.append(time.monotonic() - began)
        self.outcome.exits.append(code)

    async def restart(self, index: int) -> None:
        """Start process ``index`` again on its port."""
        port = self.bridges[index][1]
        process = await asyncio.to_thread(start_bridge, self.schema.url, self.key, port, *LOAD_LIMITS)
        self.bridges[index] = (process, port)

    async def finish(self) -> Outcome:
        """Stop the load (every request answered first) and check everything (the counts of
        :class:`Outcome`, ``audit verify``)."""
        self._stop.set()
        for task in self.flows:
            task.cancel()
        await asyncio.wait_for(asyncio.gather(*self.clicks), PHASE_SECONDS)
        await asyncio.sleep(0)
        for link in self.links:
            await link.stop()
        outcome = self.outcome
        world_ids = [link.world_id for link in self.links]
        rows = await asyncio.to_thread(audit_rows, self.schema.url, world_ids)
        audited = Counter((world_id, event_id) for world_id, event_id, _, _ in rows)
        fated = Counter((world_id, s.message_id) for world_id, _, kind, s in rows
                        if kind == "fate_spend" and s.outcome in FATE_OUTCOMES)
        outcome.acked = len(self.acked)
        outcome.latencies.sort()
        outcome.lost = [f"{w} {e}" for w, e in self.acked if (w, e) not in audited]
        outcome.decided_twice = [f"{w} {e}" for (w, e), n in audited.items() if n > 1]
        outcome.fated_twice = [f"{w} {m}" for (w, m), n in fated.items() if n > 1]
        outcome.handovers = [h for link in self.links for h in link.handovers]
        outcome.queued = sum(len(link.queued) for link in self.links)
        outcome.resent = sum(sum(link.resent.values()) for link in self.links)
        outcome.queued_sent_twice = [f"{link.world_id} {e}" for link in self.links for e in link.queued
                                     if link.sent[e] != 1 + link.resent[e]]
        verified = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "bridge", "audit", "verify", "--db", self.schema.url,
                             "--audit-key", str(self.key)], capture_output=True, text=True, timeout=300)
        outcome.verify_ok = verified.returncode == 0 and all(f"PASS {w}:" in verified.stdout for w in world_ids)
        outcome.verify_output = (verified.stdout + verified.stderr).strip()
        return outcome


async def failover(base: str | None, folder: Path, worlds: int, decisions: int = 10, pace: float = 0.0,
                   history: int = 0) -> Outcome:
    """kill -9 of the third of three processes once every world has ``decisions`` replies;
    then every world (those of the killed process on another) ``decisions`` more. ``pace``: see
    :class:`Run`; ``history``: records given first to one world of the killed process."""
    async with Run(base, folder, worlds, pace) as run:
        await run.settle(decisions=decisions)
        if history:
            await run.grow(run.on(2)[0], history)
        victims = run.on(2)
        run.kill(2)
        await run.settle(decisions=decisions)
        outcome = await run.finish()
        outcome.handovers = [h for h in outcome.handovers if h.world_id in {link.world_id for link in victims}]
        return outcome


async def rolling(base: str | None, folder: Path, worlds: int, decisions: int = 10, pace: float = 0.0,
                  history: int = 0) -> Outcome:
    """A rolling restart: each of three processes in turn drained (SIGTERM) and started again,
    every world deciding ``decisions`` times between steps. ``pace``: see :class:`Run`;
    ``history``: records given first to one world of the first process drained."""
    async with Run(base, folder, worlds, pace) as run:
        await run.settle(decisions=decisions)
        if history:
            await run.grow(run.on(0)[0], history)
        for index in range(len(run.bridges)):
            await run.drain(index)
            await run.restart(index)
            await run.settle(decisions=decisions)
        return await run.finish()


def summary(name: str, outcome: Outcome) -> str:
    """The lines ``--failover`` / ``--rolling`` print: the hand-overs' seconds, then the counts."""
    usual = [h for h in outcome.handovers if h.world_id != outcome.long_world]
    seconds = sorted(h.seconds for h in usual)
    waited = sorted(h.waited for h in usual)
    rest = sorted(h.seconds - h.waited for h in usual)
    lines = [f"{name}: {len(seconds)} hand-overs, seconds from the link's close to the world's first decided reply "
             f"on another process:"]
    if seconds:
        for label, values in (("close -> decided", seconds), ("  module's wait", waited), ("  the rest", rest)):
            lines.append(f"  {label:<18} min {values[0]:.3f}  p50 {percentile(values, 0.5):.3f}  "
                         f"max {values[-1]:.3f}")
        codes = Counter(h.code for h in outcome.handovers)
        lines.append("  close codes: " + ", ".join(f"{code} x{n}" for code, n in sorted(codes.items(), key=str)))
    for h in outcome.handovers:
        if h.world_id == outcome.long_world:
            lines.append(f"  the world with a {outcome.history}-record history: close -> decided {h.seconds:.3f} "
                         f"(module's wait {h.waited:.3f}, close -> welcome {h.welcomed:.3f})")
    if outcome.latencies:
        lat = outcome.latencies
        lines.append(f"  reference, every request under the same load: p50 {percentile(lat, 0.5):.3f}  "
                     f"p99 {percentile(lat, 0.99):.3f}  max {lat[-1]:.3f}")
    if outcome.drain_seconds:
        lines.append("  SIGTERM to exit: " + ", ".join(f"{s:.2f} s" for s in outcome.drain_seconds)
                     + f" (exit codes {outcome.exits})")
    lines.append(f"  {outcome.acked} acknowledged decisions, {outcome.queued} clicks queued while down, "
                 f"{outcome.resent} requests re-sent after a drop in flight: {len(outcome.lost)} lost, "
                 f"{len(outcome.decided_twice)} decided twice, {len(outcome.fated_twice)} fated twice, "
                 f"{len(outcome.failed)} failed, {len(outcome.queued_sent_twice)} queued clicks sent twice; "
                 f"audit verify {'PASS' if outcome.verify_ok else 'FAIL'}: {'PASS' if outcome.ok else 'FAIL'}")
    return "\n".join(lines)


PACE_S = 0.1  # the bench's load: each world fates a result every 0.1 s plus its round trips (a
# table makes a few decisions a minute: this is ~100x a busy one, ~half of what this machine's
# three processes decide at full speed, so a hand-over is measured under load, not in a queue)


HISTORY = 10_000  # records of one world before the stop: a long campaign's trail (~100 sessions)


def main(failover_run: bool, rolling_run: bool, worlds: int = 30, decisions: int = 20, pace: float = PACE_S,
         history: int = HISTORY) -> int:
    """``python -m bench --scale --failover`` / ``--rolling``: run, print, exit 1 on any finding."""
    print(f"failover / rolling restart: {worlds} worlds on 3 processes, each world fating a result every {pace:g} s after its "
          f"replies; {decisions} replies per world between steps; one world given {history} records first. Seconds are from this run on a shared machine: "
          "compare them with the reference line of the same run.")
    ok = True
    with tempfile.TemporaryDirectory(prefix="fate-bridge-failover-") as tmp:
        for name, wanted, run in (("kill -9 of one of 3 processes", failover_run, failover),
                                  ("rolling restart of 3 processes (SIGTERM drain)", rolling_run, rolling)):
            if wanted:
                print(f"{name} ...", file=sys.stderr)
                outcome = asyncio.run(run(None, Path(tmp), worlds, decisions, pace, history))
                print(summary(name, outcome))
                if not outcome.ok:
                    print(outcome.verify_output if not outcome.verify_ok else
                          f"  findings: {outcome.lost[:5]} {outcome.decided_twice[:5]} {outcome.fated_twice[:5]} "
                          f"{outcome.failed[:5]} {outcome.queued_sent_twice[:5]}")
                ok = ok and outcome.ok
    return 0 if ok else 1
