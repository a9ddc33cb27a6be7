"""The SQLite backend (bridge/store/backends.py): the database is a file, or ``":memory:"``.

:class:`~bridge.store.sqlite.SQLiteStore` serves it. This module is the rest of what the shells
do with the file: open it for the ``world`` commands, open it read-only, hold it for one
``serve``, back it up, restore it, check it. It imports the store and the audit trail's code
only when a command asks for them; the ``world`` commands need neither.

A backup goes through SQLite's online backup API (``sqlite3.Connection.backup``). It copies the
pages of one read transaction. So the copy is the database at one instant: every committed
decision before it, none after. Meanwhile the bridge goes on writing; in WAL mode a reader never
blocks the writer. The copy is written beside its destination and renamed into place. So a crash
never leaves half a backup under the final name. It is owner-only, like the database.

The audit key is not in the database (see :mod:`bridge.config`). It never changes, so one copy
kept apart from the backups is enough.

``restore`` puts a backup in the database's place. It first checks the backup is a fate-bridge
database this bridge can open. The database it replaces is kept beside it as
``<db>.before-restore-<UTC time>``. Stop ``serve`` before restoring. A restore refuses a database
another process holds open: a running bridge keeps a WAL connection on it, so an exclusive lock
cannot be taken. Swapping the file under it would delete its live ``-wal``. It would then write
every later decision to an unlinked file.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, UTC
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..startup import hold_database, lock_holder
from .admin import Admin
from .backends import Copied
from .schema import DB_FILE_MODE, SCHEMA_VERSION, _in_transaction, connect, read_as_one, storage_fault

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ..findings import Finding
    from .readonly import ReadOnlyDatabase
    from .sqlite import SQLiteStore

NAME = "SQLite"
SHARED = False  # one serve per file (its lock: bridge/startup.py)
SIDE_FILES = ("-wal", "-shm", "-journal")  # SQLite's files beside a database


async def open_store(db: Path | str, *, audit_key: bytes | None = None,
                     signing_key: Ed25519PrivateKey | None = None) -> SQLiteStore:
    """The store on the file ``db`` (made, with its folder, when missing) or ``":memory:"``."""
    from .sqlite import SQLiteStore

    return await SQLiteStore.open(db, audit_key=audit_key, signing_key=signing_key)


def open_world_admin(db: Path | str) -> Admin:
    """The ``world`` commands' access to the file ``db``, on one connection.

    A missing file is made, with its folder. It is created or upgraded as the store does
    (:func:`~bridge.store.schema.connect`). Raises ``ConfigError`` when the file cannot be opened or
    a newer bridge wrote it.
    """
    conn = connect(db)
    label = None if str(db) == ":memory:" else str(db)
    return Admin(conn, lambda work: _in_transaction(conn, work), lambda exc: storage_fault(exc, label))


def exists(db: Path | str) -> bool:
    return str(db) == ":memory:" or Path(db).expanduser().exists()


def holding(db: Path | str, command: str) -> contextlib.AbstractContextManager[None]:
    """The file's serve lock for ``command`` (:func:`bridge.startup.hold_database`).

    Every command that holds it has the file alone. ``":memory:"`` has nothing to hold.
    """
    return contextlib.nullcontext() if str(db) == ":memory:" else _held(Path(db), command)


@contextmanager
def _held(db: Path, command: str) -> Iterator[None]:
    fd = hold_database(db, command)
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)  # releases the lock (the OS does so too when the process ends)


def connect_readonly(path: Path) -> sqlite3.Connection:
    """The database at ``path`` opened read-only (``file:...?mode=ro``).

    Nothing is created, migrated or written. Raises :class:`DatabaseUnreadable` saying what is
    wrong with it. Raises ``ConfigError`` for a file of a newer schema: its rows may not read as
    this bridge's, so each would be reported changed.
    """
    from .audit_rows import REQUIRED_TABLES, DatabaseUnreadable, _tables, refuse_newer_schema

    path = path.expanduser()
    if not path.exists():
        raise DatabaseUnreadable(f"there is no database at {path}")
    if path.stat().st_size == 0:
        raise DatabaseUnreadable(f"the database {path} is empty (0 bytes): it was truncated or never written")
    try:
        # Without a -wal file everything is in the database file: `immutable` reads it with no
        # -wal/-shm made beside it. With one (a bridge running, or killed), the log must be read
        # too: read-only WAL mode, which uses the -shm that is there.
        wal = path.with_name(path.name + "-wal")
        options = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?{options}", uri=True, isolation_level=None)
        missing = [t for t in REQUIRED_TABLES if t not in _tables(conn)]
        if missing:
            conn.close()
            raise DatabaseUnreadable(f"the database {path} has no {', '.join(missing)} table: it is not a "
                                     "fate-bridge database, or its tables were dropped")
        try:
            refuse_newer_schema(conn, str(path), SCHEMA_VERSION)
        except ConfigError:
            conn.close()
            raise
        conn.execute("SELECT count(*) FROM audit").fetchone()  # (the table's: by its smallest index)
        read_as_one(conn)  # the records a running serve has not folded yet are read too
    except sqlite3.DatabaseError as exc:
        raise DatabaseUnreadable(f"the database {path} is unreadable ({exc}): it was truncated or "
                                 "overwritten") from None
    return conn


def open_readonly(db: Path | str) -> ReadOnlyDatabase:
    """:func:`connect_readonly`, as the backends' read-only database."""
    from .readonly import ReadOnlyDatabase

    return ReadOnlyDatabase(connect_readonly(Path(db)), str(db))


