"""docs/architecture.md stays a true map of the code: every module of ``bridge/`` (a ruleset's
own files aside: "Adding a ruleset" lists those) is named in it, every ``bridge/...`` path it
names exists, and its list of layers is the one ``tests/test_import_cycles.py`` enforces."""

from __future__ import annotations

import re

from .helpers import ROOT
from .test_import_cycles import LAYERS

DOC = re.sub(r"```.*?```", "", (ROOT / "docs" / "architecture.md").read_text(), flags=re.S)
NAMED = set(re.findall(r"`([^`\n]+)`", DOC))


def test_every_module_is_named():
    missing = []
    for path in sorted((ROOT / "bridge").rglob("*.py")):
        relative = path.relative_to(ROOT / "bridge")
        if "__pycache__" in path.parts or path.name == "__init__.py" or relative.parts[0] == "rulesets":
            continue
        if not any(name in (str(relative), f"bridge/{relative}", path.name) or name.endswith(f"/{path.name}")
                   for name in NAMED):
            missing.append(str(relative))
    assert missing == [], "name these in docs/architecture.md"


def test_every_path_it_names_exists():
    paths = {name for name in NAMED if re.fullmatch(r"bridge/[\w/]+\.(py|js|j2|css|html)", name)}
    assert paths, "the map names no file"
    assert sorted(p for p in paths if not (ROOT / p).exists()) == []


def _dotted(name: str) -> str:
    """A layer list's entry as a module name: ``store/`` -> ``bridge.store``, ``fairness/wire.py``
    -> ``bridge.fairness.wire``, ``rulesets/<id>/`` -> ``bridge.rulesets``."""
    name = name.split("<")[0].rstrip("/").removesuffix(".py")
    return "bridge." + name.replace("/", ".").rstrip(".")


def test_its_layers_are_the_ones_the_import_test_enforces():
    section = DOC.split("## Layers", 1)[1].split("\n## ", 1)[0]
    items = re.split(r"(?:^|\s)(\d+)\. ", section)[1:]
    documented = {}
    for number, text in zip(items[::2], items[1::2]):
        names = [n for n in re.findall(r"`([^`\n]+)`", text) if re.fullmatch(r"[\w/<>]+(\.py|/)", n)]
        if names:
            documented[int(number)] = {_dotted(n) for n in names}
    # a package listed beside its own modules (``bridge.fairness``: its ``__init__``) goes with them
    enforced = {i + 1: {m for m in layer if m != "bridge" and not any(o.startswith(m + ".") for o in layer)}
                for i, layer in enumerate(LAYERS)}
    assert {k: v for k, v in documented.items() if k in enforced} == enforced
