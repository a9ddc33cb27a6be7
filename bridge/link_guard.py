"""Links already open follow the world's credentials.

These close the links the old credential opened: a token changed (``world rotate-token``), a
world removed (``world remove``), or an overlay viewer key changed (``world viewer-key
--rotate``). The close is 4001, with a reason the module shows.

The commands write the database in their own process, often while ``serve`` runs. On a cluster
several may run. So the server polls rather than being told. While any link is open,
:class:`LinkGuard` reads the credentials of the worlds it has links of, every :data:`CHECK_SECONDS`,
in one query for them all. It closes each link whose credential no longer opens its world.

A poll needs nothing from the command. Any writer of the row is seen, on either backend, on every
process of a cluster. Nothing is lost while the server is down: a link opened later is checked at
its hello. A world without open links costs nothing. The poll stops with the last link.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass

import structlog
from websockets.asyncio.server import ServerConnection

from . import i18n
from .errors import StorageUnavailable
from .session import CLOSE_UNAUTHORIZED
from .store.base import World

log = structlog.get_logger("fate_bridge")

CHECK_SECONDS = 1.0  # how soon an open link follows a changed credential: the CLI tells the GM
# "the old token no longer works", and a table makes a decision every few seconds at most; a
# query of a few rows a second per process costs nothing beside them
MAX_CLOSE_REASON = 123  # bytes: RFC 6455 close frames carry at most 125, 2 of them the code

# Why a link was closed: the log's reason -> the close reason, shown by the module
# (foundry-module/scripts/logic/link-status.js) and the overlay page; English here, sent in the
# link's language (bridge/locale).
REASONS = {
    "token_changed": i18n.N_("the world's token was changed (world rotate-token): paste the new token "
                             "into the module settings"),
    "world_removed": i18n.N_("the world was removed from the bridge (world remove): register it again "
                             "with world add"),
    "viewer_key_changed": i18n.N_("the overlay viewer key was changed: copy the new overlay URL from the module"),
}


def close_reason(text: str) -> str:
    """``text`` cut to :data:`MAX_CLOSE_REASON` bytes of UTF-8 on a character boundary."""
    return text.encode()[:MAX_CLOSE_REASON].decode(errors="ignore")


def revoked(world: World | None, viewer: bool, credential: str | None) -> str | None:
    """Why a link that opened with ``credential`` may not stay open on ``world``.

    ``credential`` is a forwarder's token hash, or with ``viewer`` an overlay viewer key. ``world``
    is its registry row now; None means removed. Returns a key of :data:`REASONS`, or None while the
    credential still opens it."""
    if world is None:
        return "world_removed"
    if viewer:
        return None if world.viewer_key == credential else "viewer_key_changed"
    return None if world.token_hash == credential else "token_changed"


@dataclass(eq=False)
class _Guarded:
    """One open link: its world, whether it is an overlay viewer, and the credential its hello matched.

    Also the language its reason is sent in."""

    world_id: str
    viewer: bool
    credential: str | None
    language: str


class LinkGuard:
    """The open links of this process and the credentials that opened them; see the module docstring.

    ``read(world_ids)``: the registered worlds among them (the store's ``worlds_of``). ``close(ws,
    reason)``: closes a link with 4001 and ``reason``, never waiting. It is the server's, in the
    background."""

    def __init__(self, read: Callable[[Collection[str]], Awaitable[dict[str, World]]],
                 close: Callable[[ServerConnection, int, str], None]) -> None:
        self._read, self._close = read, close
        self._links: dict[ServerConnection, _Guarded] = {}
        self._task: asyncio.Task[None] | None = None

    def opened(self, ws: ServerConnection, world_id: str, *, viewer: bool, credential: str | None,
               language: str) -> None:
        """Watch ``ws``, whose hello for ``world_id`` matched ``credential``.

        ``credential`` is a token's hash, or with ``viewer`` the viewer key. Starts the poll if it
        was idle."""
        self._links[ws] = _Guarded(world_id, viewer, credential, language)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._poll())

    def closed(self, ws: ServerConnection) -> None:
        """Forget ``ws`` (idempotent)."""
        self._links.pop(ws, None)

    async def _poll(self) -> None:
        """Check every :data:`CHECK_SECONDS` while a link is open.

        A failed read (the database away for a moment) is logged and tried again at the next round."""
        failing = False
        while self._links:
            await asyncio.sleep(CHECK_SECONDS)
            try:
                await self.check()
            except StorageUnavailable:
                pass  # the store logs its outage once when it starts and once when it ends
            except Exception as exc:
                if not failing:  # one line while the reads keep failing, no traceback each round
                    log.warning("link_check_failed", error=str(exc).strip() or type(exc).__name__)
                failing = True
                continue
            failing = False

    async def check(self) -> int:
        """One round: close every link whose credential no longer opens its world. Returns how
        many were closed."""
        links = list(self._links.items())
        if not links:  # the last one closed during the wait: nothing to read (the store may be closing)
            return 0
        worlds = await self._read({link.world_id for _, link in links})
        closed = 0
        for ws, link in links:
            reason = revoked(worlds.get(link.world_id), link.viewer, link.credential)
            if reason is None or self._links.pop(ws, None) is None:
                continue  # still good, or gone meanwhile
            log.info("link_revoked", world_id=link.world_id, viewer=link.viewer, reason=reason)
            with i18n.using(link.language):
                self._close(ws, CLOSE_UNAUTHORIZED, close_reason(i18n.gettext(REASONS[reason])))
            closed += 1
        return closed
