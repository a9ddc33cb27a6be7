"""The core stays pure: rules import no I/O, clock or randomness; only the shell does.

Checked for every ruleset package (``bridge/rulesets/*/rules.py`` and ``decide.py``, relative
imports included: a rule may not reach I/O through a sibling module either), the shared core
(router, state, cards, audit, wire) and the session, which may touch secrets and hashing for
tokens but never a socket, the clock or a file.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BRIDGE = Path(__file__).resolve().parent.parent / "bridge"
RULESETS = sorted(p for p in (BRIDGE / "rulesets").iterdir() if (p / "__init__.py").is_file())
PURE_STDLIB = {"__future__", "re", "dataclasses", "typing", "collections", "collections.abc", "enum", "math",
               "functools", "itertools"}
FORBIDDEN = {"random", "secrets", "time", "datetime", "os", "sys", "socket", "sqlite3", "asyncio", "pathlib",
             "io", "websockets", "structlog", "subprocess", "uuid", "threading", "concurrent", "shutil",
             "tempfile", "urllib", "http", "select", "signal"}
# The session hashes and makes tokens (secrets, hashlib, hmac) and logs; nothing else of the shell.
SESSION_ALLOWED = {"secrets", "structlog"}
# ``bridge/dice.py`` holds the Dice protocol a decision is given and the shell's SecretDice beside
# it: the one place randomness comes from, injected. A decision imports the protocol only (its
# own imports are checked by test_core_modules_do_no_io). ``bridge/times.py`` reads the times a GM
# asks the trail about with datetime's calendar (which dates exist, zone offsets), never its
# clock (tests/test_times.py checks it names none).
# ``bridge/credentials.py`` makes world tokens and invite codes from ``secrets`` and hashes them
# for the session (no clock, no store).
INJECTED = {"dice.py": {"secrets"}, "times.py": {"datetime"}, "credentials.py": {"secrets"}}


def _module_of(path: Path) -> str:
    parts = path.relative_to(BRIDGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports, absolute names; relative imports resolved (``from ..x
    import y`` in ``bridge/rulesets/sohl/decide.py`` -> ``bridge.rulesets.x`` and
    ``bridge.rulesets.x.y``, since ``y`` may be a module)."""
    package = _module_of(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                names.add(node.module)
                continue
            base = package[: len(package) - node.level + 1]
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def _top(names: set[str]) -> set[str]:
    return {n.split(".")[0] for n in names}


def _bridge_file(module: str) -> Path | None:
    path = BRIDGE.parent.joinpath(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def reachable(path: Path) -> dict[Path, set[str]]:
    """Every bridge module ``path`` imports, directly or through other bridge modules, with the
    outside modules each one imports. Stops at the shared wire and core (checked on their own)."""
    seen: dict[Path, set[str]] = {}
    todo = [path]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        names = imports(current)
        seen[current] = {n for n in names if not n.startswith("bridge")}
        todo.extend(p for n in names if n.startswith("bridge") and (p := _bridge_file(n)) is not None)
    return seen


@pytest.mark.parametrize("path", [r / "rules.py" for r in RULESETS], ids=lambda p: f"{p.parent.name}/rules.py")
def test_rules_import_only_pure_stdlib(path):
    own = imports(path)
    outside = {n for n in own if not n.startswith("bridge")}
    assert outside <= PURE_STDLIB, outside - PURE_STDLIB
    assert not {n for n in own if n.startswith("bridge")}, "a ruleset's rules import nothing of the bridge"


def test_every_ruleset_has_its_files():
    assert [r.name for r in RULESETS] == ["hmtw", "mythic", "pool", "sohl"]
    for ruleset in RULESETS:
        for name in ("rules.py", "wire.py", "decide.py", "cards.py", "__init__.py"):
            assert (ruleset / name).is_file(), f"{ruleset.name}/{name}"
        assert list((ruleset / "templates").glob("*.j2")), f"{ruleset.name} has no card templates"


@pytest.mark.parametrize("path", [r / "decide.py" for r in RULESETS], ids=lambda p: f"{p.parent.name}/decide.py")
def test_decide_reaches_no_io_through_any_import(path):
    for module, outside in reachable(path).items():
        found = _top(outside) & FORBIDDEN - INJECTED.get(module.name, set())
        assert not found, (module.relative_to(BRIDGE), found)


CORE = ["core.py", "registry.py", "record.py", "replies.py", "ruleset.py", "state.py", "cards.py", "audit.py",
        *[f"wire/{p.name}" for p in (BRIDGE / "wire").glob("*.py")],
        *[f"rulesets/{r.name}/{p.name}" for r in RULESETS for p in r.glob("*.py")]]


@pytest.mark.parametrize("name", CORE)
def test_core_modules_do_no_io(name):
    assert not (_top(imports(BRIDGE / name)) & FORBIDDEN)


def test_the_session_imports_no_io_but_token_hashing_and_its_log():
    for module, outside in reachable(BRIDGE / "session.py").items():
        allowed = SESSION_ALLOWED if module.name == "session.py" else INJECTED.get(module.name, set())
        found = _top(outside) & FORBIDDEN - allowed
        assert not found, (module.relative_to(BRIDGE), found)


def test_the_import_checker_resolves_relative_imports():
    names = imports(BRIDGE / "rulesets" / "sohl" / "decide.py")
    assert {"bridge.rulesets.sohl.rules", "bridge.dice", "bridge.state"} <= names
