"""The ``world`` commands' access to a database (:class:`~bridge.store.base.WorldAdmin`).

It holds the worlds, invite codes and registration requests on the command's own connection.
Each call is one transaction on it, in the calling thread.

The SQL is the stores' own: :class:`~bridge.store.worlds.WorldRows` and
:class:`~bridge.store.invites.InviteRows`, which a store runs on its writer thread. A backend
gives the connection, how to open a transaction and which errors mean storage is failing.

So a command that registers a world, changes its token or lists worlds imports no store and no
asyncio. It writes the same rows a store would. A running ``serve`` reads them; its open links
follow a changed credential (bridge/link_guard.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import StorageUnavailable
from .world_values import Invite, RegistrationRequest, World
from .invites import InviteRows
from .worlds import WorldRows

T = TypeVar("T")


class _Tables(WorldRows, InviteRows):
    """The stores' world and invite rows on ``conn``.

    Each change is one transaction, opened by ``transaction(work)``.
    """

    def __init__(self, conn: Any, transaction: Callable[[Callable[[Any], Any]], Any]) -> None:
        self._conn = conn
        self._begin = transaction

    def _transaction(self, work: Callable[[Any], T]) -> T:
        return self._begin(work)


class Admin:
    """:class:`~bridge.store.base.WorldAdmin` on the connection ``conn``, closed by :meth:`close`.

    ``transaction(work)`` runs ``work(conn)`` in one transaction, committed if it returns.
    ``fault(exc)`` names the storage failure ``exc`` is, a reason of
    :data:`bridge.store.health.REASONS`. It returns None for any other error, which is re-raised.
    """

    def __init__(self, conn: Any, transaction: Callable[[Callable[[Any], Any]], Any],
                 fault: Callable[[Exception], str | None]) -> None:
        self._conn = conn
        self._tables = _Tables(conn, transaction)
        self._fault = fault
        self._closed = False

    @property
    def invalid_worlds(self) -> dict[str, str]:
        return self._tables.invalid_worlds

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``; a storage failure raised as ``StorageUnavailable``."""
        try:
            return fn(*args)
        except Exception as exc:
            reason = self._fault(exc)
            if reason is None:
                raise
            from .health import RETRY_AFTER_MS  # (imports structlog: only when storage failed)

            raise StorageUnavailable(reason, RETRY_AFTER_MS) from exc

    def add_world(self, world_id: str, token_hash: str | None) -> None:
        self._call(self._tables._add_world_sync, world_id, token_hash)

    def set_token(self, world_id: str, token_hash: str) -> None:
        self._call(self._tables._set_token_sync, world_id, token_hash)

    def remove_world(self, world_id: str) -> None:
        self._call(self._tables._remove_world_sync, world_id)

    def viewer_key(self, world_id: str, candidate: str, *, rotate: bool = False) -> str:
        return self._call(self._tables._viewer_key_sync, world_id, candidate, rotate)

    def worlds(self) -> list[World]:
        return self._call(self._tables._worlds_sync)

    def add_invite(self, invite: Invite) -> None:
        self._call(self._tables._add_invite_sync, invite)

    def invites(self) -> list[Invite]:
        return self._call(self._tables._invites_sync)

    def revoke_invite(self, invite_id: str) -> None:
        self._call(self._tables._revoke_invite_sync, invite_id)

    def registration_requests(self) -> list[RegistrationRequest]:
        return self._call(self._tables._registration_requests_sync)

    def decide_registration(self, world_id: str, approve: bool) -> None:
        self._call(self._tables._decide_registration_sync, world_id, approve)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._conn.close()
