"""What every store backend provides.

That is the :class:`Store` protocol the shell calls, and the plain values it takes and returns:
decisions, audit rows and filters. Worlds, invite codes and registrations come from
:mod:`bridge.store.world_values`. It also gives the ``world`` commands' :class:`WorldAdmin`.

Pure declarations: no SQL, no threads. ``bridge/store/sqlite.py`` is the embedded backend.
``bridge/store/postgres.py`` is the same on PostgreSQL, for many processes (docs/deploy.md).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

import msgspec

from .. import wire
from ..credentials import InviteCode
from ..record import Decision  # noqa: F401 (what a decision hands the store, made by bridge.core)
from ..state import WorldState
from .world_values import Invite, Registration, RegistrationRequest, World  # noqa: F401 (values it speaks)

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

    from .. import audit

T = TypeVar("T")


class Decided(msgspec.Struct, frozen=True):
    """The outcome of :meth:`Store.decide`.

    - ``frame``: the reply frame.
    - ``replayed``: it was replayed from a repeated ``event_id``; nothing ran.
    - ``other_request``: on a replay, the repeat carried another request than the one first decided.
      The event_id was reused.
    - ``kept``: the decision's own :attr:`Decision.kept` when it ran; None when replayed.
    - ``seq``, ``record_hash``: the number and chain hash of the audit record holding the decision.
      Also set on a replay, when the trail holds it; None when not audited. Its receipt signs them.
    - ``receipt``: that record's receipt, signed with its committed batch when the store has a
      signing key (bridge/receipts.py, :func:`~bridge.receipts.with_receipts`). None otherwise.
    """

    reply: bytes
    replayed: bool
    other_request: bool = False
    kept: Any = None
    seq: int | None = None
    record_hash: str | None = None
    receipt: wire.Receipt | None = None

    def with_receipt(self, receipt: wire.Receipt) -> Self:
        """This outcome with ``receipt`` (what :func:`~bridge.receipts.with_receipts` signs on)."""
        return msgspec.structs.replace(self, receipt=receipt)



@dataclass(frozen=True, slots=True)
class AuditFilter:
    """Filters of ``audit list``/``export`` and ``audit_query``; None = any.

    ``since`` is inclusive, ``until`` exclusive. Each is written as the trail writes a record's time
    (:func:`bridge.times.trail_time`); the store compares them as text.
    """

    world_id: str | None = None
    actor_id: str | None = None
    ruleset: str | None = None
    outcome: str | None = None
    since: str | None = None
    until: str | None = None
    before_seq: int | None = None
    limit: int | None = None


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One stored audit record: the global ``id`` (for ``audit show``), the record's canonical
    bytes, its chain links and its summary."""

    id: int
    world_id: str
    seq: int
    ts: str
    type: str
    event_id: str | None
    user_id: str | None
    summary: wire.AuditColumns
    record: bytes
    prev_hash: str
    hash: str


DecisionFn = Callable[[WorldState], Decision]
"""A decision: run synchronously on the caller's event loop against the world's state held in
memory (:mod:`bridge.store.memory`); nothing it does touches the database."""


class TrailReader(Protocol):
    """What reads and checks a database's audit trails; ``audit verify`` checks through these.

    A :class:`Store` is one. So is a database opened read-only (``Backend.open_readonly``), with
    nothing created or written.
    """

    async def audit_hashes(self, world_id: str, seqs: list[int], *, registered: bool = False) -> dict[int, str]:
        """``seq`` -> chain hash of the world's records among ``seqs``, for the receipts check.

        Missing ones are left out. ``registered``: raise WorldNotRegistered for a removed world.
        """
        ...

    async def verify(self, world_id: str | None, key: bytes | None, public_key: Ed25519PublicKey | None = None,
                     progress: Callable[[str, int], None] | None = None) -> list[audit.WorldReport]:
        """Check every world the database knows of, or one; one report per world.

        It checks the chain, the signed heads and the HMAC checkpoints (with ``key``). Heads are checked
        against ``public_key``, by default the store's signing key's. It re-derives each decision and the
        state rows against the chain's (:func:`bridge.audit.verify_world`). It calls
        ``progress(world_id, records)`` now and then, from the thread that reads.
        """
        ...


