"""The operator's commands: ``doctor``, ``status``, ``backup``, ``restore``, ``release``.

Their parsers are in :mod:`bridge.cli` with the others. Each ``run_*`` takes the parsed arguments
and returns the exit code:

- 0: all good.
- 1: a check failed, or the bridge could not be asked.
- 2: usage errors, via ``ConfigError``.
"""

from __future__ import annotations

import argparse
import sys

from . import doctor, release, status
from .config import default_audit_key, default_db, default_signing_key
from .errors import ConfigError
from .store import backend_of


async def run_doctor(args: argparse.Namespace) -> int:
    """``fate-bridge doctor``: the local checks, then the module's connection with ``--url``."""
    given = [flag for flag, value in (("--world", args.world), ("--token", args.token),
                                      ("--foundry-url", args.foundry_url)) if value is not None]
    if given and args.url is None:  # they only matter to the connection check: never ignore them silently
        raise ConfigError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} checked over the module's "
                          "connection: give --url too, the bridge URL set in the module (e.g. ws://127.0.0.1:8765)")
    found, database = doctor.check_database(args.db or default_db())
    try:
        found += doctor.check_key(args.audit_key or default_audit_key(), database)
        found += doctor.check_signing_key(args.signing_key or default_signing_key(args.audit_key), database)
        worlds = doctor.registered_worlds(database)
    finally:
        if database is not None:
            database.close()
    found += doctor.check_worlds(worlds)
    found += doctor.check_memory_budget(args.max_worlds_in_memory, worlds)
    if args.url is None:
        found += doctor.check_port(args.host, args.port)
    found += doctor.check_origins(args.origins)
    found += doctor.check_tls(args.tls_cert, args.tls_key)
    if args.url is not None:
        found += await doctor.check_link(args.url, args.world, args.token, foundry_url=args.foundry_url,
                                         ca_file=args.tls_ca, worlds=worlds)
    print(doctor.render(found))
    failed = sum(f.level == "fail" for f in found)
    print(f"\n{failed} problem{'s' if failed != 1 else ''} found." if failed else "\nNo problem found.")
    return 1 if failed else 0


def run_status(args: argparse.Namespace) -> int:
    """``fate-bridge status``: print what the running bridge at ``--url`` is doing."""
    found = status.fetch(args.url, args.token, str(args.tls_ca) if args.tls_ca else None)
    print(status.render(found))
    return 0


def run_backup(args: argparse.Namespace) -> int:
    """``fate-bridge backup PATH``."""
    db = args.db or default_db()
    copied = backend_of(db).backup(db, args.path, overwrite=args.overwrite)
    print(f"Backed up {copied.worlds} worlds and {copied.records} audit records to {copied.path}.\n"
          f"The keys are not in it: keep one copy of {default_audit_key()} and {default_signing_key()} "
          "(or the --audit-key and --signing-key serve uses) apart from the backups.")
    return 0


def run_restore(args: argparse.Namespace) -> int:
    """``fate-bridge restore PATH``."""
    db = args.db or default_db()
    backend = backend_of(db)
    with backend.holding(db, "restore"):  # no serve may start meanwhile either
        copied, kept = backend.restore(args.path, db)
    print(f"Restored {copied.worlds} worlds and {copied.records} audit records into {copied.path}."
          + (f"\nThe database it replaced is kept as {kept}." if kept else "")
          + "\nCheck it with `fate-bridge audit verify`, then start serve again.")
    return 0


def run_release(args: argparse.Namespace) -> int:
    """``fate-bridge release``: write module.json and the zip for a release.

    The release is GitHub's, or a bridge's at ``--public-url``. Prints their paths, then where
    Foundry installs from."""
    if args.tag is not None:
        release.check_tag(args.tag)  # a tag that is not this version's: nothing written
    if args.public_url is not None:
        release.public_base(args.public_url)  # a bad address is refused before anything is written
    for path in release.write_release(args.out, args.public_url, args.repository):
        print(path)
    where = (release.manifest_url(args.public_url) if args.public_url is not None
             else release.release_manifest_url(args.repository))
    print(f"Foundry installs it from {where}", file=sys.stderr)
    return 0
