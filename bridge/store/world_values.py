"""The plain values of the worlds a database registers: :class:`World`, :class:`Invite`,
:class:`Registration`, :class:`RegistrationRequest` (:mod:`bridge.store.base` gives them with
the protocols that take them).

Apart from ``base`` so that the ``world`` commands (bridge/store/admin.py) import no wire
message decoder, no decision record and no protocol of the whole store.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .. import wire


@dataclass(frozen=True, slots=True)
class World:
    """A registered world: its token's SHA-256 (hex; None for ``resolve``'s implicit world), its
    settings, its overlay viewer key (clear text; None until one is made) and its language (a
    catalog of ``bridge.i18n.languages()``, as the forwarder's last hello set it; None before any
    hello)."""

    world_id: str
    token_hash: str | None
    settings: wire.WorldSettings
    viewer_key: str | None = None
    language: str | None = None


@dataclass(frozen=True, slots=True)
class Invite:
    """An invite code as stored (``fate-bridge world invite``): its public id, its secret's
    SHA-256, how many registrations it allows (None: any number) and has made, when it expires
    (UTC text, None: never), whether each registration waits for the host's approval, when it
    was made and when revoked (None: not revoked)."""

    invite_id: str
    secret_hash: str
    max_uses: int | None
    expires_at: str | None
    approval: bool
    uses: int = 0
    created_at: str = ""
    revoked_at: str | None = None


class Registration(enum.Enum):
    """What a registration through an invite code came to (:meth:`Store.register_world`,
    :meth:`Store.collect_registration`): the first three are answers, the others refusals,
    each leaving every row as it was."""

    REGISTERED = "registered"  # the world is registered, under the token hash given
    WAITING = "waiting"  # the request waits for the host (made now, or asked again)
    DENIED = "denied"  # the host denied the request (told once: the request is gone then)
    NO_CODE = "no_code"  # no such code, or its secret is wrong
    REVOKED = "revoked"
    EXPIRED = "expired"
    USED_UP = "used_up"  # the code made its max_uses registrations
    WORLD_KNOWN = "world_known"  # the world id is registered, or was (removed): never through a code
    WORLD_ASKED = "world_asked"  # a request for the world id waits already (another browser's)
    FULL = "full"  # MAX_WAITING_REQUESTS requests wait already


@dataclass(frozen=True, slots=True)
class RegistrationRequest:
    """A registration made with an approval code (``fate-bridge world pending``): the world,
    the code's id, the address it came from, when (UTC text), and ``state``: ``waiting``,
    ``approved`` or ``denied`` (the latter two until the requesting browser asks again)."""

    world_id: str
    invite_id: str
    address: str
    requested_at: str
    state: str
