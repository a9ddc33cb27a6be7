"""Receipts (issues 15 and 17, docs/protocol.md Receipts): the signed bytes; v2 batch receipts
against an independent RFC 6962 Merkle tree for every batch size 1..20, each changed field failing;
v1 receipts (old chat messages) still verifying; the wire bound (100 receipts in one frame); the
check against a trail's hashes."""

from __future__ import annotations

import base64
import hashlib
import os
import stat
from types import SimpleNamespace

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bridge import receipts, registry, wire
from bridge.config import load_signing_key
from bridge.errors import ConfigError
from bridge.store.base import Decided
from bridge.wire.guard import MAX_FRAME_BYTES

from .helpers import ROOT, sign_v1

HASH = hashlib.sha256(b"record 7").hexdigest()


@pytest.fixture
def key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(bytes(range(32)))


class CountingKey:
    """An Ed25519 key that records every message it signs (``signed``)."""

    def __init__(self, key: Ed25519PrivateKey) -> None:
        self.key, self.signed = key, []

    def sign(self, data: bytes) -> bytes:
        self.signed.append(data)
        return self.key.sign(data)

    def public_key(self):
        return self.key.public_key()

    def private_bytes(self, *args):  # as the real key's (the store derives its seal key from it)
        return self.key.private_bytes(*args)


# --- RFC 6962 section 2.1, written out as the RFC defines it (recursive), to check the bridge's ---

def rfc_leaf(world_id: str, seq: int, record_hash: str) -> bytes:
    return hashlib.sha256(b"\x00" + b"fate-bridge receipt v1\n" + f"{world_id}\n{seq}\n{record_hash}".encode()).digest()


def rfc_split(n: int) -> int:
    """The largest power of two smaller than n (n > 1)."""
    return 1 << ((n - 1).bit_length() - 1)


def rfc_mth(leaves: list[bytes]) -> bytes:
    if len(leaves) == 1:
        return leaves[0]
    k = rfc_split(len(leaves))
    return hashlib.sha256(b"\x01" + rfc_mth(leaves[:k]) + rfc_mth(leaves[k:])).digest()


def rfc_path(m: int, leaves: list[bytes]) -> list[bytes]:
    if len(leaves) == 1:
        return []
    k = rfc_split(len(leaves))
    if m < k:
        return rfc_path(m, leaves[:k]) + [rfc_mth(leaves[k:])]
    return rfc_path(m - k, leaves[k:]) + [rfc_mth(leaves[:k])]


def records(n: int) -> list[tuple[str, int, str]]:
    """n distinct records of three worlds: (world_id, seq, record_hash)."""
    return [(f"world-{i % 3}", 10 + i, hashlib.sha256(f"record {i}".encode()).hexdigest()) for i in range(n)]


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


# --- the signed bytes ---------------------------------------------------------------------------

def test_receipt_bytes_follow_the_fixed_format():
    assert receipts.receipt_bytes("world-1", 7, "ab") == b"fate-bridge receipt v1\nworld-1\n7\nab"


def test_batch_bytes_and_tree_hashes_follow_the_fixed_format():
    root = bytes(range(32))
    assert receipts.batch_bytes(root, 3) == b"fate-bridge receipt batch v2\n" + root.hex().encode() + b"\n3"
    assert receipts.leaf_hash("w", 7, "ab") == hashlib.sha256(b"\x00fate-bridge receipt v1\nw\n7\nab").digest()


def test_key_id_is_the_first_16_hex_digits_of_sha256_of_the_raw_key(key):
    raw = receipts.public_key_bytes(key.public_key())
    assert len(raw) == 32
    assert receipts.key_id(key.public_key()) == hashlib.sha256(raw).hexdigest()[:16]


# --- v2: one signature per batch ----------------------------------------------------------------

