"""The bridge's plain HTTP pages, answered before any WebSocket upgrade.

This is websockets' ``process_request``.

 path | what | who may fetch it |
---|---|---|
 ``/`` | A small landing page: what this server is, with links to the others. | Anyone: no secrets. |
 ``/healthz`` | ``ok``. 503 ``storage unavailable: REASON`` during a storage outage (:mod:`bridge.store.health`). | Anyone. |
 ``/overlay`` (+ ``overlay.js``, ``overlay.css``) | The stream overlay page. The viewer key goes on its URL. | Anyone. |
 ``/verify`` (+ ``verify.js``) | The dice check page: recompute a revealed dice session from an exported trail (:mod:`bridge.fairness`). | Anyone. |
 ``/module/module.json``, ``/module/fate-bridge.zip`` | The Foundry module, to install by manifest URL (:mod:`bridge.release`). | Anyone. |
 ``/status`` | :class:`bridge.status.Status` as JSON. | This machine (loopback, not through a proxy). Or ``Authorization: Bearer WORLD_TOKEN``, for that world only. A wrong token is refused, from anywhere. |
 ``/metrics`` | :mod:`bridge.metrics` in the Prometheus text format. No world is named in it. | As ``/status``: this machine, or any registered world's token. |

Any other request goes on to the WebSocket upgrade. It is refused with 403 when ``origins`` is given
and the browser page's Origin is not among them. Pages the bridge serves itself always pass.
"""

from __future__ import annotations

import html
import ipaddress
from collections.abc import Callable
from http import HTTPStatus
from importlib import resources
from urllib.parse import urlsplit

from websockets.asyncio.server import ServerConnection
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from . import __version__, metrics, overlay_page, release, status
from .errors import ConfigError
from .session import OVERLAY_PATH, token_matches
from .store import Store

HEALTH_PATH = "/healthz"
MANIFEST_PATH = release.MODULE_PATH + release.MANIFEST_NAME
ZIP_PATH = release.MODULE_PATH + release.ZIP_NAME

OVERLAY_FILES = {  # URL path -> (package file in bridge/overlay/, Content-Type)
    f"/{OVERLAY_PATH}": ("index.html", "text/html; charset=utf-8"),
    f"/{OVERLAY_PATH}/overlay.js": ("overlay.js", "text/javascript; charset=utf-8"),
    f"/{OVERLAY_PATH}/overlay.css": ("overlay.css", "text/css; charset=utf-8"),
}
VERIFY_FILES = {  # the dice check page: URL path -> (file in bridge/fairness/page/, type)
    "/verify": ("verify.html", "text/html; charset=utf-8"),
    "/verify/verify.js": ("verify.js", "text/javascript; charset=utf-8"),
    "/verify/verify.css": ("verify.css", "text/css; charset=utf-8"),
}
# The page runs only its own script and style and talks only to this bridge: even a card that
# somehow carried markup could not run code or load anything. No Referer, so the viewer key in
# the page's URL never leaves it.
OVERLAY_HEADERS = (
    ("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; "
     "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Content-Type-Options", "nosniff"),
    ("Cache-Control", "no-cache"),
)
PAGE_HEADERS = (
    ("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'"),
    ("X-Content-Type-Options", "nosniff"),
    ("Cache-Control", "no-cache"),
)
# Foundry's server fetches the manifest and the zip, not a browser page: no CORS header needed.


def _load_overlay() -> dict[str, tuple[bytes, str]]:
    """The overlay's script and style, and the ``/verify`` dice check page, by URL path.

    Each is (body, Content-Type), read once from the package. The overlay page itself is rendered
    per language (:mod:`bridge.overlay_page`)."""
    folder, page = resources.files("bridge").joinpath("overlay"), resources.files("bridge").joinpath("fairness", "page")
    return {**{path: (folder.joinpath(name).read_bytes(), kind)
               for path, (name, kind) in OVERLAY_FILES.items() if name != overlay_page.PAGE},
            **{path: (page.joinpath(name).read_bytes(), kind) for path, (name, kind) in VERIFY_FILES.items()}}


def _own_origin(request: Request) -> bool:
    """True when the request's Origin is this bridge's own address: the overlay page it serves.

    Its host and port equal the Host the browser connected to."""
    origin, host = request.headers.get("Origin"), request.headers.get("Host")
    return origin is not None and host is not None and urlsplit(origin).netloc == host


