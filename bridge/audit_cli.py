"""``fate-bridge audit list | show | export | verify | report | public-key | new-key | repair``.

How a GM reads, checks, exports and repairs the trail.

Exit codes:

- 0: success. For ``verify``, every world passed; for ``verify --receipts``, every receipt is ok.
- 1: ``verify`` found a problem (a missing, empty or truncated database is one). Or ``repair``
  found the chain itself broken, or ``show`` found no such record.
- 2: configuration error: no database, unreadable key or file.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path
from typing import TextIO

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from . import audit, i18n, trail_file
from .config import db_label, default_audit_key, default_db, default_signing_key, load_key, load_signing_key
from .errors import ConfigError
from .heads import parse_public_key, public_key_text
from .receipts import check_receipts, decode_export, key_id
from .store import AuditFilter, AuditRow, Store, TrailReader, backend_of, open_store
from .store.audit_rows import DatabaseUnreadable

SUMMARY_COLUMNS = ("id", "world_id", "seq", "ts", "type", "event_id", "user_id", "ruleset", "message_id",
                   "actor_id", "actor_name", "test_name", "outcome", "label_before", "label_after",
                   "level_before", "level_after", "fate_roll", "point_name", "hash")


async def run_audit(args: argparse.Namespace) -> int:
    """Run one ``audit`` sub-command; returns the exit code. Raises ``ConfigError``."""
    db = getattr(args, "db", None) or default_db()  # a file, or a postgresql:// URL
    if args.audit_command == "verify":
        if args.file is not None:
            return _verify_file(args)
        return await _verify_database(db, args)
    if args.audit_command == "public-key":
        return _public_key(args)
    backend = backend_of(db)
    if not backend.exists(db):
        raise ConfigError(f"no database at {db}: pass the same --db as `fate-bridge serve`")
    if args.audit_command == "export" and _trail_format(args) == "trail":
        return _export_trail(db, args)
    if args.audit_command in ("new-key", "repair"):
        # each rewrites every chain it touches: never beside a running serve (bridge/startup.py)
        with backend.holding(db, args.audit_command):
            return await (_new_key if args.audit_command == "new-key" else _repair)(db, args)
    store = await open_store(db)
    try:
        if args.audit_command == "list":
            rows = await store.audit_rows(_filter(args, limit=args.limit or None))
            _print_table(rows, sys.stdout)
            return 0
        if args.audit_command == "show":
            row = await store.audit_row(args.id)
            if row is None:
                print(f"fate-bridge: no audit record with ID {args.id} (see `fate-bridge audit list`)",
                      file=sys.stderr)
                return 1
            print(json.dumps(_full(row), indent=2, ensure_ascii=False))
            return 0
        if args.audit_command == "export":
            rows = list(reversed(await store.audit_rows(_filter(args))))  # oldest first
            out = open(args.out, "w", newline="", encoding="utf-8") if args.out else sys.stdout
            try:
                _export(rows, _trail_format(args), out)
            finally:
                if args.out:
                    out.close()
            if args.out:
                print(f"{len(rows)} records written to {args.out}", file=sys.stderr)
            return 0
        return await _report(store, args)
    finally:
        await store.close()


def _filter(args: argparse.Namespace, limit: int | None = None) -> AuditFilter:
    return AuditFilter(world_id=args.world, actor_id=args.actor, ruleset=args.ruleset,
                       outcome=args.outcome, since=args.since, until=args.until, limit=limit)


def _summary_row(row: AuditRow) -> dict[str, object]:
    values: dict[str, object] = {"id": row.id, "world_id": row.world_id, "seq": row.seq, "ts": row.ts,
                                 "type": row.type, "event_id": row.event_id, "user_id": row.user_id,
                                 "hash": row.hash}
    values.update(msgspec.structs.asdict(row.summary))
    return {column: values.get(column) for column in SUMMARY_COLUMNS}


def _full(row: AuditRow) -> dict[str, object]:
    return {"id": row.id, "world_id": row.world_id, "seq": row.seq, "prev_hash": row.prev_hash,
            "hash": row.hash, "record": msgspec.json.decode(row.record)}


def _print_table(rows: list[AuditRow], out: TextIO) -> None:
    headers = ("ID", "TIME (UTC)", "WORLD", "#", "TYPE", "ACTOR", "TEST", "LEVEL", "FATE", "POINT", "OUTCOME", "USER")
    table = []
    for row in rows:
        s = row.summary
        level = s.label_before or ""
        if s.label_after:
            level += f" -> {s.label_after}"
        table.append((str(row.id), row.ts[:19].replace("T", " "), row.world_id, str(row.seq), row.type,
                      s.actor_name or "", s.test_name or "", level,
                      "" if s.fate_roll is None else str(s.fate_roll), s.point_name or "", s.outcome,
                      _user(row)))
    if not table:
        print("no audit records match", file=out)
        return
    widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(headers)]
    for line in (headers, *table):
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip(), file=out)


def _user(row: AuditRow) -> str:
    """The USER cell of ``audit list``, as ``Player One (PLACEHOLDERusr01)``.

    That is the Foundry user's name as the recorded message gave it (``user_name`` beside the same
    ``user_id``), with the id. The id alone when the message named nobody. Empty for a record no
    user asked for."""
    if not row.user_id:
        return ""
    message = msgspec.json.decode(row.record).get("message")
    name = message.get("user_name") if isinstance(message, dict) and message.get("user_id") == row.user_id else None
    return f"{name} ({row.user_id})" if isinstance(name, str) and name else row.user_id


def _export(rows: list[AuditRow], fmt: str, out: TextIO) -> None:
    if fmt == "jsonl":
        for row in rows:
            out.write(json.dumps(_full(row), ensure_ascii=False, separators=(",", ":")) + "\n")
        return
    writer = csv.DictWriter(out, fieldnames=SUMMARY_COLUMNS)
    writer.writeheader()
    for row in rows:
        writer.writerow(_summary_row(row))


async def _report(store: Store, args: argparse.Namespace) -> int:
    """``audit report``: write the world's report page (bridge/report.py) to ``--out``.

    It is in ``--lang``, else the world's language: its last hello's, English when none is known."""
    from .report import draw

    rows = await store.audit_rows(AuditFilter(world_id=args.world, since=args.since, until=args.until))
    if not rows:
        print(f"note: world {args.world!r} has no audit records{' since ' + args.since if args.since else ''}: "
              "the page will be empty (see `fate-bridge audit list`)", file=sys.stderr)
    language = args.lang
    if language is None:
        world = await store.world(args.world)
        language = world and world.language
    with i18n.using(language):
        html = await draw(rows, args.world, args.since)
    try:
        args.out.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write {args.out}: {exc.strerror}; pick another --out") from None
    print(f"report of {args.world!r} ({len(rows)} records) written to {args.out}", file=sys.stderr)
    return 0


async def _verify_receipts(trail: TrailReader, args: argparse.Namespace) -> int:
    """``verify --receipts FILE``: each exported receipt against the database.

    See :func:`bridge.receipts.check_receipts`. Names every missing or changed record."""
    try:
        export = decode_export(args.receipts.read_bytes(), str(args.receipts))
    except OSError as exc:
        raise ConfigError(f"cannot read the receipts file {args.receipts}: {exc.strerror}") from None
    key_path = args.signing_key or default_signing_key(args.audit_key)
    key = load_signing_key(key_path, create=False)
    if key is None:
        raise ConfigError(f"no receipt signing key at {key_path}: pass the --signing-key serve used "
                          "(receipts cannot be checked without it)")
    stored = await trail.audit_hashes(export.world_id, [receipt.seq for receipt in export.receipts])
    results = check_receipts(key.public_key(), export.world_id, export.receipts, stored)
    counts = {status: sum(r.status == status for r in results) for status in ("ok", "missing", "changed")}
    bad = [r for r in results if r.status != "ok"]
    print(f"{'FAIL' if bad else 'PASS'} {export.world_id}: {len(results)} receipts, {counts['ok']} ok, "
          f"{counts['missing']} missing, {counts['changed']} changed")
    for result in bad:
        what = ("no longer in the trail (deleted)" if result.status == "missing" else
                "not as the receipt says (rewritten, or the receipt is not signed by this bridge's key)")
        print(f"  - [{result.status}] record {result.seq} (receipt hash {result.record_hash[:16]}...): {what}")
    return 1 if bad else 0


def _public_key_to_trust(args: argparse.Namespace) -> Ed25519PublicKey | None:
    """``--public-key``, else the public half of the signing key file (when there is one)."""
    if args.public_key:
        try:
            return parse_public_key(args.public_key)
        except ValueError as exc:
            raise ConfigError(f"--public-key: {exc}; copy it from `fate-bridge audit public-key`") from None
    key = load_signing_key(args.signing_key or default_signing_key(args.audit_key), create=False)
    return None if key is None else key.public_key()


class _Progress:
    """``verifying WORLD: N records, R/s`` on stderr, rewritten in place: only on a terminal."""

    def __init__(self) -> None:
        self.shown = sys.stderr.isatty()
        self._start = time.monotonic()

    def __call__(self, world_id: str, records: int) -> None:
        if self.shown:
            rate = records / max(time.monotonic() - self._start, 1e-9)
            sys.stderr.write(f"\r  verifying {world_id}: {records} records ({rate:,.0f}/s)\033[K")
            sys.stderr.flush()

    def done(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


async def _verify_database(db: Path | str, args: argparse.Namespace) -> int:
    """``audit verify``: every world the database knows of, read-only; nothing is created.

    It goes through the store protocol's :meth:`~bridge.store.base.TrailReader.verify`."""
    try:
        database = backend_of(db).open_readonly(db)
    except DatabaseUnreadable as exc:
        print(f"FAIL: {exc}; verify the database serve uses (--db), or restore it from a backup")
        return 1
    try:
        if args.receipts is not None:
            return await _verify_receipts(database, args)
        key_path = args.audit_key or default_audit_key()
        key = load_key(key_path, create=False)
        # a key missing or another one is said once; the worlds are then checked without it (their
        # signed heads still vouch for them), not each failed for it
        key_problem = audit_key_problem(database.latest_checkpoints(), key, key_path)
        progress = _Progress()
        reports = await database.verify(args.world, None if key_problem else key, _public_key_to_trust(args),
                                        progress)
        progress.done()
    finally:
        database.close()
    if key_problem:
        print(f"FAIL audit key: {key_problem}")
    if not reports:
        print(f"FAIL: the database {db_label(db)} knows of no world (no registry row, no trail): "
              "if it had any, their rows were deleted")
        return 1
    return max(_print_reports(reports), 1 if key_problem else 0)


