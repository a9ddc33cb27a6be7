"""Storage faults under load: ``python -m bench --faults``.

Each fault is made under live ``fate-bridge serve`` processes while a few forwarders decide
continuously (one world each, :class:`~bench.failover.ModuleLink`: the Foundry module's
connection rules, a request answered ``unavailable`` sent again after its ``retry_after_ms``
included). The faults of one database run in turn, the load going on throughout (a *chain*):

- SQLite: a second ``serve`` on the file through a hard link, then through a symlink (each must
  exit at once with one line); SIGTERM while decisions are in flight (the bridge drains; it is
  started again, as systemd does); the database file deleted under the running bridge (the host
  then puts the file back as it was at the deletion, as a snapshot would, and starts ``serve``);
  an invalid stored settings row at start (a world's ``fate_option`` outside its enum, written
  while the bridge was stopped: ``serve`` must name it in one line and serve the other worlds).
- a full disk: SQLite on a small tmpfs, filled to its last byte, then freed (root only: skipped
  saying so elsewhere).
- PostgreSQL, on a schema of its own, through a TCP proxy (bench/outage.py; the server itself is
  never touched): every session cut at once (what a restart of the server does to its clients);
  the server unreachable for a while; a failover: the process holding the links killed -9, the
  links moving to a second process, which then gets every acknowledged request of those worlds
  again.

After each fault the bridge is restarted (unless the fault did it), every decision acknowledged
so far on the database is sent again (same ``event_id``; its reply must be the acknowledged one
byte for byte, the receipt aside), and ``audit verify`` is run. Printed per fault, as a Markdown
table (docs/deploy.md, *Storage faults*): the answers meanwhile (from the fault's start until
service returned and every world decided a few times more), by reply type or error code; the
decisions acknowledged so far and how many of them were lost (answered otherwise after the
restart: a changed reply, an error, a decision made anew); the audit records of the load's
worlds beyond the acknowledged decisions (a request decided twice, or stored and never
answered: ``audit verify`` counts them); the seconds from the fault's end (the outage over, the
second serve gone, the bridge started again) to the first decided reply to a request sent after
it; the bridge's log lines meanwhile at warning level or above and any line outside serve's
start banner (the promise: one when an outage starts, one when it ends), and the tracebacks
among them; ``audit verify``. The exit status is 1 if anything was lost, a record is beyond the
acknowledged, a traceback was written or a trail failed to verify.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from itertools import count
from pathlib import Path

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from bridge.session import hash_token, new_token
from bridge.store import open_store

from .crash import UNLIMITED, _without_receipt, free_port, rolled_message, spend_message, start_bridge
from .failover import PHASE_SECONDS, Balancer, ModuleLink
from .outage import OutageProxy, fill, tmpfs, tmpfs_problem
from .scale import LOAD_LIMITS, PG_URL, PgSchema, register_worlds


@dataclass(frozen=True)
class Size:
    """How big a run is: forwarders (one world each), the seconds each waits after a result's
    replies before the next, replies per world before each fault and after service returned,
    seconds an outage lasts once the bridge refuses, the tmpfs in MiB."""

    worlds: int
    pace_s: float
    settle: int
    hold_s: float
    disk_mb: int


# 4 tables each fating a result every 20 ms: far busier than any table, a few hundred decisions/s
# in all, about half of what this 2-core machine decides (so a fault is seen under load, not in a queue)
FULL = Size(worlds=4, pace_s=0.02, settle=40, hold_s=2.0, disk_mb=64)
QUICK = Size(worlds=2, pace_s=0.05, settle=3, hold_s=0.3, disk_mb=16)  # the suite's: checks the harness
REFUSED_SECONDS = 10.0  # bound on the wait for the first `unavailable` once storage fails
SECOND_SERVE_SECONDS = 30.0  # bound on a second serve's life (it must exit at once)
PROBLEM_LEVELS = {"warning", "error", "critical"}
VERIFIED = re.compile(r"^(?:PASS|FAIL) (\S+): (\d+) records", re.M)  # a world's line in `audit verify`
BAD_WORLD = "faults-bad-settings"
BAD_SETTINGS = '{"fate_option":"sometimes"}'  # a value outside SettingsFateOption


@dataclass
class Finding:
    """What one fault did (see the module docstring for each field's meaning)."""

    fault: str
    title: str
    answers: dict[str, int] = field(default_factory=dict)
    acked: int = 0
    lost: int = 0
    extra_records: int = 0  # audit records of the load's worlds beyond the acknowledged decisions
    back_s: float | None = None  # None: not run (skipped)
    lines: list[str] = field(default_factory=list)
    tracebacks: int = 0
    verify_ok: bool = False
    verify_output: str = ""
    note: str = ""
    skipped: str | None = None

    @property
    def ok(self) -> bool:
        return self.skipped is not None or (self.lost == self.extra_records == self.tracebacks == 0 and self.verify_ok)


@dataclass
class Happened:
    """A fault, made: when it ended (time.monotonic()), whether it started the bridge again
    itself, and what to say about it."""

    ended_at: float
    restarted: bool
    note: str


@dataclass(frozen=True)
class Answer:
    """A reply to a request: when it came (time.monotonic()), its type or, for an error, its
    code, whether it was a decision, and when its request was last sent."""

    at: float
    kind: str
    decided: bool
    sent_at: float


@dataclass
class Served:
    """One serve process of a chain, its port and its log (stderr) file."""

    process: subprocess.Popen
    port: int
    log: Path


def banner_form(line: str, port: int) -> str:
    """A start line of serve as the banner keeps it: ``port`` written PORT, the list of worlds
    left out (a world added since changes it)."""
    line = line.strip().replace(str(port), "PORT")
    return "Worlds:" if line.startswith("Worlds: ") else line


def log_findings(text: str, banner: set[str], port: int) -> tuple[list[str], int]:
    """The lines of a serve log (``text``) that count as fault lines, each as a short label, and
    the tracebacks among them: JSON lines at warning level or above (``event reason=...``), and
    any other line not in serve's start ``banner`` (compared in :func:`banner_form`)."""
    lines, tracebacks = [], 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        if isinstance(entry, dict):
            if entry.get("level") in PROBLEM_LEVELS or "exception" in entry:
                reason = f" reason={entry['reason']}" if "reason" in entry else ""
                lines.append(f"{entry.get('event')}{reason}")
                tracebacks += "exception" in entry
        elif banner_form(line, port) not in banner:
            lines.append(line.strip())
            tracebacks += line.startswith("Traceback (most recent call last)")
    return lines, tracebacks


def fate_bridge(*args: str) -> tuple[int, str]:
    """A ``fate-bridge`` command run here (call it on a worker thread: no interpreter to start
    each time); its exit code and what it printed on stdout."""
    from bridge import cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(list(args))
    return code, out.getvalue().strip()


class Chain:
    """One database, the serve processes on it, and the load: ``size.worlds`` forwarders, one
    world each, fating a result every ``size.pace_s`` after its replies, through a balancer over
    the processes' ports. ``db``: what serve is given (a file, or a URL through the proxy); ``direct``: the
    same database for ``audit verify`` (default ``db``). Use as an async context manager, then
    :meth:`run` each fault."""

    def __init__(self, folder: Path, db: str, size: Size, direct: str | None = None) -> None:
        self.folder, self.db, self.size, self.direct = folder, db, size, direct or db
        self.key = folder / "audit.key"
        self.served: list[Served] = []  # every process started, in order
        self.current: Served | None = None  # the process the links go to
        self.banner: set[str] = set()  # serve's start lines (banner_form)
        self.answers: list[Answer] = []  # every reply to a request, in order
        self.acked: dict[tuple[str, str], str] = {}  # (world, event_id) -> the decided reply as received
        self.messages: dict[tuple[str, str], dict] = {}
        self.lost: set[tuple[str, str]] = set()  # acknowledged, then answered otherwise
        self.decided: Counter[str] = Counter()  # decided replies by world
        self._going = asyncio.Event()
        self._busy = 0  # flows between a result's two requests

    async def __aenter__(self) -> Chain:
        worlds = await register_worlds(self.direct, self.size.worlds, "faults")
        self.links: dict[str, ModuleLink] = {}
        self.flows: list[asyncio.Task[None]] = []
        self.current = await self.start()
        self.balancer = Balancer([self.current.port])
        rng = random.Random(35)
        self.links = {w["world_id"]: ModuleLink(self.balancer, w["world_id"], w["token"], rng, on_reply=self._answer)
                      for w in worlds}
        for link in self.links.values():
            link.start()
        self._going.set()
        self.flows = [asyncio.create_task(self._flow(link)) for link in self.links.values()]
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self.flows:
            task.cancel()
        for link in self.links.values():
            await link.stop()
        for served in self.served:
            if served.process.poll() is None:
                served.process.kill()
                served.process.wait()

    async def start(self, port: int | None = None) -> Served:
        """A serve process on the chain's database (on ``port``, else a free one), once /healthz
        answers; the first one's start lines are the banner later ones are compared with."""
        port = port or free_port()
        log = self.folder / f"serve-{len(self.served)}.log"
        with open(log, "wb") as out:
            process = await asyncio.to_thread(start_bridge, self.db, self.key, port, *LOAD_LIMITS, log=out)
        served = Served(process, port, log)
        self.served.append(served)
        return served

    async def stop(self, served: Served, sig: int = signal.SIGTERM) -> tuple[int | None, float]:
        """Send ``sig`` to a process and wait for it to exit: its exit code and the seconds taken."""
        began = time.monotonic()
        served.process.send_signal(sig)
        code = await asyncio.to_thread(served.process.wait, PHASE_SECONDS)
        return code, time.monotonic() - began

    async def restart(self) -> None:
        """Stop the current process (SIGTERM: it drains) and start another on its port."""
        assert self.current is not None
        await self.stop(self.current)
        self.current = await self.start(self.current.port)

    def _answer(self, link: ModuleLink, event_id: str, reply: dict, text: str, sent_at: float) -> None:
        """Every reply: counted by type or code; a decision is acknowledged the first time, and
        compared with that every time after (a resend); a final error to a resend of an
        acknowledged request is a loss too."""
        error = reply.get("type") == "error"
        kind = str(reply.get("code") if error else reply.get("type"))
        self.answers.append(Answer(time.monotonic(), kind, not error, sent_at))
        key = (link.world_id, event_id)
        if key in self.acked:
            changed = _without_receipt(text) != _without_receipt(self.acked[key])
            if (error and kind != "unavailable") or (not error and changed):
                self.lost.add(key)
        elif not error:
            self.acked[key] = text
            self.decided[link.world_id] += 1

    async def _flow(self, link: ModuleLink) -> None:
        for n in count():
            await self._going.wait()
            self._busy += 1
            try:
                mid = f"{link.world_id}-{n}"
                await self._ask(link, rolled_message(f"r{mid}", mid, 0))
                await self._ask(link, spend_message(f"s{mid}", mid, UNLIMITED))
            finally:
                self._busy -= 1
            await asyncio.sleep(self.size.pace_s)

    async def _ask(self, link: ModuleLink, message: dict) -> dict:
        self.messages[link.world_id, message["event_id"]] = message
        return await asyncio.wait_for(link.request(message), PHASE_SECONDS)

    async def until(self, done: Callable[[], bool], seconds: float = PHASE_SECONDS) -> bool:
        """Wait until ``done()`` (checked every 10 ms), at most ``seconds``; whether it came true.
        A flow that failed (a request unanswered for PHASE_SECONDS) is raised here."""
        deadline = time.monotonic() + seconds
        while not done():
            for task in self.flows:
                if task.done():
                    task.result()
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    async def settle(self) -> None:
        """Wait until every world has ``size.settle`` more decided replies."""
        wanted = {world: n + self.size.settle for world, n in ((w, self.decided[w]) for w in self.links)}
        if not await self.until(lambda: all(self.decided[w] >= n for w, n in wanted.items())):
            raise RuntimeError(f"the worlds did not decide {self.size.settle} times within {PHASE_SECONDS:g} s")

    async def back_after(self, ended_at: float) -> float:
        """Seconds from ``ended_at`` to the first decided reply to a request sent after it."""
        seen = 0
        found: list[float] = []

        def back() -> bool:
            nonlocal seen
            found.extend(a.at for a in self.answers[seen:] if a.decided and a.sent_at > ended_at)
            seen = len(self.answers)
            return bool(found)

        if not await self.until(back):
            raise RuntimeError(f"no decision within {PHASE_SECONDS:g} s after the fault ended")
        return found[0] - ended_at

    async def pause(self) -> None:
        """Stop the flows after their current result (its requests answered)."""
        self._going.clear()
        if not await self.until(lambda: self._busy == 0):
            raise RuntimeError("the flows did not stop")

    async def resend_acked(self) -> int:
        """Send every acknowledged request again, same event_id, on its world's link, all at once
        (the bridge answers each world's in order); :meth:`_answer` compares each reply with the
        acknowledged one. Returns how many were sent."""
        keys = list(self.acked)
        await asyncio.wait_for(asyncio.gather(*(self.links[world].request(self.messages[world, event_id])
                                                for world, event_id in keys)), PHASE_SECONDS)
        return len(keys)

    async def run(self, fault: Fault, *extra: object) -> Finding:
        """Make one fault under the load (``fault.make(chain, *extra)``) and check after it (the
        module docstring)."""
        await self.settle()
        marks = {served.log: served.log.stat().st_size for served in self.served}
        first, lost_before = len(self.answers), len(self.lost)
        happened = await fault.make(self, *extra)
        back = await self.back_after(happened.ended_at)
        await self.settle()
        answers = Counter(a.kind for a in self.answers[first:])
        lines, tracebacks = [], 0
        for served in self.served:
            with open(served.log, "rb") as log:
                log.seek(marks.get(served.log, 0))
                found = log_findings(log.read().decode(errors="replace"), self.banner, served.port)
            lines += found[0]
            tracebacks += found[1]
        await self.pause()
        if not happened.restarted:
            await self.restart()
        await self.resend_acked()
        code, output = await asyncio.to_thread(fate_bridge, "audit", "verify", "--db", self.direct,
                                               "--audit-key", str(self.key))
        records = sum(int(n) for world, n in VERIFIED.findall(output) if world in self.links)
        self._going.set()
        return Finding(fault.name, fault.title, dict(answers.most_common()), len(self.acked), len(self.lost) - lost_before,
                       records - len(self.acked), back, lines, tracebacks, code == 0, output, happened.note)

    def learn_banner(self) -> None:
        """Take the first process's start lines as serve's banner (call once it has served)."""
        first = self.served[0]
        self.banner = {banner_form(line, first.port) for line in first.log.read_text().splitlines()
                       if line.strip() and not line.startswith("{")}

    async def healthz(self) -> str:
        """What the current process's ``GET /healthz`` answers now: ``STATUS body``."""
        assert self.current is not None
        url = f"http://127.0.0.1:{self.current.port}/healthz"

        def get() -> str:
            try:
                with urllib.request.urlopen(url, timeout=PHASE_SECONDS) as response:
                    return f"{response.status} {response.read().decode().strip()}"
            except urllib.error.HTTPError as refused:
                with refused:  # an open HTTPError holds the socket
                    return f"{refused.code} {refused.read().decode().strip()}"

        return await asyncio.to_thread(get)

    async def refused_said(self, first: int) -> str:
        """Wait (at most REFUSED_SECONDS) for an ``unavailable`` among the answers from index
        ``first`` on (``len(chain.answers)`` before the fault); what the fault's note says of it
        and of ``/healthz`` then."""
        if not await self.until(lambda: any(a.kind == "unavailable" for a in self.answers[first:]),
                                REFUSED_SECONDS):
            return f"NOT refused within {REFUSED_SECONDS:g} s"
        return f"refused, /healthz answering `{await self.healthz()}`"

    def in_flight(self) -> int:
        """Requests sent on a live link and not answered yet."""
        return sum(1 for link in self.links.values() for entry in link.pending.values() if entry.sent)


# -- the faults: each makes its fault on a running chain and says when it ended ----------------


async def second_serve(chain: Chain, how: str) -> Happened:
    """A second ``serve`` on the chain's SQLite file through another path (``hard link`` or
    ``symlink``): it must exit at once with one line naming the file and the holder."""
    other = chain.folder / f"another-name-{how.replace(' ', '-')}.sqlite3"
    (os.link if how == "hard link" else os.symlink)(chain.db, other)
    began = time.monotonic()
    try:
        result = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "bridge", "serve", "--port", "0", "--db", str(other),
                             "--audit-key", str(chain.key), "--log-format", "json", "--rate-limit", "0"],
            capture_output=True, text=True, timeout=SECOND_SERVE_SECONDS)
        said = (result.stdout + result.stderr).strip().splitlines()
        note = (f"the second serve exited {result.returncode} after {time.monotonic() - began:.2f} s with "
                f"{len(said)} line{'s' * (len(said) != 1)}: `{' / '.join(said)}`")
    except subprocess.TimeoutExpired:
        note = f"the second serve did not exit: it served the file too for {SECOND_SERVE_SECONDS:g} s"
    finally:
        other.unlink()
    return Happened(time.monotonic(), False, note)


