"""How the big per-decision blobs are stored (issue 17): zstd frames with a shipped dictionary.

A decision's audit ``record`` and the ``records.value`` it writes are JSON; they are stored as
zstd frames compressed with a dictionary trained on the project's own example
sessions (:mod:`bridge.store.dictionary` builds it), which brings a 3 KB audit record to about
350 bytes. Only the storage changes: the chain hashes, signed heads, state digests, exports and
receipts are over the JSON (the canonical bytes), which :func:`unpack` gives back exactly.

:func:`pack` is the one place a blob is encoded (where a row is built); :func:`unpack` is the one
place every read goes through. It tells the two encodings apart by their first bytes: a zstd
frame starts with ``28 b5 2f fd``, JSON with ``{`` (or ``[``, ``"``), so rows written before
compression (plain JSON) read as they always did, and so does a value a hand edit turned into
TEXT.

A dictionary is forever: each frame names the dictionary it was made with (its id), and
:data:`DICTIONARIES` keeps every dictionary ever shipped, by id. A rebuild adds a new id (and
makes it :data:`CURRENT`); it never replaces or removes one, or old rows would stop reading.
"""

from __future__ import annotations

import threading
from functools import cache
from pathlib import Path

import zstandard

from .. import __version__
from ..errors import ConfigError

MAGIC = b"\x28\xb5\x2f\xfd"  # every zstd frame starts with it; JSON never does
FOLDER = Path(__file__).with_name("dictionaries")  # <id>.zdict, shipped as package data
# Every dictionary shipped: its id (what a frame names) -> the first bridge version writing with it.
# Append only (ids 32768-65535: two bytes in a frame's header; below 32768 zstd reserves them).
DICTIONARIES: dict[int, str] = {32769: "0.1.0", 32770: "0.1.0"}
# The dictionary new frames of each kind of blob are made with: ``audit`` records, ``records``
# values (a dictionary of its own: trained with the audit records, they came out ~35% larger).
CURRENT: dict[str, int] = {"audit": 32769, "records": 32770}
LEVEL = 3  # zstd level: ~4 µs for a 3 KB record; level 9 saves ~15% for 6x the time
# The most a stored frame may decompress to. A frame's header says its size and zstandard
# allocates that much at once, so a hand-edited header claiming terabytes would exhaust memory
# (MemoryError in `audit verify`) instead of reading as an altered row. A record holds one wire
# frame (at most 64 KiB) and its reply: 16 MiB is far above any row a bridge writes.
MAX_BLOB_BYTES = 16 * 1024 * 1024


class UnknownDictionary(ConfigError):
    """A stored frame names a dictionary this bridge does not ship: a newer bridge wrote it."""


@cache
def dictionary(dict_id: int) -> zstandard.ZstdCompressionDict:
    """The shipped dictionary ``dict_id`` (from :data:`FOLDER`), prepared for compressing at
    :data:`LEVEL`. Raises :class:`UnknownDictionary` for an id not in :data:`DICTIONARIES`."""
    if dict_id not in DICTIONARIES:
        raise UnknownDictionary(
            f"a stored row is compressed with zstd dictionary {dict_id}, which fate-bridge {__version__} "
            f"does not have (it has {', '.join(map(str, sorted(DICTIONARIES)))}): it was written by a newer "
            "fate-bridge; upgrade fate-bridge to read this database")
    loaded = zstandard.ZstdCompressionDict((FOLDER / f"{dict_id}.zdict").read_bytes(),
                                           dict_type=zstandard.DICT_TYPE_FULLDICT)
    loaded.precompute_compress(level=LEVEL)  # ~25% less time per frame than loading it each time
    return loaded


class _Coders(threading.local):
    """One compressor and decompressors per thread (zstandard's objects are not thread-safe;
    blobs are packed on event loops and the writer thread, read on several threads)."""

    def __init__(self) -> None:
        self.compressors: dict[str, zstandard.ZstdCompressor] = {}  # made on a thread's first pack
        self.decompressors: dict[int, zstandard.ZstdDecompressor] = {}


_coders = _Coders()


def pack(data: bytes, kind: str) -> bytes:
    """``data`` (JSON) as stored in a column of ``kind`` (a key of :data:`CURRENT`: ``audit``,
    ``records``): a zstd frame made with that kind's current dictionary, naming its id (no
    checksum: the chain hash and state digest cover the JSON)."""
    compressor = _coders.compressors.get(kind)
    if compressor is None:
        compressor = _coders.compressors[kind] = zstandard.ZstdCompressor(
            level=LEVEL, dict_data=dictionary(CURRENT[kind]), write_checksum=False, write_content_size=True,
            write_dict_id=True)
    return compressor.compress(data)


def unpack(value: bytes | bytearray | memoryview | str) -> bytes:
    """The JSON of a stored blob: a zstd frame decompressed with the dictionary it names, anything
    else (JSON written before compression, or TEXT after a hand edit) as it is. A frame that does
    not decompress (damaged or edited by hand), or whose header claims more than
    :data:`MAX_BLOB_BYTES`, is returned as stored, so ``audit verify`` reports the row as altered.
    Raises :class:`UnknownDictionary` for a frame of a dictionary this bridge
    does not have."""
    data = value.encode() if isinstance(value, str) else bytes(value)
    if not data.startswith(MAGIC):
        return data
    try:
        frame = zstandard.get_frame_parameters(data)
    except zstandard.ZstdError:
        return data
    if frame.content_size > MAX_BLOB_BYTES:  # a header edited to claim a huge size (or none: unknown)
        return data
    dict_id = frame.dict_id
    decompressors = _coders.decompressors
    decompressor = decompressors.get(dict_id)
    if decompressor is None:
        decompressor = decompressors[dict_id] = zstandard.ZstdDecompressor(dict_data=dictionary(dict_id))
    try:
        return decompressor.decompress(data)
    except zstandard.ZstdError:
        return data