class Store(TrailReader, Protocol):
    """The async store interface the server, CLI and ``resolve`` use: every method they call.
    A backend's module opens one (bridge/store/backends.py, ``open_store``).

    ``signing_key``: the bridge's Ed25519 receipt key (bridge/receipts.py), None when it has none;
    ``audit_key``: the HMAC key of its checkpoints, likewise. ``max_worlds``: how many worlds it
    holds in memory at most, ``worlds_in_memory`` how many it holds."""

    signing_key: Ed25519PrivateKey | None
    audit_key: bytes | None
    invalid_worlds: dict[str, str]  # after worlds(): id -> why its stored settings cannot be read
    max_worlds: int

    def worlds_in_memory(self) -> int:
        """How many worlds' state is held in memory now."""
        ...

    def unload(self, world_id: str) -> bool:
        """Drop the world's state from memory, unless a decision of it is queued or in its batch.

        It is loaded again on its next use. True when it was held and is dropped.
        """
        ...

    async def world(self, world_id: str) -> World | None:
        """The registered world, or None."""
        ...

    async def add_world(self, world_id: str, token_hash: str | None) -> None:
        """Register a world. Raises ``ConfigError`` if it exists."""
        ...

    async def set_token(self, world_id: str, token_hash: str) -> None:
        """Give a world a new token hash. Raises ``ConfigError`` if it is not registered."""
        ...

    async def remove_world(self, world_id: str) -> None:
        """Unregister a world: its token and viewer key stop working.

        Its state and audit trail are kept for when it is added again. Raises ``ConfigError`` if it is
        not registered.
        """
        ...

    async def viewer_key(self, world_id: str, candidate: str, *, rotate: bool = False) -> str:
        """The world's overlay viewer key.

        The stored one; or ``candidate``, stored in its place when there is none yet or ``rotate`` is
        set. Raises ``ConfigError`` if the world is not registered.
        """
        ...

    async def set_language(self, world_id: str, language: str) -> None:
        """Keep ``language`` (a normalized ``bridge.i18n`` language) as the world's, for what is
        made without its connection (``audit report``). Raises ``ConfigError`` if the world is
        not registered."""
        ...

    async def worlds(self) -> list[World]:
        """Every registered world, by id."""
        ...

    async def add_invite(self, invite: Invite) -> None:
        """Store a new invite code (its secret's hash only)."""
        ...

    async def invites(self) -> list[Invite]:
        """Every invite code, newest first (revoked and expired ones too)."""
        ...

    async def revoke_invite(self, invite_id: str) -> None:
        """Make the code ``invite_id`` refuse every registration from now on.

        Requests made with it and waiting stay for the host to decide. Raises ``ConfigError`` if there
        is no such code.
        """
        ...

    async def register_world(self, world_id: str, code: InviteCode, token_hash: str, request_hash: str,
                             address: str) -> Registration:
        """Register ``world_id`` through ``code`` in one transaction.

        - ``REGISTERED``, under ``token_hash``, with a plain code.
        - ``WAITING`` with an approval code. A request is kept with ``address`` and ``request_hash``,
          the SHA-256 of the requesting browser's secret.

        The code's use is counted either way. Otherwise it returns the refusal and writes nothing:

        - ``NO_CODE``: unknown, or the secret differs (compared in constant time).
        - ``REVOKED``, ``EXPIRED``, ``WORLD_ASKED``, ``USED_UP``, ``FULL``.
        - ``WORLD_KNOWN``: a world the database knows, even removed, is never registered through a code.
        """
        ...

    async def collect_registration(self, world_id: str, request_secret: str, token_hash: str) -> Registration | None:
        """The requesting browser asks again about its request for ``world_id``.

        - None: no request for it holds ``request_secret`` (compared in constant time).
        - ``WAITING``.
        - ``REGISTERED`` once approved. The world's token hash is set to ``token_hash``; the request is gone.
        - ``DENIED``; the request is gone.
        - ``WORLD_KNOWN``: the host gave the approved world a token meanwhile. The request is gone, and
          that token is never replaced.
        """
        ...

    async def registration_requests(self) -> list[RegistrationRequest]:
        """Every registration request, oldest first."""
        ...

    async def decide_registration(self, world_id: str, approve: bool) -> None:
        """Approve (the world registered, without a token until its browser collects one) or
        deny the waiting request for ``world_id``. Raises ``ConfigError`` when none waits, or
        (approving) when the world was registered meanwhile."""
        ...

    async def worlds_of(self, world_ids: Collection[str]) -> dict[str, World]:
        """The registered worlds among ``world_ids``, by id; a removed or unknown one is left out.

        The server's link guard compares open links with them (bridge/link_guard.py).
        """
        ...

    async def decide(self, world_id: str, event_id: str | None, decision: DecisionFn,
                     request_hash: str | None = None) -> Decided:
        """Run one decision in one transaction (see the module docstring).

        ``request_hash`` identifies the request, so a reused ``event_id`` can be told from a repeat. The
        stored reply is returned either way, as the contract says.
        """
        ...

    async def holds_decision(self, world_id: str, target: str) -> bool:
        """Whether ``world_id`` holds a passed decision that ``target`` names.

        ``target`` is its ``event_id``, or the id of the ChatMessage its audit columns link
        (``message_id``). A refused request holds none. Only committed decisions count: a reply is sent
        after its COMMIT, so a client names no other. Requests naming an earlier decision need this
        (``gm_override``, :func:`bridge.core.named_decision`). Raises ``WorldNotRegistered`` for a world
        not registered.
        """
        ...

    async def decided(self, world_id: str, event_id: str) -> bool:
        """Whether a request under ``event_id`` was decided in ``world_id`` already, passed or refused.

        If so, :meth:`decide` answers its repeat with the stored reply.
        """
        ...

    async def read(self, world_id: str, query: Callable[[WorldState], T]) -> T:
        """Run a read-only ``query`` on the world's state; anything it writes is discarded."""
        ...

    async def audit_page(self, world_id: str, query: wire.AuditQuery) -> wire.AuditPage:
        """A page of ``world_id``'s audit trail for the module's audit window (``audit_query``).

        Newest first, filtered as the query says. ``more`` when older records match too.
        """
        ...

    async def audit_rows(self, where: AuditFilter) -> list[AuditRow]:
        """Audit records matching ``where`` (any world unless it names one), newest first
        (``audit list``/``export``)."""
        ...

    async def audit_row(self, row_id: int) -> AuditRow | None:
        """The audit record with global id ``row_id`` (``audit show``), or None."""
        ...

    async def repair(self, world_id: str, public_key: Ed25519PublicKey | None = None) -> audit.WorldReport:
        """Rebuild the world's state rows from its chain and sign a head sealing them.

        Nothing is written when the chain itself fails (``WorldReport.chain_ok``).
        """
        ...

    async def new_key(self, old_key: Ed25519PrivateKey | None, new_key: Ed25519PrivateKey) -> list[str]:
        """Sign with ``new_key`` from now on: a ``key_change`` record in every world's chain, each
        head signed by the new key. Returns the worlds changed."""
        ...

    async def close(self) -> None:
        """Finish pending work and close; idempotent."""
        ...


