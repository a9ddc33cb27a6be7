"""Both backends' invite codes and registration requests.

A GM registers a world through a code the host handed out, without a terminal on the bridge's
machine.

A mixin of :class:`~bridge.store.writer.BatchWriter`, so of both backends; the SQL is written
once, with ``?`` placeholders. Its ``*_sync`` methods run on the store's writer thread, each
registration in one transaction. So two racing registrations cannot both take a code's last use
or one world id, even on two processes of one PostgreSQL database. A conditional ``UPDATE``
counts the use. The world is inserted with ``ON CONFLICT DO NOTHING``. Each is checked by its row
count, and a refusal rolls the whole transaction back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..credentials import InviteCode, token_matches
from ..errors import ConfigError
from .schema import utc_now
from .world_values import Invite, Registration, RegistrationRequest
from .worlds import NEW_SETTINGS

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar

    T = TypeVar("T")

MAX_WAITING_REQUESTS = 100  # requests waiting for the host at once: a host reads the list by
# hand, and a leaked approval code cannot fill the database
NO_SECRET = "0" * 64  # what an unknown code's secret is compared with (no SHA-256 is all zeros)


class _Refused(Exception):
    """Rolls a registration's transaction back; carries what it came to."""

    def __init__(self, outcome: Registration) -> None:
        super().__init__(outcome.value)
        self.outcome = outcome