async def sigterm(chain: Chain) -> Happened:
    """SIGTERM while requests are in flight (a batch being decided), then serve started again."""
    assert chain.current is not None
    await chain.until(lambda: chain.in_flight() > 0)
    in_flight = chain.in_flight()
    code, seconds = await chain.stop(chain.current)
    ended = time.monotonic()
    chain.current = await chain.start(chain.current.port)
    return Happened(ended, True, f"{in_flight} request{'s' * (in_flight != 1)} in flight at the signal; the bridge "
                                 f"drained and exited {code} after {seconds:.2f} s, then was started again")


async def file_deleted(chain: Chain) -> Happened:
    """The database file deleted under the running bridge. The bridge is frozen (SIGSTOP) for the
    instant of the deletion so the file (with its WAL) can be copied as it was then: what the
    host restores, once the bridge has refused for a while, before starting serve again. Every
    decision acknowledged before or after the deletion must be in that copy."""
    assert chain.current is not None
    db, rescue = Path(chain.db), chain.folder / "rescue"
    rescue.mkdir()
    parts = [Path(f"{db}{suffix}") for suffix in ("", "-wal")]
    first = len(chain.answers)
    chain.current.process.send_signal(signal.SIGSTOP)
    try:
        for part in parts:
            if part.exists():
                shutil.copy2(part, rescue / part.name)
        db.unlink()
    finally:
        chain.current.process.send_signal(signal.SIGCONT)
    refused = await chain.refused_said(first)
    await asyncio.sleep(chain.size.hold_s)
    code, seconds = await chain.stop(chain.current)
    for leftover in (*parts, Path(f"{db}-shm")):
        leftover.unlink(missing_ok=True)
    for part in parts:
        if (rescue / part.name).exists():
            (rescue / part.name).rename(part)
    ended = time.monotonic()
    chain.current = await chain.start(chain.current.port)
    return Happened(ended, True, f"{refused} after the deletion; stopped "
                                 f"(exit {code} after {seconds:.2f} s), the file as it was at the deletion put "
                                 "back, serve started again")


