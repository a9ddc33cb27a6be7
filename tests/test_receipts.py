"""Receipts (issue 15, docs/protocol.md Receipts): the signed bytes, sign/verify round trip, a
changed field or another key fails, and the check against a trail's hashes."""

from __future__ import annotations

import base64
import hashlib
import os
import stat

import msgspec
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bridge import receipts, wire
from bridge.config import load_signing_key
from bridge.errors import ConfigError

HASH = hashlib.sha256(b"record 7").hexdigest()


@pytest.fixture
def key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(bytes(range(32)))


def test_receipt_bytes_follow_the_fixed_format():
    assert receipts.receipt_bytes("world-1", 7, "ab") == b"fate-bridge receipt v1\nworld-1\n7\nab"


def test_key_id_is_the_first_16_hex_digits_of_sha256_of_the_raw_key(key):
    raw = receipts.public_key_bytes(key.public_key())
    assert len(raw) == 32
    assert receipts.key_id(key.public_key()) == hashlib.sha256(raw).hexdigest()[:16]


def test_sign_then_verify_round_trips(key):
    receipt = receipts.sign_receipt(key, "world-1", 7, HASH)
    assert (receipt.world_id, receipt.seq, receipt.record_hash) == ("world-1", 7, HASH)
    assert receipt.key_id == receipts.key_id(key.public_key())
    sig = base64.urlsafe_b64decode(receipt.sig + "=" * (-len(receipt.sig) % 4))
    assert "=" not in receipt.sig and len(sig) == 64
    key.public_key().verify(sig, receipts.receipt_bytes("world-1", 7, HASH))  # raises if wrong
    assert receipts.verify_receipt(key.public_key(), receipt)
    # through the wire: what the module stores and sends back verifies the same
    again = msgspec.json.decode(wire.encode(receipt), type=wire.Receipt)
    assert receipts.verify_receipt(key.public_key(), again)


@pytest.mark.parametrize("field, value", [
    ("world_id", "world-2"), ("seq", 8), ("record_hash", hashlib.sha256(b"other").hexdigest()),
    ("sig", "A" * 86), ("sig", "not base64!"), ("key_id", "0" * 16),
])
def test_a_changed_field_fails(key, field, value):
    receipt = msgspec.structs.replace(receipts.sign_receipt(key, "world-1", 7, HASH), **{field: value})
    assert not receipts.verify_receipt(key.public_key(), receipt)


def test_another_key_fails(key):
    other = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
    receipt = receipts.sign_receipt(key, "world-1", 7, HASH)
    assert not receipts.verify_receipt(other.public_key(), receipt)
    # same key_id claimed, other key's signature: still refused
    forged = msgspec.structs.replace(receipts.sign_receipt(other, "world-1", 7, HASH), key_id=receipt.key_id)
    assert not receipts.verify_receipt(key.public_key(), forged)


def test_check_receipts_names_ok_missing_and_changed(key):
    hashes = {seq: hashlib.sha256(str(seq).encode()).hexdigest() for seq in range(1, 6)}
    good = [receipts.sign_receipt(key, "w", seq, h) for seq, h in hashes.items()]
    stored = dict(hashes)
    del stored[2]  # deleted record
    stored[4] = hashlib.sha256(b"rewritten").hexdigest()  # rewritten record
    forged_missing = msgspec.structs.replace(receipts.sign_receipt(key, "w", 99, "x" * 64), sig="A" * 86)
    foreign = receipts.sign_receipt(key, "another-world", 1, hashes[1])
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
