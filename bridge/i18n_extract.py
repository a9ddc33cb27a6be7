"""A Babel extractor for the rules' tables: the words a ruleset's ``rules.py`` shows on cards.

A ruleset's rules import nothing of the bridge (tests/test_purity.py). So they cannot mark their
words with ``_()``. Instead each ``rules.py`` names the tables whose text is shown, in its
:data:`TABLES_NAME` tuple: ``SHOWN_TABLES = ("SUIT_NAMES", "RANK_NAMES", ...)``. A ``tables =``
option in ``babel.cfg`` would name them instead.

This extractor collects every text in them: string values at any depth. That covers dict values,
tuple items, call arguments, and f-strings made of the module's own constants. It never takes dict
keys, ``key=`` arguments, or identifiers such as ``"act_next"``. The cards translate them with
``_(TABLE[key])`` (``bridge/rulesets/<id>/cards.py``).

Used by ``pybabel extract -F babel.cfg`` (docs/translating.md); never at run time.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import IO, Any

_IDENTIFIER = re.compile(r"[a-z0-9_]+")
TABLES_NAME = "SHOWN_TABLES"  # a rules module's tuple of the names of its tables shown translated


def _is_text(value: str) -> bool:
    """Words a reader sees: some lowercase letter, and not a bare identifier (``"act_next"``)."""
    return bool(re.search(r"[a-z]", value)) and not _IDENTIFIER.fullmatch(value)


def _constants(tree: ast.Module) -> dict[str, str]:
    """The module's ``NAME = "text"`` constants, for f-strings built from them."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            found.update({t.id: node.value.value for t in node.targets if isinstance(t, ast.Name)})
    return found


def _fold(node: ast.JoinedStr, constants: dict[str, str]) -> str | None:
    """An f-string's text when every part is literal or one of the module's text constants."""
    parts = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            parts.append(str(value.value))
        elif isinstance(value, ast.FormattedValue) and isinstance(value.value, ast.Name) \
                and value.value.id in constants and value.format_spec is None:
            parts.append(constants[value.value.id])
        else:
            return None
    return "".join(parts)


def _texts(node: ast.AST, constants: dict[str, str]) -> Iterator[tuple[int, str]]:
    """Every text under ``node``, with its line, skipping dict keys and ``key=`` arguments."""
    skipped: set[int] = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Dict):
            skipped.update(id(k) for k in child.keys if k is not None)
        elif isinstance(child, ast.keyword) and child.arg == "key":
            skipped.add(id(child.value))
        elif isinstance(child, ast.JoinedStr):  # read whole by _fold, never in parts
            skipped.update(id(v) for v in ast.walk(child) if v is not child)
    for child in ast.walk(node):
        if id(child) in skipped:
            continue
        if isinstance(child, ast.Constant) and isinstance(child.value, str):
            text: str | None = child.value
        elif isinstance(child, ast.JoinedStr):
            text = _fold(child, constants)
        elif isinstance(child, ast.Name) and child.id in constants:
            text = constants[child.id]
        else:
            continue
        if text is not None and _is_text(text):
            yield child.lineno, text


def _shown_tables(tree: ast.Module) -> set[str]:
    """The names in the module's ``SHOWN_TABLES = ("A", "B")``; none when it has no such tuple."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == TABLES_NAME for t in node.targets):
            return {e.value for e in getattr(node.value, "elts", ())
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def extract_tables(fileobj: IO[bytes], keywords: Any, comment_tags: Any,
                   options: dict[str, str]) -> Iterator[tuple[int, str | None, str, list[str]]]:
    """Babel's extractor interface: ``(line, None, text, [comment])`` for each text in one
    ``rules.py``'s tables.

    The tables are those ``options["tables"]`` names (space separated), else its :data:`TABLES_NAME`
    tuple."""
    tree = ast.parse(fileobj.read())
    tables = set(options.get("tables", "").split()) or _shown_tables(tree)
    constants = _constants(tree)
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        names = {t.id for t in targets if isinstance(t, ast.Name)}
        if names & tables:
            for line, text in _texts(value, constants):
                yield line, None, text, [f"rules table {', '.join(sorted(names & tables))}"]