async def invalid_settings(chain: Chain) -> Happened:
    """The bridge stopped, a world registered with a settings row outside its enum (by hand),
    serve started again: one line naming the world and the value, the other worlds served, the
    bad world's hello refused. Then what the line says to do: serve stopped, ``audit repair``
    of that world, serve started again (``audit verify`` fails the edited row until then)."""
    assert chain.current is not None
    code, _ = await chain.stop(chain.current)
    token = new_token()
    store = await open_store(chain.db)
    try:
        await store.add_world(BAD_WORLD, hash_token(token))
    finally:
        await store.close()
    with contextlib.closing(sqlite3.connect(chain.db)) as conn, conn:
        conn.execute("UPDATE worlds SET settings = ? WHERE world_id = ?", (BAD_SETTINGS, BAD_WORLD))
    ended = time.monotonic()
    chain.current = await chain.start(chain.current.port)
    async with connect(f"ws://127.0.0.1:{chain.current.port}") as ws:
        await ws.send(json.dumps({"type": "hello", "v": 1, "world_id": BAD_WORLD, "token": token}))
        reply = json.loads(await asyncio.wait_for(ws.recv(), PHASE_SECONDS))
        with contextlib.suppress(ConnectionClosed):
            await asyncio.wait_for(ws.recv(), PHASE_SECONDS)
        closed = ws.close_code
    await chain.back_after(ended)  # the other worlds served, before the repair
    await chain.stop(chain.current)
    repaired, said = await asyncio.to_thread(fate_bridge, "audit", "repair", "--world", BAD_WORLD, "--db", chain.db,
                                             "--audit-key", str(chain.key))
    chain.current = await chain.start(chain.current.port)
    return Happened(ended, True, f"stopped (exit {code}), {BAD_WORLD}'s settings set to {BAD_SETTINGS}, serve "
                                 f"started again; that world's hello answered {reply.get('code', reply['type'])}, "
                                 f"closed {closed}; then stopped, `audit repair` (exit {repaired}: "
                                 f"{said.splitlines()[0] if said else 'nothing said'}), started again")