def _verify_file(args: argparse.Namespace) -> int:
    """``audit verify FILE``: an exported trail, with no database."""
    try:
        data = args.file.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {args.file}: {exc.strerror}") from None
    public_key = _public_key_to_trust(args)
    progress = _Progress()
    trail = trail_file.decode(data, str(args.file))
    report = audit.verify_world(trail, None, public_key, lambda n: progress(trail.world_id, n))
    progress.done()
    return _print_reports([report])


def _print_reports(reports: list[audit.WorldReport]) -> int:
    failed = False
    for report in reports:
        status = "PASS" if report.ok else "FAIL"
        signed = f", signed up to record {report.last_checkpoint}" if report.last_checkpoint else ""
        keys = f" (key {', '.join(report.key_ids)})" if report.key_ids else ""
        print(f"{status} {report.world_id}: {report.records} records{signed}{keys}")
        if report.problems:
            failed = True
            first = next((p.seq for p in report.problems if p.seq), None)
            if first is not None:
                print(f"  first bad record: {first}")
            for problem in report.problems:
                print(f"  - [{problem.kind}] {problem.detail}")
        for note in report.notes:
            print(f"  note: {note}")
    return 1 if failed else 0


def _trail_format(args: argparse.Namespace) -> str:
    """``--format``; unset: ``trail`` for ``--world`` alone, else ``jsonl``."""
    if args.format:
        return args.format
    filtered = any((args.actor, args.ruleset, args.outcome, args.since, args.until))
    return "trail" if args.world and not filtered else "jsonl"


