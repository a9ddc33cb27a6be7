"""``fate-bridge doctor``: finds why a table does not connect, and says how to fix it.

Each check returns :class:`Finding` s: ``ok``, ``warn`` (works, but worth knowing) or ``fail`` (this
breaks the table). Each failure comes with the fix.

Local checks read files only and never change them:

- the database: folder writable, schema version, ``PRAGMA quick_check``.
- the audit key: present, owner-only, the key that signed the stored checkpoints.
- the receipt signing key: present, owner-only, the key that signed the heads.
- the registered worlds, the port, ``--origins`` and the TLS files.

:func:`check_link` then connects to a bridge the way the Foundry module does. It sends an Origin
header from the Foundry page, then ``hello`` with the world's token. It explains what went wrong:
nothing listening, a TLS certificate for another name, ``ws://`` to another computer from an
``https://`` page, an Origin not allowed, an unknown world or a wrong token. A bridge on the GM's
own computer behind an ``https://`` Foundry passes, with a note on the browser's one-time question.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import json
import socket
import ssl
import stat
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.typing import Origin

from . import __version__, audit, status, wire
from .config import load_signing_key
from .errors import ConfigError
from .findings import Finding, fail, ok, render, warn  # noqa: F401 (render: how the doctor prints them)
from .heads import public_key_text
from .server import tls_context
from .store import backend_of
from .store.readonly import ReadOnlyDatabase

CONNECT_TIMEOUT_SECONDS = 5.0  # a bridge on the LAN or behind a proxy answers well within this


# --- files ---------------------------------------------------------------------------------------


def check_database(db: Path | str) -> tuple[list[Finding], ReadOnlyDatabase | None]:
    """The database, as its backend checks it (bridge/store/backends.py, ``inspect``).

    For a SQLite file: its folder and file writable, its integrity and schema version, the serve
    holding it. For PostgreSQL: the database reached, and its schema version. Also returns it opened
    read-only for the checks that follow; None when it cannot be read. The caller closes it."""
    try:
        return backend_of(db).inspect(db)
    except ConfigError as exc:  # no backend serves the URL
        return [fail(str(exc), "give --db the database serve uses")], None


def check_key(key_path: Path, database: ReadOnlyDatabase | None) -> list[Finding]:
    """The audit key: present, owner-only, and the key that signed every checkpoint in the database.

    A missing key is fine only before the first signed checkpoint."""
    signed = [] if database is None else database.checkpoints()
    if not key_path.exists():
        if signed:
            return [fail(f"audit key {key_path} is missing, but {len(signed)} checkpoints were "
                         "signed with one", "restore the key file from your backup (a new key "
                         "cannot vouch for the old records), or give --audit-key its path")]
        return [warn(f"no audit key at {key_path} yet", "`fate-bridge serve` creates it; back it up once")]
    findings = _owner_only(key_path, "audit key")
    try:
        key = bytes.fromhex(key_path.read_text().strip())
    except (OSError, ValueError) as exc:
        return [*findings, fail(f"audit key {key_path} is unreadable ({exc})", "restore it from your backup")]
    bad = [(world, seq) for world, seq, record_hash, mac in signed
           if audit.checkpoint_mac(key, world, seq, record_hash) != mac]
    if bad:
        findings.append(fail(f"audit key {key_path} did not sign {len(bad)} of {len(signed)} stored "
                             f"checkpoints (first: world {bad[0][0]}, seq {bad[0][1]})",
                             "give --audit-key the key serve used with this database (restore it "
                             "from backup); if it is lost, `audit verify` cannot vouch for these records"))
    elif not findings:
        signed_text = f"signed all {len(signed)} stored checkpoints" if signed else "no checkpoint signed yet"
        findings.append(ok(f"audit key {key_path}: owner-only, {signed_text}"))
    return findings


def _owner_only(path: Path, what: str) -> list[Finding]:
    """A failure when the key file ``path`` can be read by others, else none."""
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        return [fail(f"{what} {path} can be read by others (mode {mode:o})", f"`chmod 600 {path}`")]
    return []


def check_signing_key(key_path: Path, database: ReadOnlyDatabase | None) -> list[Finding]:
    """The receipt signing key (``receipt.key``, Ed25519).

    It must be present, owner-only, and the key the worlds' latest heads were signed with. A missing
    key is fine only before the first signed head. Serve refuses a trail signed by another
    (bridge/audit_cli.py, ``check_keys``)."""
    signed_by = set() if database is None else database.signers()
    if not key_path.exists():
        if signed_by:
            return [fail(f"signing key {key_path} is missing, but the audit trail is signed with one",
                         "restore receipt.key from your backup, or give --signing-key its path (`fate-bridge "
                         "audit new-key` starts a new one, recorded in every chain)")]
        return [warn(f"no signing key at {key_path} yet", "`fate-bridge serve` creates it; back it up once, "
                     "with the audit key")]
    findings = _owner_only(key_path, "signing key")
    try:
        key = load_signing_key(key_path, create=False)
    except ConfigError as exc:
        return [*findings, fail(str(exc), "restore it from your backup")]
    assert key is not None  # the file exists: checked above
    if signed_by and public_key_text(key.public_key()) not in signed_by:
        findings.append(fail(f"signing key {key_path} did not sign the audit trail's heads",
                             "give --signing-key the key serve used with this database (restore it from backup)"))
    elif not findings:
        findings.append(ok(f"signing key {key_path}: owner-only, "
                           + ("signed the audit trail's heads" if signed_by else "no head signed yet")))
    return findings


def registered_worlds(database: ReadOnlyDatabase | None) -> list[tuple[str, bool]] | None:
    """(world id, has a token) of each registered world; None when unknown (no database)."""
    return None if database is None else database.registered_worlds()


def check_worlds(worlds: list[tuple[str, bool]] | None) -> list[Finding]:
    """At least one registered world; each with a token (``resolve`` registers worlds without)."""
    if worlds is None:
        return []
    if not worlds:
        return [fail("no world is registered", "`fate-bridge world add WORLD_ID` (the id is "
                     "game.world.id, the folder name under Data/worlds) and paste its token into the module")]
    findings = [ok("registered worlds: " + ", ".join(world for world, _ in worlds))]
    findings += [warn(f"world {world} has no token (made by `resolve --db`): no module can connect to it",
                      f"`fate-bridge world rotate-token {world}` and paste the token into the module")
                 for world, has_token in worlds if not has_token]
    return findings


def check_memory_budget(max_worlds: int, worlds: list[tuple[str, bool]] | None) -> list[Finding]:
    """What ``serve --max-worlds-in-memory`` holds: at most ``max_worlds`` worlds in memory.

    Beyond it, the least recently used idle worlds leave. With more registered worlds than that,
    some are loaded again from the database on their next decision. A load reads the world's event
    ids and checks its chain (docs/performance.md)."""
    registered = "" if worlds is None else f" ({len(worlds)} registered)"
    return [ok(f"serve holds at most {max_worlds} worlds in memory{registered} (--max-worlds-in-memory); "
               "an idle world beyond it leaves memory and is loaded again on its next decision")]


def check_port(host: str, port: int) -> list[Finding]:
    """Whether ``serve`` can listen on host:port, or a fate-bridge already answers there."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return [fail(f"--host {host} is not an address of this machine or a name that resolves",
                     "use 127.0.0.1 (this machine only), 0.0.0.0 (every network) or one of this machine's addresses")]
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        try:
            sock.bind(address)
            if port == 0:  # serve --port 0 takes any free port
                return [ok(f"serve can listen on {host} (--port 0: any free port)")]
            return [warn(f"nothing listens on {host}:{port}: no module can connect until serve runs",
                         "start it: `fate-bridge serve` (the port is free, so it can listen there)")]
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                return [fail(f"cannot listen on {host}:{port}: {exc.strerror}",
                             "use an address of this machine (`ip addr` lists them) and a port "
                             "above 1023")]
    if _answers_healthz(host, port):
        return [ok(f"a fate-bridge answers on {host}:{port}")]
    return [fail(f"another program listens on {host}:{port}",
                 f"stop it (`ss -ltnp 'sport = :{port}'` names it) or give serve another --port")]