async def disk_full(chain: Chain) -> Happened:
    """The database's disk (a tmpfs) filled to its last byte while deciding, then freed."""
    first = len(chain.answers)
    filler = await asyncio.to_thread(fill, Path(chain.db).parent)
    filled_at = time.monotonic()
    refused = await chain.refused_said(first)
    await asyncio.sleep(chain.size.hold_s)
    filler.unlink()
    return Happened(time.monotonic(), False, f"{refused} once full; "
                                             f"space freed after {time.monotonic() - filled_at:.2f} s")


async def pg_sessions_cut(chain: Chain, proxy: OutageProxy) -> Happened:
    """Every open connection to PostgreSQL cut at once (the proxy): what a server restart does."""
    cut = proxy.cut()
    return Happened(time.monotonic(), False, f"{cut} sessions cut")


async def pg_unreachable(chain: Chain, proxy: OutageProxy) -> Happened:
    """PostgreSQL unreachable (the proxy cuts every link and refuses new ones) for a while."""
    first = len(chain.answers)
    proxy.down()
    down_at = time.monotonic()
    refused = await chain.refused_said(first)
    await asyncio.sleep(chain.size.hold_s)
    proxy.up()
    return Happened(time.monotonic(), False, f"{refused} while down; reachable "
                                             f"again after {time.monotonic() - down_at:.2f} s")