# --- doctor ----------------------------------------------------------------------------------------


def _writable_folder(folder: Path) -> Path | None:
    """The nearest existing folder of ``folder`` if this user cannot create files in it, else None.

    Tried for real, with a temporary file removed at once. Permission bits do not tell for root,
    read-only mounts or special file systems.
    """
    import tempfile

    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        with tempfile.TemporaryFile(dir=existing):
            return None
    except OSError:
        return existing


def _writable_file(path: Path) -> bool:
    """True when this user can open ``path`` for writing (nothing is written)."""
    try:
        with path.open("r+b"):
            return True
    except OSError:
        return False


def inspect(db: Path | str) -> tuple[list[Finding], ReadOnlyDatabase | None]:
    """Check the database file; also return it opened read-only.

    It checks the folder is writable (SQLite writes ``-wal`` beside the file), the file is writable,
    ``quick_check``, the schema version, and which ``serve`` holds its lock, if any. The file
    opened read-only is for the checks that follow; None when it cannot be read. The caller closes
    it.
    """
    from ..findings import fail, ok, warn
    from .readonly import ReadOnlyDatabase

    db = Path(db)
    findings: list[Finding] = []
    stuck = _writable_folder(db.parent)
    if stuck is not None:
        findings.append(fail(f"database folder {stuck} is not writable by this user",
                             f"run the bridge as the folder's owner, `chmod u+w {stuck}`, or "
                             "give --db a path in a folder you own"))
    if not db.exists():
        findings.append(warn(f"no database at {db} yet",
                             "`fate-bridge serve` or `fate-bridge world add` creates it"))
        return findings, None
    if not _writable_file(db):
        findings.append(fail(f"database {db} is not writable by this user",
                             f"`chmod 600 {db}` as its owner, or run the bridge as the file's owner"))
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
        integrity = conn.execute("PRAGMA quick_check").fetchone()[0]
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.DatabaseError as exc:
        findings.append(fail(f"database {db} cannot be read as a fate-bridge database ({exc})",
                             "restore your last backup with `fate-bridge restore BACKUP_FILE` "
                             "(or move the file away to start afresh)"))
        return findings, None
    if integrity != "ok":
        findings.append(fail(f"database {db} is damaged: {integrity}",
                             "stop serve and restore your last backup with `fate-bridge restore BACKUP_FILE`"))
    version = int(row[0]) if row else 0
    if version > SCHEMA_VERSION:
        findings.append(fail(f"database {db} has schema {version}, newer than this bridge's "
                             f"{SCHEMA_VERSION}", "upgrade fate-bridge to the version that wrote it"))
    elif version < SCHEMA_VERSION:
        findings.append(ok(f"database {db}: schema {version}, intact; serve upgrades it to {SCHEMA_VERSION}"))
    elif integrity == "ok":
        findings.append(ok(f"database {db}: schema {version}, intact"))
    if (holder := lock_holder(db)) is not None:
        findings.append(ok(f"database {db} is served by {holder}: a second "
                           "serve on it is refused; the other commands work beside it"))
    return findings, ReadOnlyDatabase(conn, str(db))


