"""The bridge's store, split by job: ``base`` (the :class:`Store` protocol every backend provides
and the values it speaks), ``schema`` (the SQLite file's migrations and codecs), ``memory`` (a
world's state held in memory, which decisions run on), ``writer`` (the batch writer both backends
share: loading worlds, the group commit, one transaction per batch, the lease refusal),
``sqlite`` (the embedded backend's part: the file's connections, batches on the event loop,
the tails), ``blobs`` (stored blobs as zstd frames, with the installed rulesets' dictionaries),
``worlds`` (registered worlds), ``invites`` (invite codes and registration requests), ``audit_rows`` (the audit trail's rows, checkpoints and
verification) and ``postgres`` (the PostgreSQL backend's part, with per-world leases for many
processes). Neither backend derives from the other.

The shell imports the protocol from here; :class:`SQLiteStore`, ``MIGRATIONS`` and
``SCHEMA_VERSION`` are loaded only when asked for, so code that needs the protocol alone (the
session) does not import SQLite.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .base import (AuditFilter, AuditRow, Decided, Decision, DecisionFn, Invite, Registration,
                   RegistrationRequest, Store, World)

__all__ = ["AuditFilter", "AuditRow", "Decided", "Decision", "DecisionFn", "Invite", "Registration",
           "RegistrationRequest", "Store", "World",
           "SQLiteStore", "MIGRATIONS", "SCHEMA_VERSION", "DB_FILE_MODE", "utc_now", "open_store"]


def __getattr__(name: str) -> Any:
    """The SQLite backend's names (``SQLiteStore``, ``MIGRATIONS``, ``SCHEMA_VERSION``, ``DB_FILE_MODE``, ``utc_now``), on first use."""
    if name in ("SQLiteStore", "DB_FILE_MODE"):
        from . import sqlite
        return getattr(sqlite, name)
    if name in ("MIGRATIONS", "SCHEMA_VERSION", "utc_now"):
        from . import schema
        return getattr(schema, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


async def open_store(db: str | Path, *, audit_key: bytes | None = None, signing_key: Any = None,
                     max_worlds: int | None = None) -> Store:
    """Open the store ``--db`` names: a ``postgresql://`` URL (:class:`~bridge.store.postgres.
    PostgresStore`, needs the ``postgres`` extra) or a SQLite file path / ``":memory:"`` (the
    default backend); ``audit_key``/``signing_key`` as the backend's ``open`` takes them;
    ``max_worlds``: how many worlds it holds in memory at most (``serve --max-worlds-in-memory``;
    None: ``bridge.store.writer.MAX_WORLDS_IN_MEMORY``). Raises ``ConfigError`` as the backend's
    ``open`` does."""
    from ..config import is_postgres_url

    if is_postgres_url(db):
        from .postgres import PostgresStore
        store: Any = await PostgresStore.open(str(db), audit_key=audit_key, signing_key=signing_key)
    else:
        from .sqlite import SQLiteStore
        store = await SQLiteStore.open(db, audit_key=audit_key, signing_key=signing_key)
    if max_worlds is not None:
        store.max_worlds = max_worlds
    return store
