"""A third store backend, kept outside the package as a plug-in would be: one module giving
``bridge.store.backends.Backend``'s names, registered with one line in the test that uses it
(tests/test_store_protocol.py). Its databases are ``plugfile:///PATH`` URLs, served by SQLite's
file at PATH, so every command runs on it for real."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from bridge.store import sqlite_file

NAME = "Plug-in file"
SHARED = False


def _path(db: Path | str) -> Path:
    return Path(urlsplit(str(db)).path)


async def open_store(db, *, audit_key=None, signing_key=None):
    return await sqlite_file.open_store(_path(db), audit_key=audit_key, signing_key=signing_key)


def open_world_admin(db):
    return sqlite_file.open_world_admin(_path(db))


def open_readonly(db):
    return sqlite_file.open_readonly(_path(db))


def exists(db) -> bool:
    return _path(db).exists()


def holding(db, command):
    return sqlite_file.holding(_path(db), command)


def backup(db, dest, *, overwrite):
    return sqlite_file.backup(_path(db), dest, overwrite=overwrite)


def restore(source, db):
    return sqlite_file.restore(source, _path(db))


def inspect(db):
    return sqlite_file.inspect(_path(db))
