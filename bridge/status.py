"""What the bridge is doing right now.

That is: who holds each world's link, recent decisions, viewers, and how many worlds it holds in
memory against its budget.

The server tells :class:`Presence` when a world's forwarder (the GM's browser) opens and closes.
:func:`report` combines it with the store and the overlay viewer counts into a :class:`Status`. From
the store come the decisions of the last hour, and the last one. ``GET /status`` answers it as JSON
(:mod:`bridge.http`). ``fate-bridge status`` fetches it (:func:`fetch`) and prints it
(:func:`render`). No token, key or viewer key is ever part of it.
"""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import datetime, timedelta, UTC
from urllib.parse import urljoin, urlsplit

import msgspec

from . import __version__, wire
from .errors import ConfigError
from .release import public_base
from .store import AuditFilter, Store, utc_now

STATUS_PATH = "/status"
WINDOW = timedelta(hours=1)  # "decisions in the last hour"
FETCH_TIMEOUT_SECONDS = 5.0


class Link(msgspec.Struct, kw_only=True):
    """The GM's browser holding a world's link, as its ``hello.client`` described it.

    A field is None for what the module did not say. ``since``: when it connected (ISO-8601 UTC)."""

    user_name: str | None
    foundry_version: str | None
    module_version: str | None
    system_id: str | None
    since: str


class LastDecision(msgspec.Struct, kw_only=True):
    """A world's newest audit record: when, which message, and its result columns."""

    ts: str
    type: str
    ruleset: str | None
    outcome: str
    actor_name: str | None
    detail: str | None


class WorldStatus(msgspec.Struct, kw_only=True):
    """One registered world.

    ``link`` is None when no GM is connected. It also gives how many decisions it made in the last
    hour, and its last decision ever (None before the first). ``overlay_viewers``: how many overlay
    viewers watch it."""

    world_id: str
    link: Link | None
    decisions_last_hour: int
    last_decision: LastDecision | None
    overlay_viewers: int


class Status(msgspec.Struct, kw_only=True):
    """``GET /status``: the bridge's version, when it started (ISO-8601 UTC), and its worlds.

    It also gives this process's memory budget: how many worlds' state it holds in memory now, and
    at most (``serve --max-worlds-in-memory``). Both are None from a bridge before it."""

    bridge_version: str
    started: str
    worlds: list[WorldStatus]
    worlds_in_memory: int | None = None
    max_worlds_in_memory: int | None = None


class Presence:
    """The connected forwarder of each world, and what its hello said.

    The server calls :meth:`linked` once a forwarder is open, and :meth:`unlinked` when it closes. A
    newer forwarder of the same world replaces the older one's entry; the older is being closed."""

    def __init__(self, clock: Callable[[], str] = utc_now) -> None:
        self.clock = clock
        self.started = clock()
        self._links: dict[str, tuple[object, Link]] = {}

    def linked(self, world_id: str, connection: object, client: wire.ClientInfo | None) -> None:
        """``connection`` now holds ``world_id``'s link; ``client`` is its hello's ``client``."""
        self._links[world_id] = (connection, Link(
            user_name=None if client is None else client.user_name,
            foundry_version=None if client is None else client.foundry_version,
            module_version=None if client is None else client.module_version,
            system_id=None if client is None else client.system_id,
            since=self.clock()))

    def unlinked(self, world_id: str | None, connection: object) -> bool:
        """``connection`` closed: forget it if it still holds ``world_id``'s link (True then)."""
        held = self._links.get(world_id) if world_id is not None else None
        if world_id is not None and held is not None and held[0] is connection:
            del self._links[world_id]
            return True
        return False

    def elsewhere(self, world_id: str, link: Link | None, origin: str) -> None:
        """Another bridge process on the same database holds ``world_id``'s link now, or no longer does.

        ``origin`` is that process's cluster id; ``link`` is its link. None means no longer. The
        entry is then forgotten only when the link known here is that process's. Notices of two
        processes may arrive in either order. The old holder's "no longer" may arrive after the new
        holder's link; it must not erase it."""
        if link is not None:
            self._links[world_id] = (("elsewhere", origin), link)
        else:
            held = self._links.get(world_id)
            if held is not None and held[0] == ("elsewhere", origin):
                del self._links[world_id]

    def link(self, world_id: str) -> Link | None:
        """Who holds ``world_id``'s link now (None: nobody)."""
        held = self._links.get(world_id)
        return held[1] if held else None


