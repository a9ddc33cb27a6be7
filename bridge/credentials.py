"""The bridge's secrets as plain values: world tokens, invite codes, and a waiting request's secret.

The last is the secret of a waiting registration request. This module says how each is made, stored
and compared. Each is stored as a SHA-256, never the secret, and compared in constant time. No
clock, no store: the store and the session call these.

An invite code (``fate-bridge world invite``) reads ``ID.SECRET``. ``ID`` names the code in ``world
invite list`` and ``revoke``; it is no secret. ``SECRET`` is 192 random bits, stored as its SHA-256
and compared in constant time. So neither a lookup nor a comparison tells how much of a guess was
right.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

TOKEN_BYTES = 32  # 256 bits: a hash without key stretching is enough at this entropy
INVITE_ID_BYTES = 6  # 8 characters: tells codes apart in a listing; no secret
INVITE_SECRET_BYTES = 24  # 192 bits: never guessed, so a plain SHA-256 stores it safely
INVITE_CODE = re.compile(r"([A-Za-z0-9_-]{8})\.([A-Za-z0-9_-]{32})")


def new_token() -> str:
    """A fresh world token or overlay viewer key: URL-safe text, 256 random bits from ``secrets``.

    It never starts with ``-``. Pasted after ``--token`` on a command line, such a token would read
    as an option. A redraw costs one bit of the 256, in one case of 64."""
    while True:
        token = secrets.token_urlsafe(TOKEN_BYTES)
        if not token.startswith("-"):
            return token


def hash_token(token: str) -> str:
    """The SHA-256 (hex) under which a token, an invite code's secret or a request's secret is stored.

    The secret itself is never stored."""
    return hashlib.sha256(token.encode()).hexdigest()


def token_matches(token: str, token_hash: str | None) -> bool:
    """Constant-time check of ``token`` against a stored hash; None never matches.

    ``token`` may be any secret :func:`hash_token` stores."""
    if token_hash is None:
        return False
    return hmac.compare_digest(hash_token(token), token_hash)


@dataclass(frozen=True, slots=True)
class InviteCode:
    """An invite code as the GM enters it, split: ``invite_id`` (public) and ``secret``."""

    invite_id: str
    secret: str

    @property
    def text(self) -> str:
        """The code as the host hands it out: ``ID.SECRET``."""
        return f"{self.invite_id}.{self.secret}"


def new_invite_code() -> InviteCode:
    """A fresh invite code (random id and secret, from ``secrets``)."""
    return InviteCode(secrets.token_urlsafe(INVITE_ID_BYTES), secrets.token_urlsafe(INVITE_SECRET_BYTES))


def parse_invite_code(text: str) -> InviteCode | None:
    """``text`` as an :class:`InviteCode`; spaces around it (a pasted code) are ignored.

    None when it does not have a code's shape: ``ID.SECRET``, of 8 and 32 URL-safe characters."""
    match = INVITE_CODE.fullmatch(text.strip())
    return None if match is None else InviteCode(match.group(1), match.group(2))
