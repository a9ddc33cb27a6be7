"""Databases for the benches, built in this process through the store: far quicker than
deciding over WebSockets, and the same rows, since the same ``Session`` and store make them.

:func:`open_for_serve` opens a SQLite file with the keys ``fate-bridge serve --audit-key KEY``
then uses; :func:`fill` decides ``bench.load``'s flows (test_rolled -> fate_spend -> fate_choice)
in a world until it holds about the records asked for.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from bridge.config import default_signing_key, load_key, load_signing_key
from bridge.dice import SecretDice
from bridge.session import Session
from bridge.store import Store, open_store

from .load import ASKS_CHOICE, CHOICE, ROLLED, SPEND


async def open_for_serve(db: Path, key: Path) -> Store:
    """The SQLite store at ``db`` with the audit key at ``key`` and the receipt signing key beside
    it (``default_signing_key``), both made when missing: the keys ``serve --db DB --audit-key
    KEY`` loads, so the chains it reads are signed as its own would be."""
    return await open_store(db, audit_key=load_key(key, create=True),
                            signing_key=load_signing_key(default_signing_key(key), create=True))


async def _flows(session: Session, tag: str, left: list[int]) -> None:
    n = 0
    while left[0] > 0:
        ids = (f"{tag}-{n}".encode(),) * 2
        left[0] -= 2
        await session.receive(ROLLED % ids)
        reply = await session.receive(SPEND % ids)
        if ASKS_CHOICE in reply.frames[0]:
            left[0] -= 1
            await session.receive(CHOICE % ids)
        n += 1


async def fill(store: Store, world: str, records: int, flows: int = 1) -> None:
    """Decide flows in the registered ``world`` through trusted sessions on ``store`` until about
    ``records`` audit records are made (one per decision; a flow makes 2 or 3, so up to 2 more),
    with ``flows`` sessions at once (32 make ~4,000 records/s on one core: group commit)."""
    left = [records]
    await asyncio.gather(*(_flows(Session(store, SecretDice(), trusted=True, default_world=world), f"f{k}", left)
                           for k in range(flows)))
