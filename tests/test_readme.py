"""The README's "what you should see": each ``resolve --cards < examples/...`` command, run as the
README says, prints the lines its ``text`` block shows, in that order (a line ``...`` marks lines
left out). Keeps the README's pasted output true to the code."""

from __future__ import annotations

import re

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
