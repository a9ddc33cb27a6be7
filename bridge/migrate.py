"""``fate-bridge migrate``: copy a table's data from one database to another, row for row.

It copies a SQLite file to PostgreSQL, or back. The rows are worlds, their state, the event ids'
replies, audit trails, signed checkpoints and signed heads, invite codes and registration requests.
Both backends keep the same tables and columns. So a copied audit chain verifies on the target as on
the source: same bytes, same hashes, same record ids.

The source is opened as the bridge would open it; an older SQLite file is upgraded first. The target
must hold no world yet, so nothing is mixed or overwritten. Leases are not copied: they belong to
the processes of one database.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .config import db_label
from .errors import ConfigError
from .store import AuditFilter, backend_of, open_store
from .store.schema import TABLES as SHARED_TABLES

# Not copied: a world's state seal (bridge/store/seal.py) only ever saves work at a load; left NULL
# (none yet), the target checks the world's state as without one, and its next batch seals it.
NOT_COPIED = {("worlds", "state_seal")}
# table -> (its columns, the columns holding bytes), from the tables both backends keep
# (bridge/store/schema.py, TABLES), in dependency order
TABLES: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {
    table: (tuple(column for column in columns if (table, column) not in NOT_COPIED),
            frozenset(column for column, kind in columns.items() if kind == "bytes"))
    for table, columns in SHARED_TABLES.items()
}
BATCH_ROWS = 2000  # rows read and inserted per statement batch


async def migrate(source: Path | str, target: Path | str) -> dict[str, int]:
    """Copy every row of ``TABLES`` from ``source`` to ``target``; returns the rows copied per
    table. Raises ``ConfigError`` when the source is missing, the target holds worlds already,
    or either cannot be opened. The target's writes are one transaction: all or nothing."""
    if not backend_of(source).exists(source):
        raise ConfigError(f"no database at {source}: --from names the file `fate-bridge serve --db` used")
    if str(source) == str(target):
        raise ConfigError("--from and --to name the same database")
    src = await open_store(source)
    try:
        dst = await open_store(target)
        try:
            if await dst.worlds() or await dst.audit_rows(AuditFilter(limit=1)):
                raise ConfigError(f"{db_label(target)} holds a table already: migrate into an empty database")
            tables = {name: await src._run(_read_all, src, name) for name in TABLES}  # type: ignore[attr-defined]
            return await dst._run(dst._transaction, lambda conn: _write_all(conn, tables, dst))  # type: ignore[attr-defined]
        finally:
            await dst.close()
    finally:
        await src.close()


def _read_all(store: Any, table: str) -> list[tuple]:
    columns, blobs = TABLES[table]
    rows = store._conn.execute(f"SELECT {', '.join(columns)} FROM {table}").fetchall()
    if not blobs:
        return rows
    at = [i for i, c in enumerate(columns) if c in blobs]
    return [tuple(v.encode() if i in at and isinstance(v, str) else v for i, v in enumerate(row)) for row in rows]


def _write_all(conn: Any, tables: dict[str, list[tuple]], dst: Any) -> dict[str, int]:
    """Insert the ``tables``' rows through ``dst``'s connection ``conn``, then let it continue the ids.

    The tables are those its backend names (``BatchWriter._copy_target``). The ids continue after
    the copied ones."""
    counts = {}
    for table, rows in tables.items():
        columns, _ = TABLES[table]
        sql = f"INSERT INTO {dst._copy_target(table)} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
        for start in range(0, len(rows), BATCH_ROWS):
            conn.executemany(sql, rows[start:start + BATCH_ROWS])
        counts[table] = len(rows)
    dst._copied(conn)
    return counts