def _export_trail(db: Path | str, args: argparse.Namespace) -> int:
    """``audit export --world W``: the world's whole trail for ``audit verify FILE``."""
    if not args.world:
        raise ConfigError("--format trail exports one world's whole trail: add --world WORLD_ID")
    if any((args.actor, args.ruleset, args.outcome, args.since, args.until)):
        raise ConfigError("a trail is exported whole (a filtered one could not be verified): drop the "
                          "filters, or use --format jsonl")
    try:
        database = backend_of(db).open_readonly(db)
    except DatabaseUnreadable as exc:
        raise ConfigError(str(exc)) from None
    try:
        rows, heads, checkpoints = database.trail(args.world)
    finally:
        database.close()
    data = trail_file.encode(args.world, rows, heads, checkpoints)
    if not rows:
        raise ConfigError(f"world {args.world!r} has no audit records (see `fate-bridge audit list`)")
    if args.out:
        try:
            args.out.write_bytes(data)
        except OSError as exc:
            raise ConfigError(f"cannot write {args.out}: {exc.strerror}; pick another --out") from None
        print(f"{len(rows)} records of {args.world!r} written to {args.out}; check it anywhere with "
              f"`fate-bridge audit verify {args.out} --public-key KEY`", file=sys.stderr)
    else:
        sys.stdout.buffer.write(data + b"\n")
    return 0


