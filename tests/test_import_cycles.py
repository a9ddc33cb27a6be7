"""No import cycles among the bridge's modules, nor among bench/'s (issue 26).

The walk is ``/work/shared/hooks/import-cycles.py``'s, and stricter: every ``import`` and
``from`` statement anywhere in a module counts (function-level, ``TYPE_CHECKING``-guarded: a lazy
import that hides a cycle is still a cycle), relative imports resolved; importing ``a.b.c`` also
runs the packages ``a`` and ``a.b`` (Python executes their ``__init__`` first), so those count as
imported too, except the module's own enclosing packages.

The layers, each importing only those beneath it (``docs/architecture.md``, Layers):

1. plain values: ``errors``, ``i18n`` (and ``i18n_templates``), ``dice``, ``times``, ``wire`` (the shared messages, no ruleset),
   ``state``, ``cards``, ``fairness.provable``, ``fairness.wire``; and what the shells and the store
   both read: ``config`` (file locations), ``startup`` (one-line startup errors), ``release``;
   ``metrics`` (the counters the session and the server tell, importing nothing of the bridge);
   ``credentials`` (tokens and invite codes: made, hashed, compared); ``findings`` (what a check
   found, as ``doctor`` and the store backends' checks say it); ``charts`` (SVG) and
   ``chi_square`` (the fit test), which a ruleset's part of the audit report draws with;
2. the plug-in interface: ``ruleset``;
3. the rulesets: ``rulesets/<id>/`` (nothing above ``ruleset``);
4. ``registry``: the installed rulesets, the wire union and its decoder;
5. ``record`` (what a decision records) and ``frames`` (its reply frame); ``fairness.decide``
   (provable, physical and overridden dice: a layer of the core, importing no ruleset);
6. ``core``: ``decide``, the one call a decision makes; ``routes``, the table of every message;
7. ``derive``, ``audit``, ``fairness.trail``, ``receipts``, ``heads``: the trail, re-deriving
   through ``core``;
8. ``store``; 9. ``session``; 10. ``server``, ``cli`` and the other shells.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def modules(package: str) -> dict[str, Path]:
    """Every module of ``package`` (a folder under the repository root) by dotted name."""
    found = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that module ``name`` (at ``path``) imports, by any statement."""
    is_package = path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - (node.level - 1)] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            targets.add(module)
            targets.update(f"{module}.{alias.name}" for alias in node.names)
    found: set[str] = set()
    for target in targets:
        while target and target not in known and "." in target:
            target = target.rsplit(".", 1)[0]
        parts = target.split(".")
        for end in range(1, len(parts) + 1):  # the packages Python runs on the way to it, and it
            step = ".".join(parts[:end])
            if step in known and step != name and not name.startswith(step + "."):
                found.add(step)
    return found


def cycles(package: str) -> list[list[str]]:
    """The strongly connected components (more than one module) of ``package``'s import graph."""
    known = modules(package)
    graph = {name: imported(name, path, known) for name, path in known.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


LAYERS = [
    ("bridge", "bridge.errors", "bridge.i18n", "bridge.i18n_templates", "bridge.dice", "bridge.times", "bridge.wire", "bridge.state", "bridge.cards",
     "bridge.fairness", "bridge.fairness.provable", "bridge.fairness.wire", "bridge.config", "bridge.startup",
     "bridge.release", "bridge.metrics", "bridge.credentials", "bridge.findings", "bridge.charts",
     "bridge.chi_square"),
    ("bridge.ruleset",),
    ("bridge.rulesets",),
    ("bridge.registry",),
    ("bridge.record", "bridge.replies", "bridge.fairness.decide"),
    ("bridge.core",),
    ("bridge.derive", "bridge.audit", "bridge.fairness.trail", "bridge.receipts", "bridge.heads"),
    ("bridge.store",),
    ("bridge.session",),
]
"""The layers of the module docstring, bottom first (a name covers its submodules; ``bridge``
itself only its ``__init__``); every other module is a shell, above them all."""

TOOLS = {("bridge.store.dictionary", "bridge.session"), ("bridge.store.dictionary", "bridge.logs")}
"""Imports upwards that are no part of the bridge's run: ``python -m bridge.store.dictionary``
trains the stored blobs' zstd dictionaries by playing the example sessions through a Session."""


def layer(module: str) -> int:
    """The index in :data:`LAYERS` of ``module`` (the longest name that covers it); shells:
    ``len(LAYERS)``."""
    found, length = len(LAYERS), -1
    for index, names in enumerate(LAYERS):
        for name in names:
            covers = module == name or (name != "bridge" and module.startswith(name + "."))
            if covers and len(name) > length:
                found, length = index, len(name)
    return found


def test_every_import_goes_down_the_layers():
    known = modules("bridge")
    upwards = sorted((name, target) for name, path in known.items() for target in imported(name, path, known)
                     if layer(target) > layer(name) and (name, target) not in TOOLS)
    assert upwards == []


@pytest.mark.parametrize("package", ["bridge", "bench"])
def test_no_import_cycles(package):
    assert cycles(package) == []


def test_the_walk_finds_a_lazy_cycle_and_a_parent_package(tmp_path, monkeypatch):
    """The walk itself: a function-level import closing a loop, and an import of ``p.a`` that
    runs ``p/__init__.py`` (which imports back), are both cycles."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from . import b\n")
    (pkg / "b.py").write_text("from .a import f\n")
    (pkg / "sub" / "__init__.py").write_text("from .. import c\n")
    (pkg / "sub" / "x.py").write_text("")
    (pkg / "c.py").write_text("from .sub.x import *\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert cycles("pkg") == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.sub"]]


def test_the_rulesets_import_nothing_above_the_plugin_interface():
    """A ruleset reaches only the plain values and ``bridge.ruleset`` (issue 26)."""
    allowed = {"bridge", "bridge.ruleset", "bridge.wire", "bridge.cards", "bridge.dice", "bridge.state",
               "bridge.errors", "bridge.i18n", "bridge.charts", "bridge.chi_square"}
    known = modules("bridge")
    for name, path in known.items():
        if name.startswith("bridge.rulesets."):
            outside = {m for m in imported(name, path, known) if not m.startswith("bridge.rulesets")}
            assert {m.split(".wire.")[0] if m.startswith("bridge.wire.") else m for m in outside} <= allowed, name
