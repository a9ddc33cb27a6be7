"""Train a ruleset's zstd dictionary for one kind of stored blob (:mod:`bridge.store.blobs`).

It trains from that ruleset's own example session. Run ``python -m bridge.store.dictionary
RULESET KIND`` from a checkout; see ``--help``.

The samples are real rows. The example session (``examples/<ruleset>-session.jsonl``) is played
through a trusted :class:`~bridge.session.Session` and the SQLite store into a temporary
database. It is played in English and in German, several times with seeded dice. The first play
uses the example's own dice, so outcomes, cards and dice differ. The blobs of the kind asked for
are read back as JSON: ``audit`` gives the audit records; ``records`` the records' values.

The bench's data is never used: the bench measures the dictionary, so it must not teach it.
Nothing here tells one ruleset from another. What a dictionary learns is the ruleset's, and it
ships with the ruleset (:class:`~bridge.ruleset.Dictionary`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import sys
import tempfile
from importlib import resources
from pathlib import Path

import zstandard

from . import blobs
from ..registry import installed

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
LANGUAGES = (None, "de")
# Each kind's dictionary size: audit 16 KB came out ~5% larger, 64 KB no smaller; records from
# 8 to 24 KB alike (measured on the four rulesets' plays).
DICT_BYTES = {"audit": 32 * 1024, "records": 16 * 1024}
COLUMNS = {"audit": "SELECT record FROM audit", "records": "SELECT value FROM records"}
PLAYS = 48  # seeded plays of the example per language

HELP = """\
Train a new zstd dictionary for one kind of a ruleset's compressed rows (audit:
the audit records; records: the records' values) from the ruleset's example
session, and write it as bridge/rulesets/<ruleset>/dictionaries/<id>.zdict, with
the next id no installed ruleset ships.

When: for a new ruleset, or when the rows its decisions store change shape so much
that they compress clearly worse (a new record layout); `python -m bench` prints the
bytes per decision by table. Never to replace a shipped dictionary: frames in
databases name their dictionary by id and must read forever, so a retrain ADDS one.

How: run it from a checkout (it plays examples/<ruleset>-session.jsonl), then add
a Dictionary(id, kind, path, first bridge version writing with it) to the end of
the ruleset's `dictionaries` (the last of a kind writes), pin its SHA-256 in
tests/test_blobs.py next to the others (keep theirs), and commit the .zdict file.
"""


class _SeededDice:
    """Dice from a seeded generator (reproducible sample sets)."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def roll(self, faces: int) -> int:
        return self._rng.randint(1, faces)


async def _play(db: Path, ruleset: str) -> None:
    """``ruleset``'s example, in each language, :data:`PLAYS` times (a world each), into ``db``."""
    from .. import logs
    from ..dice import ScriptedDice
    from ..session import Session
    from .sqlite import SQLiteStore

    logs.configure(level="error")  # a line per decision is noise here
    example = EXAMPLES / f"{ruleset}-session.jsonl"
    lines = [json.loads(line) for line in example.read_text().splitlines() if line.strip()]
    store = await SQLiteStore.open(db)
    try:
        for language in LANGUAGES:
            for play in range(PLAYS):
                rng = random.Random(f"{example.name}/{language}/{play}")
                world = f"{example.stem}-{language or 'en'}-{play}"
                await store.add_world(world, None)
                session = Session(store, _SeededDice(rng), trusted=True, default_world=world,
                                  new_seed=rng.randbytes)
                client = {"module_version": "0.1.0", "foundry_version": "13.351", "system_id": ruleset,
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


def samples(ruleset: str, kind: str) -> list[bytes]:
    """The JSON of every blob of ``kind`` that ``ruleset``'s decisions store when its example is played.

    ``kind`` is a key of :data:`COLUMNS`. Rows of no ruleset, e.g. ``hello``, are left out. Raises
    ``SystemExit`` when the example is missing.
    """
    example = EXAMPLES / f"{ruleset}-session.jsonl"
    if not example.is_file():
        raise SystemExit(f"no {example}: run this from a fate-bridge checkout, for a ruleset with an example session")
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "samples.sqlite3"
        asyncio.run(_play(db, ruleset))
        conn = sqlite3.connect(db)
        try:
            if kind == "audit":
                rows = conn.execute(COLUMNS[kind] + " WHERE ruleset = ?", (ruleset,)).fetchall()
            else:
                rows = conn.execute(COLUMNS[kind]).fetchall()
        finally:
            conn.close()
    return [blobs.unpack(value) for (value,) in rows]


def build(ruleset: str, kind: str, dict_id: int) -> bytes:
    """A dictionary of ``DICT_BYTES[kind]`` bytes with id ``dict_id`` for ``ruleset``'s blobs of ``kind``.

    Trained on :func:`samples` with COVER. Its segment sizes are picked by trying 16 on held-out
    samples.
    """
    # zstandard's stub asks for a list of bytes-likes, invariantly: a list[bytes] is one
    trained = zstandard.train_dictionary(DICT_BYTES[kind], samples(ruleset, kind),  # type: ignore[arg-type]
                                         dict_id=dict_id,
                                         level=blobs.LEVEL, steps=16)
    return trained.as_bytes()


def main(argv: list[str] | None = None) -> int:
    """The command line (see ``HELP``)."""
    shipped = blobs.catalog().by_id
    parser = argparse.ArgumentParser(prog="python -m bridge.store.dictionary", description=HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ruleset", choices=sorted(r.id for r in installed()), help="whose rows")
    parser.add_argument("kind", choices=sorted(COLUMNS), help="which blobs the dictionary is for")
    parser.add_argument("--id", type=int, default=max(shipped, default=32768) + 1,
                        help="the new dictionary's id (default: the next after the installed rulesets' ones)")
    parser.add_argument("--package", help="the ruleset's package, whose dictionaries/ gets the file (default: "
                        "the package of the ruleset's last dictionary; needed for its first)")
    args = parser.parse_args(argv)
    if args.id in shipped or not 32768 <= args.id <= 65535:
        parser.error(f"--id {args.id}: pick an id in 32768..65535 that no installed ruleset ships "
                     f"({', '.join(map(str, sorted(shipped)))})")
    ruleset = next(r for r in installed() if r.id == args.ruleset)
    package = args.package or next((d.package for d in reversed(ruleset.dictionaries)), None)
    if package is None:
        parser.error(f"ruleset {args.ruleset} ships no dictionary yet: name its package with --package")
    folder = Path(str(resources.files(package))) / "dictionaries"
    folder.mkdir(exist_ok=True)
    out = folder / f"{args.id}.zdict"
    out.write_bytes(build(args.ruleset, args.kind, args.id))
    print(f"wrote {out} ({out.stat().st_size} bytes); now add Dictionary({args.id}, {args.kind!r}, ...) to the end of"
          f" the {args.ruleset} ruleset's dictionaries and pin its SHA-256 in tests/test_blobs.py", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
