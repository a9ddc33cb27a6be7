"""``fate-bridge audit list | show | export | verify``: how a GM reads and checks the trail.

Exit codes: 0 success (``verify``: every chain passed), 1 ``verify`` found a problem (or
``show`` found no such record), 2 configuration error (no database, unreadable key).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import TextIO

import msgspec

from .config import default_audit_key, default_db, load_key
from .errors import ConfigError
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
                      row.user_id or ""))
    if not table:
        print("no audit records match", file=out)
        return
    widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(headers)]
    for line in (headers, *table):
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip(), file=out)


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
