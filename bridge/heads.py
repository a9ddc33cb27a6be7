"""Signed heads, and key changes written into the chain itself.

A head is a world's chain head ``(seq, hash)`` and the digest of the world's state after that
record. It is signed with the bridge's Ed25519 key, the receipt key (:mod:`bridge.receipts`). So
anyone holding the public key can check a trail.

Pure: no files, no clock. The store writes a head every ``audit.CHECKPOINT_EVERY`` records. It
writes one at each clean stop, after ``audit new-key`` and after ``audit repair``. ``audit verify``
checks them.

Signed bytes: ``b"fate-bridge head v1\\n" + world_id + "\\n" + seq + "\\n" + hash + "\\n" +
state_digest``. ``state_digest`` is ``""`` when the head does not carry one. Periodic heads are
written inside a decision's batch, where computing it would cost a scan of the world's state.

Version 2 also seals the stored bytes of the records it covers, byte for byte: ``b"fate-bridge head
v2\\n" + world_id + "\\n" + seq + "\\n" + hash + "\\n" + state_digest + "\\n" + stored_digest``.
``stored_digest`` (:func:`stored_digest`) is a SHA-256 (hex). It hashes the concatenated SHA-256
digests (32 bytes each) of the stored ``audit.record`` bytes. Those are exactly as in the database
row: the zstd frame. The records are :func:`stored_range` ``(seq)``, in seq order. The range runs
from the record after the last multiple of ``CHECKPOINT_EVERY`` below ``seq`` up to ``seq`` itself.

The range depends on ``seq`` alone, not on which other heads exist. A head at record 32 covers
17..32. A clean stop's head at 37 covers 33..37, and the next periodic one at 48 covers 33..48
again. So every record of a trail signed every ``CHECKPOINT_EVERY`` records is covered by a head. A
head with ``stored_digest`` None is a version 1 head, written by older bridges. It is checked as
before.

A key change is an audit record of type ``key_change`` (:data:`KEY_CHANGE`). Its message is
:class:`KeyChange`: the old public key (None when it was lost) and the new one. Heads before it are
signed by the old key, heads from it on by the new one. The hash chain ties the two periods
together. So trusting the current key is enough to check every head of the trail.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

import msgspec
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .receipts import b64url, key_id, public_key_bytes

HEAD_DOMAIN = b"fate-bridge head v1\n"
HEAD_DOMAIN_V2 = b"fate-bridge head v2\n"  # heads sealing the stored bytes too
KEY_CHANGE = "key_change"  # the audit record type of a key change


def head_bytes(world_id: str, seq: int, record_hash: str, state_digest: str | None,
               stored: str | None = None) -> bytes:
    """The bytes a head's signature covers (UTF-8; see the module docstring).

    Version 2 when ``stored`` (the head's stored digest) is given, version 1 otherwise."""
    common = (world_id.encode() + b"\n" + str(seq).encode() + b"\n" + record_hash.encode() + b"\n"
              + (state_digest or "").encode())
    if stored is None:
        return HEAD_DOMAIN + common
    return HEAD_DOMAIN_V2 + common + b"\n" + stored.encode()


def stored_range(seq: int, every: int) -> range:
    """The records whose stored bytes a version 2 head at record ``seq`` seals.

    They run from the record after the last multiple of ``every`` (``audit.CHECKPOINT_EVERY``) below
    ``seq`` to ``seq``. With 16: 17..32 for 32, 33..37 for 37."""
    return range((seq - 1) // every * every + 1, seq + 1)


def stored_hash(stored: bytes) -> bytes:
    """One record's part of a stored digest: the SHA-256 (32 bytes) of its stored bytes.

    The bytes are as in the database row: its zstd frame, or the JSON of a row written before
    compression."""
    return hashlib.sha256(stored).digest()


def stored_digest(hashes: Iterable[bytes]) -> str:
    """The stored digest a version 2 head signs (hex).

    It is the SHA-256 of the :func:`stored_hash` of each record of its :func:`stored_range`,
    concatenated in seq order."""
    return hashlib.sha256(b"".join(hashes)).hexdigest()


def public_key_text(public_key: Ed25519PublicKey) -> str:
    """The public key as ``audit public-key`` prints it: base64url (no padding) of its raw 32 bytes."""
    return b64url(public_key_bytes(public_key))


def parse_public_key(text: str) -> Ed25519PublicKey:
    """The Ed25519 public key written as :func:`public_key_text` does. Raises ``ValueError``
    naming what is wrong."""
    try:
        raw = base64.urlsafe_b64decode(text.strip() + "=" * (-len(text.strip()) % 4))
    except (binascii.Error, ValueError):
        raise ValueError(f"{text!r} is not base64url") from None
    if len(raw) != 32:
        raise ValueError(f"an Ed25519 public key is 32 bytes, this one is {len(raw)}")
    return Ed25519PublicKey.from_public_bytes(raw)


@dataclass(frozen=True, slots=True)
class Head:
    """One signed head as stored.

    ``public_key`` is in :func:`public_key_text` form. ``sig`` is base64url of the Ed25519 signature
    over :func:`head_bytes`. ``stored_digest`` is the :func:`stored_digest` of its
    :func:`stored_range` for a version 2 head, None for a version 1 head."""

    world_id: str
    seq: int
    hash: str
    state_digest: str | None
    public_key: str
    sig: str
    stored_digest: str | None = None

    @property
    def key_id(self) -> str:
        """The key id of the key that signed it (as ``audit public-key`` prints it)."""
        try:
            return key_id(parse_public_key(self.public_key))
        except ValueError:
            return "?"

    def signed(self) -> bool:
        """True when ``sig`` is ``public_key``'s signature over this head. Never raises."""
        try:
            key = parse_public_key(self.public_key)
            sig = base64.urlsafe_b64decode(self.sig + "=" * (-len(self.sig) % 4))
            key.verify(sig, head_bytes(self.world_id, self.seq, self.hash, self.state_digest, self.stored_digest))
        except (InvalidSignature, ValueError, binascii.Error):
            return False
        return True


def sign_head(private_key: Ed25519PrivateKey, world_id: str, seq: int, record_hash: str,
              state_digest: str | None, stored: str | None = None) -> Head:
    """The head of ``world_id`` at record ``seq`` (chain hash ``record_hash``), signed.

    A version 2 head when ``stored`` (its :func:`stored_digest`) is given."""
    sig = private_key.sign(head_bytes(world_id, seq, record_hash, state_digest, stored))
    return Head(world_id, seq, record_hash, state_digest, public_key_text(private_key.public_key()),
                b64url(sig), stored)


class KeyChange(msgspec.Struct, kw_only=True, frozen=True):
    """The message of a ``key_change`` audit record.

    ``old_public_key`` is None when the old key was lost. Both keys are in :func:`public_key_text`
    form."""

    type: str = KEY_CHANGE
    old_public_key: str | None
    new_public_key: str
