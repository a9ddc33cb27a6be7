"""A real nginx in front of the bridge, configured with exactly the block docs/deploy.md shows
("The proxy: TLS, WebSocket upgrade, health checks (nginx)"): through it over ``wss://``, the
module's ``hello``, a decision (SoHL ``test_rolled`` -> ``test_graded``, ``fate_spend`` ->
``fate_resolved``) and the overlay (``GET /overlay``, and its viewer receives the card).

The test reads the ``nginx`` block from the doc and replaces only the doc's text named in the
marked constants below (each must be in the block once): the four upstream addresses, the listen
port (on 127.0.0.1) and the certificate files (a certificate made by ``trustme`` at test time),
then wraps it in the ``http`` context of a small nginx.conf. The doc's first upstream is the bridge;
the other three are ports bound here but not listening, as a killed or draining process's are, so
nginx's ``proxy_next_upstream error`` must skip them for the live one. nginx (Debian's package,
``/usr/sbin/nginx``) runs in the foreground as one process, with its prefix, configuration, logs
and temporary files in ``tmp_path``.

Skipped, with one line, where nginx is not installed; with ``FATE_BRIDGE_REQUIRE_SERVICES=1``
(``.ci/run``, which installs it) that fails instead, as the PostgreSQL tests do.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import trustme
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus

from .conftest import REQUIRE_SERVICES
from .helpers import ROOT, eventually
from .served import started, stopped, store, token
from .test_server import REPLY_TIMEOUT, WORLD_ID, archery_test_rolled, fate_spend, hello

__all__ = ["store", "token"]  # fixtures used here

DEPLOY = ROOT / "docs" / "deploy.md"
HEADING = "### The proxy: TLS, WebSocket upgrade, health checks (nginx)"
NGINX = shutil.which("nginx", path=os.pathsep.join((os.environ.get("PATH", ""), "/usr/sbin")))  # Debian: /usr/sbin
FOUNDRY = "https://foundry.example.org"  # the Foundry page's origin, the one --origins lets in
NGINX_START_TRIES = 3  # a free port taken by someone else between our close and nginx's bind
MESSAGE_ID = "msgThroughNginx1"
WORLD = WORLD_ID  # the world served.token registers

# --- placeholders: the doc's text the test replaces (ports and files only) ---
UPSTREAMS = ("127.0.0.1:8801", "127.0.0.1:8802", "127.0.0.1:8803", "127.0.0.1:8804")
LISTEN = "listen 443 ssl;"
CERT = "/etc/letsencrypt/live/bridge.example.org/fullchain.pem"
KEY = "/etc/letsencrypt/live/bridge.example.org/privkey.pem"
# --- end of placeholders ---


def doc_config() -> str:
    """The ``nginx`` block under :data:`HEADING` in docs/deploy.md."""
    text = DEPLOY.read_text()
    assert HEADING in text, f"docs/deploy.md has no heading {HEADING!r}"
    block = re.search(r"```nginx\n(.*?)```", text[text.index(HEADING):], re.S)
    assert block is not None, f"no ```nginx block under {HEADING!r}"
    return block.group(1)


def substituted(config: str, placeholders: dict[str, str]) -> str:
    """``config`` with each placeholder replaced; fails if the doc no longer has one."""
    for doc_text, value in placeholders.items():
        assert config.count(doc_text) == 1, f"docs/deploy.md's nginx block should hold {doc_text!r} once"
        config = config.replace(doc_text, value)
    return config


def full_config(http_block: str, prefix: Path) -> str:
    """A whole nginx.conf around the doc's ``http`` block: one foreground process, its files in
    ``prefix`` (Debian's defaults are under /var, for root)."""
    temp = "\n".join(f"    {kind}_temp_path {prefix / kind};"
                     for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return (f"daemon off;\nmaster_process off;\npid {prefix / 'nginx.pid'};\n"
            f"error_log {prefix / 'error.log'} warn;\nevents {{}}\n"
            f"http {{\n    access_log off;\n{temp}\n{http_block}}}\n")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def refusing_port(stack: contextlib.ExitStack) -> int:
    """A port bound (no one else can take it) but not listening: connecting is refused, as to a
    killed bridge process."""
    held = stack.enter_context(socket.socket())
    held.bind(("127.0.0.1", 0))
    return held.getsockname()[1]


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=REPLY_TIMEOUT).close()
    except OSError:
        return False
    return True


@pytest.fixture
def nginx_binary() -> str:
    if NGINX is None:
        message = "nginx not installed (Debian: apt-get install nginx; .ci/run installs it)"
        if REQUIRE_SERVICES:
            pytest.fail(message + " (required: FATE_BRIDGE_REQUIRE_SERVICES=1)")
        pytest.skip(message)
    return NGINX


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[trustme.CA, Path, Path]:
    """A CA, and the proxy's certificate chain and key files it signed (for 127.0.0.1)."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "bridge.example.org")
    chain, key = tmp_path / "fullchain.pem", tmp_path / "privkey.pem"
    cert.private_key_pem.write_to_path(key)
    chain.write_bytes(b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    return ca, chain, key


@contextlib.asynccontextmanager
async def behind_nginx(binary: str, prefix: Path, store, placeholders: dict[str, str]):
    """The bridge (in-process, on ``store``, its public address nginx's) behind nginx on a free
    port with the doc's block (``placeholders`` + the two ports); yields nginx's port once it
    accepts connections. Both are stopped after."""
    prefix.mkdir()
    for attempt in range(NGINX_START_TRIES):
        port = free_port()
        server, bridge_url = await started(store, origins=[FOUNDRY], public_url=f"https://127.0.0.1:{port}/")
        bridge = bridge_url.removeprefix("ws://")
        config = prefix / "nginx.conf"
        config.write_text(full_config(substituted(doc_config(), {
            **placeholders, UPSTREAMS[0]: bridge, LISTEN: f"listen 127.0.0.1:{port} ssl;"}), prefix))
        proc = subprocess.Popen([binary, "-p", str(prefix), "-c", str(config), "-e", str(prefix / "error.log")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            await eventually(lambda: proc.poll() is not None or listening(port),  # noqa: B023 (awaited here)
                             "nginx listening or exited")
            if proc.poll() is None:
                yield port
                return
        finally:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=REPLY_TIMEOUT)
            await stopped(server)
        log = (prefix / "error.log").read_text()
        if "Address already in use" not in log or attempt == NGINX_START_TRIES - 1:
            pytest.fail(f"nginx exited {proc.returncode}: {log[-2000:]}")


def https_get(port: int, path: str, context: ssl.SSLContext) -> tuple[int, dict[str, str], bytes]:
    """GET https://127.0.0.1:``port````path``: (status, headers, body), an error status too."""
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}{path}", timeout=REPLY_TIMEOUT,
                                    context=context) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