def _public_key(args: argparse.Namespace) -> int:
    """``audit public-key``: the key anyone may check receipts and exported trails with."""
    path = args.signing_key or default_signing_key(args.audit_key)
    key = load_signing_key(path, create=False)
    if key is None:
        raise ConfigError(f"no signing key at {path}: `fate-bridge serve` makes one on its first start "
                          "(or pass --signing-key)")
    print(public_key_text(key.public_key()))
    print(f"key id: {key_id(key.public_key())}", file=sys.stderr if args.key_only else sys.stdout)
    return 0


def signing_key_problem(signed_by: set[str], key: Ed25519PrivateKey | None, path: Path) -> str | None:
    """What is wrong with the signing key ``key``, read from ``path`` (None: no file).

    ``signed_by`` are the public keys that signed the worlds' latest heads. Returns None when
    nothing is signed yet, or all by this key. Else the sentence saying what to do. The key is never
    replaced silently: ``audit new-key`` does it, in the chain."""
    if not signed_by:
        return None
    names = ", ".join(sorted(audit.key_id_of(k) for k in signed_by))
    if key is None:
        return (f"the audit trail is signed by key {names}, but there is no signing key at {path}: "
                "restore that key from your backup (or pass --signing-key), or start a new key "
                "explicitly with `fate-bridge audit new-key` (recorded in every world's chain)")
    if signed_by != {public_key_text(key.public_key())}:
        return (f"the audit trail is signed by key {names}, not by the key at {path} "
                f"({key_id(key.public_key())}): pass the --signing-key that signed it, or start "
                "this one explicitly with `fate-bridge audit new-key`")
    return None


def audit_key_problem(signed: list[tuple[str, int, str, str]], key: bytes | None, path: Path) -> str | None:
    """What is wrong with the audit key ``key``, read from ``path`` (None: no file).

    ``signed`` are the worlds' latest HMAC checkpoints (``latest_checkpoints``). Returns None when
    there is no checkpoint, or the key signed one of them. A checkpoint it did not sign is then a
    world's problem, for ``audit verify``. Else the sentence naming the file and what to restore."""
    if not signed:
        return None
    if key is None:
        return (f"the audit trail's checkpoints were signed with an audit key, but there is none at {path}: "
                "restore audit.key from your backup, or give --audit-key its path")
    if any(audit.checkpoint_mac(key, world_id, seq, record_hash) == mac for world_id, seq, record_hash, mac in signed):
        return None
    return (f"the audit key at {path} did not sign this database's checkpoints (it is another key): restore "
            "the audit.key serve used with this database from your backup, or give --audit-key its path")


