"""The core stays pure: rules import no I/O, clock or randomness; only the shell does."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BRIDGE = Path(__file__).resolve().parent.parent / "bridge"
PURE_STDLIB = {"__future__", "re", "dataclasses", "typing", "collections", "collections.abc", "enum", "math",
               "functools", "itertools"}
FORBIDDEN = {"random", "secrets", "time", "datetime", "os", "sys", "socket", "sqlite3", "asyncio", "pathlib",
             "io", "websockets", "structlog", "subprocess", "uuid"}


def imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", sorted((BRIDGE / "rules").glob("*.py")), ids=lambda p: p.name)
def test_rules_import_only_pure_stdlib(path):
    assert imports(path) <= PURE_STDLIB, imports(path) - PURE_STDLIB


CORE = ["dispatch.py", "state.py", "cards.py", "audit.py", *[f"wire/{p.name}" for p in (BRIDGE / "wire").glob("*.py")],
        *[f"decisions/{p.name}" for p in (BRIDGE / "decisions").glob("*.py")]]


@pytest.mark.parametrize("name", CORE)
def test_core_modules_do_no_io(name):
    assert not (imports(BRIDGE / name) & FORBIDDEN)
