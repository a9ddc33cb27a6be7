"""The bridge's store, split by job.

- ``base``: the :class:`Store` protocol every backend provides, and its values.
- ``schema``: the SQLite file's migrations and codecs.
- ``memory``: a world's state in memory; decisions run on it.
- ``writer``: the batch writer both backends share. It loads worlds, group-commits,
  runs one transaction per batch and refuses without the lease.
- ``sqlite``: the embedded backend's part: connections, batches on the event loop, tails.
- ``admin``: the ``world`` commands' access. Worlds and invite rows on one connection, no store.
- ``blobs``: stored blobs as zstd frames, with the installed rulesets' dictionaries.
- ``worlds``: registered worlds. Their values, and the invite codes', are in ``world_values``.
- ``invites``: invite codes and registration requests.
- ``audit_rows``: the audit trail's rows, checkpoints and verification.
- ``readonly``: a database opened read-only.
- ``sqlite_file``: the SQLite file for the ``world`` commands: read-only, backup, restore, check.
- ``postgres``: the PostgreSQL backend's part, with per-world leases for many processes.

Neither backend derives from the other. ``backends`` maps a ``--db`` to its backend's module;
the shells ask it (:func:`backend_of`, :func:`open_store`).

The shell imports the protocol and its values from here. Each is loaded on first use, the
SQLite names (``SQLiteStore``, ``MIGRATIONS``, ``SCHEMA_VERSION``) too. So the session, which
needs only the protocol, imports no SQLite. The ``world`` commands (``admin``) import neither
the wire messages nor the decision's record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .backends import backend_of, open_store

if TYPE_CHECKING:
    from .base import (AuditFilter, AuditRow, Decided, Decision, DecisionFn, Invite, Registration,
                       RegistrationRequest, Store, TrailReader, World, WorldAdmin)
    from .schema import DB_FILE_MODE, MIGRATIONS, SCHEMA_VERSION, utc_now
    from .sqlite import SQLiteStore

__all__ = ["AuditFilter", "AuditRow", "Decided", "Decision", "DecisionFn", "Invite", "Registration",
           "RegistrationRequest", "Store", "TrailReader", "World", "WorldAdmin",
           "SQLiteStore", "MIGRATIONS", "SCHEMA_VERSION", "DB_FILE_MODE", "utc_now", "backend_of", "open_store"]

_FROM = {"SQLiteStore": "sqlite", "MIGRATIONS": "schema", "SCHEMA_VERSION": "schema", "DB_FILE_MODE": "schema",
         "utc_now": "schema"}  # the others of __all__: base


def __getattr__(name: str) -> Any:
    """A name of :data:`__all__`, imported from its module on first use."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{_FROM.get(name, 'base')}"), name)