def check_keys(db: Path | str, audit_key: bytes | None, audit_path: Path, signing_key: Ed25519PrivateKey | None,
               signing_path: Path) -> None:
    """Refuse keys that did not sign the trail in ``db``, before anything opens it to write.

    So a refused start writes nothing. First the signing key (:func:`signing_key_problem`), then the
    audit key (:func:`audit_key_problem`). Each is loaded from its path (None: no file there).
    Read-only. A database that does not exist yet, or cannot be read, has nothing to check here;
    opening the store says what is wrong with it. Raises ``ConfigError`` with the first problem's
    sentence."""
    backend = backend_of(db)
    if not backend.exists(db):
        return
    try:
        database = backend.open_readonly(db)
    except DatabaseUnreadable:
        return
    try:
        signed_by, checkpoints = database.signers(), database.latest_checkpoints()
    finally:
        database.close()
    if problem := (signing_key_problem(signed_by, signing_key, signing_path)
                   or audit_key_problem(checkpoints, audit_key, audit_path)):
        raise ConfigError(problem)


def make_missing_keys(store: Store, audit_path: Path, signing_path: Path) -> list[Path]:
    """Make the keys ``store`` lacks, at their paths, and give them to it.

    This is for serve's first start on a trail :func:`check_keys` passed (nobody signed it yet), or
    one ``resolve --db`` wrote. Returns the paths of the keys made. Raises ``ConfigError`` when a
    key cannot be written."""
    made = []
    if store.signing_key is None:
        store.signing_key = load_signing_key(signing_path, create=True)
        made.append(signing_path)
    if store.audit_key is None:
        store.audit_key = load_key(audit_path, create=True)
        made.append(audit_path)
    return made


async def _new_key(db: Path | str, args: argparse.Namespace) -> int:
    """``audit new-key``: a new signing key, written into every world's chain as a key change."""
    path = (args.signing_key or default_signing_key(args.audit_key)).expanduser()
    old = load_signing_key(path, create=False)
    new = Ed25519PrivateKey.generate()
    store = await open_store(db, signing_key=old)
    try:
        fresh = path.with_name(path.name + ".new")
        fresh.unlink(missing_ok=True)
        load_signing_key(fresh, create=True, key=new)
        try:
            worlds = await store.new_key(old, new)
        except BaseException:
            fresh.unlink(missing_ok=True)
            raise
        if old is not None:
            path.rename(path.with_name(f"{path.name}.{key_id(old.public_key())}.old"))
        fresh.rename(path)
    finally:
        await store.close()
    print(f"new signing key {key_id(new.public_key())} at {path}"
          + (f" (the old one, {key_id(old.public_key())}, kept beside it)" if old else " (no old key was found)"))
    print(f"key change recorded in {len(worlds)} world(s): {', '.join(worlds) or '-'}")
    print(f"public key: {public_key_text(new.public_key())}")
    return 0


async def _repair(db: Path | str, args: argparse.Namespace) -> int:
    """``audit repair --world W``: the world's state rebuilt from its chain, sealed in a new head."""
    path = args.signing_key or default_signing_key(args.audit_key)
    key_path = args.audit_key or default_audit_key()
    audit_key, signing_key = load_key(key_path, create=False), load_signing_key(path, create=False)
    check_keys(db, audit_key, key_path, signing_key, path)  # the keys verify finds, as serve checks them
    store = await open_store(db, audit_key=audit_key, signing_key=signing_key)
    try:
        for made in make_missing_keys(store, key_path, path):
            print(f"note: no trail here was signed yet (written by `fate-bridge resolve --db`?): made the "
                  f"{'signing' if made == path else 'audit'} key {made}, as serve's first start would", file=sys.stderr)
        report = await store.repair(args.world)
    finally:
        await store.close()
    edited = [p for p in report.problems if p.kind == "state"]
    if not report.chain_ok:
        print(f"FAIL {args.world}: the chain itself does not verify, so its state cannot be trusted; "
              "nothing was written:")
        for problem in report.problems:
            if problem.kind != "state":
                print(f"  - [{problem.kind}] {problem.detail}")
        return 1
    print(f"repaired {args.world}: state rebuilt from {report.records} records"
          f" ({len(edited)} difference(s) fixed)")
    for problem in edited:
        print(f"  - {problem.detail}")
    return 0