class InviteRows:
    """The ``invites`` and ``registrations`` tables (see :class:`~bridge.store.base.Store` for
    each method's contract)."""

    _INVITE = "invite_id, secret_hash, max_uses, expires_at, approval, uses, created_at, revoked_at"

    if TYPE_CHECKING:
        async def _run(self, fn: Callable[..., T], *args: object) -> T: ...
        def _transaction(self, work: Callable[[Any], T]) -> T: ...

    @staticmethod
    def _invite_row(row: tuple) -> Invite:
        return Invite(row[0], row[1], row[2], row[3], bool(row[4]), row[5], row[6], row[7])

    def _add_invite_sync(self, invite: Invite) -> None:
        self._transaction(lambda conn: conn.execute(
            f"INSERT INTO invites ({self._INVITE}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (invite.invite_id, invite.secret_hash, invite.max_uses, invite.expires_at, int(invite.approval),
             invite.uses, invite.created_at or utc_now(), invite.revoked_at)))

    def _invites_sync(self) -> list[Invite]:
        return self._transaction(lambda conn: [self._invite_row(r) for r in conn.execute(
            f"SELECT {self._INVITE} FROM invites ORDER BY created_at DESC, invite_id").fetchall()])

    def _revoke_invite_sync(self, invite_id: str) -> None:
        def work(conn: Any) -> None:
            done = conn.execute("UPDATE invites SET revoked_at = coalesce(revoked_at, ?) WHERE invite_id = ?",
                                (utc_now(), invite_id))
            if done.rowcount != 1:
                raise ConfigError(f"no invite code {invite_id!r} (see `fate-bridge world invite list`)")
        self._transaction(work)

    def _register_world_sync(self, world_id: str, code: InviteCode, token_hash: str, request_hash: str,
                             address: str) -> Registration:
        now = utc_now()

        def work(conn: Any) -> Registration:
            row = conn.execute(f"SELECT {self._INVITE} FROM invites WHERE invite_id = ?", (code.invite_id,)).fetchone()
            invite = None if row is None else self._invite_row(row)
            # the secret is compared even for an unknown id, so both cost alike
            matches = token_matches(code.secret, NO_SECRET if invite is None else invite.secret_hash)
            if invite is None or not matches:
                raise _Refused(Registration.NO_CODE)
            if invite.revoked_at is not None:
                raise _Refused(Registration.REVOKED)
            if invite.expires_at is not None and invite.expires_at <= now:
                raise _Refused(Registration.EXPIRED)
            if conn.execute("SELECT 1 FROM worlds WHERE world_id = ?", (world_id,)).fetchone():
                raise _Refused(Registration.WORLD_KNOWN)
            if invite.approval:
                (waiting,) = conn.execute("SELECT count(*) FROM registrations WHERE state = 'waiting'").fetchone()
                if waiting >= MAX_WAITING_REQUESTS:
                    raise _Refused(Registration.FULL)
                added = conn.execute(
                    "INSERT INTO registrations (world_id, invite_id, secret_hash, address, requested_at)"
                    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (world_id) DO NOTHING",
                    (world_id, invite.invite_id, request_hash, address, now))
                if added.rowcount != 1:
                    raise _Refused(Registration.WORLD_ASKED)
            else:
                if conn.execute("SELECT 1 FROM registrations WHERE world_id = ?", (world_id,)).fetchone():
                    raise _Refused(Registration.WORLD_ASKED)
                added = conn.execute(
                    "INSERT INTO worlds (world_id, token_hash, settings) VALUES (?, ?, ?)"
                    " ON CONFLICT (world_id) DO NOTHING", (world_id, token_hash, NEW_SETTINGS))
                if added.rowcount != 1:
                    raise _Refused(Registration.WORLD_KNOWN)
            used = conn.execute("UPDATE invites SET uses = uses + 1 WHERE invite_id = ?"
                                " AND (max_uses IS NULL OR uses < max_uses)", (invite.invite_id,))
            if used.rowcount != 1:
                raise _Refused(Registration.USED_UP)
            return Registration.WAITING if invite.approval else Registration.REGISTERED

        try:
            return self._transaction(work)
        except _Refused as refused:
            return refused.outcome

    def _collect_registration_sync(self, world_id: str, request_secret: str, token_hash: str) -> Registration | None:
        def work(conn: Any) -> Registration | None:
            row = conn.execute("SELECT secret_hash, state FROM registrations WHERE world_id = ?",
                               (world_id,)).fetchone()
            if row is None or not token_matches(request_secret, row[0]):
                return None
            if row[1] == "waiting":
                return Registration.WAITING
            conn.execute("DELETE FROM registrations WHERE world_id = ?", (world_id,))
            if row[1] == "denied":
                return Registration.DENIED
            given = conn.execute("UPDATE worlds SET token_hash = ? WHERE world_id = ? AND token_hash IS NULL"
                                 " AND removed_at IS NULL", (token_hash, world_id))
            return Registration.REGISTERED if given.rowcount == 1 else Registration.WORLD_KNOWN
        return self._transaction(work)

    def _registration_requests_sync(self) -> list[RegistrationRequest]:
        return self._transaction(lambda conn: [RegistrationRequest(*r) for r in conn.execute(
            "SELECT world_id, invite_id, address, requested_at, state FROM registrations"
            " ORDER BY requested_at, world_id").fetchall()])

    def _decide_registration_sync(self, world_id: str, approve: bool) -> None:
        def work(conn: Any) -> None:
            row = conn.execute("SELECT 1 FROM registrations WHERE world_id = ? AND state = 'waiting'",
                               (world_id,)).fetchone()
            if row is None:
                raise ConfigError(f"no registration request waits for world {world_id!r} "
                                  "(see `fate-bridge world pending`)")
            if approve:
                added = conn.execute(
                    "INSERT INTO worlds (world_id, token_hash, settings) VALUES (?, NULL, ?)"
                    " ON CONFLICT (world_id) DO NOTHING", (world_id, NEW_SETTINGS))
                if added.rowcount != 1:
                    raise ConfigError(f"world {world_id!r} was registered meanwhile: deny the request "
                                      "(`fate-bridge world pending deny`)")
            conn.execute("UPDATE registrations SET state = ? WHERE world_id = ?",
                         ("approved" if approve else "denied", world_id))
        self._transaction(work)

    async def add_invite(self, invite: Invite) -> None:
        """Store a new invite code (see :class:`Store`)."""
        await self._run(self._add_invite_sync, invite)

    async def invites(self) -> list[Invite]:
        """Every invite code, newest first (see :class:`Store`)."""
        return await self._run(self._invites_sync)

    async def revoke_invite(self, invite_id: str) -> None:
        """Revoke the code ``invite_id`` (see :class:`Store`)."""
        await self._run(self._revoke_invite_sync, invite_id)

    async def register_world(self, world_id: str, code: InviteCode, token_hash: str, request_hash: str,
                             address: str) -> Registration:
        """Register ``world_id`` through ``code`` (see :class:`Store`)."""
        return await self._run(self._register_world_sync, world_id, code, token_hash, request_hash, address)

    async def collect_registration(self, world_id: str, request_secret: str, token_hash: str) -> Registration | None:
        """The answer to a request asked again (see :class:`Store`)."""
        return await self._run(self._collect_registration_sync, world_id, request_secret, token_hash)

    async def registration_requests(self) -> list[RegistrationRequest]:
        """Every registration request, oldest first (see :class:`Store`)."""
        return await self._run(self._registration_requests_sync)

    async def decide_registration(self, world_id: str, approve: bool) -> None:
        """Approve or deny the request for ``world_id`` (see :class:`Store`)."""
        await self._run(self._decide_registration_sync, world_id, approve)