def _body(code: HTTPStatus, body: bytes, kind: str, extra: tuple[tuple[str, str], ...] = ()) -> Response:
    headers = Headers([("Content-Type", kind), ("Content-Length", str(len(body))), *extra])
    return Response(code, code.phrase, headers, body)


def _loopback(connection: ServerConnection) -> bool:
    """True when the peer is this machine (127.0.0.0/8 or ::1, IPv4-mapped included)."""
    try:
        address = ipaddress.ip_address(connection.remote_address[0])
    except (TypeError, ValueError, IndexError):
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


PROXY_HEADERS = ("Forwarded", "X-Forwarded-For", "X-Real-IP")  # set by a proxy for its client


def _local(connection: ServerConnection, request: Request) -> bool:
    """True when the request comes from this machine itself.

    The peer is loopback. And it is not a reverse proxy on this machine passing on someone else's
    request; such a proxy says so in one of ``PROXY_HEADERS``. docs/security.md has the nginx line."""
    return _loopback(connection) and not any(name in request.headers for name in PROXY_HEADERS)


def _bearer(request: Request) -> str | None:
    value = request.headers.get("Authorization", "")
    scheme, _, token = value.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


class Pages:
    """Answers the plain HTTP paths of one server.

    ``public_url`` is the bridge's address as others reach it. The manifest and the landing page
    name it. It is ``--public-url``, else the address the server listens on. It is None until
    :func:`bridge.server.start` has bound its port and set it. It is never a request's Host header.
    Anyone may send any Host. A manifest pointing where a client chose would send Foundry's download
    elsewhere. The module's zip is built once, on the first request for it."""

    def __init__(self, store: Store, presence: status.Presence, viewer_count: Callable[[str], int],
                 *, origins: list[str] | None, public_url: str | None,
                 metrics: metrics.Metrics | None = None) -> None:
        self.store, self.presence, self.viewer_count = store, presence, viewer_count
        self.metrics = metrics  # what ``/metrics`` answers (404 without)
        self.origins, self.public_url = origins, public_url
        self.overlay = _load_overlay()
        self.overlay_pages = overlay_page.render_pages()  # the page by language (``&lang=``)
        self._package: release.Package | None = None

    def package(self) -> release.Package:
        """The module's manifest and zip for :attr:`public_url` (built on the first call).
        Raises ``ConfigError`` when the module's folder is missing."""
        if self._package is None:
            assert self.public_url is not None, "serve sets public_url once listening"
            self._package = release.package(self.public_url)
        return self._package

    async def __call__(self, connection: ServerConnection, request: Request) -> Response | None:
        """websockets' ``process_request``: a Response for the plain HTTP paths.

        None goes on with the WebSocket upgrade."""
        url = urlsplit(request.path)
        path = url.path
        if path == HEALTH_PATH:
            health = getattr(self.store, "health", None)
            if health is not None and not health.available:
                return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE, f"storage unavailable: {health.reason}\n")
            return connection.respond(HTTPStatus.OK, "ok\n")
        if path == f"/{OVERLAY_PATH}":
            body = self.overlay_pages[overlay_page.language_of(url.query)]
            return _body(HTTPStatus.OK, body, OVERLAY_FILES[path][1], OVERLAY_HEADERS)
        if path in self.overlay:
            body, kind = self.overlay[path]
            return _body(HTTPStatus.OK, body, kind, OVERLAY_HEADERS)
        if path in (MANIFEST_PATH, ZIP_PATH):
            try:
                built = self.package()
            except ConfigError as exc:
                return connection.respond(HTTPStatus.NOT_FOUND, f"{exc}\n")
            if path == MANIFEST_PATH:
                return _body(HTTPStatus.OK, built.manifest, "application/json", (("Cache-Control", "no-cache"),))
            return _body(HTTPStatus.OK, built.zip, "application/zip",
                         (("Content-Disposition", f'attachment; filename="{release.ZIP_NAME}"'),))
        if path == status.STATUS_PATH:
            return await self._status(connection, request)
        if path == metrics.METRICS_PATH and self.metrics is not None:
            return await self._metrics(connection, request)
        if path == "/" and request.headers.get("Upgrade", "").lower() != "websocket":
            registered = bool(await self.store.worlds())
            return _body(HTTPStatus.OK, self.landing(registered), "text/html; charset=utf-8", PAGE_HEADERS)
        origin = request.headers.get("Origin")
        if self.origins is None or origin is None or origin in self.origins or _own_origin(request):
            return None
        return connection.respond(HTTPStatus.FORBIDDEN,
                                  f"Failed to open a WebSocket connection: invalid Origin header: {origin}.\n")

    async def _status(self, connection: ServerConnection, request: Request) -> Response:
        allowed = await self._allowed(connection, request, status.STATUS_PATH)
        if isinstance(allowed, Response):
            return allowed
        report = await status.report(self.store, self.presence, self.viewer_count, allowed)
        return _body(HTTPStatus.OK, status.encode(report), "application/json", (("Cache-Control", "no-store"),))

    async def _metrics(self, connection: ServerConnection, request: Request) -> Response:
        allowed = await self._allowed(connection, request, metrics.METRICS_PATH)
        if isinstance(allowed, Response):
            return allowed
        assert self.metrics is not None
        return _body(HTTPStatus.OK, self.metrics.exposition(), metrics.CONTENT_TYPE, (("Cache-Control", "no-store"),))

    async def _allowed(self, connection: ServerConnection, request: Request, path: str) -> Response | str | None:
        """Who may read ``path`` (``/status``, ``/metrics``).

        None for this machine, which may read everything. Else the world id whose token the request
        carries (``Authorization: Bearer``). Else the 401 response: for anyone else, and for a token
        no world has."""
        only: str | None = None
        token = _bearer(request)
        if token is not None or not _local(connection, request):  # a token is judged by itself
            worlds = await self.store.worlds() if token else []
            only = next((w.world_id for w in worlds if token is not None and token_matches(token, w.token_hash)), None)
            if only is None and token:  # the token is what is wrong, wherever it came from
                return connection.respond(
                    HTTPStatus.UNAUTHORIZED,
                    "this token is no registered world's token: give the token the module's settings "
                    "hold (`fate-bridge world rotate-token WORLD_ID` issues a new one), or ask from the "
                    "bridge's machine without a token.\n")
            if only is None:
                return connection.respond(
                    HTTPStatus.UNAUTHORIZED,
                    f"{path} answers this machine, or a request with `Authorization: Bearer "
                    "WORLD_TOKEN` (a registered world's token; /status then shows that world only). "
                    "On the bridge's machine run `fate-bridge status`.\n")
        return only

    def landing(self, registered: bool) -> bytes:
        """The page at ``/``: what this server is, with links.

        It links to health, overlay, the dice check page and the manifest. While no world is
        ``registered``, the next step (``world add``) comes first. It names no world, path or
        secret: anyone may fetch it."""
        assert self.public_url is not None, "serve sets public_url once listening"
        link = html.escape(release.manifest_url(self.public_url))
        next_step = "" if registered else """<p class="next"><b>Next step: register a world.</b> No world is
registered yet. In a terminal on the bridge's machine run <code>fate-bridge world add YOUR_WORLD_ID</code>
(with the same <code>--db</code> as <code>serve</code>, if you gave one): it prints the world's token, to
paste into the module's settings in Foundry.</p>
"""
        return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>fate-bridge {__version__}</title>