@pytest.mark.parametrize("n", range(1, 21))
def test_a_batch_is_rfc_6962_under_one_signature_and_every_receipt_verifies(key, n):
    counting = CountingKey(key)
    leaves = records(n)
    signed = receipts.sign_batch(counting, leaves)
    hashes = [rfc_leaf(*leaf) for leaf in leaves]
    root = rfc_mth(hashes)
    assert counting.signed == [b"fate-bridge receipt batch v2\n" + root.hex().encode() + f"\n{n}".encode()]
    for i, (receipt, leaf) in enumerate(zip(signed, leaves)):
        assert (receipt.world_id, receipt.seq, receipt.record_hash) == leaf
        assert (receipt.batch_size, receipt.batch_index) == (n, i)
        assert [unb64(h) for h in receipt.path] == rfc_path(i, hashes)
        assert all(len(h) == 43 and "=" not in h for h in receipt.path)
        assert receipt.key_id == receipts.key_id(key.public_key())
        key.public_key().verify(unb64(receipt.sig), counting.signed[0])  # raises if wrong
        assert receipts.verify_receipt(key.public_key(), receipt)
        # through the wire: what the module stores and sends back verifies the same
        assert receipts.verify_receipt(key.public_key(), msgspec.json.decode(wire.encode(receipt), type=wire.Receipt))


def changed(receipt: wire.Receipt, n: int) -> list[wire.Receipt]:
    """Every single edit of a v2 receipt of a batch of n: another index, size, path hash, path
    length, record, seq, world, signature or key id."""
    path = receipt.path
    flip = lambda h: receipts.b64url(bytes([unb64(h)[0] ^ 1]) + unb64(h)[1:])  # noqa: E731
    edits = [{"batch_index": j} for j in range(wire.MAX_RECEIPT_BATCH) if j != receipt.batch_index]
    edits += [{"batch_size": size} for size in (n - 1, n + 1) if size >= 1]
    edits += [{"path": path[:k] + [flip(path[k])] + path[k + 1:]} for k in range(len(path))]
    edits += [{"path": path + [path[0] if path else receipts.b64url(bytes(32))]}]
    edits += [{"path": path[:-1]}] if path else []
    edits += [{"record_hash": hashlib.sha256(b"other").hexdigest()}, {"seq": receipt.seq + 1},
              {"world_id": receipt.world_id + "x"}, {"sig": "A" * 86}, {"sig": "not base64!"}, {"key_id": "0" * 16},
              {"batch_size": None}, {"path": None}, {"batch_size": None, "batch_index": None, "path": None}]
    return [msgspec.structs.replace(receipt, **edit) for edit in edits]


@pytest.mark.parametrize("n", range(1, 21))
def test_any_changed_field_of_a_batch_receipt_fails(key, n):
    for receipt in receipts.sign_batch(key, records(n)):
        for edited in changed(receipt, n):
            assert not receipts.verify_receipt(key.public_key(), edited), edited


def test_the_documented_verification_refuses_an_index_past_the_batch():
    """docs/protocol.md's v2 steps, followed as written, must fail an index past the batch: the
    path loop alone accepts one (a batch of one has no path, so any index reaches the root)."""
    text = (ROOT / "docs" / "protocol.md").read_text()
    start = text.index("- Verify a v2 receipt")
    steps = " ".join(text[start:text.index("\n- ", start)].split())
    assert "fail unless `batch_index < n`" in steps
    assert steps.index("fail unless `batch_index < n`") < steps.index("for each `p` of `path`")


def test_a_batch_of_one_is_a_tree_of_one_leaf(key):
    (receipt,) = receipts.sign_batch(key, [("w", 7, HASH)])
    assert (receipt.batch_size, receipt.batch_index, receipt.path) == (1, 0, [])
    key.public_key().verify(unb64(receipt.sig), receipts.batch_bytes(receipts.leaf_hash("w", 7, HASH), 1))


