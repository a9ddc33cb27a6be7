"""The bridge's store, split by job: ``base`` (the :class:`Store` protocol every backend provides
and the values it speaks), ``schema`` (the SQLite file's migrations and codecs), ``memory`` (a world's
state held in memory, which decisions run on), ``sqlite`` (the embedded backend: loading worlds,
its writer thread, one transaction per batch), ``worlds``
(registered worlds) and ``audit_rows`` (the audit trail's rows, checkpoints and verification).

The shell imports the protocol from here; :class:`SQLiteStore`, ``MIGRATIONS`` and
``SCHEMA_VERSION`` are loaded only when asked for, so code that needs the protocol alone (the
session) does not import SQLite.
"""

from __future__ import annotations

from typing import Any

from .base import AuditFilter, AuditRow, Decided, Decision, DecisionFn, Store, World

__all__ = ["AuditFilter", "AuditRow", "Decided", "Decision", "DecisionFn", "Store", "World",
           "SQLiteStore", "MIGRATIONS", "SCHEMA_VERSION", "DB_FILE_MODE", "utc_now"]


def __getattr__(name: str) -> Any:
    """The SQLite backend's names (``SQLiteStore``, ``MIGRATIONS``, ``SCHEMA_VERSION``, ``DB_FILE_MODE``, ``utc_now``), on first use."""
    if name in ("SQLiteStore", "DB_FILE_MODE"):
        from . import sqlite
        return getattr(sqlite, name)
    if name in ("MIGRATIONS", "SCHEMA_VERSION", "utc_now"):
        from . import schema
        return getattr(schema, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
