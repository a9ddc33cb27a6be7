"""Receipts: a decision's record number and chain hash, signed with the bridge's Ed25519 key.

A copy is kept outside the bridge, in the ChatMessage's flags in Foundry's database. It can later
show that the trail still holds that record, unchanged.

The format is fixed in docs/protocol.md (Receipts). A v1 receipt's signature covers
:func:`receipt_bytes` alone. A v2 receipt has one signature per committed batch. It is a leaf of a
Merkle tree over its batch, shaped and hashed as RFC 6962 section 2.1 (Certificate Transparency).
The signature covers :func:`batch_bytes`: the tree's root and size. The receipt carries its
``batch_index``, ``batch_size`` and audit ``path``. The path holds sibling hashes only, so it names
no other world. ``key_id`` is the first 16 hex digits of SHA-256 of the raw 32-byte public key.
``sig`` and the path's hashes are base64url without padding.

Pure: no files. The key file is :func:`bridge.config.load_signing_key`. The store calls
:func:`with_receipts` once per committed batch. :func:`check_receipts` compares receipts with the
hashes a trail holds. The ``receipts_check`` query and ``audit verify --receipts`` share it.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol, Self, TypeVar

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
import msgspec

from .errors import ConfigError
from .wire import MAX_RECEIPT_BATCH, Receipt, ReceiptResult, ReceiptStatus


BATCH_DOMAIN = b"fate-bridge receipt batch v2\n"
_LEAF, _NODE = b"\x00", b"\x01"  # RFC 6962's domain separation of leaf and node hashes
_B64URL = re.compile(r"[A-Za-z0-9_-]+")


def receipt_bytes(world_id: str, seq: int, record_hash: str) -> bytes:
    """The bytes a v1 receipt's signature covers, and a v2 receipt's leaf hashes (UTF-8).

    ``b"fate-bridge receipt v1\\n" + world_id + b"\\n" + str(seq) + b"\\n" + record_hash``."""
    return f"fate-bridge receipt v1\n{world_id}\n{seq}\n{record_hash}".encode()


def leaf_hash(world_id: str, seq: int, record_hash: str) -> bytes:
    """A v2 receipt's leaf: SHA-256(0x00 || :func:`receipt_bytes`), 32 bytes."""
    return hashlib.sha256(_LEAF + receipt_bytes(world_id, seq, record_hash)).digest()


def _node_hash(left: bytes, right: bytes) -> bytes:
    """An inner node of the batch tree: SHA-256(0x01 || left || right)."""
    return hashlib.sha256(_NODE + left + right).digest()


def batch_bytes(root: bytes, size: int) -> bytes:
    """The bytes a v2 receipt's signature covers, for a batch tree of ``size`` leaves (ASCII).

    ``root`` is its root hash (32 bytes). The bytes are ``b"fate-bridge receipt batch v2\\n" +
    hex(root) + b"\\n" + str(size)``."""
    return BATCH_DOMAIN + root.hex().encode() + b"\n" + str(size).encode()


def public_key_bytes(public_key: Ed25519PublicKey) -> bytes:
    """The raw 32 bytes of an Ed25519 public key."""
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(public_key: Ed25519PublicKey) -> str:
    """The first 16 hex digits of SHA-256 of the raw 32-byte public key."""
    return hashlib.sha256(public_key_bytes(public_key)).hexdigest()[:16]


@functools.lru_cache(maxsize=4)
def _signer_key_id(private_key: Ed25519PrivateKey) -> str:
    """:func:`key_id` of the key ``private_key`` signs for, computed once per key.

    The store signs with one key until ``audit new-key``. Key objects hash by identity."""
    return key_id(private_key.public_key())


