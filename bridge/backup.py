"""``fate-bridge backup`` and ``restore``: a consistent copy of the database, taken while serving.

A backup goes through SQLite's online backup API (``sqlite3.Connection.backup``): it copies the
pages of one read transaction, so the copy is the database as it was at one instant, with every
committed decision before it and none after, while the bridge goes on writing (WAL mode: a
reader never blocks the writer). The copy is written beside its destination and renamed into
place, so a crash never leaves half a backup under the final name, and it is owner-only like the
database. The audit key is not in the database (see :mod:`bridge.config`); it never changes, so
one copy of it kept apart from the backups is enough.

``restore`` puts a backup in the database's place after checking it is a fate-bridge database
this bridge can open; the database it replaces is first kept beside it as
``<db>.before-restore-<UTC time>``. Stop ``serve`` before restoring: a restore refuses a
database another process holds open (a running bridge keeps a WAL connection on it, so an
exclusive lock cannot be taken), because swapping the file under it would delete its live
``-wal`` and leave it writing every later decision to an unlinked file.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .errors import ConfigError
from .store import DB_FILE_MODE, SCHEMA_VERSION

SIDE_FILES = ("-wal", "-shm", "-journal")  # SQLite's files beside a database


@dataclass(frozen=True, slots=True)
class Copied:
    """What a backup or restore copied: the file written, its worlds and audit records."""

    path: Path
    worlds: int
    records: int


def _open_ro(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 5000")
    return conn


def check_database(path: Path) -> tuple[int, int]:
    """Check that ``path`` is an intact fate-bridge database this bridge can open: (worlds,
    audit records). Raises ``ConfigError`` naming what is wrong (missing, not a database,
    damaged, from a newer bridge)."""
    if not path.is_file():
        raise ConfigError(f"{path} does not exist: give the path of a backup file")
    try:
        conn = _open_ro(path)
        try:
            integrity = conn.execute("PRAGMA quick_check").fetchone()[0]
            if integrity != "ok":
                raise ConfigError(f"{path} is damaged ({integrity}): use an older backup")
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row else 0
            if version > SCHEMA_VERSION:
                raise ConfigError(f"{path} was written by a newer fate-bridge (schema {version}, "
                                  f"this one knows {SCHEMA_VERSION}): upgrade fate-bridge first")
            worlds = conn.execute("SELECT count(*) FROM worlds").fetchone()[0]
            records = conn.execute("SELECT count(*) FROM audit").fetchone()[0] if version >= 2 else 0
            if version >= 9:  # a running serve's unfolded records too (each table by its index, not the view)
                records += conn.execute("SELECT count(*) FROM audit_tail").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise ConfigError(f"{path} is not a fate-bridge database ({exc}): give the path of a "
                          "file written by `fate-bridge backup`") from None
    return worlds, records


@contextmanager
def _copy_errors(*, unreadable: Callable[[sqlite3.DatabaseError], str],
                 unwritable: Callable[[str | OSError], str]) -> Iterator[None]:
    """Turn what a copy raises into a ``ConfigError`` saying what to do: the message
    ``unreadable(error)`` for a ``sqlite3.DatabaseError``, ``unwritable(reason)`` for an
    ``OSError`` (the reason: its strerror, else the error)."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        raise ConfigError(unreadable(exc)) from None
    except OSError as exc:
        raise ConfigError(unwritable(exc.strerror or exc)) from None


def _copy(source: Path, dest: Path) -> None:
    """Copy the database ``source`` to ``dest`` with the online backup API (one read
    transaction), through a temporary file renamed into place. Raises ``sqlite3.Error`` or
    ``OSError``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    partial.unlink(missing_ok=True)
    try:  # from its creation on: a Ctrl+C at any point leaves no partial file
        os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, DB_FILE_MODE))
        src = _open_ro(source)
        try:
            out = sqlite3.connect(partial)
            try:
                src.backup(out)  # pages=-1: every page in one step, so one consistent snapshot
                out.execute("PRAGMA journal_mode = DELETE")  # a single self-contained file
            finally:
                out.close()
        finally:
            src.close()
        os.replace(partial, dest)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def backup(db: Path, dest: Path, *, overwrite: bool = False) -> Copied:
    """Write a consistent copy of the database ``db`` to ``dest`` (safe while ``serve`` runs).
    Raises ``ConfigError`` when ``db`` is missing or unreadable, ``dest`` exists (unless
    ``overwrite``) or cannot be written."""
    if not db.is_file():
        raise ConfigError(f"there is no database at {db}: give --db, or set $FATE_BRIDGE_DB")
    if dest.exists() and not overwrite:
        raise ConfigError(f"{dest} exists already: give another path, or --overwrite to replace it")
    if dest.resolve() == db.resolve():
        raise ConfigError(f"{dest} is the database itself: write the backup somewhere else")
    with _copy_errors(unreadable=lambda exc: f"cannot read the database {db} ({exc}): if it is damaged, "
                                             "restore the last backup with `fate-bridge restore`",
                      unwritable=lambda reason: f"cannot write {dest}: {reason}; pick a folder you can write to"):
        _copy(db, dest)
    return Copied(dest, *check_database(dest))


def _refuse_if_in_use(db: Path) -> None:
    """Raise ``ConfigError`` when another process holds the database ``db`` open (a running
    ``serve``): every SQLite connection in WAL mode keeps a shared lock on the file, so an
    exclusive lock cannot be taken. A missing file, or one that is not a database, passes."""
    if not db.is_file():
        return
    conn = sqlite3.connect(db, isolation_level=None, timeout=1.0)
    try:
        conn.execute("PRAGMA locking_mode = EXCLUSIVE")
        conn.execute("BEGIN EXCLUSIVE")
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise ConfigError(f"the database {db} is in use (is `fate-bridge serve` running on "
                              "it?): stop `fate-bridge serve` (Ctrl+C), then run restore again") from None
    except sqlite3.DatabaseError:
        pass  # not a database: nothing uses it as one; it is kept aside below all the same
    finally:
        conn.close()


def restore(source: Path, db: Path) -> tuple[Copied, Path | None]:
    """Replace the database ``db`` with the backup ``source`` (checked first, see
    :func:`check_database`). The database replaced is kept as ``<db>.before-restore-<time>``,
    whose path is returned second (None when there was none). Raises ``ConfigError``, also
    when ``serve`` (or any process) holds ``db`` open."""
    check_database(source)
    if db.exists() and source.resolve() == db.resolve():
        raise ConfigError(f"{source} is the database itself: give the path of a backup")
    _refuse_if_in_use(db)
    kept = None
    with _copy_errors(unreadable=lambda exc: f"cannot read the database {db} to keep it ({exc}); move it "
                                             "away by hand and run restore again",
                      unwritable=lambda reason: f"cannot write {db}: {reason}; check the folder's permissions"):
        if db.exists():
            stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            kept = db.with_name(f"{db.name}.before-restore-{stamp}")
            _copy(db, kept)  # consistent even with a leftover -wal
        staged = db.with_name(db.name + ".restoring")
        _copy(source, staged)
        for side in SIDE_FILES:  # a -wal of the old file must never be replayed onto the new one
            Path(str(db) + side).unlink(missing_ok=True)
        os.replace(staged, db)
    return Copied(db, *check_database(db)), kept