async def pg_failover(chain: Chain, proxy: OutageProxy) -> Happened:
    """A second process started; the one holding every link killed -9; the links move to the
    second (the module's backoff, then the balancer), which gets every acknowledged request of
    those worlds again once it decides."""
    assert chain.current is not None
    killed, survivor = chain.current, await chain.start()
    chain.balancer.ports.append(survivor.port)
    await chain.stop(killed, signal.SIGKILL)
    ended = time.monotonic()
    chain.current = survivor
    await chain.back_after(ended)
    resent = await chain.resend_acked()
    return Happened(ended, False, f"the process holding {len(chain.links)} links killed -9; they moved to a "
                                  f"second process, which got {resent} acknowledged requests again")


@dataclass(frozen=True)
class Fault:
    """One fault of the bench: its name (``--faults NAME``), its table title, its chain (the
    database it runs on) and what makes it (given the chain, and the proxy on PostgreSQL)."""

    name: str
    title: str
    chain: str
    make: Callable[..., Awaitable[Happened]]


FAULTS = [
    Fault("pg-sessions-cut", "PostgreSQL: every session cut (a server restart)", "postgresql", pg_sessions_cut),
    Fault("pg-unreachable", "PostgreSQL unreachable", "postgresql", pg_unreachable),
    Fault("pg-failover", "PostgreSQL: failover (kill -9), requests sent again elsewhere", "postgresql", pg_failover),
    Fault("hard-link", "a second serve through a hard link", "sqlite", lambda chain: second_serve(chain, "hard link")),
    Fault("symlink", "a second serve through a symlink", "sqlite", lambda chain: second_serve(chain, "symlink")),
    Fault("sigterm", "SIGTERM with decisions in flight", "sqlite", sigterm),
    Fault("file-deleted", "the database file deleted", "sqlite", file_deleted),
    Fault("invalid-settings", "an invalid stored settings row at start", "sqlite", invalid_settings),
    Fault("disk-full", "disk full (SQLite)", "disk", disk_full),
]
NAMES = [fault.name for fault in FAULTS]


