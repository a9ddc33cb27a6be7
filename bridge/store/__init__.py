"""The bridge's store, split by job: ``base`` (the :class:`Store` protocol every backend provides
and the values it speaks), ``schema`` (the SQLite file's migrations and codecs), ``memory`` (a
world's state held in memory, which decisions run on), ``writer`` (the batch writer both backends
share: loading worlds, the group commit, one transaction per batch, the lease refusal),
``sqlite`` (the embedded backend's part: the file's connections, batches on the event loop,
the tails), ``blobs`` (stored blobs as zstd frames, with the installed rulesets' dictionaries),
``worlds`` (registered worlds), ``invites`` (invite codes and registration requests), ``audit_rows`` (the audit trail's rows, checkpoints and
verification), ``readonly`` (a database opened read-only), ``sqlite_file`` (the SQLite file
read-only, backed up, restored, checked) and ``postgres`` (the PostgreSQL backend's part, with
per-world leases for many processes). Neither backend derives from the other; ``backends`` maps a
``--db`` to its backend's module, which the shells ask (:func:`backend_of`, :func:`open_store`).

The shell imports the protocol from here; :class:`SQLiteStore`, ``MIGRATIONS`` and
``SCHEMA_VERSION`` are loaded only when asked for, so code that needs the protocol alone (the
session) does not import SQLite.
"""

from __future__ import annotations

from typing import Any

from .backends import backend_of, open_store
from .base import (AuditFilter, AuditRow, Decided, Decision, DecisionFn, Invite, Registration,
                   RegistrationRequest, Store, TrailReader, World)

__all__ = ["AuditFilter", "AuditRow", "Decided", "Decision", "DecisionFn", "Invite", "Registration",
           "RegistrationRequest", "Store", "TrailReader", "World",
           "SQLiteStore", "MIGRATIONS", "SCHEMA_VERSION", "DB_FILE_MODE", "utc_now", "backend_of", "open_store"]


def __getattr__(name: str) -> Any:
    """The SQLite backend's names (``SQLiteStore``, ``MIGRATIONS``, ``SCHEMA_VERSION``, ``DB_FILE_MODE``, ``utc_now``), on first use."""
    if name in ("SQLiteStore", "DB_FILE_MODE"):
        from . import sqlite
        return getattr(sqlite, name)
    if name in ("MIGRATIONS", "SCHEMA_VERSION", "utc_now"):
        from . import schema
        return getattr(schema, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
