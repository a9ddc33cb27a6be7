"""The store backends, one registry: the database a ``--db`` names -> the module serving it.

A URL picks its backend by its scheme. A plain path or ``":memory:"`` is SQLite's file. The
module opens its store, opens it for the ``world`` commands, and opens it read-only. It holds it
for a command, backs it up and restores it, and checks it for ``doctor``.

A backend is one module giving :class:`Backend`'s names, and one :func:`register` line: its URL
schemes and its module's dotted name. The module is imported when a database of it is first
used. So choosing a backend imports neither psycopg nor the store. The shells ask
:func:`backend_of` and call what it gives; none of them names a backend.
"""

from __future__ import annotations

import importlib
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast
from urllib.parse import urlsplit

from ..config import URL_SCHEME, db_label
from ..errors import ConfigError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ..findings import Finding
    from .base import Store, WorldAdmin
    from .readonly import ReadOnlyDatabase


@dataclass(frozen=True, slots=True)
class Copied:
    """What a backup or restore copied: the file written, its worlds and audit records."""

    path: Path
    worlds: int
    records: int


class Backend(Protocol):
    """What a backend's module gives.

    Its functions take the ``--db`` value, a ``Path`` or a URL ``str``. Unless said otherwise,
    errors are ``ConfigError`` saying what is wrong and what to do.
    """

    NAME: str  # for messages: "SQLite", "PostgreSQL"
    SHARED: bool  # many bridge processes serve one database (serve --reuse-port, the cluster's notices)

    async def open_store(self, db: Path | str, *, audit_key: bytes | None = None,
                         signing_key: Ed25519PrivateKey | None = None) -> Store:
        """The store, created or upgraded to this bridge's schema."""
        ...

    def open_world_admin(self, db: Path | str) -> WorldAdmin:
        """The ``world`` commands' access to ``db`` (:class:`~bridge.store.base.WorldAdmin`), without the store.

        It is created or upgraded to this bridge's schema, as by :meth:`open_store`.
        """
        ...

    def open_readonly(self, db: Path | str) -> ReadOnlyDatabase:
        """The database opened to be read only; nothing is created.

        Raises ``DatabaseUnreadable`` (bridge/store/audit_rows.py) saying why it cannot be read. Raises
        ``ConfigError`` for one a newer bridge wrote.
        """
        ...

    def exists(self, db: Path | str) -> bool:
        """Whether ``db`` holds a database already (the commands that only read refuse to make one)."""
        ...

    def holding(self, db: Path | str, command: str) -> AbstractContextManager[None]:
        """Hold ``db`` for ``command`` while inside.

        ``command`` is ``serve`` or a command of ``bridge.startup._WHEN_HELD``. Refused with
        ``ConfigError``, naming the holder, while another process holds it against that command.
        """
        ...

    def backup(self, db: Path | str, dest: Path, *, overwrite: bool) -> Copied:
        """Write a consistent copy of ``db`` to ``dest``, safe while ``serve`` runs."""
        ...

    def restore(self, source: Path, db: Path | str) -> tuple[Copied, Path | None]:
        """Put the backup ``source`` in ``db``'s place.

        The replaced database is kept at the path returned second; None when there was none.
        """
        ...

    def inspect(self, db: Path | str) -> tuple[list[Finding], ReadOnlyDatabase | None]:
        """``doctor``'s checks of the database, and the database opened read-only.

        The checks: reachable, schema version, and what else the backend can tell. The read-only
        database is for the checks that follow; None when it cannot be read. The caller closes it.
        """
        ...


DEFAULT = "bridge.store.sqlite_file"  # a plain path, or ":memory:"
_MODULES: dict[str, str] = {}  # URL scheme -> the module of its backend


def register(schemes: tuple[str, ...], module: str) -> None:
    """Serve the databases whose URLs have one of ``schemes`` with the backend ``module``.

    A scheme is e.g. ``"postgresql"`` for ``postgresql://...``. ``module`` is a dotted name,
    imported on first use. Raises ``ValueError`` for a scheme registered already.
    """
    for scheme in schemes:
        if scheme in _MODULES:
            raise ValueError(f"the scheme {scheme!r} is served by {_MODULES[scheme]} already")
        _MODULES[scheme] = module


register(("postgresql", "postgres"), "bridge.store.postgres")


def backend_of(db: Path | str) -> Backend:
    """The backend serving ``db`` (a ``--db`` value: :func:`bridge.config.database`). Raises
    ``ConfigError`` for a URL whose scheme no backend serves."""
    if isinstance(db, str) and URL_SCHEME.match(db):
        module = _MODULES.get(urlsplit(db).scheme)
        if module is None:
            known = ", ".join(f"{scheme}://" for scheme in _MODULES)
            raise ConfigError(f"no backend serves {db_label(db)}: give a SQLite file path or a URL of {known}")
        return cast("Backend", importlib.import_module(module))
    return cast("Backend", importlib.import_module(DEFAULT))


async def open_store(db: Path | str, *, audit_key: bytes | None = None,
                     signing_key: Ed25519PrivateKey | None = None, max_worlds: int | None = None) -> Store:
    """Open the store ``db`` names (:func:`backend_of`). Raises ``ConfigError``.

    ``audit_key`` and ``signing_key`` are as the backend's ``open_store`` takes them. ``max_worlds``
    is how many worlds it holds in memory at most (``serve --max-worlds-in-memory``). None means
    ``bridge.store.writer.MAX_WORLDS_IN_MEMORY``.
    """
    store = await backend_of(db).open_store(db, audit_key=audit_key, signing_key=signing_key)
    if max_worlds is not None:
        store.max_worlds = max_worlds
    return store