def test_a_receipt_names_no_other_world_of_its_batch(key):
    signed = receipts.sign_batch(key, [("secret-world", 1, HASH), ("w", 2, HASH), ("secret-world", 3, HASH)])
    assert b"secret-world" not in wire.encode(signed[1])
    assert receipts.verify_receipt(key.public_key(), signed[1])


def test_a_batch_is_1_to_max_receipt_batch_records(key):
    for size in (0, wire.MAX_RECEIPT_BATCH + 1):
        with pytest.raises(ValueError, match=f"1 to {wire.MAX_RECEIPT_BATCH} records, not {size}"):
            receipts.sign_batch(key, records(size))
    assert len(receipts.sign_batch(key, records(wire.MAX_RECEIPT_BATCH))[-1].path) == wire.MAX_RECEIPT_PATH


def test_100_worst_case_receipts_fit_one_receipts_check_frame(key):
    """The largest receipt a bridge issues: a 128-character world id (the longest `world add`
    takes, ASCII), the largest seq, a full batch's longest path; 100 of them, with the longest
    query_id, are one frame the bridge accepts."""
    world = "w" * 128
    full = receipts.sign_batch(key, [(world, 2**53 - i, hashlib.sha256(bytes([i])).hexdigest())
                                     for i in range(wire.MAX_RECEIPT_BATCH)])
    worst = max(full, key=lambda r: len(wire.encode(r)))
    assert len(worst.path) == wire.MAX_RECEIPT_PATH
    query = wire.ReceiptsCheck(query_id="q" * 128, receipts=[worst] * wire.MAX_RECEIPTS_PER_CHECK)
    data = wire.encode(query)
    assert len(data) <= MAX_FRAME_BYTES, len(data)
    assert registry.decode_client(data) == query


# --- v1: the receipts old chat messages hold ----------------------------------------------------

def test_a_v1_receipt_still_verifies_and_encodes_as_before(key):
    receipt = sign_v1(key, "world-1", 7, HASH)
    assert receipts.verify_receipt(key.public_key(), receipt)
    assert receipts.signed_bytes(receipt) == receipts.receipt_bytes("world-1", 7, HASH)
    assert list(msgspec.json.decode(wire.encode(receipt))) == ["world_id", "seq", "record_hash", "key_id", "sig"]
    again = msgspec.json.decode(wire.encode(receipt), type=wire.Receipt)
    assert receipts.verify_receipt(key.public_key(), again)
    # read as a batch of one, a v1 signature does not verify: the two never stand for each other
    single = msgspec.structs.replace(receipt, batch_size=1, batch_index=0, path=[])
    assert not receipts.verify_receipt(key.public_key(), single)


@pytest.mark.parametrize("field, value", [
    ("world_id", "world-2"), ("seq", 8), ("record_hash", hashlib.sha256(b"other").hexdigest()),
    ("sig", "A" * 86), ("sig", "not base64!"), ("key_id", "0" * 16),
    ("batch_size", 1), ("path", []),  # a v1 signature is no batch of one
])
def test_a_changed_field_of_a_v1_receipt_fails(key, field, value):
    receipt = msgspec.structs.replace(sign_v1(key, "world-1", 7, HASH), **{field: value})
    assert not receipts.verify_receipt(key.public_key(), receipt)


@pytest.mark.parametrize("sign", [
    lambda key: sign_v1(key, "world-1", 7, HASH),
    lambda key: receipts.sign_batch(key, [("world-0", 1, HASH), ("world-1", 7, HASH)])[1],
], ids=["v1", "v2"])
def test_another_key_fails(key, sign):
    other = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
    receipt = sign(key)
    assert not receipts.verify_receipt(other.public_key(), receipt)
    # same key_id claimed, other key's signature: still refused
    forged = msgspec.structs.replace(sign(other), key_id=receipt.key_id)
    assert not receipts.verify_receipt(key.public_key(), forged)


# --- the store's call: one signature per committed batch ----------------------------------------