def pg_problem(url: str) -> str | None:
    """Why PostgreSQL cannot be used at ``url``, or None."""
    try:
        import psycopg

        psycopg.connect(url, connect_timeout=3).close()
    except Exception as exc:  # psycopg missing, refused, bad URL: all mean "no server to run on"
        return (f"PostgreSQL not reachable at {url} ({type(exc).__name__}: {exc}); set FATE_BRIDGE_BENCH_PG to a "
                "server's URL")
    return None


async def run_chain(kind: str, faults: list[Fault], folder: Path, size: Size) -> list[Finding]:
    """The ``faults`` of one chain, in order, on a new database of ``kind`` in ``folder``."""
    async with contextlib.AsyncExitStack() as stack:
        extra: tuple = ()
        if kind == "postgresql":
            schema = stack.enter_context(PgSchema(PG_URL, prefix="fb_faults"))
            proxy = OutageProxy.before(schema.url)
            await proxy.start()
            stack.push_async_callback(proxy.close)
            chain = Chain(folder, proxy.url(schema.url), size, direct=schema.url)
            extra = (proxy,)
        else:
            disk = folder / "disk"
            disk.mkdir()
            if kind == "disk":
                stack.enter_context(tmpfs(disk, size.disk_mb))
            chain = Chain(folder, str(disk / "bridge.sqlite3"), size)
        await stack.enter_async_context(chain)
        await chain.settle()
        chain.learn_banner()
        findings = []
        for fault in faults:
            print(f"{fault.name} ...", file=sys.stderr)
            findings.append(await chain.run(fault, *extra))
        return findings


