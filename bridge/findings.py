"""What a check found (``fate-bridge doctor``).

A finding is ``ok``, ``warn`` (works, but worth knowing) or ``fail`` (this breaks the table). Each
warning and failure comes with its fix.

Plain values. So the checks of a store backend (bridge/store/backends.py, ``inspect``) and the
doctor's own (bridge/doctor.py) speak alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Level = Literal["ok", "warn", "fail"]
LABELS = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}


@dataclass(frozen=True, slots=True)
class Finding:
    """One result: its ``level``, what was found, and (for warn/fail) how to fix it."""

    level: Level
    what: str
    fix: str | None = None


def ok(what: str) -> Finding:
    return Finding("ok", what)


def warn(what: str, fix: str) -> Finding:
    return Finding("warn", what, fix)


def fail(what: str, fix: str) -> Finding:
    return Finding("fail", what, fix)


def render(findings: Iterable[Finding]) -> str:
    """Findings as terminal lines: ``ok``/``WARN``/``FAIL``, then the fix indented below."""
    lines = []
    for found in findings:
        lines.append(f"{LABELS[found.level]}  {found.what}")
        if found.fix:
            lines.append(f"      fix: {found.fix}")
    return "\n".join(lines)
