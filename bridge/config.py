"""Where the bridge keeps its files: the database, the audit checkpoint key and the receipt key.

Defaults follow the XDG base directories. The database goes in ``$XDG_DATA_HOME/fate-bridge``
(``~/.local/share``). The key goes in ``$XDG_CONFIG_HOME/fate-bridge`` (``~/.config``). The key is
kept outside the database, so whoever can rewrite the database cannot re-sign it.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from typing import TYPE_CHECKING

from .errors import ConfigError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

KEY_BYTES = 32
LOG_FORMATS = ("console", "json")  # how serve writes its log lines (bridge/logs.py)
# Worlds held in memory at most by default (``serve --max-worlds-in-memory``; beyond
# it the least recently used idle one leaves memory: bridge/store/writer.py). A count, not bytes:
# what a world costs is mostly its event ids and the records in use, which a count of worlds
# bounds as well as an estimate would, and a host can check it against RSS (docs/performance.md).
MAX_WORLDS_IN_MEMORY = 2000


# A ``--db`` value naming a database by URL (``postgresql://...``): which backend serves it is
# bridge/store/backends.py's to say; anything else is a SQLite file path.
URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def database(text: str) -> Path | str:
    """A ``--db`` value: a URL (``scheme://...``) as given, anything else a SQLite file path."""
    return text if URL_SCHEME.match(text) else Path(text)


def source_db(text: str) -> Path | str:
    """A ``migrate --from``/``--to`` value.

    ``sqlite:PATH`` or a plain path is a SQLite file. Else it is a database URL (:func:`database`)."""
    return Path(text.removeprefix("sqlite:")).expanduser() if text.startswith("sqlite:") else database(text)


def db_label(db: Path | str) -> str:
    """``db`` for messages and logs: a URL's password replaced by ``***``."""
    if not isinstance(db, str) or not URL_SCHEME.match(db):
        return str(db)
    parts = urlsplit(str(db))
    if parts.password is None:
        return str(db)
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def default_db() -> Path | str:
    """``$FATE_BRIDGE_DB`` (a file or a ``postgresql://`` URL), else
    ``$XDG_DATA_HOME/fate-bridge/bridge.sqlite3``."""
    if env := os.environ.get("FATE_BRIDGE_DB"):
        return database(env)
    data_home = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data_home) / "fate-bridge" / "bridge.sqlite3"


def default_audit_key() -> Path:
    """``$FATE_BRIDGE_AUDIT_KEY``, else ``$XDG_CONFIG_HOME/fate-bridge/audit.key``."""
    if env := os.environ.get("FATE_BRIDGE_AUDIT_KEY"):
        return Path(env)
    config_home = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(config_home) / "fate-bridge" / "audit.key"


def default_signing_key(audit_key: Path | None = None) -> Path:
    """The Ed25519 key signing receipts (bridge/receipts.py); outside the database like the audit key.

    It is ``$FATE_BRIDGE_SIGNING_KEY``, else ``receipt.key`` beside the audit key. The audit key is
    ``audit_key``: the one given with ``--audit-key``, or the default one."""
    if env := os.environ.get("FATE_BRIDGE_SIGNING_KEY"):
        return Path(env)
    return (audit_key or default_audit_key()).with_name("receipt.key")


def load_key(path: Path, *, create: bool) -> bytes | None:
    """The audit checkpoint key at ``path`` (hex text).

    With ``create``, a missing key is made: 32 random bytes, file mode 0600. Without it, a missing
    key gives None.

    Raises ``ConfigError`` when the file exists but is not a hex key, or cannot be written."""
    path = path.expanduser()
    if path.exists():
        try:
            key = bytes.fromhex(path.read_text().strip())
        except (ValueError, OSError) as exc:
            raise ConfigError(f"the audit key {path} is unreadable ({exc}); restore it from backup") from None
        if len(key) < 16:
            raise ConfigError(f"the audit key {path} is too short; restore it from backup")
        return key
    if not create:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as file:
            key = secrets.token_bytes(KEY_BYTES)
            file.write(key.hex() + "\n")
    except OSError as exc:
        raise ConfigError(f"cannot create the audit key {path}: {exc.strerror}; use --audit-key") from None
    return key


def load_signing_key(path: Path, *, create: bool, key: Ed25519PrivateKey | None = None) -> Ed25519PrivateKey | None:
    """The bridge's receipt signing key at ``path``: an unencrypted PKCS#8 PEM file.

    With ``create``, a missing key is made: a new Ed25519 key, file mode 0600, folder created.
    Without it, a missing key gives None. ``key``: the key a missing file is made with; default a
    new one (``audit new-key`` passes one). It is kept beside the audit key and outside the
    database, for the same reason (above).

    Raises ``ConfigError`` when the file exists but is not an Ed25519 key, or cannot be written."""
    from cryptography.hazmat.primitives import serialization  # (only the commands that sign load it)
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path = path.expanduser()
    if path.exists():
        try:
            loaded = serialization.load_pem_private_key(path.read_bytes(), password=None)
        except (ValueError, TypeError, OSError) as exc:
            raise ConfigError(f"the receipt signing key {path} is unreadable ({exc}); restore it from "
                              "backup") from None
        if not isinstance(loaded, Ed25519PrivateKey):
            raise ConfigError(f"the receipt signing key {path} is not an Ed25519 key; restore it from backup")
        return loaded
    if not create:
        return None
    key = key or Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(pem)
    except OSError as exc:
        raise ConfigError(f"cannot create the receipt signing key {path}: {exc.strerror}; use "
                          "--signing-key") from None
    return key
