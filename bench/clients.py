"""The load clients and process readings both bench runs use (``bench`` and ``bench.scale``):
kept apart from ``bench/__main__.py`` so that neither imports the other."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

START_TIMEOUT = 30.0  # seconds a server process may take to listen
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")

# The bridge's limits per address (docs/security.md) raised for the bench's loopback clients: every
# connection, the idle ones included, comes from 127.0.0.1 at once.
LOAD_LIMITS = ("--max-connections", "10000", "--max-connections-per-address", "10000",
               "--max-pending-hellos", "10000", "--connect-rate", "100000", "--connect-burst", "10000")


def rss_bytes(pid: int) -> int:
    """Resident set size of a process, from /proc/PID/statm, in bytes."""
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_SIZE


def cpu_seconds(pid: int) -> float:
    """CPU time of a process so far (all its threads, ended ones included), in seconds to the
    nanosecond: Linux's CPU clock of the process (``clock_gettime`` on the clock id the kernel
    derives from the pid, ``MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)`` in
    include/linux/posix-timers.h), so a run of a few hundred milliseconds is not rounded to
    /proc/PID/stat's 10 ms ticks, which on a busy machine can make it nothing. Where
    that clock cannot be read: user + system time from /proc/PID/stat, in ticks. Raises
    ``OSError`` when the process is gone."""
    try:
        return time.clock_gettime((~pid << 3) | 2)
    except OSError:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def start_clients(urls: list[str], worlds_file: Path, conns: int, procs: int, duration: float, tag: str) -> list:
    """Start ``procs`` load client processes sharing ``conns`` connections, client ``i`` on
    ``urls[i % len(urls)]`` (one server, or one per bridge process); each has opened its
    connections (printed ``ready``) when this returns. Their results: :func:`release_clients`."""
    clients, first = [], 0
    for i in range(procs):
        share = conns // procs + (1 if i < conns % procs else 0)
        clients.append(subprocess.Popen(
            [sys.executable, "-m", "bench.load", "--url", urls[i % len(urls)], "--worlds", str(worlds_file),
             "--conns", str(share), "--first", str(first), "--duration", str(duration), "--tag", f"{tag}p{i}-",
             "--wait-go", "--result", str(_result_file(worlds_file, i))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        first += share
    for client in clients:
        assert client.stdout is not None and client.stderr is not None  # both PIPE
        line = client.stdout.readline().strip()
        if line != "ready":
            for other in clients:
                other.kill()
            raise SystemExit(f"load client failed: {line} {client.stderr.read()[-2000:]}")
    return clients


def _result_file(worlds_file: Path, i: int) -> Path:
    return worlds_file.with_name(f"{worlds_file.stem}-result-{i}.json")


def go(clients: list) -> None:
    """Let the ready clients of :func:`start_clients` start their load, all at once."""
    for client in clients:
        client.stdin.write("go\n")
        client.stdin.close()


def release_clients(clients: list, worlds_file: Path, duration: float) -> list[dict]:
    """Wait for the clients :func:`go` started; their result files (``bench.load --result``)."""
    results = []
    for i, client in enumerate(clients):
        if client.wait(timeout=duration + 120) != 0:
            raise SystemExit(f"load client failed: {client.stderr.read()[-2000:]}")
        results.append(json.loads(_result_file(worlds_file, i).read_text()))
    return results


def wait_ready(process: subprocess.Popen, port: int, health: bool) -> None:
    """Return once ``process`` answers on ``port`` (``health``: its ``/healthz``, the bridge's; else
    a TCP connection). Raises ``SystemExit`` naming the port if it exits first or is not listening
    within :data:`START_TIMEOUT` (then it is killed)."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the server for port {port} exited with {process.returncode} before listening")
        try:
            if health:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).close()
            else:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise SystemExit(f"no server on port {port} after {START_TIMEOUT:g} s")
