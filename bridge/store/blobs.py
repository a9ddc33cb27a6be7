"""How the big per-decision blobs are stored: zstd frames, with the deciding ruleset's dictionary.

A decision's audit ``record`` and the ``records.value`` it writes are JSON, stored as zstd
frames. What compression learns from a ruleset's rows is that ruleset's. Each ruleset may ship
zstd dictionaries (:class:`~bridge.ruleset.Dictionary`), trained on its own example plays by
:mod:`bridge.store.dictionary`. A decision's blobs are compressed with its ruleset's current
dictionary of their kind; sohl's bring a 3 KB audit record to about 350 bytes. A ruleset that
ships none, or a decision of no ruleset, uses no dictionary. The store holds none of its own.

Only the storage changes. Chain hashes, signed heads, state digests, exports and receipts are
over the JSON (the canonical bytes), and :func:`unpack` gives it back exactly.

:func:`pack` is the one place a blob is encoded, where a row is built. :func:`unpack` is the one
place every read goes through. It tells the encodings apart by their first bytes. A zstd frame
starts with ``28 b5 2f fd``; JSON with ``{``, ``[`` or ``"``. So rows written before compression
(plain JSON) read as they always did. So does a value a hand edit turned into TEXT.

A dictionary is forever. Each frame names the dictionary it was made with (its id; 0: none).
:func:`dictionary` finds it among the installed rulesets' (:func:`catalog`). A ruleset's
retrain adds a new id; the last of its kind writes. It never replaces or removes one, or old
rows would stop reading.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

import zstandard

from .. import __version__
from ..errors import ConfigError
from ..registry import installed

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    from ..ruleset import Dictionary, Ruleset

MAGIC = b"\x28\xb5\x2f\xfd"  # every zstd frame starts with it; JSON never does
NO_DICTIONARY = 0  # the dictionary id of a frame made without one (zstd writes no id field)
LEVEL = 3  # zstd level: ~4 µs for a 3 KB record; level 9 saves ~15% for 6x the time
# The most a stored frame may decompress to. A frame's header says its size and zstandard
# allocates that much at once, so a hand-edited header claiming terabytes would exhaust memory
# (MemoryError in `audit verify`) instead of reading as an altered row. A record holds one wire
# frame (at most 64 KiB) and its reply: 16 MiB is far above any row a bridge writes.
MAX_BLOB_BYTES = 16 * 1024 * 1024


class UnknownDictionary(ConfigError):
    """A stored frame names a dictionary no installed ruleset ships.

    A newer bridge, or a ruleset not installed here, wrote it.
    """


@dataclass(frozen=True, slots=True)
class Catalog:
    """The installed rulesets' dictionaries.

    ``by_id`` maps what a frame names to the dictionary and the ruleset shipping it. ``current``
    maps (ruleset id, kind) to the id new frames are made with: the ruleset's last dictionary of
    that kind.
    """

    by_id: dict[int, tuple[str, Dictionary]]
    current: dict[tuple[str, str], int]


_last: tuple[tuple[Ruleset, ...], Catalog] | None = None  # the installed rulesets and their catalog


def catalog_of(rulesets: tuple[Ruleset, ...]) -> Catalog:
    """The :class:`Catalog` of ``rulesets``. Raises ``ValueError`` when two of them ship one id."""
    by_id: dict[int, tuple[str, Dictionary]] = {}
    current: dict[tuple[str, str], int] = {}
    for ruleset in rulesets:
        for shipped in ruleset.dictionaries:
            if shipped.id in by_id and by_id[shipped.id][0] != ruleset.id:
                raise ValueError(f"zstd dictionary {shipped.id} is shipped by the rulesets "
                                 f"{by_id[shipped.id][0]!r} and {ruleset.id!r}: each id names one dictionary")
            by_id[shipped.id] = (ruleset.id, shipped)
            current[ruleset.id, shipped.kind] = shipped.id
    return Catalog(by_id, current)


def catalog() -> Catalog:
    """The installed rulesets' :class:`Catalog`, built again only when they change.

    They are compared by identity: ~0.3 µs a call, twice or more per decision.
    """
    global _last
    rulesets, last = installed(), _last
    if last is None or last[0] != rulesets:
        last = _last = (rulesets, catalog_of(rulesets))
    return last[1]


def dictionary_file(shipped: Dictionary) -> Traversable:
    """Where ``shipped``'s bytes are: ``dictionaries/<id>.zdict`` in its package's data."""
    return resources.files(shipped.package) / "dictionaries" / f"{shipped.id}.zdict"


@cache
def _dictionary_data(shipped: Dictionary) -> zstandard.ZstdCompressionDict:
    loaded = zstandard.ZstdCompressionDict(dictionary_file(shipped).read_bytes(),
                                           dict_type=zstandard.DICT_TYPE_FULLDICT)
    loaded.precompute_compress(level=LEVEL)  # ~25% less time per frame than loading it each time
    return loaded


def dictionary(dict_id: int) -> zstandard.ZstdCompressionDict:
    """The installed rulesets' dictionary ``dict_id``, prepared for compressing at :data:`LEVEL`.
    Raises :class:`UnknownDictionary` for an id none of them ships."""
    found = catalog().by_id.get(dict_id)
    if found is None:
        shipped = ", ".join(f"{ruleset} {d}" for d, (ruleset, _) in sorted(catalog().by_id.items())) or "none"
        raise UnknownDictionary(
            f"a stored row is compressed with zstd dictionary {dict_id}, which no ruleset installed in"
            f" fate-bridge {__version__} ships (they ship: {shipped}): a newer fate-bridge or a ruleset not"
            " installed here wrote it; upgrade fate-bridge, or install that ruleset, to read this database")
    return _dictionary_data(found[1])


class _Coders(threading.local):
    """One compressor and decompressors per thread.

    zstandard's objects are not thread-safe. Blobs are packed on event loops and the writer
    thread, and read on several threads.
    """

    def __init__(self) -> None:
        self.compressors: dict[int, zstandard.ZstdCompressor] = {}  # by dictionary id, made on first use
        self.decompressors: dict[int, zstandard.ZstdDecompressor] = {}


_coders = _Coders()


def pack(data: bytes, kind: str, ruleset: str | None) -> bytes:
    """``data`` (JSON) as stored in a column of ``kind`` (``audit``, ``records``).

    ``ruleset`` is the deciding ruleset's id; None: of no ruleset. The result is a zstd frame made
    with that ruleset's current dictionary of the kind, naming its id; with none when it ships
    none. No checksum: the chain hash and state digest cover the JSON.
    """
    return _compressor(catalog().current.get((ruleset, kind), NO_DICTIONARY) if ruleset else NO_DICTIONARY
                       ).compress(data)


def pack_record(value: bytes, kind: str) -> bytes:
    """A record's ``value`` (JSON) as stored in ``records.value``.

    It is :func:`pack`ed with the records dictionary of the ruleset that namespaces its ``kind``.
    ``"sohl.graded"`` takes sohl's (see :mod:`bridge.state`). ``"dice.session"`` is no installed
    ruleset's, so it takes none.
    """
    return pack(value, "records", kind.partition(".")[0])


def _compressor(dict_id: int) -> zstandard.ZstdCompressor:
    """This thread's compressor writing frames as :func:`pack` does with dictionary ``dict_id``
    (:data:`NO_DICTIONARY`: none)."""
    compressor = _coders.compressors.get(dict_id)
    if compressor is None:
        compressor = _coders.compressors[dict_id] = zstandard.ZstdCompressor(
            level=LEVEL, dict_data=dictionary(dict_id) if dict_id != NO_DICTIONARY else None,
            write_checksum=False, write_content_size=True, write_dict_id=dict_id != NO_DICTIONARY)
    return compressor


_DICT_ID_BYTES = (0, 1, 2, 4)  # RFC 8878 3.1.1.1.1: Dictionary_ID_Flag -> field size


def frame_problem(value: bytes | bytearray | memoryview | str) -> str | None:
    """Why the stored ``value`` is not byte for byte a frame :func:`pack` writes; None when it is.

    Also None when it is no frame: JSON written before compression, whose bytes the chain hash
    covers.

    The chain seals the JSON a frame decodes to. A frame can change without changing that JSON:
    bytes appended after it, a bit the decoder ignores. So ``audit verify`` reads the frame's own
    fields (RFC 8878, 3.1.1) and names the row. It catches:

    - bytes after the frame, or a second frame;
    - a frame cut short;
    - any header field ``pack`` never writes: an unused or reserved bit, a checksum, or a
      dictionary id or content size field of another width. ``pack`` writes a 2-byte id, or no
      id for a frame made without a dictionary.

    It reads the fields rather than compress again. libzstd 1.5.5 and 1.5.7 compress some records
    to different blocks, and trails written with either must keep verifying. Ignored bits inside a
    compressed block are not caught; no re-encoding is stable across zstd versions.
    """
    data = value.encode() if isinstance(value, str) else bytes(value)
    if not data.startswith(MAGIC) or len(data) < 6:
        return None
    descriptor = data[4]
    fcs_flag, single, dict_flag = descriptor >> 6, descriptor >> 5 & 1, descriptor & 3
    if descriptor & 0b0001_1100 or dict_flag not in (0, 2):  # unused, reserved, checksum bits; a 2-byte id or none
        return f"its zstd frame header has flags fate-bridge never writes (descriptor {descriptor:#04x})"
    at = 5 + (not single) + _DICT_ID_BYTES[dict_flag]
    fcs_bytes = (1 if single else 0, 2, 4, 8)[fcs_flag]
    size = int.from_bytes(data[at:at + fcs_bytes], "little") + (256 if fcs_flag == 1 else 0)
    shortest = 0 if size < 256 and single else 1 if size < 65536 + 256 else 2 if size < 0xFFFFFFFF else 3
    if fcs_flag != shortest:
        return f"its zstd frame header writes the content size ({size} bytes) in another width than fate-bridge does"
    at += fcs_bytes
    last = 0
    while not last:
        if at + 3 > len(data):
            return "its zstd frame is cut short"
        header = int.from_bytes(data[at:at + 3], "little")
        last, kind, block_size = header & 1, header >> 1 & 3, header >> 3
        at += 3 + (1 if kind == 1 else block_size)  # an RLE block stores its one byte
    if at != len(data):
        return ("its zstd frame is cut short" if at > len(data) else
                f"{len(data) - at} byte{'s follow' if len(data) - at != 1 else ' follows'} its zstd frame")
    return None


def written_as(value: bytes | bytearray | memoryview | str) -> bytes | None:
    """The frame this bridge's zstd writes for the JSON the stored ``value`` decodes to.

    It uses :func:`pack`'s parameters, with the dictionary the stored frame names. ``b""`` for a
    frame that does not decode: this bridge writes no such frame. None when ``value`` is no frame:
    JSON written before compression. It is a hint for ``audit verify``, naming which record of a
    range sealed by a head was changed. A frame written by another libzstd version can differ too.
    """
    data = value.encode() if isinstance(value, str) else bytes(value)
    if not data.startswith(MAGIC):
        return None
    decoded = unpack(data)
    if decoded == data:  # unpack gives a frame that does not decode back as it is
        return b""
    return _compressor(zstandard.get_frame_parameters(data).dict_id).compress(decoded)


def unpack(value: bytes | bytearray | memoryview | str) -> bytes:
    """The JSON of a stored blob.

    A zstd frame is decompressed with the dictionary it names. Anything else is returned as it is:
    JSON written before compression, or TEXT after a hand edit. Some frames are also returned as
    stored: one that does not decompress (damaged or edited by hand), or whose header claims more
    than :data:`MAX_BLOB_BYTES`. Then ``audit verify`` reports the row as altered. Raises
    :class:`UnknownDictionary` for a frame of a dictionary no installed ruleset ships.
    """
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
        decompressor = decompressors[dict_id] = zstandard.ZstdDecompressor(
            dict_data=dictionary(dict_id) if dict_id != NO_DICTIONARY else None)
    try:
        return decompressor.decompress(data)
    except zstandard.ZstdError:
        return data
