"""The Foundry module as Foundry installs it: a manifest and a zip of its runtime files.

Foundry's *Install Module* takes a manifest URL, reads ``download`` from it, and unpacks that zip
into ``Data/modules/<id>/``. In Foundry's ``ModuleManifestData``, ``manifest`` is the URL Foundry
checks for updates, and ``download`` the zip
(https://foundryvtt.com/api/interfaces/foundry.packages.types.ModuleManifestData.html).

The bridge serves both at ``/module/module.json`` and ``/module/fate-bridge.zip``
(:mod:`bridge.http`). That is enough for a Foundry on the bridge's machine or network. A Foundry
hosted elsewhere (The Forge, Molten, a rented server) fetches the manifest from its own server. That
server cannot reach a GM's computer. So it installs from the project's GitHub release instead.
``fate-bridge release`` writes the two files for it. ``.github/workflows/release.yml`` runs it on
each version tag ``vX.Y.Z``, and attaches them to that tag's release.

GitHub answers ``/releases/latest/download/NAME`` with the newest release's asset NAME
(https://docs.github.com/en/repositories/releasing-projects-on-github/linking-to-releases). So the
released manifest's ``manifest`` (where Foundry checks for updates) stays the same URL from release
to release. Its ``download`` names the zip of its own tag, as Foundry packages commonly do. The
repository is :data:`REPOSITORY`; a fork passes ``release --repository OWNER/REPO``, and the
workflow passes its own. The checked-in ``foundry-module/module.json`` names no URL. Every manifest
built here gets ``url``, ``bugs`` and ``changelog`` from the repository. It gets ``manifest`` and
``download`` from where it is served.

The zip holds ``module.json`` at its root, and only what Foundry loads or shows: ``scripts/``,
``styles/``, ``lang/``, ``README.md`` and ``LICENSE``. No ``node_modules``, no tests, no npm files.
It is built deterministically (fixed file times), so the same module gives the same bytes.
"""

from __future__ import annotations

import io
import json
import os
import re
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
REPOSITORY = "fate-bridge/fate-bridge"  # the project's GitHub OWNER/REPO: its page, issues, releases
GITHUB = "https://github.com/"
# GitHub's names: an owner is letters, digits and hyphens (at most 39), a repository letters,
# digits, ".", "-" and "_" (at most 100), never "." or "..".
REPOSITORY_NAME = re.compile(r"[A-Za-z0-9-]{1,39}/(?!\.\.?$)[A-Za-z0-9._-]{1,100}")


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
    """``url`` as an http(s) base ending in ``/``.

    ``url`` is the bridge's address as others reach it: http(s) or ws(s), maybe behind a proxy path.
    Raises ``ConfigError`` for anything else."""
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


def repository_name(value: str) -> str:
    """``value`` if it names a GitHub repository as ``OWNER/REPO``. Raises ``ConfigError`` otherwise."""
    if not REPOSITORY_NAME.fullmatch(value):
        raise ConfigError(f"{value!r} is not a GitHub repository: write it as OWNER/REPO, "
                          f"e.g. {REPOSITORY}")
    return value


def release_tag(version: str = __version__) -> str:
    """The git tag of ``version``'s release: ``v`` and the version (``v0.1.0``)."""
    return f"v{version}"


def check_tag(tag: str) -> None:
    """Raises ``ConfigError`` unless ``tag`` is this version's :func:`release_tag`.

    A release whose tag and version differ would point its ``download`` at a release that does not
    exist."""
    if tag != release_tag():
        raise ConfigError(f"the tag {tag!r} is not this version's: the bridge and the module are "
                          f"{__version__}, so the tag must be {release_tag()!r} (set the new version in "
                          "pyproject.toml, bridge/__init__.py, foundry-module/module.json and "
                          "foundry-module/package.json, then tag that commit)")


def release_manifest_url(repository: str = REPOSITORY) -> str:
    """The manifest URL a hosted Foundry installs from: the newest release's ``module.json``."""
    return f"{GITHUB}{repository}/releases/latest/download/{MANIFEST_NAME}"


def release_download_url(repository: str = REPOSITORY, version: str = __version__) -> str:
    """The zip of ``version``'s release in ``repository``."""
    return f"{GITHUB}{repository}/releases/download/{release_tag(version)}/{ZIP_NAME}"


