"""What ``serve`` says when it starts, and, once listening, the addresses to give others.

Each problem gets one clear line with its fix, never a traceback.

- :func:`listen_problem` and :func:`database_problem` turn an ``OSError`` or ``sqlite3`` error
  into the sentence the operator reads.
- :func:`hold_database` keeps a second process off a SQLite file one already serves: a
  ``serve``, a ``resolve --db``, a ``restore``, an ``audit new-key`` or ``audit repair``. What
  each is told is in :data:`_WHEN_HELD`, on PostgreSQL too (bridge/store/postgres.py).
- :func:`reach_lines` lists the URLs for the module, the overlay and Foundry's *Install Module*.
  With ``--host 0.0.0.0`` they use this machine's own addresses.
"""

from __future__ import annotations

import errno
import fcntl
import ipaddress
import os
import sqlite3
from pathlib import Path

from . import release
from .errors import ConfigError

WILDCARDS = ("0.0.0.0", "::", "")  # listen on every network of the machine


def listen_problem(host: str, port: int, exc: OSError) -> str:
    """Why ``serve`` cannot listen on ``host:port``, and the fix."""
    import socket  # (here and below: the commands that hold or open a database need no socket)

    if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
        return (f"--host {host} is not an address of this machine: use 127.0.0.1 (this machine "
                "only), 0.0.0.0 (every network) or one of its addresses (`ip addr` lists them)")
    if exc.errno == errno.EADDRINUSE:
        return (f"port {port} on {host} is taken by another program (maybe a bridge already "
                "running): stop it, or pick another --port")
    if exc.errno == errno.EACCES:
        return f"port {port} needs root (below 1024): use --port 8765, or a proxy in front"
    return f"cannot listen on {host}:{port}: {exc.strerror or exc}; pick another --host or --port"


def folder_given(path: str | Path) -> str | None:
    """What is wrong when the database path ``path`` is a folder; None when it is not."""
    if not Path(path).expanduser().is_dir():
        return None
    return f"{path} is a folder, not a database file: give the file's path, e.g. {Path(path) / 'bridge.sqlite3'}"


def database_problem(path: str, exc: Exception) -> str:
    """Why the database at ``path`` cannot be opened, and the fix.

    The causes: a folder given for the file; a folder or file this user may not write; a file that
    is no database; else what the system said. Write access is checked, not guessed from SQLite's
    "unable to open"."""
    file = Path(path).expanduser()
    folder = file.parent
    if given_folder := folder_given(path):
        return given_folder
    if isinstance(exc, PermissionError) and exc.filename:  # creating the folder or the file
        return (f"cannot write the database {path}: {exc.filename} cannot be written by this user "
                f"({exc.strerror}); give --db a path in a folder you own")
    if isinstance(exc, PermissionError) or "readonly" in str(exc) or "unable to open" in str(exc):
        if folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK):
            return (f"cannot write the database {path}: its folder {folder} is read-only for this user; "
                    f"give --db a path in a folder you own, or fix the permissions (`chmod u+w {folder}`)")
        if file.exists() and not os.access(file, os.R_OK | os.W_OK):
            return (f"cannot write the database {path}: the file is read-only for this user; fix its "
                    f"permissions (`chmod u+rw {file}`), or give --db another path")
        return f"cannot open the database {path} ({exc}): give --db a file path in a folder you own"
    if isinstance(exc, sqlite3.DatabaseError):
        return (f"the database {path} is not a readable fate-bridge database ({exc}): restore your "
                "last backup with `fate-bridge restore BACKUP_FILE`, or move the file away to "
                "start afresh")
    return f"cannot open the database {path}: {getattr(exc, 'strerror', None) or exc}; give another --db"


PROC_LOCKS = Path("/proc/locks")  # Linux: every file lock held, with its holder's pid and the file's inode


def lock_holder(path: str | Path) -> str | None:
    """Who holds the serve lock of the database ``path``, as "pid 123 on host h".

    None when no process holds it, or the file does not exist. The lock is on the file itself,
    whatever path reaches it: a hard link, a symlink, a bind mount. It ends with its holder, even
    after ``kill -9``.

    Read from Linux's ``/proc/locks``: the holder's pid, by the file's device and inode. Nothing is
    opened or taken. So a process with SQLite connections on the file may ask. Closing a descriptor
    of the file would drop their POSIX locks (sqlite.org/howtocorrupt.html, 2.2). Says "another
    process" where ``/proc/locks`` cannot be read."""
    try:
        stat = os.stat(Path(path).expanduser())
    except OSError:
        return None
    inode = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    try:
        lines = PROC_LOCKS.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()  # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" ("->" when waiting)
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[3] == "WRITE" and fields[5] == inode:
            import socket

            return f"pid {fields[4]} on host {socket.gethostname()}"
    return None


# What a command refused because another process holds the serve lock should do.
_WHEN_HELD = {
    "serve": "only one bridge may serve a SQLite file; stop that one first, or give --db another file",
    # resolve --db decides as serve does: beside a serve, its state would go stale (and serve's too)
    "resolve": "`fate-bridge resolve --db` decides on the file as serve does, so it needs the file to "
               "itself; stop that bridge first, or give --db another file",
    "restore": "a restore would swap the file under it; stop that bridge (Ctrl+C), then run restore again",
    # a key change and a repair write every chain they touch: a serve beside them would sign with the
    # old key, or decide from state and chain heads the command rewrote under it
    "new-key": "a running bridge would go on signing with the old key; stop it first (Ctrl+C; on a "
               "cluster, every process), run `audit new-key` again, then start serve with the new key",
    "repair": "a running bridge would go on deciding from the state being rebuilt; stop it first "
              "(Ctrl+C; on a cluster, every process), run `audit repair` again, then start serve",
}


