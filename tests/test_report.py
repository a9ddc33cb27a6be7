"""The audit report (issue 15, bridge/report.py): numbers from a real trail of every ruleset, the
goodness-of-fit tests, sessions split by a 4-hour gap, the page (escaped, no script), the CLI and
the audit window's ``audit_report`` query."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import re
import sqlite3
from datetime import datetime, timedelta

import pytest

from bridge import chi_square, report
from bridge.cli import main
from bridge.dice import ScriptedDice
from bridge.rulesets.hmtw import report as hmtw_report
from bridge.session import Session
from bridge.store import AuditFilter, SQLiteStore

from .helpers import ROOT
from .sohl_messages import LUCKY_STAR, actor, frame, point, rolled, fate_spend

EXAMPLES = ("sohl", "hmtw", "mythic", "pool")
HOSTILE = '<img src=x onerror="alert(1)">Ann'


async def play(db, fate_dice: list[int], name: str = "Basic Folk") -> None:
    """The four example sessions into world ``w`` (their recorded dice; each example's event ids
    prefixed with its name, as they reuse ``ev-1``...), then one SoHL Fate Test
    per die of ``fate_dice`` by actor ``name`` (unlimited Lucky Star; each test rolled 88: MF)."""
    store = await SQLiteStore.open(db)
    await store.add_world("w", None)
    session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
    for example in EXAMPLES:
        text = (ROOT / "examples" / f"{example}-session.jsonl").read_text()
        for line in text.replace('"ev-', f'"{example}-ev-').splitlines():  # one world: event ids apart
            message = json.loads(line)
            await session.receive(frame({k: v for k, v in message.items() if k != "dice"}),
                                  ScriptedDice(message.get("dice", [])))
    who = actor(name=name, actor_id="annActor00000001", fate_points=[point(LUCKY_STAR, "Lucky Star", None, None)])
    for n, die in enumerate(fate_dice):
        await session.receive(frame(rolled(f"r{n}", f"fate{n}", actor_part=who)))
        await session.receive(frame(fate_spend(f"s{n}", f"fate{n}")), ScriptedDice([die]))
    await store.close()


async def rows_of(db):
    store = await SQLiteStore.open(db)
    rows = await store.audit_rows(AuditFilter(world_id="w"))
    await store.close()
    return rows


@pytest.fixture
def db(tmp_path):
    return tmp_path / "bridge.sqlite3"


async def test_collect_counts_what_the_trail_recorded(db):
    rng = random.Random(15)
    dice = [rng.randint(1, 100) for _ in range(120)]
    await play(db, dice, name=HOSTILE)
    data = report.collect(await rows_of(db))
    # every d100 the bridge rolled: the SoHL example's two Fate Tests, ours, the Mythic example's seven
    assert data.d100["sohl"][2:] == dice and len(data.d100["sohl"]) == 122
    assert len(data.d100["mythic"]) == 7
    assert report.d100_bands(dice) == [sum(1 for d in dice if 10 * b < d <= 10 * b + 10) for b in range(10)]
    # S9 graded as S1 against Fate ML 77 (a roll ending in 0 or 5 is critical): MS spent, MF kept,
    # CF lost; a CS is a pending choice, not counted until chosen
    ours = data.fate_by_actor[HOSTILE]
    assert ours["sohl.spent"] == sum(1 for d in dice if d <= 77 and d % 5)
    assert ours["sohl.kept"] == sum(1 for d in dice if d > 77 and d % 5)
    assert ours["sohl.lost"] == sum(1 for d in dice if d > 77 and d % 5 == 0)
    assert ours["sohl.fate_tests"] == ours["sohl.spent"] + ours["sohl.kept"] + ours["sohl.lost"] > 80
    assert data.fate_by_actor["Basic Folk"]["sohl.spent"] == 2  # the SoHL example: two Fate Tests, both MS
    assert data.fate_by_actor["Aldric"]["pool.fate_spent"] == 3  # one die bought, two rerolls (pool example)
    # hmtw: 14 player-deck draws (the Fool twice) and one GM card (XIII Death)
    tarot = data.sections["hmtw.tarot"]
    assert sum(tarot.player.values()) == 14 and tarot.player["fool"] == 2
    assert dict(tarot.gm) == {"major-13": 1}
    observed, expected = hmtw_report.groups(tarot.player)
    assert observed[-1] == 2 and sum(observed) == 14
    assert expected == pytest.approx([14 * 14 / 57] * 4 + [14 / 57])
    assert data.outcomes["mythic"]["forbidden"] == 1 and data.outcomes["hmtw"]["gm_draw"] == 1
    assert [p[1:] for p in data.sections["pool.ledger"]["Aldric"]][:2] == [(0, 0), (3, 0)]  # entered, then the session's 3 Fate


async def test_the_d100_test_tells_a_fair_die_from_a_loaded_one(db):
    rng = random.Random(3)
    fair = [rng.randint(1, 100) for _ in range(400)]
    loaded = [rng.randint(1, 60) for _ in range(400)]
    fair_test = chi_square.fit_test(report.d100_bands(fair), [40.0] * 10)
    loaded_test = chi_square.fit_test(report.d100_bands(loaded), [40.0] * 10)
    assert fair_test.valid and fair_test.p_value > 0.01 and fair_test.degrees == 9
    assert loaded_test.valid and loaded_test.p_value < 1e-6
    few = chi_square.fit_test(report.d100_bands(fair[:20]), [2.0] * 10)
    assert few.valid is False


async def test_sessions_split_at_gaps_longer_than_four_hours(db):
    await play(db, [41] * 10)  # ten MS: spent
    rows = sorted(await rows_of(db), key=lambda r: r.seq)
    start = datetime(2026, 11, 1, 18, 0)
    # records 1-20 a minute apart; then a 3 h pause (same session); 5 h before record 41; a day before 61
    offsets, t = [], timedelta()
    for index in range(len(rows)):
        t += {20: timedelta(hours=3), 40: timedelta(hours=5), 60: timedelta(days=1)}.get(index, timedelta(minutes=1))
        offsets.append(t)
    shifted = [dataclasses.replace(r, ts=(start + o).strftime("%Y-%m-%dT%H:%M:%S.000Z")) for r, o in zip(rows, offsets)]
    data = report.collect(shifted)
    assert [s.records for s in data.sessions] == [40, 20, len(rows) - 60]
    assert data.sessions[1].start == shifted[40].ts
    assert sum(s.fate["sohl.fate_tests"] for s in data.sessions) == sum(t["sohl.fate_tests"] for t in data.fate_by_actor.values())


async def test_the_page_is_self_contained_escaped_and_scriptless(db):
    rng = random.Random(1)
    await play(db, [rng.randint(1, 100) for _ in range(60)], name=HOSTILE)
    html = report.report_page(await rows_of(db), world_id="w<b>", since=None, generated="2026-12-01 10:00")
    assert html.startswith("<!doctype html>")
    assert "<script" not in html.lower()
    assert "<img" not in html and HOSTILE not in html  # the hostile name is text everywhere
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;Ann" in html  # in the tables
    assert "&lt;img src=x onerror=\"alert(1)\"&gt;Ann</text>" in html  # in the charts' SVG
    assert "Fate audit report: w&lt;b&gt;" in html
    assert "script-src" not in html and "default-src 'none'" in html  # the CSP forbids any script
    assert len(re.findall(r"<svg\b", html)) == 5  # d100, Fate, outcomes, tarot, ledger
    assert not re.search(r"(src|href)=\"(https?:)?//", html), "nothing loaded from outside"
    assert "no gap longer than 4 hours" in html
    assert re.search(r"p = \d\.\d{3}", html)


def test_audit_report_cli_writes_the_page(db, tmp_path, capsys):
    asyncio.run(play(db, [20, 40, 60, 80, 99]))
    out = tmp_path / "report.html"
    assert main(["audit", "report", "--db", str(db), "--world", "w", "--out", str(out)]) == 0
    assert "written to" in capsys.readouterr().err
    html = out.read_text()
    assert "Fate audit report: w" in html and "SoHL Fate Test" in html
    assert main(["audit", "report", "--db", str(db), "--world", "w", "--since", "2999-01-01", "--out", str(out)]) == 0
    assert "has no audit records since 2999-01-01" in capsys.readouterr().err
    assert "No d100 rolled by the bridge in this period." in out.read_text()


async def test_the_audit_window_query_answers_the_page_and_records_nothing(db):
    await play(db, [50, 51])
    store = await SQLiteStore.open(db)
    plain = Session(store, ScriptedDice([]), trusted=True, default_world="w")  # resolve's: no reporter
    refused = json.loads((await plain.receive(frame({"type": "audit_report", "v": 1, "query_id": "q0"}))).frames[0])
    assert (refused["code"], refused["ref"]) == ("not_found", "q0")
    session = Session(store, ScriptedDice([]), trusted=True, default_world="w", reporter=report.draw)
    before = sqlite3.connect(db).execute("SELECT count(*) FROM audit").fetchone()[0]
    reply = json.loads((await session.receive(frame({"type": "audit_report", "v": 1, "query_id": "q9"}))).frames[0])
    assert reply["type"] == "audit_report_page" and reply["query_id"] == "q9"
    assert reply["html"].startswith("<!doctype html>") and "Fate audit report: w" in reply["html"]
    bad = json.loads((await session.receive(frame({"type": "audit_report", "v": 1, "query_id": "q", "since": "yesterday"}))).frames[0])
    assert (bad["code"], bad["field"]) == ("bad_message", "since")
    await store.close()
    assert sqlite3.connect(db).execute("SELECT count(*) FROM audit").fetchone()[0] == before


@pytest.mark.parametrize("degrees", [1, 2, 3, 4, 9, 20, 56])
@pytest.mark.parametrize("statistic", [0.0, 0.01, 0.7, 3.84, 9.0, 16.919, 21.666, 45.0, 150.0])
def test_the_chi_square_p_value_is_the_closed_form(degrees, statistic):
    """chi_square_sf against the closed forms of the chi-square survival function (Abramowitz &
    Stegun 26.4.4 and 26.4.5): even k = 2m, e^(-x/2) sum_{j<m} (x/2)^j / j!; odd k, erfc(sqrt(x/2))
    plus e^(-x/2) sum_{j<(k-1)/2} (x/2)^(j+1/2) / Gamma(j + 3/2). Both branches (series, continued
    fraction) are reached."""
    import math

    half = statistic / 2
    if degrees % 2 == 0:
        exact = math.exp(-half) * sum(half ** j / math.factorial(j) for j in range(degrees // 2))
    else:
        exact = math.erfc(math.sqrt(half)) + math.exp(-half) * sum(
            half ** (j + 0.5) / math.gamma(j + 1.5) for j in range((degrees - 1) // 2))
    assert chi_square.chi_square_sf(statistic, degrees) == pytest.approx(exact, rel=1e-12, abs=1e-300)


def test_fit_test_gives_the_textbook_statistic_and_critical_values():
    """Pearson's statistic sum (O - E)^2 / E; at the 5 % and 1 % critical values of 9 degrees of
    freedom (16.919, 21.666: any chi-square table) the p-value is 0.05 and 0.01."""
    test = chi_square.fit_test([30, 50, 40, 40, 40, 40, 40, 40, 40, 40], [40.0] * 10)
    assert test.statistic == pytest.approx(5.0) and test.degrees == 9
    assert chi_square.chi_square_sf(16.919, 9) == pytest.approx(0.05, abs=1e-5)
    assert chi_square.chi_square_sf(21.666, 9) == pytest.approx(0.01, abs=1e-5)
    assert chi_square.fit_test([0] * 10, [0.0] * 10) is None
    with pytest.raises(ValueError, match="degrees >= 1"):
        chi_square.chi_square_sf(3.0, 0)


def test_nice_ticks_are_whole_steps_covering_the_top():
    from bridge.charts import nice_ticks

    assert nice_ticks(7) == [0, 2, 4, 6, 8]
    assert nice_ticks(40) == [0, 10, 20, 30, 40]
    assert nice_ticks(3) == [0, 1, 2, 3]
    assert nice_ticks(0) == [0, 1]
    assert nice_ticks(123) == [0, 50, 100, 150]


def test_a_column_chart_draws_each_bar_to_its_count_and_the_fair_line():
    """The d100 chart's geometry: bar heights proportional to the counts on a 0-based axis, the
    dashed reference at the fair count, every label escaped text."""
    from bridge import charts

    panel = charts.column_panel(["a<b", "c", "d"], [10, 5, 0], color="#123456", reference=5, width=300, height=200)
    svg = charts.figure([panel], label="t & u")
    bars = re.findall(r'height="([\d.]+)" fill="#123456"><title>([^<]*)</title>', svg)
    heights = {title: float(height) for height, title in bars}
    assert set(heights) == {"a&lt;b: 10", "c: 5", "d: 0"}
    assert heights["a&lt;b: 10"] == pytest.approx(2 * heights["c: 5"], abs=0.15) and heights["d: 0"] == 0
    assert 'stroke-dasharray="6 4"' in svg and 'aria-label="t &amp; u"' in svg
    assert ">a&lt;b</text>" in svg and "<b" not in svg


def test_the_report_needs_no_plotting_or_science_library(db):
    """Issue 25: the report comes with the README's install (`pip install -e .`): drawing it imports
    neither matplotlib nor scipy (nor numpy), and the package declares no ``report`` extra."""
    import subprocess
    import sys
    import tomllib

    asyncio.run(play(db, [20, 40, 60]))
    code = ("import sys, asyncio\n"
            "sys.modules['matplotlib'] = sys.modules['scipy'] = sys.modules['numpy'] = None  # importing them fails\n"
            "from bridge.store import AuditFilter, SQLiteStore\n"
            "from bridge import report\n"
            "async def main():\n"
            f"    store = await SQLiteStore.open({str(db)!r})\n"
            "    rows = await store.audit_rows(AuditFilter(world_id='w'))\n"
            "    await store.close()\n"
            "    print(report.report_page(rows, world_id='w', since=None, generated='now').count('<svg'))\n"
            "asyncio.run(main())\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "5"
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "report" not in extras and not any("matplotlib" in d or "scipy" in d for ds in extras.values() for d in ds)
