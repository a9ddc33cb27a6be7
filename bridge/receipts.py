"""Receipts (issue 15): a decision's record number and chain hash, signed with the bridge's
Ed25519 key, so a copy kept outside the bridge (the ChatMessage's flags in Foundry's database)
can later show that the trail still holds that record, unchanged.

The format is fixed in docs/protocol.md (Receipts): the signature covers
:func:`receipt_bytes`; ``key_id`` is the first 16 hex digits of SHA-256 of the raw 32-byte
public key; ``sig`` is base64url without padding. Pure (no files: the key file is
:func:`bridge.config.load_signing_key`); :func:`check_receipts` compares receipts with the
hashes a trail holds and is shared by the ``receipts_check`` query and ``audit verify --receipts``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Iterable, Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
import msgspec

from .errors import ConfigError
from .wire import Receipt, ReceiptResult

RECEIPT_DOMAIN = b"fate-bridge receipt v1\n"
_B64URL = re.compile(r"[A-Za-z0-9_-]+")


def receipt_bytes(world_id: str, seq: int, record_hash: str) -> bytes:
    """The bytes a receipt's signature covers:
    ``b"fate-bridge receipt v1\\n" + world_id + b"\\n" + str(seq) + b"\\n" + record_hash`` (UTF-8)."""
    return RECEIPT_DOMAIN + world_id.encode() + b"\n" + str(seq).encode() + b"\n" + record_hash.encode()


def public_key_bytes(public_key: Ed25519PublicKey) -> bytes:
    """The raw 32 bytes of an Ed25519 public key."""
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(public_key: Ed25519PublicKey) -> str:
    """The first 16 hex digits of SHA-256 of the raw 32-byte public key."""
    return hashlib.sha256(public_key_bytes(public_key)).hexdigest()[:16]


def b64url(data: bytes) -> str:
    """base64url without padding (how ``sig`` and the printed public key are written)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64url(text: str) -> bytes:
    """The bytes of unpadded base64url text; raises ``ValueError`` when it is not that."""
    if not _B64URL.fullmatch(text):
        raise ValueError("not base64url")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error as exc:
        raise ValueError(str(exc)) from None


def sign_receipt(private_key: Ed25519PrivateKey, world_id: str, seq: int, record_hash: str) -> Receipt:
    """The receipt of record ``seq`` (1-based, the world's audit sequence number) whose chain
    hash is ``record_hash`` (hex), signed with ``private_key``."""
    sig = private_key.sign(receipt_bytes(world_id, seq, record_hash))
    return Receipt(world_id=world_id, seq=seq, record_hash=record_hash,
                   key_id=key_id(private_key.public_key()), sig=b64url(sig))


def verify_receipt(public_key: Ed25519PublicKey, receipt: Receipt) -> bool:
    """True when ``receipt`` was signed by ``public_key`` as it reads now (its ``key_id`` must
    name that key too); False for any other receipt, malformed ones included. Never raises."""
    if receipt.key_id != key_id(public_key):
        return False
    try:
        public_key.verify(_unb64url(receipt.sig),
                          receipt_bytes(receipt.world_id, receipt.seq, receipt.record_hash))
    except (InvalidSignature, ValueError):
        return False
    return True


def check_receipts(public_key: Ed25519PublicKey, world_id: str, receipts: Iterable[Receipt],
                   stored: Mapping[int, str]) -> list[ReceiptResult]:
    """Answer each receipt against a world's trail, in order. ``stored`` maps each ``seq`` the
    world's audit table holds to that record's chain hash.

    The signature is checked first, so a forged receipt can never claim a record is missing:
    ``changed`` when the signature does not verify with ``public_key`` or the receipt names
    another world; then ``missing`` when no record has its ``seq``; ``changed`` when the record
    there has another hash; else ``ok``."""
    results = []
    for receipt in receipts:
        if receipt.world_id != world_id or not verify_receipt(public_key, receipt):
            status = "changed"
        elif receipt.seq not in stored:
            status = "missing"
        elif stored[receipt.seq] != receipt.record_hash:
            status = "changed"
        else:
            status = "ok"
        results.append(ReceiptResult(seq=receipt.seq, status=status, record_hash=receipt.record_hash))
    return results


class ReceiptsExport(msgspec.Struct, kw_only=True, frozen=True, forbid_unknown_fields=True):
    """The file the GM's audit window exports for ``fate-bridge audit verify --receipts``:
    ``{"world_id": ..., "receipts": [Receipt, ...]}`` (every receipt found in the chat log)."""

    world_id: str
    receipts: list[Receipt]


def decode_export(data: bytes, source: str) -> ReceiptsExport:
    """An exported receipts file's content. Raises ``ConfigError`` naming ``source`` (the file)
    and what is wrong."""
    try:
        return msgspec.json.decode(data, type=ReceiptsExport)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ConfigError(f"{source} is not a receipts export ({exc}): export it again from the GM's "
                          "audit window (\"Export receipts\")") from None