def b64url(data: bytes) -> str:
    """base64url without padding: how ``sig``, the path's hashes and the printed public key are written."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64url(text: str) -> bytes:
    """The bytes of unpadded base64url text; raises ``ValueError`` when it is not that."""
    if not _B64URL.fullmatch(text):
        raise ValueError("not base64url")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error as exc:
        raise ValueError(str(exc)) from None


def _levels(leaves: list[bytes]) -> list[list[bytes]]:
    """RFC 6962's Merkle tree over ``leaves``, level by level from the leaves to the root.

    ``leaves`` are leaf hashes, at least one. The last level is the root, one hash. Adjacent pairs
    are hashed. A last node without a partner moves up unchanged. That gives the tree of section 2.1
    for any size: its left subtree holds the largest power of two of the leaves."""
    levels = [leaves]
    while len(levels[-1]) > 1:
        level = levels[-1]
        up = [_node_hash(level[j], level[j + 1]) for j in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            up.append(level[-1])
        levels.append(up)
    return levels


def _path(levels: list[list[str]], index: int) -> list[str]:
    """Leaf ``index``'s audit path in ``levels``, a tree's levels below the root.

    It holds its sibling at each level, from the leaf up. There is none where its node moved up
    without a partner."""
    path = []
    for level in levels:
        sibling = index ^ 1
        if sibling < len(level):
            path.append(level[sibling])
        index >>= 1
    return path


def root_from_path(leaf: bytes, index: int, size: int, path: Sequence[bytes]) -> bytes:
    """The root hash a leaf's audit path leads to, as RFC 9162 section 2.1.3.2 verifies an inclusion proof.

    ``leaf`` is the leaf hash at ``index`` (0-based) of a tree of ``size`` leaves. ``path`` is its
    sibling hashes from the leaf up. Raises ``ValueError`` when the index, size and path length do
    not fit together, or a hash is not 32 bytes."""
    if not 0 <= index < size:
        raise ValueError(f"batch index {index} is outside a batch of {size}")
    fn, sn, node = index, size - 1, leaf
    for sibling in path:
        if sn == 0 or len(sibling) != 32:
            raise ValueError("the audit path does not fit the batch")
        if fn & 1 or fn == sn:
            node = _node_hash(sibling, node)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            node = _node_hash(node, sibling)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise ValueError("the audit path is too short for the batch")
    return node


def sign_batch(private_key: Ed25519PrivateKey, leaves: Sequence[tuple[str, int, str]]) -> list[Receipt]:
    """The v2 receipts of one batch, in order, under ONE Ed25519 signature.

    ``leaves`` holds each record's ``(world_id, seq, record_hash)``. seq is 1-based, the world's
    audit sequence number; record_hash is hex. Repeats are allowed. A batch of one is a tree of one
    leaf, with an empty path. Raises ``ValueError`` for no leaves, or more than
    ``MAX_RECEIPT_BATCH``."""
    if not 1 <= len(leaves) <= MAX_RECEIPT_BATCH:
        raise ValueError(f"a receipt batch holds 1 to {MAX_RECEIPT_BATCH} records, not {len(leaves)}")
    size = len(leaves)
    levels = _levels([leaf_hash(*leaf) for leaf in leaves])
    sig, kid = b64url(private_key.sign(batch_bytes(levels[-1][0], size))), _signer_key_id(private_key)
    encoded = [[b64url(node) for node in level] for level in levels[:-1]]
    return [Receipt(world_id=world_id, seq=seq, record_hash=record_hash, key_id=kid, sig=sig,
                    batch_size=size, batch_index=index, path=_path(encoded, index))
            for index, (world_id, seq, record_hash) in enumerate(leaves)]


class _InWorld(Protocol):
    """What :func:`with_receipts` reads of a queued item: the world its decision is in."""

    world_id: str


class _Stored(Protocol):
    """What :func:`with_receipts` reads of a decided request (``bridge.store.base.Decided``).

    That is where the trail holds it, and a copy with its receipt."""

    @property
    def seq(self) -> int | None: ...

    @property
    def record_hash(self) -> str | None: ...

    def with_receipt(self, receipt: Receipt) -> Self: ...


Q = TypeVar("Q", bound=_InWorld)
D = TypeVar("D", bound=_Stored)
E = TypeVar("E")


def with_receipts(private_key: Ed25519PrivateKey,
                  outcomes: Sequence[tuple[Q, D | None, E]]) -> list[tuple[Q, D | None, E]]:
    """A committed batch's outcomes, in order, with a receipt on every ``Decided`` the trail holds.

    The outcomes are ``(queued item with its world_id, Decided or None, error)``, as the store's
    writer settles them. A ``Decided`` the trail holds has ``seq`` and ``record_hash`` set: new
    decisions and replays alike. They are signed by :func:`sign_batch`, with ONE signature for each
    ``MAX_RECEIPT_BATCH`` of them. The rest are left as they are. The store calls it after each
    batch's COMMIT (``SQLiteStore._flush_sync``), before the replies go out."""
    audited = [(n, decided, (item.world_id, decided.seq, decided.record_hash))
               for n, (item, decided, _) in enumerate(outcomes)
               if decided is not None and decided.seq is not None and decided.record_hash is not None]
    result = list(outcomes)
    for start in range(0, len(audited), MAX_RECEIPT_BATCH):
        chunk = audited[start:start + MAX_RECEIPT_BATCH]
        for (n, decided, _), receipt in zip(chunk, sign_batch(private_key, [leaf for _, _, leaf in chunk])):
            item, _, error = outcomes[n]
            result[n] = (item, decided.with_receipt(receipt), error)
    return result


