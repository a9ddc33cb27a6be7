"""``python -m bench --click``: how long a player waits from Spend Fate to the Fate card on every
screen, and which hop costs most.

Runs the module side, ``foundry-module/bench/click.js`` (Node), which drives real Chromium pages
(Debian's /usr/bin/chromium through playwright-core): the GM's, the player's and a viewer's, each
running the module's real scripts on a fake Foundry client, relayed by a fake Foundry server as
Foundry's server relays them, the GM's linked to a real bridge process. The player clicks Spend
Fate ``clicks`` times, one after another, each on a new test card, after ``warmup`` unmeasured
clicks; after each click the player posts a plain chat message, the reference. Its file comment
says what each hop covers. Here the hops' p50, p99 and max are printed, with the check that every
click gave exactly one Fate card in every page, and written as JSON to ``out``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .load import percentile

MODULE = Path(__file__).resolve().parent.parent / "foundry-module"
CLICKS, QUICK_CLICKS = 200, 3
WARMUP, QUICK_WARMUP = 5, 1
#: Bound on the whole Node run: 200 clicks take about a minute on a quiet 2-core machine.
TIMEOUT_S = 900
#: The hops of a click, in order (they add up to ``total_ms``), and what each covers.
HOPS = {
    "relay_ms": "relay to the GM's browser (request, ack, go)",
    "bridge_ms": "the bridge, request to reply (grading, fate_spend)",
    "gm_ms": "the GM's browser between its two requests",
    "apply_ms": "applying the decision (the fated flag)",
    "card_ms": "the card: created, then in every page's log",
    "total_ms": "total: click to the card in every page",
}
CHAT = ("chat_ms", "reference: a plain chat message to every page")


def figures(values: list[float]) -> dict:
    """p50, p99 and max of ``values`` (ms)."""
    ordered = sorted(values)
    return {"p50_ms": percentile(ordered, 0.50), "p99_ms": percentile(ordered, 0.99), "max_ms": ordered[-1]}


def summarize(raw: dict) -> dict:
    """The report: the figures per hop and for the chat reference, the card check, the clocks."""
    clicks, chats = raw["clicks"], raw["chats"]
    per_page = {page: [click["cards"][page] for click in clicks] for page in raw["pages"]}
    clocks = [sync for moment in raw["clock"].values() for sync in moment.values()]
    return {
        "clicks": len(clicks), "warmup": raw["warmup"], "pages": raw["pages"], "chromium": raw["chromium"],
        "hops": {hop: figures([click[hop] for click in clicks]) for hop in HOPS},
        "chat": figures([chat[CHAT[0]] for chat in chats]),
        "bridge_process": raw["bridge_process"],
        "one_card_per_page": all(count == 1 for counts in per_page.values() for count in counts),
        "cards_per_page": per_page,
        "clock_uncertainty_ms": max(sync["rtt"] for sync in clocks) / 2,
        "errors": raw["errors"],
        "raw": {"clicks": clicks, "chats": chats, "clock": raw["clock"], "notices": raw["notices"]},
    }


def print_report(report: dict) -> None:
    print(f"\nfate-bridge click bench ({report['clicks']} clicks after {report['warmup']} unmeasured, one at a "
          f"time; {len(report['pages'])} Chromium {report['chromium']} pages: {', '.join(report['pages'])}; "
          "a real bridge, a fake Foundry server)")
    print(f"{'hop':<52} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7}")
    rows = [(HOPS[hop], report["hops"][hop]) for hop in HOPS] + [(CHAT[1], report["chat"])]
    for name, f in rows:
        print(f"{name:<52} {f['p50_ms']:>7.1f} {f['p99_ms']:>7.1f} {f['max_ms']:>7.1f}")
    process = report["bridge_process"]
    print(f"the bridge process itself (its /metrics, frame to reply ready): {process['mean_ms']:.1f} ms a decision, "
          f"mean of {process['decisions']} (3 a click: the first grading, the grading again, the spend)")
    verdict = "yes" if report["one_card_per_page"] else "NO"
    print(f"every click gave exactly one Fate card in each page ({', '.join(report['pages'])}): {verdict}")
    print(f"page clocks on the server's within ±{report['clock_uncertainty_ms']:.2f} ms")
    for page, errors in report["errors"].items():
        for error in errors:
            print(f"WARNING: page error in the {page}'s page: {error}")


def run(clicks: int, warmup: int) -> dict:
    """Run foundry-module/bench/click.js; its raw JSON. Raises SystemExit naming what is missing
    or what failed."""
    node = shutil.which("node")
    if node is None:
        raise SystemExit("node is not installed: the click bench needs Node.js 20.19+ (see README.md)")
    if not (MODULE / "node_modules" / "playwright-core").is_dir():
        raise SystemExit(f"playwright-core is missing: run npm ci in {MODULE}")
    with tempfile.TemporaryDirectory(prefix="fate-bridge-click-") as tmp:
        out = Path(tmp) / "click.json"
        env = {**os.environ, "FATE_BRIDGE_PYTHON": os.environ.get("FATE_BRIDGE_PYTHON", sys.executable)}
        result = subprocess.run([node, "bench/click.js", "--clicks", str(clicks), "--warmup", str(warmup),
                                 "--out", str(out)], cwd=MODULE, env=env, capture_output=True, text=True,
                                timeout=TIMEOUT_S)
        if result.returncode != 0:
            raise SystemExit(f"the click bench failed (exit {result.returncode}):\n{result.stderr[-4000:]}")
        return json.loads(out.read_text())


def main(clicks: int, warmup: int, out: Path) -> int:
    """Run, print, write ``out``; exit status 1 when a click did not give one card in every page
    or a page reported an error."""
    print(f"{warmup} + {clicks} clicks in Chromium ...", file=sys.stderr)
    report = summarize(run(clicks, warmup))
    out.write_text(json.dumps(report, indent=2) + "\n")
    print_report(report)
    print(f"\nresults written to {out}")
    failed = not report["one_card_per_page"] or any(report["errors"].values())
    return 1 if failed else 0
