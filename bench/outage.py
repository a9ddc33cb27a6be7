"""Storage outages made without touching the database server: a small TCP proxy in
front of it that the bridge connects through, whose links the caller cuts or refuses; and a full
disk, a small tmpfs (:func:`tmpfs`, root only) filled to its last byte (:func:`fill`).

:class:`OutageProxy` listens on 127.0.0.1 (a port of its own) and forwards each connection to the
server's address. :meth:`OutageProxy.cut` closes every open link at once (a lost session: what a
PostgreSQL restart, a failover or a network cut does to a client), :meth:`OutageProxy.down`
also refuses new connections until :meth:`OutageProxy.up` (the server unreachable). The tests
(tests/test_storage_faults.py) and ``bench`` drive it; :func:`through` rewrites a ``postgresql://``
URL to go through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

CHUNK = 65536  # bytes read per forwarding step
TMPFS_NEEDS_ROOT = "a full disk is a small tmpfs, which only root can mount"


def tmpfs_problem() -> str | None:
    """Why :func:`tmpfs` cannot run here (:data:`TMPFS_NEEDS_ROOT`), or None."""
    return TMPFS_NEEDS_ROOT if os.geteuid() != 0 or shutil.which("mount") is None else None


@contextlib.contextmanager
def tmpfs(folder: Path, megabytes: int) -> Iterator[Path]:
    """A tmpfs of ``megabytes`` MiB mounted on ``folder`` (an empty folder; root only, see
    :func:`tmpfs_problem`), unmounted (lazily) on exit; yields ``folder``."""
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(folder)], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def fill(disk: Path) -> Path:
    """Fill ``disk`` to its last byte with one file; returns it (delete it to free the space).
    Raises OSError for any failure but the disk being full."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
    finally:
        os.close(fd)
    return filler


def through(url: str, port: int) -> str:
    """``url`` (``postgresql://user@host:port/db?...``) with its host and port replaced by
    127.0.0.1:``port`` (the proxy's), everything else kept."""
    parts = urlsplit(url)
    user = parts.netloc.rpartition("@")[0]
    netloc = f"{user}@127.0.0.1:{port}" if user else f"127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


class OutageProxy:
    """Forwards TCP connections from 127.0.0.1:``port`` to ``target`` (host, port). Use
    :meth:`start` (a coroutine) before connecting through it and :meth:`close` after. Runs on
    the event loop that started it."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = 0
        self.refusing = False
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    @classmethod
    def before(cls, url: str) -> OutageProxy:
        """A proxy in front of the server a ``postgresql://`` ``url`` names (default port 5432)."""
        parts = urlsplit(url)
        return cls((parts.hostname or "127.0.0.1", parts.port or 5432))

    async def start(self) -> None:
        """Listen (on a free port, :attr:`port`)."""
        self._server = await asyncio.start_server(self._link, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    def url(self, url: str) -> str:
        """``url`` going through this proxy (:func:`through`)."""
        return through(url, self.port)

    def cut(self) -> int:
        """Close every open link now (both sides see the connection end); returns how many."""
        links = list(self._links)
        for writer in links:
            writer.transport.abort()
        self._links.clear()
        return len(links) // 2

    def down(self) -> None:
        """The server unreachable: open links cut, new connections closed at once."""
        self.refusing = True
        self.cut()

    def up(self) -> None:
        """The server reachable again through the proxy."""
        self.refusing = False

    async def close(self) -> None:
        """Stop listening and cut every link."""
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._links.update((writer, up_writer))
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.get_running_loop().create_task(self._pump(source, sink, (writer, up_writer)))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter,
                    pair: tuple[asyncio.StreamWriter, asyncio.StreamWriter]) -> None:
        """Copy ``source`` into ``sink`` until either end closes; then both ends of the pair go."""
        with contextlib.suppress(OSError, asyncio.CancelledError):
            while data := await source.read(CHUNK):
                sink.write(data)
                await sink.drain()
        for writer in pair:
            self._links.discard(writer)
            writer.transport.abort()
