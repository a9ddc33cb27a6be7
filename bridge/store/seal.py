"""A world's state, sealed in each batch that changes it.

So loading a world after a crash checks its state rows in time proportional to the rows, never
to the length of its chain.

The state guard (:meth:`~bridge.store.audit_rows.AuditRows._state_guard`) refuses to serve a
world whose state rows were edited outside the bridge. Its cheap check compares the stored
state with the digest a signed head sealed at a clean stop. After a crash, that head is older
than the chain's end. The state then had to be derived from the whole chain again: 102 s for a
world of 100,000 records.

The seal closes that gap. Every batch writes ``worlds.state_seal`` in the same transaction as
the rows it changes. It is an HMAC over:

- the world's id, and its chain's last record (seq and hash);
- its ``worlds.last_seq`` and the SHA-256 of its stored settings;
- the sum of its state rows' :func:`element`, and their count. A row is each ``records`` value
  and ``events`` reply, as stored, by key.

The sum is a keyed set hash (MSet-Add-Hash, Clarke et al. 2003). A row's element is a keyed
BLAKE2b of the row. Elements are added modulo 2^256. So a batch updates the sum with only the
rows it writes: a written row takes its old element out and puts its new one in.

Without the key nobody can compute an element. So no other set of rows can give the same sum
and count. The key is derived from the store's signing key (or audit key), which an editor of
the database file does not hold. Elements are taken over the stored bytes, not decompressed.
So a load reads each row once and hashes it (~1 us a row).

Loading a world recomputes the sum from its rows, and the MAC. If it matches, the rows are the
ones the bridge last committed, and nothing is derived. It may not match: rows edited, a seal
by another key or an older bridge, no seal yet. Then the guard does what it did before: the
clean-stop head, else the whole chain. That tells an edit from a harmless difference. So the
seal only ever saves work; it never decides alone that a world is refused.

Pure (no SQL, no clock): the store calls these with the rows' bytes.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from typing import Any

BITS = 256
_MASK = (1 << BITS) - 1
EVENT = "\0event"  # the kind an ``events`` row's element is made with (no record kind holds a NUL)


def world_hasher(key: bytes, world_id: str) -> Any:
    """The keyed BLAKE2b every element of ``world_id``'s rows starts from (:func:`element` copies it)."""
    return hashlib.blake2b(f"{len(world_id)}:{world_id}".encode(), key=key, digest_size=32)


def element(hasher: Any, kind: str, name: str, stored: bytes) -> int:
    """The element of one state row under its world's :func:`world_hasher`: an int below 2^256.

    For a ``records`` row, ``kind`` and its key (``name``). For an ``events`` row, :data:`EVENT`
    and its event id. ``stored`` is its value (reply) as the database holds it.
    """
    h = hasher.copy()
    h.update(f"{len(kind)}:{kind}{len(name)}:{name}".encode() + stored)  # (length-prefixed: unambiguous)
    return int.from_bytes(h.digest(), "little")


def add(total: int, item: int) -> int:
    """``total`` with ``item`` added (mod 2^256)."""
    return (total + item) & _MASK


def remove(total: int, item: int) -> int:
    """``total`` with ``item`` taken away (mod 2^256)."""
    return (total - item) & _MASK


def rows_sum(hasher: Any, rows: Iterable[tuple[str, str, bytes]]) -> tuple[int, int]:
    """The sum of the elements of a world's state ``rows`` under its :func:`world_hasher`, and their count.

    Each row is (kind or :data:`EVENT`, key or event id, stored bytes).
    """
    total = count = 0
    for kind, name, stored in rows:
        total += element(hasher, kind, name, stored)
        count += 1
    return total & _MASK, count


def seal_key(signing_key: object | None, audit_key: bytes | None) -> bytes | None:
    """The HMAC key of the seals, or None.

    It is derived from the Ed25519 ``signing_key`` (its raw private bytes) when there is one. Else
    from the HMAC ``audit_key``. Without either, no seal is written or checked; the guard then works
    without seals.
    """
    if signing_key is not None:
        from cryptography.hazmat.primitives import serialization

        secret = signing_key.private_bytes(serialization.Encoding.Raw,  # type: ignore[attr-defined]
                                           serialization.PrivateFormat.Raw, serialization.NoEncryption())
    elif audit_key is not None:
        secret = audit_key
    else:
        return None
    return hashlib.sha256(b"fate-bridge state seal v1\0" + secret).digest()


def seal(key: bytes, world_id: str, head: tuple[int, str], last_seq: int, settings: bytes,
         total: int, count: int) -> str:
    """The seal (hex HMAC-SHA-256) of a world.

    Its chain ends at ``head`` (seq, hash); ``(0, GENESIS_HASH)`` before its first record. It also
    covers ``last_seq``, the stored ``settings`` bytes (JSON) and its rows' :func:`rows_sum`
    ``(total, count)``.
    """
    message = b"%s\0%d\0%s\0%d\0%s\0%d\0" % (world_id.encode(), head[0], head[1].encode(), last_seq,
                                            hashlib.sha256(settings).hexdigest().encode(), count)
    return hmac.new(key, message + total.to_bytes(BITS // 8, "little"), hashlib.sha256).hexdigest()


def matches(stored: str | None, expected: str) -> bool:
    """Whether the stored seal (None: none written) is ``expected`` (compared in constant time)."""
    return stored is not None and hmac.compare_digest(stored, expected)
