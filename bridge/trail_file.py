"""An exported trail: one world's audit chain, its signed heads and checkpoints, and the public key.

They sit in one JSON file. ``fate-bridge audit verify FILE`` checks it with no database.

Format ``fate-bridge trail v1``::

    {"format": "fate-bridge trail v1", "world_id": str, "public_key": str | null,
     "records": [{"seq": int, "prev_hash": str, "hash": str, "record": {...}}, ...],
     "heads": [{"seq", "hash", "state_digest", "public_key", "sig", "stored_digest"}, ...],
     "checkpoints": [{"seq", "hash", "mac"}, ...]}

Each ``record`` is exported as the record's canonical bytes, verbatim. The chain hashes them;
``msgspec.Raw`` keeps them byte for byte. Read back, a record is read as a record, not as bytes
(:func:`bridge.record.canonical_json`). So a file re-indented or re-encoded by an editor or ``jq .``
verifies as the file exported, as on the /verify page. That covers keys reordered, ``\\u`` escapes
or UTF-8, and a byte order mark.

``public_key`` is the key the latest head is signed by. It is for convenience only. A verifier
should pin the key it trusts (``--public-key``). That is what makes the file worth checking on
another machine. The state rows are not exported. The file proves what was decided, not what the
database holds now.

A version 2 head (:mod:`bridge.heads`) is exported with its ``stored_digest``, so its signature
verifies. Absent or null means a version 1 head. The stored bytes it seals (the database's zstd
frames) are not in the file, so the file cannot prove them. ``audit verify`` on the database does.
"""

from __future__ import annotations

import codecs

import msgspec

from . import audit
from .errors import ConfigError
from .heads import Head
from .record import canonical_json

FORMAT = "fate-bridge trail v1"


class TrailRecord(msgspec.Struct, frozen=True):
    seq: int
    prev_hash: str
    hash: str
    record: msgspec.Raw


class TrailHead(msgspec.Struct, frozen=True):
    seq: int
    hash: str
    state_digest: str | None
    public_key: str
    sig: str
    stored_digest: str | None = None  # a version 2 head's; files of older bridges have none


class TrailCheckpoint(msgspec.Struct, frozen=True):
    seq: int
    hash: str
    mac: str


class TrailFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The exported file (see the module docstring)."""

    format: str
    world_id: str
    public_key: str | None
    records: list[TrailRecord]
    heads: list[TrailHead]
    checkpoints: list[TrailCheckpoint]


def encode(world_id: str, rows: list[tuple[int, bytes, str, str]], heads: list[Head],
           checkpoints: list[tuple[int, str, str]]) -> bytes:
    """The file's bytes for ``rows`` ``(seq, canonical record, prev_hash, hash)`` in seq order."""
    latest = max(heads, key=lambda h: h.seq, default=None)
    return msgspec.json.encode(TrailFile(
        format=FORMAT, world_id=world_id, public_key=latest.public_key if latest else None,
        records=[TrailRecord(seq, prev_hash, record_hash, msgspec.Raw(record))
                 for seq, record, prev_hash, record_hash in rows],
        heads=[TrailHead(h.seq, h.hash, h.state_digest, h.public_key, h.sig, h.stored_digest) for h in heads],
        checkpoints=[TrailCheckpoint(*c) for c in checkpoints]))


def _record_bytes(record: msgspec.Raw) -> bytes:
    """A record of the file as the chain hashed it (:func:`bridge.record.canonical_json`).

    A record that does not read as one is kept as it is. Verify names it (hash, unreadable)."""
    try:
        return canonical_json(record)
    except (msgspec.MsgspecError, ValueError):
        return bytes(record)


def decode(data: bytes, source: str) -> audit.Trail:
    """The trail in an exported file, for :func:`bridge.audit.verify_world`, with no state rows.

    Each record is read as a record (:func:`_record_bytes`). A leading UTF-8 byte order mark is
    skipped. Raises ``ConfigError`` naming ``source`` when it is not such a file."""
    try:
        file = msgspec.json.decode(data.removeprefix(codecs.BOM_UTF8), type=TrailFile)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ConfigError(f"{source} is not an exported trail ({exc}): make one with "
                          "`fate-bridge audit export --world WORLD_ID --out FILE`") from None
    if file.format != FORMAT:
        raise ConfigError(f"{source} is a {file.format!r} file; this bridge reads {FORMAT!r}")
    return audit.Trail(
        file.world_id,
        ((r.seq, _record_bytes(r.record), r.prev_hash, r.hash, None) for r in file.records),
        [(c.seq, c.hash, c.mac) for c in file.checkpoints],
        [Head(file.world_id, h.seq, h.hash, h.state_digest, h.public_key, h.sig, h.stored_digest)
         for h in file.heads])
