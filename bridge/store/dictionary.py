"""Build a new zstd dictionary for one kind of stored blob (:mod:`bridge.store.blobs`) from the
project's own example sessions: ``python -m bridge.store.dictionary KIND`` (from a checkout;
``--help``).

The samples are real rows: every example session of ``examples/`` (all four rulesets) is played
through a trusted :class:`~bridge.session.Session` and the SQLite store into a temporary database,
in English and in German, several times with seeded dice (the first play with the example's own) (so outcomes, cards and dice differ),
and the blobs of the kind asked for are read back as JSON (``audit``: the audit records;
``records``: the records' values). The
bench's data is never used: the bench measures the dictionary, it must not teach it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import sys
import tempfile
from pathlib import Path

import zstandard

from . import blobs

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
LANGUAGES = (None, "de")
# Each kind's dictionary size: audit 16 KB came out ~5% larger, 64 KB no smaller; records from
# 8 to 24 KB alike.
DICT_BYTES = {"audit": 32 * 1024, "records": 16 * 1024}
COLUMNS = {"audit": "SELECT record FROM audit", "records": "SELECT value FROM records"}
# Seeded plays of each example per language. SoHL's, the bridge's first ruleset and the shortest
# example, is played six times as often: trained on equal plays, its rows came out ~20% larger.
PLAYS = {"sohl": 72}
PLAYS_DEFAULT = 12

HELP = f"""\
Train a new zstd dictionary for one kind of the database's compressed rows (audit:
the audit records; records: the records' values) and write it as
bridge/store/dictionaries/<id>.zdict, with the next free id.

When: only when the rows a decision stores change shape so much that they compress
clearly worse (a new ruleset, a new record layout); `python -m bench` prints the
bytes per decision by table. Never to replace a shipped dictionary: frames in
databases name their dictionary by id and must read forever, so a rebuild ADDS one.

How: run it from a checkout (it plays examples/*.jsonl), then in
bridge/store/blobs.py add the new id to DICTIONARIES (with the bridge version that
first writes it) and make it the kind's CURRENT, pin its SHA-256 in tests/test_blobs.py next
to the old ones (keep theirs), and commit the .zdict file.
"""


class _SeededDice:
    """Dice from a seeded generator (reproducible sample sets)."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def roll(self, faces: int) -> int:
        return self._rng.randint(1, faces)


async def _play(db: Path) -> None:
    """Every example, in each language, ``PLAYS`` times (a world each), into the database ``db``."""
    from .. import logs
    from ..dice import ScriptedDice
    from ..session import Session
    from .sqlite import SQLiteStore

    logs.configure(level="error")  # a line per decision is noise here
    store = await SQLiteStore.open(db)
    try:
        for example in sorted(EXAMPLES.glob("*-session.jsonl")):
            lines = [json.loads(line) for line in example.read_text().splitlines() if line.strip()]
            for language in LANGUAGES:
                for play in range(PLAYS.get(example.stem.removesuffix("-session"), PLAYS_DEFAULT)):
                    rng = random.Random(f"{example.name}/{language}/{play}")
                    world = f"{example.stem}-{language or 'en'}-{play}"
                    await store.add_world(world, None)
                    session = Session(store, _SeededDice(rng), trusted=True, default_world=world,
                                      new_seed=rng.randbytes)
                    client = {"module_version": "0.1.0", "foundry_version": "13.351", "system_id": "sohl",
                              "system_version": "0.9.0"}
                    if language:
                        client["language"] = language
                    await session.receive(json.dumps({"type": "hello", "v": 1, "world_id": world,
                                                      "client": client}).encode())
                    for message in lines:
                        scripted = message.get("dice")
                        frame = json.dumps({k: v for k, v in message.items() if k != "dice"}).encode()
                        await session.receive(frame, None if scripted is None or play else ScriptedDice(scripted))
    finally:
        await store.close()


def samples(kind: str) -> list[bytes]:
    """The JSON of every blob of ``kind`` (a key of :data:`COLUMNS`) the example plays store."""
    if not EXAMPLES.is_dir():
        raise SystemExit(f"no {EXAMPLES}: run this from a fate-bridge checkout")
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "samples.sqlite3"
        asyncio.run(_play(db))
        conn = sqlite3.connect(db)
        try:
            rows = conn.execute(COLUMNS[kind]).fetchall()
        finally:
            conn.close()
    return [blobs.unpack(value) for (value,) in rows]


def build(kind: str, dict_id: int) -> bytes:
    """A dictionary for ``kind`` of ``DICT_BYTES[kind]`` bytes with id ``dict_id``, trained on
    :func:`samples` (COVER, its segment sizes picked by trying 16 on held-out samples)."""
    trained = zstandard.train_dictionary(DICT_BYTES[kind], samples(kind), dict_id=dict_id,
                                         level=blobs.LEVEL, steps=16)
    return trained.as_bytes()


def main(argv: list[str] | None = None) -> int:
    """The command line (see ``HELP``)."""
    parser = argparse.ArgumentParser(prog="python -m bridge.store.dictionary", description=HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=sorted(COLUMNS), help="which blobs the dictionary is for")
    parser.add_argument("--id", type=int, default=max(blobs.DICTIONARIES) + 1,
                        help="the new dictionary's id (default: the next after the shipped ones)")
    args = parser.parse_args(argv)
    if args.id in blobs.DICTIONARIES or not 32768 <= args.id <= 65535:
        parser.error(f"--id {args.id}: pick an id in 32768..65535 that no shipped dictionary has "
                     f"({', '.join(map(str, sorted(blobs.DICTIONARIES)))})")
    out = blobs.FOLDER / f"{args.id}.zdict"
    out.write_bytes(build(args.kind, args.id))
    print(f"wrote {out} ({out.stat().st_size} bytes); now add {args.id} to DICTIONARIES in "
          f"bridge/store/blobs.py, make it CURRENT[{args.kind!r}] and pin its SHA-256 in tests/test_blobs.py", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