def test_with_receipts_signs_what_the_trail_holds_once_per_max_receipt_batch(key):
    counting = CountingKey(key)
    item = SimpleNamespace(world_id="w")
    audited = [(item, Decided(b"{}", replayed=n % 5 == 0, seq=n + 1, record_hash=f"{n:064x}"), None)
               for n in range(wire.MAX_RECEIPT_BATCH + 3)]
    failed = (item, None, RuntimeError("commit failed"))
    unaudited = (item, Decided(b"{}", replayed=False), None)
    outcomes = [audited[0], failed, *audited[1:5], unaudited, *audited[5:]]
    result = receipts.with_receipts(counting, outcomes)
    assert len(counting.signed) == 2  # 35 records: a tree of 32 and one of 3
    assert result[1] is failed and result[6] is unaudited
    signed = [decided for _, decided, _ in result if decided is not None and decided.receipt is not None]
    assert [d.seq for d in signed] == list(range(1, wire.MAX_RECEIPT_BATCH + 4))
    assert [d.receipt.batch_size for d in signed] == [wire.MAX_RECEIPT_BATCH] * wire.MAX_RECEIPT_BATCH + [3] * 3
    for decided in signed:
        assert (decided.receipt.world_id, decided.receipt.seq, decided.receipt.record_hash) == (
            "w", decided.seq, decided.record_hash)
        assert receipts.verify_receipt(key.public_key(), decided.receipt)
    assert receipts.with_receipts(counting, [failed, unaudited]) == [failed, unaudited]
    assert len(counting.signed) == 2  # nothing to sign: no signature


# --- the check ----------------------------------------------------------------------------------

def test_check_receipts_names_ok_missing_and_changed(key):
    hashes = {seq: hashlib.sha256(str(seq).encode()).hexdigest() for seq in range(1, 6)}
    good = [sign_v1(key, "w", 1, hashes[1]), *receipts.sign_batch(key, [("w", seq, hashes[seq]) for seq in (2, 3, 4, 5)])]
    stored = dict(hashes)
    del stored[2]  # deleted record
    stored[4] = hashlib.sha256(b"rewritten").hexdigest()  # rewritten record
    forged_missing = msgspec.structs.replace(receipts.sign_batch(key, [("w", 99, "x" * 64)])[0], sig="A" * 86)
    foreign = receipts.sign_batch(key, [("another-world", 1, hashes[1])])[0]
    results = receipts.check_receipts(key.public_key(), "w", [*good, forged_missing, foreign], stored)
    assert [(r.seq, r.status) for r in results] == [
        (1, "ok"), (2, "missing"), (3, "ok"), (4, "changed"), (5, "ok"), (99, "changed"), (1, "changed")]
    assert results[3].record_hash == hashes[4]


def test_signing_key_is_created_owner_only_and_read_back(tmp_path):
    path = tmp_path / "cfg" / "receipt.key"
    assert load_signing_key(path, create=False) is None
    made = load_signing_key(path, create=True)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    again = load_signing_key(path, create=False)
    assert receipts.public_key_bytes(again.public_key()) == receipts.public_key_bytes(made.public_key())


def test_an_unreadable_signing_key_is_a_config_error(tmp_path):
    path = tmp_path / "receipt.key"
    path.write_text("not a key\n")
    with pytest.raises(ConfigError, match="receipt signing key .* unreadable"):
        load_signing_key(path, create=True)


def test_the_module_bounds_receipts_as_the_wire_does():
    """foundry-module/scripts/logic/receipts.js keeps only receipts the bridge takes: its bounds
    are the wire's."""
    from .helpers import ROOT

    source = (ROOT / "foundry-module" / "scripts" / "logic" / "receipts.js").read_text()
    for name in ("MAX_RECEIPT_BATCH", "MAX_RECEIPT_PATH", "MAX_RECEIPTS_PER_CHECK"):
        assert f"export const {name} = {getattr(wire, name)};" in source, name
