"""tests/README.md's map from each module of ``bridge/`` to its tests stays true: every module is
listed, and every test file it names exists."""

from __future__ import annotations

import re

from .helpers import ROOT

MAP = (ROOT / "tests" / "README.md").read_text()
ROW = re.compile(r"^\| `(bridge/[^`]+\.py)` \| (.+) \|$", re.M)


def test_every_module_of_the_bridge_is_in_the_map():
    listed = {module for module, _ in ROW.findall(MAP)}
    modules = {str(p.relative_to(ROOT)) for p in (ROOT / "bridge").rglob("*.py") if "__pycache__" not in p.parts}
    assert sorted(modules - listed) == [], "add these to tests/README.md"
    assert sorted(listed - modules) == [], "these are gone: take them out of tests/README.md"


def test_every_test_file_the_map_names_exists():
    for module, tests in ROW.findall(MAP):
        named = re.findall(r"`([^`]+)`", tests)
        assert named, f"{module}: no test file named"
        missing = [name for name in named if not (ROOT / "tests" / name).is_file()]
        assert missing == [], f"{module}: {missing} not in tests/"
