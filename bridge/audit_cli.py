"""``fate-bridge audit list | show | export | verify | report``: how a GM reads and checks the trail.

Exit codes: 0 success (``verify``: every chain passed; ``verify --receipts``: every receipt ok),
1 ``verify`` found a problem (or ``show`` found no such record), 2 configuration error (no
database, unreadable key or receipts file).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import TextIO

import msgspec

from .config import default_audit_key, default_db, default_signing_key, load_key, load_signing_key
from .errors import ConfigError
from .receipts import check_receipts, decode_export
from .store import AuditFilter, AuditRow, Store, open_store

SUMMARY_COLUMNS = ("id", "world_id", "seq", "ts", "type", "event_id", "user_id", "ruleset", "message_id",
                   "actor_id", "actor_name", "test_name", "outcome", "label_before", "label_after",
                   "level_before", "level_after", "fate_roll", "point_name", "hash")


async def run_audit(args: argparse.Namespace) -> int:
    """Run one ``audit`` sub-command; returns the exit code. Raises ``ConfigError``."""
    db = args.db or default_db()
    if isinstance(db, Path) and not db.exists():
        raise ConfigError(f"no database at {db}: pass the same --db as `fate-bridge serve`")
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
                _export(rows, args.format, out)
            finally:
                if args.out:
                    out.close()
            if args.out:
                print(f"{len(rows)} records written to {args.out}", file=sys.stderr)
            return 0
        if args.audit_command == "report":
            return await _report(store, args)
        if args.receipts is not None:
            return await _verify_receipts(store, args)
        return await _verify(store, args)
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
    """The USER cell of ``audit list``: ``Player One (PLACEHOLDERusr01)``, the Foundry user's name
    as the recorded message gave it (``user_name`` beside the same ``user_id``) with the id, or the
    id alone when the message named nobody; empty for a record no user asked for."""
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


async def _verify(store: Store, args: argparse.Namespace) -> int:
    key_path = args.audit_key or default_audit_key()
    key = load_key(key_path, create=False)
    if key is None:
        print(f"note: no audit key at {key_path}: signed checkpoints cannot be checked", file=sys.stderr)
    reports = await store.verify(args.world, key)
    if not reports:
        print("no audit records to verify")
        return 0
    failed = False
    for report in reports:
        status = "PASS" if report.ok else "FAIL"
        checkpoint = f", signed up to record {report.last_checkpoint}" if report.last_checkpoint else ""
        print(f"{status} {report.world_id}: {report.records} records{checkpoint}")
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


async def _report(store: Store, args: argparse.Namespace) -> int:
    """``audit report``: write the world's report page (bridge/report.py) to ``--out``."""
    from .report import draw

    rows = await store.audit_rows(AuditFilter(world_id=args.world, since=args.since, until=args.until))
    if not rows:
        print(f"note: world {args.world!r} has no audit records{' since ' + args.since if args.since else ''}: "
              "the page will be empty (see `fate-bridge audit list`)", file=sys.stderr)
    html = await draw(rows, args.world, args.since)
    try:
        args.out.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write {args.out}: {exc.strerror}; pick another --out") from None
    print(f"report of {args.world!r} ({len(rows)} records) written to {args.out}", file=sys.stderr)
    return 0


async def _verify_receipts(store: Store, args: argparse.Namespace) -> int:
    """``verify --receipts FILE``: each exported receipt against the database (see
    :func:`bridge.receipts.check_receipts`); names every missing or changed record."""
    try:
        export = decode_export(args.receipts.read_bytes(), str(args.receipts))
    except OSError as exc:
        raise ConfigError(f"cannot read the receipts file {args.receipts}: {exc.strerror}") from None
    key_path = args.signing_key or default_signing_key(args.audit_key)
    key = load_signing_key(key_path, create=False)
    if key is None:
        raise ConfigError(f"no receipt signing key at {key_path}: pass the --signing-key serve used "
                          "(receipts cannot be checked without it)")
    stored = await store.audit_hashes(export.world_id, [r.seq for r in export.receipts])
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