def unavailable_reason(kind: str) -> str | None:
    """Why a chain cannot run on this machine, or None."""
    if kind == "postgresql":
        return pg_problem(PG_URL)
    if kind == "disk":
        return tmpfs_problem()
    return None


def run(names: list[str], size: Size) -> list[Finding]:
    """The faults named (in :data:`FAULTS`' order), chain by chain; a chain that cannot run here
    gives its faults as skipped, with the reason."""
    findings = []
    with tempfile.TemporaryDirectory(prefix="fate-bridge-faults-") as tmp:
        for kind in ("sqlite", "disk", "postgresql"):
            faults = [fault for fault in FAULTS if fault.chain == kind and fault.name in names]
            if not faults:
                continue
            reason = unavailable_reason(kind)
            if reason is not None:
                findings += [Finding(fault.name, fault.title, skipped=reason) for fault in faults]
                continue
            folder = Path(tmp) / kind
            folder.mkdir()
            findings += asyncio.run(run_chain(kind, faults, folder, size))
    order = {name: n for n, name in enumerate(NAMES)}
    return sorted(findings, key=lambda finding: order[finding.fault])


def table(findings: list[Finding]) -> str:
    """The findings as a Markdown table, then one line per fault: its log lines and its note."""
    rows = ["| fault | answers meanwhile | acknowledged | lost | records beyond | back after (s) | log lines "
            "| tracebacks | audit verify |", "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    notes = []
    for f in findings:
        if f.skipped is not None:
            rows.append(f"| {f.title} | skipped: {f.skipped} | | | | | | | |")
            continue
        answers = ", ".join(f"{kind} {n}" for kind, n in f.answers.items())
        rows.append(f"| {f.title} | {answers} | {f.acked} | {f.lost} | {f.extra_records} | {f.back_s:.2f} "
                    f"| {len(f.lines)} | {f.tracebacks} | {'PASS' if f.verify_ok else 'FAIL'} |")
        said = "; ".join(f"`{line}`" for line in f.lines) or "none"
        notes.append(f"- {f.title}: {f.note}. Log lines: {said}.")
    return "\n".join(rows + [""] + notes)


def main(names: list[str], quick: bool, out: Path) -> int:
    """``python -m bench --faults [NAMES]``: run, print the table, write the JSON to ``out``;
    exit 1 unless every fault that ran is :attr:`Finding.ok`."""
    size = QUICK if quick else FULL
    unknown = sorted(set(names) - set(NAMES))
    if unknown:
        raise SystemExit(f"unknown fault {', '.join(unknown)}: choose among {', '.join(NAMES)}")
    findings = run(names, size)
    out.write_text(json.dumps({"mode": "quick" if quick else "full", "size": asdict(size),
                               "findings": [asdict(f) for f in findings]}, indent=2) + "\n")
    print(f"storage faults under load: {size.worlds} forwarders, one world each, fating a result every "
          f"{size.pace_s:g} s after its replies; outages held {size.hold_s:g} s once refused; after each fault the "
          "bridge restarted and every decision acknowledged so far on its database sent again\n")
    print(table(findings))
    print(f"\nresults written to {out}")
    return 0 if all(f.ok for f in findings) else 1