def _answers_healthz(host: str, port: int) -> bool:
    target = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    try:
        with urllib.request.urlopen(f"http://{target}:{port}/healthz", timeout=2) as resp:
            return resp.status == 200 and resp.read().strip() == b"ok"
    except (OSError, ValueError):
        return False


def check_origins(origins: list[str] | None) -> list[Finding]:
    """Each ``--origins`` value as a browser sends it: ``scheme://host[:port]``, no path."""
    if origins is None:
        return []
    findings = []
    for origin in origins:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path or parts.query:
            findings.append(fail(f"--origins {origin!r} never matches: a browser sends scheme://host[:port] "
                                 "with no path and no trailing slash",
                                 "write it like https://foundry.example.org (the address bar of your "
                                 "Foundry page, up to the first single /)"))
    return findings or [ok("origins: " + ", ".join(origins))]


def check_tls(cert: Path | None, key: Path | None) -> list[Finding]:
    """The TLS certificate and key load together (``serve`` would refuse them otherwise)."""
    if cert is None and key is None:
        return []
    if cert is None or key is None:
        return [fail("--tls-cert and --tls-key go together", "give both, or neither for ws://")]
    try:
        tls_context(cert, key)
    except ConfigError as exc:
        return [fail(str(exc), "give the PEM certificate chain (fullchain.pem) and its private key")]
    return [ok(f"TLS certificate {cert} and key {key} load")]


