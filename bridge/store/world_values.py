"""The plain values of the worlds a database registers.

:class:`World`, :class:`Invite`, :class:`Registration`, :class:`RegistrationRequest`.
:mod:`bridge.store.base` re-exports them with the protocols that take them.

They live apart from ``base`` for the ``world`` commands (bridge/store/admin.py). Those import
no wire decoder, no decision record and no whole-store protocol.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .. import wire


@dataclass(frozen=True, slots=True)
class World:
    """A registered world.

    ``token_hash`` is the token's SHA-256 in hex; None for ``resolve``'s implicit world.
    ``viewer_key`` is the overlay viewer key in clear text; None until one is made.
    ``language`` is a catalog of ``bridge.i18n.languages()``, set by the forwarder's last hello;
    None before any hello.
    """

    world_id: str
    token_hash: str | None
    settings: wire.WorldSettings
    viewer_key: str | None = None
    language: str | None = None


@dataclass(frozen=True, slots=True)
class Invite:
    """An invite code as stored (``fate-bridge world invite``).

    ``secret_hash`` is the secret's SHA-256. ``max_uses`` caps registrations (None: no cap);
    ``uses`` counts those made. ``expires_at`` is UTC text (None: never). ``approval`` makes
    each registration wait for the host. ``revoked_at`` is None while not revoked.
    """

    invite_id: str
    secret_hash: str
    max_uses: int | None
    expires_at: str | None
    approval: bool
    uses: int = 0
    created_at: str = ""
    revoked_at: str | None = None


class Registration(enum.Enum):
    """What a registration through an invite code came to.

    Returned by :meth:`Store.register_world` and :meth:`Store.collect_registration`. The first
    three are answers. The others are refusals, and leave every row as it was.
    """

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
    """A registration made with an approval code (``fate-bridge world pending``).

    ``address`` is where it came from; ``requested_at`` is UTC text. ``state`` is ``waiting``,
    ``approved`` or ``denied``. The last two stay until the requesting browser asks again.
    """

    world_id: str
    invite_id: str
    address: str
    requested_at: str
    state: str
