"""The README's "what you should see": each ``resolve --cards < examples/...`` command, run as the
README says, prints the lines its ``text`` block shows, in that order (a line ``...`` marks lines
left out). Keeps the README's pasted output true to the code."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import ROOT, run_bridge

README = (ROOT / "README.md").read_text()
EXAMPLE_BLOCK = re.compile(
    r"```sh\n\.venv/bin/fate-bridge resolve --cards < (examples/\S+)\n```\n.*?```text\n(.*?)```", re.S)
SHOWN = {example: block.splitlines() for example, block in EXAMPLE_BLOCK.findall(README)}


def test_every_ruleset_example_shows_its_output():
    assert sorted(SHOWN) == [f"examples/{r}-session.jsonl" for r in ("hmtw", "mythic", "pool", "sohl")]


@pytest.mark.parametrize("example", sorted(SHOWN))
def test_the_shown_lines_are_printed_in_order(example):
    result = run_bridge("resolve", "--cards", stdin=(ROOT / example).read_text())
    assert result.returncode == 0, result.stderr
    printed = iter(result.stderr.splitlines())
    for line in (shown for shown in SHOWN[example] if shown != "..."):
        assert any(out == line for out in printed), f"README's {example} output: {line!r} not printed (in this order)"


SERVE_BLOCK = re.search(r"What you should see, after pip's lines \(the paths are yours\):\n\n```text\n(.*?)```",
                        README, re.S)


def test_the_first_run_of_serve_prints_what_the_readme_shows(tmp_path):
    """README's first command on a fresh machine: ``serve`` prints exactly the block it shows
    (home folder /home/you, port 8765, run as .venv/bin/fate-bridge), and nothing else first."""
    env = {**os.environ, "HOME": str(tmp_path)}
    for name in ("FATE_BRIDGE_DB", "FATE_BRIDGE_AUDIT_KEY", "FATE_BRIDGE_SIGNING_KEY", "FATE_BRIDGE_PUBLIC_URL"):
        env.pop(name, None)
    proc = subprocess.Popen([sys.executable, "-m", "bridge", "serve", "--port", "0"], cwd=ROOT, env=env,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        lines = []
        while not (lines and lines[-1].startswith("then install")):
            line = proc.stderr.readline()
            assert line, f"serve stopped after {lines}"
            lines.append(line.rstrip("\n"))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    port = re.search(r"listening on ws://127\.0\.0\.1:(\d+) ", lines[0]).group(1)
    shown = [line.replace(str(tmp_path), "/home/you").replace(f":{port}", ":8765")
             .replace(f"{Path(sys.executable).name} -m bridge", ".venv/bin/fate-bridge") for line in lines]
    assert SERVE_BLOCK is not None
    assert shown == SERVE_BLOCK.group(1).splitlines()
