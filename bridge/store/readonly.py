"""A database opened read-only (``Backend.open_readonly``); nothing is created, migrated or written.

``audit verify``, ``audit export``, ``doctor`` and ``serve``'s key check read through it. Any
backend: it reads through a connection whose ``execute`` takes the shared SQL (``?``
placeholders). That is a ``sqlite3.Connection`` or PostgreSQL's read-only session.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import WorldNotRegistered
from .audit_rows import (PREV_HASH, _tables, chain_hashes, heads_of, latest_checkpoints, signers,
                         verify_database)
from .blobs import unpack

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from .. import audit
    from ..heads import Head


class ReadOnlyDatabase:
    """The :class:`~bridge.store.base.TrailReader` of a database opened read-only.

    It also reads what is needed before, or instead of, opening the store. ``label``: the database
    as messages name it, a URL's password hidden. Reads run on the caller's thread. Call
    :meth:`close` once done.
    """

    def __init__(self, conn: Any, label: str) -> None:
        self.conn, self.label = conn, label

    async def audit_hashes(self, world_id: str, seqs: list[int], *, registered: bool = False) -> dict[int, str]:
        """See :meth:`bridge.store.base.TrailReader.audit_hashes`."""
        if registered and not any(world == world_id and present for world, _, present in self._worlds()):
            raise WorldNotRegistered(f"world {world_id!r} is not registered (see `fate-bridge world list`)")
        return chain_hashes(self.conn, world_id, seqs)

    async def verify(self, world_id: str | None, key: bytes | None, public_key: Ed25519PublicKey | None = None,
                     progress: Callable[[str, int], None] | None = None) -> list[audit.WorldReport]:
        """See :meth:`bridge.store.base.TrailReader.verify` (no signing key here: ``public_key``
        None checks no signature)."""
        return verify_database(self.conn, world_id, key, public_key, progress)

    def checkpoints(self) -> list[tuple[str, int, str, str]]:
        """Every HMAC checkpoint stored, ``(world_id, seq, hash, mac)`` (none before schema 2)."""
        if "checkpoints" not in _tables(self.conn):
            return []
        return [tuple(row) for row in self.conn.execute("SELECT world_id, seq, hash, mac FROM checkpoints")]

    def latest_checkpoints(self) -> list[tuple[str, int, str, str]]:
        """Each world's latest HMAC checkpoint (:func:`~bridge.store.audit_rows.latest_checkpoints`)."""
        return latest_checkpoints(self.conn)

    def signers(self) -> set[str]:
        """The public keys that signed the worlds' latest heads (:func:`~bridge.store.audit_rows.signers`)."""
        return signers(self.conn)

    def registered_worlds(self) -> list[tuple[str, bool]]:
        """(world id, has a token) of each registered world, by id."""
        return [(world, token) for world, token, present in self._worlds() if present]

    def _worlds(self) -> list[tuple[str, bool, bool]]:
        """(world id, has a token, not removed) of every row of ``worlds``, by id.

        A file from before ``removed_at`` has no removed world.
        """
        if "worlds" not in _tables(self.conn):
            return []
        columns = [d[0] for d in self.conn.execute("SELECT * FROM worlds LIMIT 0").description]
        removed = "removed_at" if "removed_at" in columns else "NULL"
        return [(world, token is not None, gone is None) for world, token, gone in self.conn.execute(
            f"SELECT world_id, token_hash, {removed} FROM worlds ORDER BY world_id")]

    def trail(self, world_id: str) -> tuple[list[tuple[int, bytes, str, str]], list[Head], list[tuple]]:
        """One world's whole trail as stored, for ``audit export``.

        Its records ``(seq, record JSON, prev_hash, hash)`` in seq order, its signed heads, and its
        HMAC checkpoints ``(seq, hash, mac)``.
        """
        rows = [(seq, unpack(record), prev_hash, record_hash) for seq, record, prev_hash, record_hash in
                self.conn.execute(f"SELECT seq, record, {PREV_HASH}, hash FROM audit WHERE world_id = ?"
                                  " ORDER BY seq", (world_id,))]
        checkpoints = self.conn.execute("SELECT seq, hash, mac FROM checkpoints WHERE world_id = ? ORDER BY seq",
                                        (world_id,)).fetchall()
        return rows, heads_of(self.conn, world_id), checkpoints

    def close(self) -> None:
        self.conn.close()