def _hour_ago(now: str) -> str:
    then = datetime.fromisoformat(now.rstrip("Z")).replace(tzinfo=UTC) - WINDOW
    return then.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


async def report(store: Store, presence: Presence, viewer_count: Callable[[str], int],
                 only_world: str | None = None) -> Status:
    """The bridge's status now: every registered world, or only ``only_world``.

    Each world has its link from ``presence``. Its decisions of the last hour, and its last one,
    come from the audit trail (``store.audit_rows``). ``viewer_count(world_id)`` gives its overlay
    viewers."""
    since = _hour_ago(presence.clock())
    worlds = []
    for world in await store.worlds():
        if only_world is not None and world.world_id != only_world:
            continue
        recent = await store.audit_rows(AuditFilter(world_id=world.world_id, since=since))
        newest = recent[:1] or await store.audit_rows(AuditFilter(world_id=world.world_id, limit=1))
        last = None
        if newest:
            row = newest[0]
            last = LastDecision(ts=row.ts, type=row.type, ruleset=row.summary.ruleset,
                                outcome=row.summary.outcome, actor_name=row.summary.actor_name,
                                detail=row.summary.detail)
        worlds.append(WorldStatus(world_id=world.world_id, link=presence.link(world.world_id),
                                  decisions_last_hour=len(recent), last_decision=last,
                                  overlay_viewers=viewer_count(world.world_id)))
    return Status(bridge_version=__version__, started=presence.started, worlds=worlds,
                  worlds_in_memory=store.worlds_in_memory(), max_worlds_in_memory=store.max_worlds)


def render(status: Status) -> str:
    """``status`` as lines for a terminal: one block per world."""
    lines = [f"fate-bridge {status.bridge_version}, running since {status.started}"]
    if status.max_worlds_in_memory is not None:
        lines.append(f"worlds in memory: {status.worlds_in_memory} of at most {status.max_worlds_in_memory} "
                     "(serve --max-worlds-in-memory; idle ones leave first)")
    if not status.worlds:
        lines.append("No world is registered: `fate-bridge world add WORLD_ID` registers one.")
    for world in status.worlds:
        lines.append(f"\nworld {world.world_id}")
        link = world.link
        if link is None:
            lines.append("  link: not connected (no GM's Foundry has this world open with the module)")
        else:
            lines.append(f"  link: {link.user_name or 'a GM'} since {link.since} (Foundry "
                         f"{link.foundry_version or '?'}, module {link.module_version or '?'}, "
                         f"system {link.system_id or '?'})")
        lines.append(f"  decisions in the last hour: {world.decisions_last_hour}")
        last = world.last_decision
        if last is None:
            lines.append("  last decision: none yet")
        else:
            what = " ".join(part for part in (last.ruleset, last.type, "->", last.outcome) if part)
            about = f", {last.actor_name}" if last.actor_name else ""
            lines.append(f"  last decision: {last.ts} {what}{about}"
                         + (f": {last.detail}" if last.detail else ""))
        lines.append(f"  overlay viewers: {world.overlay_viewers}")
    return "\n".join(lines)


encode = msgspec.json.Encoder().encode
decode = msgspec.json.Decoder(Status).decode


def fetch(url: str, token: str | None, ca_file: str | None = None) -> Status:
    """GET ``/status`` from the bridge at ``url`` (http(s) or ws(s)).

    Raises ``ConfigError`` saying why it could not be read."""
    target = urljoin(public_base(url), STATUS_PATH.lstrip("/"))
    request = urllib.request.Request(target, headers={"Authorization": f"Bearer {token}"} if token else {})
    context = ssl.create_default_context(cafile=ca_file) if urlsplit(target).scheme == "https" else None
    try:
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_SECONDS, context=context) as resp:
            return decode(resp.read())
    except urllib.error.HTTPError as refused:
        with refused:
            text = refused.read().decode(errors="replace").strip()
        raise ConfigError(f"{target} answered {refused.code}: {text}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ConfigError(f"cannot reach the bridge at {target} ({reason}): is `fate-bridge serve` "
                          "running there? (`fate-bridge doctor` explains why not)") from None
    except ValueError as exc:
        raise ConfigError(f"{target} did not answer a fate-bridge status ({exc}): check --url") from None