# --- backup and restore ----------------------------------------------------------------------------


def _open_ro(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    conn.execute("PRAGMA busy_timeout = 5000")
    return conn


def check_backup(path: Path) -> tuple[int, int]:
    """Check that ``path`` is an intact fate-bridge database this bridge can open.

    Returns (worlds, audit records). Raises ``ConfigError`` naming what is wrong: missing, not a
    database, damaged, from a newer bridge.
    """
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
    """Turn what a copy raises into a ``ConfigError`` saying what to do.

    A ``sqlite3.DatabaseError`` gives the message ``unreadable(error)``. An ``OSError`` gives
    ``unwritable(reason)``; the reason is its strerror, else the error.
    """
    try:
        yield
    except sqlite3.DatabaseError as exc:
        raise ConfigError(unreadable(exc)) from None
    except OSError as exc:
        raise ConfigError(unwritable(exc.strerror or exc)) from None


def _copy(source: Path, dest: Path) -> None:
    """Copy the database ``source`` to ``dest`` with the online backup API, in one read transaction.

    It goes through a temporary file renamed into place. Raises ``sqlite3.Error`` or ``OSError``.
    """
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


def backup(db: Path | str, dest: Path, *, overwrite: bool = False) -> Copied:
    """Write a consistent copy of the database ``db`` to ``dest``. Safe while ``serve`` runs.

    Raises ``ConfigError`` when ``db`` is missing or unreadable, or when ``dest`` cannot be written
    or exists (unless ``overwrite``).
    """
    db = Path(db)
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
    return Copied(dest, *check_backup(dest))


def _refuse_if_in_use(db: Path) -> None:
    """Raise ``ConfigError`` when another process, such as a running ``serve``, holds ``db`` open.

    Every SQLite connection in WAL mode keeps a shared lock on the file, so an exclusive lock cannot
    be taken. A missing file, or one that is not a database, passes.
    """
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


def restore(source: Path, db: Path | str) -> tuple[Copied, Path | None]:
    """Replace the database ``db`` with the backup ``source``, checked first (:func:`check_backup`).

    The replaced database is kept as ``<db>.before-restore-<time>``. Its path is returned second;
    None when there was none. Raises ``ConfigError``, also when ``serve`` or any process holds
    ``db`` open.
    """
    db = Path(db)
    check_backup(source)
    if db.exists() and source.resolve() == db.resolve():
        raise ConfigError(f"{source} is the database itself: give the path of a backup")
    _refuse_if_in_use(db)
    kept = None
    with _copy_errors(unreadable=lambda exc: f"cannot read the database {db} to keep it ({exc}); move it "
                                             "away by hand and run restore again",
                      unwritable=lambda reason: f"cannot write {db}: {reason}; check the folder's permissions"):
        if db.exists():
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
            kept = db.with_name(f"{db.name}.before-restore-{stamp}")
            _copy(db, kept)  # consistent even with a leftover -wal
        staged = db.with_name(db.name + ".restoring")
        _copy(source, staged)
        for side in SIDE_FILES:  # a -wal of the old file must never be replayed onto the new one
            Path(str(db) + side).unlink(missing_ok=True)
        os.replace(staged, db)
    return Copied(db, *check_backup(db)), kept
