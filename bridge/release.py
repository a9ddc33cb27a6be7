"""The Foundry module as Foundry installs it: a manifest and a zip of its runtime files.

Foundry's *Install Module* takes a manifest URL, reads ``download`` from it and unpacks that zip
into ``Data/modules/<id>/`` (Foundry's ``ModuleManifestData``: ``manifest`` is the URL Foundry
checks for updates, ``download`` the zip; https://foundryvtt.com/api/interfaces/foundry.packages.types.ModuleManifestData.html).
The bridge serves both at ``/module/module.json`` and ``/module/fate-bridge.zip``
(:mod:`bridge.http`); ``fate-bridge release`` writes the same two files for a release page.

The zip holds ``module.json`` at its root and only what Foundry loads or shows: ``scripts/``,
``styles/``, ``lang/``, ``README.md`` and ``LICENSE`` (no ``node_modules``, no tests, no npm
files). It is built deterministically (fixed file times), so the same module gives the same bytes.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from . import __version__
from .errors import ConfigError

MODULE_ID = "fate-bridge"
MODULE_PATH = "/module/"  # where the bridge serves the manifest and the zip
MANIFEST_NAME = "module.json"
ZIP_NAME = f"{MODULE_ID}.zip"
RUNTIME_FOLDERS = ("scripts", "styles", "lang")  # what Foundry loads (esmodules, styles, languages)
RUNTIME_FILES = ("README.md", "LICENSE")  # what Foundry shows (manifest ``readme``, ``license``)
ZIP_TIME = (2020, 1, 1, 0, 0, 0)  # every entry's time, so the zip's bytes depend on content only
PUBLIC_URL_ENV = "FATE_BRIDGE_PUBLIC_URL"
MODULE_DIR_ENV = "FATE_BRIDGE_MODULE_DIR"


def module_dir() -> Path:
    """The Foundry module's folder: ``$FATE_BRIDGE_MODULE_DIR``, else ``foundry-module/`` beside
    the ``bridge`` package (a source checkout or ``pip install -e``). Raises ``ConfigError``
    when it holds no ``module.json``."""
    folder = Path(os.environ.get(MODULE_DIR_ENV) or Path(__file__).resolve().parent.parent / "foundry-module")
    if not (folder / MANIFEST_NAME).is_file():
        raise ConfigError(f"the Foundry module is not at {folder} (no {MANIFEST_NAME}): run the bridge "
                          f"from its source checkout, or set ${MODULE_DIR_ENV} to the foundry-module folder")
    return folder


def public_base(url: str) -> str:
    """``url`` (the bridge's address as others reach it: http(s) or ws(s), maybe behind a proxy
    path) as an http(s) base ending in ``/``. Raises ``ConfigError`` for anything else."""
    parts = urlsplit(url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    if scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ConfigError(f"{url!r} is not a public address of the bridge: write it like "
                          "http://192.168.1.20:8765 or https://foundry.example.org/fate-bridge/")
    path = parts.path.rstrip("/") + "/"
    return f"{scheme}://{parts.netloc}{path}"


def manifest_url(base: str) -> str:
    """The URL to paste into Foundry's *Install Module* for the bridge at ``base``."""
    return urljoin(public_base(base), MODULE_PATH.lstrip("/") + MANIFEST_NAME)


def runtime_files(folder: Path) -> list[str]:
    """The module's runtime files, relative POSIX paths, sorted (``module.json`` excluded: the
    zip carries the served manifest instead)."""
    found = [name for name in RUNTIME_FILES if (folder / name).is_file()]
    for sub in RUNTIME_FOLDERS:
        found += [path.relative_to(folder).as_posix() for path in (folder / sub).rglob("*")
                  if path.is_file()]
    return sorted(found)


def manifest(folder: Path, base: str | None) -> dict:
    """The module's ``module.json`` as served: the checked-in one with ``version`` set to the
    bridge's, and, with ``base`` (the bridge's public address), ``manifest`` and ``download``
    pointing at the bridge. Raises ``ConfigError`` when the checked-in file is not JSON."""
    try:
        data = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {folder / MANIFEST_NAME}: {exc}") from None
    data["version"] = __version__
    if base is not None:
        root = urljoin(public_base(base), MODULE_PATH.lstrip("/"))
        data["manifest"] = root + MANIFEST_NAME
        data["download"] = root + ZIP_NAME
    return data


def manifest_bytes(data: dict) -> bytes:
    """A manifest as the file's bytes (2-space JSON, trailing newline)."""
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode()


@dataclass(frozen=True, slots=True)
class Package:
    """The module ready to install: its manifest's bytes and the zip's."""

    manifest: bytes
    zip: bytes


def package(base: str | None, folder: Path | None = None) -> Package:
    """Build the manifest and zip of the module in ``folder`` (default :func:`module_dir`) for
    the bridge at ``base`` (None: a manifest without ``manifest``/``download``, for a zip
    installed by hand)."""
    folder = module_dir() if folder is None else folder
    body = manifest_bytes(manifest(folder, base))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo(MANIFEST_NAME, ZIP_TIME), body, zipfile.ZIP_DEFLATED)
        for name in runtime_files(folder):
            archive.writestr(zipfile.ZipInfo(name, ZIP_TIME), (folder / name).read_bytes(),
                             zipfile.ZIP_DEFLATED)
    return Package(body, buffer.getvalue())


def write_release(out: Path, base: str | None) -> list[Path]:
    """Write ``module.json`` and ``fate-bridge.zip`` into ``out`` (created); returns their paths."""
    built = package(base)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / MANIFEST_NAME).write_bytes(built.manifest)
        (out / ZIP_NAME).write_bytes(built.zip)
    except OSError as exc:
        raise ConfigError(f"cannot write the release into {out}: {exc.strerror or exc}; pick another --out") from None
    return [out / MANIFEST_NAME, out / ZIP_NAME]


def manifest_problems(folder: Path) -> list[str]:
    """What keeps the module in ``folder`` (an unpacked zip) from loading: a missing or
    unreadable ``module.json``, a missing ``id``/``title``/``version``, or a file it lists
    (esmodules, scripts, styles, languages) that is not there. Empty when it loads."""
    try:
        data = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [f"{MANIFEST_NAME}: {exc}"]
    problems = [f"{MANIFEST_NAME} has no {key}" for key in ("id", "title", "version") if not data.get(key)]
    listed = [*data.get("esmodules", []), *data.get("scripts", []), *data.get("styles", []),
              *(lang.get("path", "") for lang in data.get("languages", []))]
    problems += [f"{name} is listed but missing" for name in listed if not (folder / name).is_file()]
    return problems