# --- the module's connection --------------------------------------------------------------------


def _origin(foundry_url: str) -> Origin:
    parts = urlsplit(foundry_url)
    return Origin(f"{parts.scheme}://{parts.netloc}")


def is_loopback_host(host: str) -> bool:
    """True for a host browsers take as this computer.

    That is ``localhost`` and ``*.localhost``, 127.0.0.0/8 and ``::1``. The source is W3C Secure
    Contexts, "potentially trustworthy"; see the module's ``connection.js`` LOOPBACK_HOST. ``host``
    is as :func:`urllib.parse.urlsplit` gives it."""
    name = host.rstrip(".").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_page_to_bridge(url: str, foundry_url: str) -> list[Finding]:
    """What the GM's browser does with a link to the bridge, before any byte is sent.

    ``url`` is the bridge; ``foundry_url`` is the Foundry page. Both are absolute URLs.

    From an ``https://`` page, plain ``ws://`` to another computer is mixed content. Every browser
    blocks it. ``ws://`` to this computer is not blocked: loopback is potentially trustworthy. So
    say Chrome, Firefox 84+ and MDN browser-compat-data (http.mixed-content.allow_loopback_url).
    Safari has no such exemption.

    But a page from elsewhere reaches this computer only once the GM allows it, over ws:// or
    wss://. Chromium asks (Local Network Access, for WebSockets since Chrome 147:
    developer.chrome.com/blog/local-network-access). The prompt and setting names are Chromium 156's
    own strings. Firefox asks as its rollout reaches the GM (support.mozilla.org, "Control personal
    device and local network permissions in Firefox")."""
    page, bridge = urlsplit(foundry_url), urlsplit(url)
    if page.scheme != "https" or bridge.scheme not in ("ws", "wss"):
        return []
    on_this_computer = is_loopback_host(bridge.hostname or "")
    if bridge.scheme == "ws" and not on_this_computer:
        return [fail(f"Foundry is served over https://, and browsers block ws:// to another computer from an "
                     f"https:// page (mixed content): {url} can never connect",
                     "serve with --tls-cert/--tls-key, or behind Foundry's https proxy, "
                     "and set the module's bridge URL to wss://...")]
    if not on_this_computer or is_loopback_host(page.hostname or ""):
        return []  # another computer over wss://, or the page itself on this computer: nothing asks
    safari = ("Safari blocks ws:// to this computer from an https:// page: use another browser there, "
              "or serve with --tls-cert/--tls-key (a certificate Safari trusts) and a wss:// bridge URL"
              if bridge.scheme == "ws" else "Safari connects once it trusts the bridge's certificate")
    return [warn(f"{url} is on the GM's computer and Foundry is served over https:// from {page.hostname}"
                 f"{': not mixed content, but' if bridge.scheme == 'ws' else ':'} the GM's browser asks once "
                 f"(Chrome, Edge, Brave: \"{page.hostname} wants to: Access other apps and services on this "
                 "device\"; Firefox too, as it rolls the same check out)",
                 "allow it in the GM's browser. After a Block: in Chrome, Edge or Brave click the icon left of the "
                 "address bar, open Site settings, set \"Apps on device\" to Allow and reload; in Firefox change it "
                 f"in the site's permissions or Settings. {safari}")]


