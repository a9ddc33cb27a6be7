"""The click bench (issue 37) works end to end with a handful of clicks: real Chromium pages, a
real bridge, every click one Fate card in every page, and the figures in the shape the full run
prints. Timings are never checked here, only that they are there and add up."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench import click

from .helpers import run_bench

CHROMIUM = Path("/usr/bin/chromium")
PAGES = ["gm", "player", "viewer"]


@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing: install Debian's chromium (.ci/run does)")
def test_quick_run_gives_one_card_per_click_in_every_page_and_the_hops_of_each_click(tmp_path):
    result, report = run_bench("bench", "--click", tmp_path / "click.json", timeout=120, extra=("--quick",))
    assert report["clicks"] == click.QUICK_CLICKS and report["warmup"] == click.QUICK_WARMUP
    assert report["pages"] == PAGES
    # Every measured click: exactly one Fate card in each page's chat log, nothing reported wrong.
    assert report["cards_per_page"] == {page: [1] * click.QUICK_CLICKS for page in PAGES}
    assert report["one_card_per_page"] is True
    assert report["errors"] == {page: [] for page in PAGES}
    # Each click: the GM's browser asked the bridge twice (the grading again, then the spend), and
    # the hops, each positive, add up to the click's total.
    clicks = report["raw"]["clicks"]
    assert len(clicks) == click.QUICK_CLICKS and len(report["raw"]["chats"]) == click.QUICK_CLICKS
    for one in clicks:
        assert one["bridge_requests"] == ["test_rolled", "fate_spend"]
        assert all(one[hop] > 0 for hop in click.HOPS), one
        assert math.isclose(sum(one[hop] for hop in click.HOPS if hop != "total_ms"), one["total_ms"], abs_tol=1e-6)
    # The bridge's own time, from its /metrics: three decisions a measured click.
    assert report["bridge_process"]["decisions"] == 3 * click.QUICK_CLICKS
    assert report["bridge_process"]["mean_ms"] > 0
    # The figures: p50 <= p99 <= max for every hop and for the chat reference, max the slowest click.
    assert list(report["hops"]) == list(click.HOPS)
    for hop, figures in report["hops"].items():
        assert 0 < figures["p50_ms"] <= figures["p99_ms"] <= figures["max_ms"] == max(one[hop] for one in clicks)
    chat = report["chat"]
    assert 0 < chat["p50_ms"] <= chat["p99_ms"] <= chat["max_ms"]
    # Printed as the other modes print theirs: one line per hop, the reference, the card check.
    lines = result.stdout.splitlines()
    for name, figures in [*((click.HOPS[hop], report["hops"][hop]) for hop in click.HOPS), (click.CHAT[1], chat)]:
        (line,) = [line for line in lines if line.startswith(name)]
        assert line[len(name):].split() == [f"{figures[key]:.1f}" for key in ("p50_ms", "p99_ms", "max_ms")], line
    assert "every click gave exactly one Fate card in each page (gm, player, viewer): yes" in lines