def runtime_files(folder: Path) -> list[str]:
    """The module's runtime files, relative POSIX paths, sorted.

    ``module.json`` is excluded: the zip carries the served manifest instead."""
    found = [name for name in RUNTIME_FILES if (folder / name).is_file()]
    for sub in RUNTIME_FOLDERS:
        found += [path.relative_to(folder).as_posix() for path in (folder / sub).rglob("*")
                  if path.is_file()]
    return sorted(found)


def manifest(folder: Path, base: str | None, repository: str = REPOSITORY) -> dict:
    """The module's ``module.json`` as installed.

    It is the checked-in one, with ``version`` set to the bridge's. ``url``, ``bugs`` and
    ``changelog`` are the pages of the GitHub ``repository`` (``OWNER/REPO``). ``manifest`` and
    ``download`` are the bridge's ``/module/`` under ``base``, its public address. Without ``base``
    they are ``repository``'s release of this version (:func:`release_manifest_url`,
    :func:`release_download_url`). Raises ``ConfigError`` when the checked-in file is not JSON."""
    try:
        data = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {folder / MANIFEST_NAME}: {exc}") from None
    page = GITHUB + repository
    data.update(version=__version__, url=page, bugs=f"{page}/issues",
                changelog=f"{page}/blob/{release_tag()}/CHANGELOG.md")
    if base is not None:
        root = urljoin(public_base(base), MODULE_PATH.lstrip("/"))
        data.update(manifest=root + MANIFEST_NAME, download=root + ZIP_NAME)
    else:
        data.update(manifest=release_manifest_url(repository), download=release_download_url(repository))
    return data


def manifest_bytes(data: dict) -> bytes:
    """A manifest as the file's bytes (2-space JSON, trailing newline)."""
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode()


@dataclass(frozen=True, slots=True)
class Package:
    """The module ready to install: its manifest's bytes and the zip's."""

    manifest: bytes
    zip: bytes


def package(base: str | None, folder: Path | None = None, repository: str = REPOSITORY) -> Package:
    """Build the manifest (:func:`manifest`) and zip of the module in ``folder``.

    ``folder`` defaults to :func:`module_dir`. The bridge serves them at ``base``; with None, they
    are released in ``repository``."""
    folder = module_dir() if folder is None else folder
    import zipfile  # (only this builds one: every command imports this module)

    body = manifest_bytes(manifest(folder, base, repository))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo(MANIFEST_NAME, ZIP_TIME), body, zipfile.ZIP_DEFLATED)
        for name in runtime_files(folder):
            archive.writestr(zipfile.ZipInfo(name, ZIP_TIME), (folder / name).read_bytes(),
                             zipfile.ZIP_DEFLATED)
    return Package(body, buffer.getvalue())


def write_release(out: Path, base: str | None, repository: str = REPOSITORY) -> list[Path]:
    """Write ``module.json`` and ``fate-bridge.zip`` (:func:`package`) into ``out`` (created);
    returns their paths."""
    built = package(base, repository=repository)
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / MANIFEST_NAME).write_bytes(built.manifest)
        (out / ZIP_NAME).write_bytes(built.zip)
    except OSError as exc:
        raise ConfigError(f"cannot write the release into {out}: {exc.strerror or exc}; pick another --out") from None
    return [out / MANIFEST_NAME, out / ZIP_NAME]


def manifest_problems(folder: Path) -> list[str]:
    """What keeps the module in ``folder`` (an unpacked zip) from loading.

    That is: a missing or unreadable ``module.json``; a missing ``id``/``title``/``version``; or a
    file it lists (esmodules, scripts, styles, languages) that is not there. Empty when it loads."""
    try:
        data = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [f"{MANIFEST_NAME}: {exc}"]
    problems = [f"{MANIFEST_NAME} has no {key}" for key in ("id", "title", "version") if not data.get(key)]
    listed = [*data.get("esmodules", []), *data.get("scripts", []), *data.get("styles", []),
              *(lang.get("path", "") for lang in data.get("languages", []))]
    problems += [f"{name} is listed but missing" for name in listed if not (folder / name).is_file()]
    return problems