async def ask(ws: ClientConnection, message: dict) -> dict:
    await ws.send(json.dumps(message))
    return await answer(ws)


async def answer(ws: ClientConnection) -> dict:
    async with asyncio.timeout(REPLY_TIMEOUT):
        return json.loads(await ws.recv())


async def test_the_doc_config_carries_hello_a_decision_and_the_overlay(nginx_binary, certificate, store, token,
                                                                      tmp_path):
    ca, chain, key = certificate
    viewer_key = await store.viewer_key(WORLD, "key-" + WORLD)
    with contextlib.ExitStack() as stack:
        placeholders = {CERT: str(chain), KEY: str(key),
                        **{doc: f"127.0.0.1:{refusing_port(stack)}" for doc in UPSTREAMS[1:]}}
        async with behind_nginx(nginx_binary, tmp_path / "nginx", store, placeholders) as port:
            await through_nginx(port, ca, token, viewer_key)


async def through_nginx(port: int, ca: trustme.CA, token: str, viewer_key: str) -> None:
    """What a GM, a stream page and a health check do through the proxy at ``port``."""
    public = f"https://127.0.0.1:{port}/"
    client = ssl.create_default_context()
    ca.configure_trust(client)

    async def get(path: str) -> tuple[int, dict[str, str], bytes]:
        return await asyncio.to_thread(https_get, port, path, client)

    status, _, body = await get("/healthz")
    assert (status, body) == (200, b"ok\n")
    status, _, body = await get("/status")  # X-Forwarded-For: the proxy's client is not this machine
    assert status == 401, body
    status, _, body = await get("/module/module.json")
    assert status == 200 and json.loads(body)["download"] == public + "module/fate-bridge.zip"

    # the stream overlay: the page, then its viewer (the page's own origin, as a browser sends it)
    status, headers, page = await get(f"/overlay?world={WORLD}&key={viewer_key}")
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    assert b'<script type="module" src="overlay/overlay.js">' in page
    url = f"wss://127.0.0.1:{port}/"
    with pytest.raises(InvalidStatus) as refused:  # the Origin reaches the bridge: --origins holds
        await connect(url, ssl=client, origin="https://elsewhere.example", open_timeout=REPLY_TIMEOUT)
    assert refused.value.response.status_code == 403
    async with (connect(url, ssl=client, origin=public.rstrip("/"), open_timeout=REPLY_TIMEOUT) as viewer,
                connect(url, ssl=client, origin=FOUNDRY, open_timeout=REPLY_TIMEOUT) as forwarder):
        welcome = await ask(viewer, {"type": "hello", "v": 1, "world_id": WORLD, "viewer_key": viewer_key})
        assert (welcome["type"], welcome["world_id"]) == ("welcome", WORLD), welcome

        # the module's hello, then a decision: the Archery test graded, Lucky Star spent
        welcome = await ask(forwarder, hello(WORLD, token))
        assert (welcome["type"], welcome["world_id"]) == ("welcome", WORLD), welcome
        graded = await ask(forwarder, archery_test_rolled("rolled-1", MESSAGE_ID))
        assert (graded["type"], graded["label"]) == ("test_graded", "MF"), graded
        resolved = await ask(forwarder, fate_spend("spend-1", MESSAGE_ID))
        assert (resolved["type"], resolved["outcome"]) == ("fate_resolved", "spent"), resolved

        card = await answer(viewer)
        assert (card["type"], card["world_id"], card["key"]) == ("overlay_card", WORLD, MESSAGE_ID), card
        assert "34 vs Fate ML 77" in card["card"]["html"]