def signed_bytes(receipt: Receipt) -> bytes:
    """The bytes ``receipt``'s signature must cover, as it reads now.

    :func:`receipt_bytes` for a v1 receipt, which has no batch fields. For a v2 one,
    :func:`batch_bytes` of the root its path leads to. Raises ``ValueError`` for a malformed
    receipt: only some batch fields, a path that does not fit its index and size, or a hash that is
    not base64url of 32 bytes."""
    batch = (receipt.batch_size, receipt.batch_index, receipt.path)
    if batch == (None, None, None):
        return receipt_bytes(receipt.world_id, receipt.seq, receipt.record_hash)
    if receipt.batch_size is None or receipt.batch_index is None or receipt.path is None:
        raise ValueError("a receipt has batch_size, batch_index and path together or none of them")
    root = root_from_path(leaf_hash(receipt.world_id, receipt.seq, receipt.record_hash), receipt.batch_index,
                          receipt.batch_size, [_unb64url(h) for h in receipt.path])
    return batch_bytes(root, receipt.batch_size)


def _verify(public_key: Ed25519PublicKey, public_id: str, receipt: Receipt) -> bool:
    """:func:`verify_receipt` with ``public_id`` = ``key_id(public_key)`` already computed."""
    if receipt.key_id != public_id:
        return False
    try:
        public_key.verify(_unb64url(receipt.sig), signed_bytes(receipt))
    except (InvalidSignature, ValueError):
        return False
    return True


def verify_receipt(public_key: Ed25519PublicKey, receipt: Receipt) -> bool:
    """True when ``receipt`` (v1 or v2) was signed by ``public_key`` as it reads now.

    Its ``key_id`` must name that key too. False for any other receipt, malformed ones included.
    Never raises."""
    return _verify(public_key, key_id(public_key), receipt)


def check_receipts(public_key: Ed25519PublicKey, world_id: str, receipts: Iterable[Receipt],
                   stored: Mapping[int, str]) -> list[ReceiptResult]:
    """Answer each receipt against a world's trail, in order.

    ``stored`` maps each ``seq`` the world's audit table holds to that record's chain hash. The
    signature is checked first, so a forged receipt can never claim a record is missing. The
    answers, in order:

    - ``changed`` when the signature does not verify with ``public_key``, or the receipt names
      another world.
    - ``missing`` when no record has its ``seq``.
    - ``changed`` when the record there has another hash.
    - else ``ok``."""
    results, public_id = [], key_id(public_key)
    for receipt in receipts:
        status: ReceiptStatus
        if receipt.world_id != world_id or not _verify(public_key, public_id, receipt):
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
    """The file the GM's audit window exports for ``fate-bridge audit verify --receipts``.

    ``{"world_id": ..., "receipts": [Receipt, ...]}``: every receipt found in the chat log."""

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