def hold_database(path: str | Path, command: str = "serve") -> int | None:
    """Take the serve lock of the SQLite database ``path`` for ``command``.

    ``command`` is a key of :data:`_WHEN_HELD`: ``serve``, ``resolve``, ``restore``, ``new-key`` or
    ``repair``. These write the file as its only user. The lock is an exclusive ``flock`` on the
    database file itself. So a second process is refused whatever path reaches the file: its name, a
    hard link, a symlink, a bind mount. A missing file is made, owner-only, with its folder. A
    ``restore`` onto no file has nothing to hold and gets None.

    Returns the file's descriptor. The lock lasts while it is open: until this process ends, however
    it ends. The OS releases a killed holder's lock. Close it only after the process's SQLite
    connections to the file are closed. Closing any descriptor of the file drops the process's POSIX
    locks on it, SQLite's included. Other commands (``audit list``, ``backup``, ``world add``) share
    the file with a running bridge, as SQLite's WAL allows.

    Raises ``ConfigError`` when another process holds it. Its one line names the file, the holder
    (:func:`lock_holder`) and what ``command`` should do. Raises it with :func:`database_problem`'s
    sentence when the file cannot be opened."""
    file = Path(path).expanduser()
    try:
        if command == "restore" and not file.exists():
            return None
        file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(file, os.O_RDONLY | os.O_CREAT, 0o600)
    except OSError as exc:
        raise ConfigError(database_problem(str(path), exc)) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = lock_holder(file) or "another process"
        os.close(fd)  # (this process holds no SQLite connection to it yet)
        raise ConfigError(f"the database {path} is already served by {holder}: {_WHEN_HELD[command]}") from None
    return fd


def lan_addresses() -> list[str]:
    """This machine's IPv4 addresses others may reach it at, best guess first; no loopback.

    First the address of the default route (a UDP "connect" sends nothing), then those of its name."""
    import socket

    found: list[str] = []
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: never routed, nothing is sent
            found.append(probe.getsockname()[0])
    except OSError:
        pass  # no route: no network
    try:
        found += [str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)]
    except OSError:
        pass
    unique = []
    for address in found:
        if address not in unique and not ipaddress.ip_address(address).is_loopback:
            unique.append(address)
    return unique


def bridge_address(host: str, port: int, tls: bool) -> str:
    """The bridge URL for the module's setting when listening on ``host:port``.

    For every network: this machine's first address others can reach, else loopback."""
    return f"{'wss' if tls else 'ws'}://{_url_host(host)}:{port}"


def _url_host(host: str) -> str:
    """``host`` as a URL writes it.

    A wildcard becomes this machine's first address others can reach, else loopback. An IPv6 address
    goes in brackets."""
    if host in WILDCARDS:
        return next(iter(lan_addresses()), "127.0.0.1")
    return f"[{host}]" if ":" in host else host


def listen_base(host: str, port: int, tls: bool) -> str:
    """The http(s) address of a bridge listening on ``host:port``, ending in ``/``.

    A wildcard becomes this machine's first address others can reach. Without ``--public-url`` the
    manifest points here. The banner and the served ``module.json`` use it alike."""
    return f"{'https' if tls else 'http'}://{_url_host(host)}:{port}/"


def reach_lines(host: str, port: int, tls: bool, public_url: str | None) -> list[str]:
    """What ``serve`` prints once listening.

    It gives the bridge URL(s) for the module's setting, and manifest URLs to paste into Foundry's
    *Install Module*. The bridge's own manifest URL works only for a Foundry that reaches this
    machine. Without ``public_url``, the GitHub release's is printed too, for a Foundry hosted
    elsewhere (:mod:`bridge.release`)."""
    scheme = "wss" if tls else "ws"
    install = "Install the module in Foundry: Add-on Modules -> Install Module -> Manifest URL:"
    if public_url is not None:
        return [f"Others reach it at {public_url}", f"{install}\n  {release.manifest_url(public_url)}"]
    lines = []
    if host in WILDCARDS:
        addresses = lan_addresses()
        if not addresses:
            return [f"Listening on every network, but this machine has no address others can "
                    f"reach yet; on this machine use {scheme}://127.0.0.1:{port}"]
        lines.append("Others on your network reach it at: "
                     + ", ".join(f"{scheme}://{address}:{port}" for address in addresses))
        reached_by = "a Foundry on this machine or your network"
    elif _is_ip(host) and ipaddress.ip_address(host).is_loopback:
        lines.append("Only this machine can connect (--host 0.0.0.0 accepts other machines)")
        reached_by = "a Foundry on this machine"
    else:
        reached_by = f"a Foundry that reaches {host}"
    lines.append(f"{install}\n"
                 f"  {release.manifest_url(listen_base(host, port, tls))}\n"
                 f"  (for {reached_by}; behind a proxy or another name, start serve with --public-url https://NAME/PATH)\n"
                 "A hosted Foundry (The Forge, Molten, a rented server) cannot reach that address; its Manifest URL is the release's:\n"
                 f"  {release.release_manifest_url()}")
    return lines


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