<style>body{{font:16px/1.5 system-ui,sans-serif;max-width:44em;margin:2em auto;padding:0 1em;color:#222;background:#faf8f4}}
h1{{border-bottom:3px solid #2b4c7e;padding-bottom:4px}}
code{{background:#eef1f6;padding:0 .2em}}
.next{{background:#fff;border-left:4px solid #e0a030;padding:8px 12px}}</style></head>
<body><h1>fate-bridge {__version__}</h1>
{next_step}
<p>This is a fate-bridge server: it resolves the Fate rules of tabletop role-playing games for
Foundry VTT. The Foundry module <b>fate-bridge</b> connects to it over a WebSocket at this address.</p>
<ul>
<li>Install the module: in Foundry's <i>Add-on Modules &rarr; Install Module</i>, paste
<code>{link}</code> as the Manifest URL (<a href="{link}">the manifest</a>).</li>
<li><a href="{HEALTH_PATH}">{HEALTH_PATH}</a>: answers <code>ok</code> while the bridge runs.</li>
<li><a href="/{OVERLAY_PATH}">/{OVERLAY_PATH}</a>: the stream overlay for OBS; it needs the world's
viewer key on its URL (type <code>/fateoverlay</code> in Foundry's chat as GM to copy it).</li>
<li><a href="/verify">/verify</a>: check the dice and the hash chain of an exported trail
(<code>fate-bridge audit export</code>) in your browser.</li>
<li><a href="{status.STATUS_PATH}">{status.STATUS_PATH}</a>: connected worlds and recent decisions,
for this machine or with a world's token (<code>fate-bridge status</code> prints it).</li>
</ul></body></html>
""".encode()