async def check_link(url: str, world_id: str | None, token: str | None, *, foundry_url: str | None,
                     ca_file: Path | None, worlds: list[tuple[str, bool]] | None) -> list[Finding]:
    """Connect to the bridge at ``url`` as the module would.

    It sends the Foundry page's Origin (``foundry_url``), then ``hello`` for ``world_id`` with
    ``token``. There is no hello without a world. ``worlds`` are the local database's worlds. They
    tell an unknown world from a wrong token. The bridge refuses both alike, so as not to tell a
    stranger which worlds exist."""
    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss") or not parts.hostname:
        return [fail(f"{url!r} is not a bridge URL", "write it as the module's setting: "
                     "ws://HOST:PORT, or wss://HOST[/PATH] behind TLS")]
    findings = check_page_to_bridge(url, foundry_url) if foundry_url else []
    tls = None
    if parts.scheme == "wss":
        tls = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
    origin = _origin(foundry_url) if foundry_url else None
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
            ws = await connect(url, origin=origin, ssl=tls, open_timeout=None, compression=None)
    except ConnectionRefusedError:
        return [*findings, fail(f"nothing is listening at {parts.hostname}:{parts.port or 'default port'}",
                                "start `fate-bridge serve` (with --host/--port matching this URL); "
                                "from another machine, serve needs --host 0.0.0.0 and an open firewall port")]
    except socket.gaierror:
        return [*findings, fail(f"the host name {parts.hostname} does not resolve",
                                "check the spelling, or use the bridge machine's IP address")]
    except ssl.SSLCertVerificationError as exc:
        if exc.verify_code == 62 or "match" in str(exc.verify_message):  # X509_V_ERR_HOSTNAME_MISMATCH
            return [*findings, fail(f"the bridge's TLS certificate is not for {parts.hostname} "
                                    f"({exc.verify_message})",
                                    "connect by a name the certificate lists, or get a certificate "
                                    f"for {parts.hostname} (e.g. from Let's Encrypt)")]
        return [*findings, fail(f"the bridge's TLS certificate is not trusted ({exc.verify_message})",
                                "use a certificate from a CA browsers trust (e.g. Let's Encrypt); "
                                "a private CA must be installed in every player's browser (--tls-ca here)")]
    except ssl.SSLError as exc:
        return [*findings, _no_tls(url, exc.reason)]
    except InvalidStatus as exc:
        code = exc.response.status_code
        if code == 403 and origin:
            return [*findings, fail(f"the bridge refuses pages from {origin} (Origin not allowed)",
                                    f"add {origin} to serve's --origins")]
        return [*findings, fail(f"{url} answered HTTP {code}, not a WebSocket: something other than "
                                "fate-bridge answers there", "check the port, or the proxy's path "
                                "and its WebSocket (Upgrade) forwarding")]
    except (InvalidHandshake, OSError, EOFError) as exc:
        if parts.scheme == "wss" and await asyncio.to_thread(_answers_healthz, parts.hostname, parts.port or 443):
            return [*findings, _no_tls(url, "it answers plain HTTP")]
        return [*findings, fail(f"{url} did not complete a WebSocket handshake ({exc})",
                                "check that the URL points at fate-bridge serve (and a proxy forwards Upgrade)")]
    except TimeoutError:
        return [*findings, fail(f"no answer from {url} within {CONNECT_TIMEOUT_SECONDS:g} s",
                                "a firewall drops the packets: open the port on the bridge machine")]
    async with ws:
        findings.append(ok(f"WebSocket to {url} opens" + (f" from {origin}" if origin else "")))
        if world_id is None:
            return findings
        held = await asyncio.to_thread(_link_holder, url, world_id, token, ca_file)
        if held is not None:
            findings.append(ok(f"world {world_id}: the token is accepted (by /status); {held} holds "
                               "the link now, so no hello was sent (it would take the link away)"))
        else:
            findings.append(await _hello(ws, world_id, token, worlds))
    return findings


def _link_holder(url: str, world_id: str, token: str | None, ca_file: Path | None) -> str | None:
    """Who holds ``world_id``'s link, as the bridge's ``/status`` tells (with ``token``).

    None when nobody does, or the bridge would not say. Then hello checks the token."""
    try:
        found = status.fetch(url, token, str(ca_file) if ca_file else None)
    except ConfigError:
        return None
    for world in found.worlds:
        if world.world_id == world_id and world.link is not None:
            return world.link.user_name or "a GM"
    return None


def _no_tls(url: str, why: object) -> Finding:
    return fail(f"no TLS at {url} ({why}): the bridge speaks plain ws://",
                "use ws:// in the URL, or serve with --tls-cert/--tls-key")


async def _hello(ws, world_id: str, token: str | None, worlds: list[tuple[str, bool]] | None) -> Finding:
    client = wire.ClientInfo(module_version=__version__, foundry_version="doctor", system_id="doctor",
                             system_version="doctor", user_name="fate-bridge doctor")
    hello = wire.Hello(world_id=world_id, token=token, client=client)
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
            await ws.send(wire.encode(hello).decode())
            reply = json.loads(await ws.recv())
    except (TimeoutError, ConnectionClosed, ValueError) as exc:
        return fail(f"the bridge did not answer hello ({exc})", "look at serve's log for the reason")
    if reply.get("type") == "welcome":
        return ok(f"world {world_id}: the token is accepted (bridge {reply.get('bridge_version')})")
    if reply.get("code") != "unauthorized":
        return fail(f"hello refused: {reply.get('message')}", "look at serve's log for the reason")
    known = None if worlds is None else any(world == world_id for world, _ in worlds)
    if known is False:
        return fail(f"world {world_id} is not registered on this bridge",
                    f"`fate-bridge world add {world_id}` and paste its token into the module; the "
                    "id must be game.world.id exactly (the folder name under Data/worlds)")
    if known:
        return fail(f"world {world_id} is registered, but the bridge refused this token",
                    f"`fate-bridge world rotate-token {world_id}` and paste the new token into the "
                    "module's settings (as GM)")
    return fail(f"the bridge refused world {world_id} with this token (unknown world or wrong token; "
                "give --db to tell which)",
                f"check the world id is game.world.id; else `fate-bridge world rotate-token {world_id}`")