class WorldAdmin(Protocol):
    """What the ``world`` commands change in a database, synchronously.

    These are the :class:`Store` methods of the same names, each with the contract there. Each call
    is one transaction, committed when it returns. A backend's module opens one without the store's
    threads, event loop, world cache or audit chain (bridge/store/backends.py,
    ``open_world_admin``). So a command beside a running ``serve`` writes the rows, and the server
    reads them; its links follow a changed credential (bridge/link_guard.py). A failure of storage
    itself is raised as ``StorageUnavailable``: the database locked, full, read-only, unreachable.
    """

    invalid_worlds: dict[str, str]  # after worlds(): id -> why its stored settings cannot be read

    def add_world(self, world_id: str, token_hash: str | None) -> None:
        """As :meth:`Store.add_world`."""
        ...

    def set_token(self, world_id: str, token_hash: str) -> None:
        """As :meth:`Store.set_token`."""
        ...

    def remove_world(self, world_id: str) -> None:
        """As :meth:`Store.remove_world`."""
        ...

    def viewer_key(self, world_id: str, candidate: str, *, rotate: bool = False) -> str:
        """As :meth:`Store.viewer_key`."""
        ...

    def worlds(self) -> list[World]:
        """As :meth:`Store.worlds`."""
        ...

    def add_invite(self, invite: Invite) -> None:
        """As :meth:`Store.add_invite`."""
        ...

    def invites(self) -> list[Invite]:
        """As :meth:`Store.invites`."""
        ...

    def revoke_invite(self, invite_id: str) -> None:
        """As :meth:`Store.revoke_invite`."""
        ...

    def registration_requests(self) -> list[RegistrationRequest]:
        """As :meth:`Store.registration_requests`."""
        ...

    def decide_registration(self, world_id: str, approve: bool) -> None:
        """As :meth:`Store.decide_registration`."""
        ...

    def close(self) -> None:
        """Close the connection; idempotent."""
        ...
