"""Times in ``since``/``until`` are read as times (issue 36, bridge/times.py): ISO 8601 with or
without seconds and zone, a date alone, UTC unless a zone is given, compared as instants, by
``audit list``/``audit report`` on the command line and ``audit_query``/``audit_report`` on the
wire alike; a value that is not a time is refused naming the field."""

from __future__ import annotations

import asyncio
import json

import pytest

from bridge import report, times
from bridge.cli import main
from bridge.dice import ScriptedDice
from bridge.errors import BadMessage
from bridge.session import Session
from bridge.store import SQLiteStore

from .mythic_messages import question
from .sohl_messages import frame

AT = ("2026-12-07T04:17:01.000Z", "2026-12-07T04:17:02.500Z", "2026-12-07T04:17:03.999Z")  # the records' times


@pytest.mark.parametrize(("text", "instant"), [
    ("2026-12-07", "2026-12-07T00:00:00.000Z"),
    ("2026-12-07T04Z", "2026-12-07T04:00:00.000Z"),
    ("2026-12-07T04:17Z", "2026-12-07T04:17:00.000Z"),
    ("2026-12-07 05:00", "2026-12-07T05:00:00.000Z"),
    ("2026-12-07T04:17:02", "2026-12-07T04:17:02.000Z"),
    ("2026-12-07T04:17:02.5Z", "2026-12-07T04:17:02.500Z"),
    ("2026-12-07T04:17:02.5000001", "2026-12-07T04:17:02.501Z"),  # finer than a record's: rounded up
    ("2026-12-07T05:17+01:00", "2026-12-07T04:17:00.000Z"),
    ("2026-12-07T05:17+0100", "2026-12-07T04:17:00.000Z"),
    ("2026-12-07T05+01", "2026-12-07T04:00:00.000Z"),
    ("2026-12-06T22:47-05:30", "2026-12-07T04:17:00.000Z"),
    ("2026-12-07t04:17z", "2026-12-07T04:17:00.000Z"),
])
def test_a_time_is_read_as_an_instant_written_as_the_trail_writes_one(text, instant):
    assert times.trail_time(text) == instant


@pytest.mark.parametrize("text", ["yesterday", "", "2026-12-7", "2026-13-01", "2026-02-30", "2026-12-07T25:00",
                                  "2026-12-07T04:60", "2026-12-07T04:17+24:00", "2026-12-07T04:17+01:60",
                                  "2026-12-07T04:17 UTC", "0000-01-01", "9999-12-31T23:00-01:00", "1733545020"])
def test_what_is_not_a_time_is_refused_saying_what_to_write(text):
    with pytest.raises(ValueError, match="is not a time: write 2026-12-07, 2026-12-07T04:17 or 2026-12-07 05:00"):
        times.trail_time(text)


def test_times_reads_no_clock():
    """bridge/times.py may import datetime (tests/test_purity.py) for its calendar only."""
    import ast

    from .helpers import ROOT

    names = {node.attr for node in ast.walk(ast.parse((ROOT / "bridge" / "times.py").read_text()))
             if isinstance(node, ast.Attribute)}
    assert not names & {"now", "today", "utcnow", "fromtimestamp", "utcfromtimestamp", "time"}


def test_a_query_is_refused_naming_the_field_that_is_not_a_time():
    assert times.query_times("2026-12-07T04Z", None) == ("2026-12-07T04:00:00.000Z", None)
    for since, until, field in (("soon", None, "since"), ("2026-12-07", "2026-02-30", "until")):
        with pytest.raises(BadMessage) as refused:
            times.query_times(since, until)
        assert refused.value.field == field


@pytest.fixture
def db(tmp_path, monkeypatch):
    """World ``w`` with three Fate Chart questions recorded at 04:17 UTC (AT), the store's clock
    faked (bridge.store.writer reads it once per batch)."""
    clock = iter(AT)
    monkeypatch.setattr("bridge.store.writer.utc_now", lambda: next(clock))
    path = tmp_path / "b.sqlite3"

    async def record() -> None:
        store = await SQLiteStore.open(path)
        await store.add_world("w", None)
        session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
        for n in range(3):
            reply = await session.receive(frame(question(f"ev-{n}")), ScriptedDice([50]))
            assert json.loads(reply.frames[0])["type"] == "chart_answered"
        await store.close()

    asyncio.run(record())
    return path


# (since, until, how many of the three records at 04:17 UTC); the cases first
WINDOWS = [
    ("2026-12-07T04Z", None, 3),
    ("2026-12-07T04:17Z", None, 3),
    (None, "2026-12-07 05:00", 3),
    ("2026-12-07 23:59", None, 0),
    ("2026-12-07", None, 3),
    (None, "2026-12-07", 0),
    ("2026-12-07T05:17+01:00", None, 3),
    (None, "2026-12-07T05:17+01:00", 0),
    ("2026-12-07T04:17:02.5", None, 2),  # inclusive
    (None, "2026-12-07T04:17:02.5", 1),  # exclusive
    ("2026-12-07T04:17:02.4999", "2026-12-07T04:17:03.9991", 2),
    ("2026-12-06T23:17-05:00", None, 3),  # 04:17 UTC
    ("2026-12-06T23:18-05:00", None, 0),
]


def _listed(db, capsys, since, until) -> int:
    args = ["audit", "list", "--db", str(db), "--world", "w"]
    args += ["--since", since] if since else []
    args += ["--until", until] if until else []
    assert main(args) == 0
    out = capsys.readouterr().out
    return 0 if out.startswith("no audit records match") else len(out.splitlines()) - 1


def test_audit_list_compares_instants(db, capsys):
    assert [_listed(db, capsys, since, until) for since, until, _ in WINDOWS] == [n for _, _, n in WINDOWS]


def test_audit_report_takes_the_same_times(db, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["audit", "report", "--db", str(db), "--world", "w", "--since", "2026-12-07T05:17+01:00",
                 "--out", str(out)]) == 0
    assert "report of 'w' (3 records)" in capsys.readouterr().err
    assert "(since 2026-12-07 04:17 UTC)" in out.read_text()
    assert main(["audit", "report", "--db", str(db), "--world", "w", "--until", "2026-12-07T04Z", "--out", str(out)]) == 0
    assert "report of 'w' (0 records)" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["list", "report", "export"])
def test_the_command_line_refuses_what_is_not_a_time_naming_the_option(db, command, capsys):
    with pytest.raises(SystemExit) as usage:
        main(["audit", command, "--db", str(db), "--world", "w", "--until", "2026-02-30"])
    assert usage.value.code == 2
    assert 'argument --until: "2026-02-30" is not a time: write 2026-12-07' in capsys.readouterr().err


async def test_the_wire_compares_instants_and_refuses_naming_the_field(db):
    store = await SQLiteStore.open(db)
    session = Session(store, ScriptedDice([]), trusted=True, default_world="w", reporter=report.draw)

    async def ask(**query) -> dict:
        message = {"type": "audit_query", "v": 1, "query_id": "q", **{k: v for k, v in query.items() if v}}
        return json.loads((await session.receive(frame(message))).frames[0])

    found = [len((await ask(since=since, until=until))["records"]) for since, until, _ in WINDOWS]
    assert found == [n for _, _, n in WINDOWS]
    for field, value in (("since", "yesterday"), ("until", "2026-02-30"), ("since", "2026-12-07T04:17+24:00")):
        refused = await ask(**{field: value})
        assert (refused["type"], refused["code"], refused["field"], refused["ref"]) == ("error", "bad_message", field, "q")
        assert f'"{value}" is not a time' in refused["message"]
    page = json.loads((await session.receive(frame({"type": "audit_report", "v": 1, "query_id": "r",
                                                    "since": "2026-12-07T04Z"}))).frames[0])
    assert "3 audit records" in page["html"] and "(since 2026-12-07 04:00 UTC)" in page["html"]
    refused = json.loads((await session.receive(frame({"type": "audit_report", "v": 1, "query_id": "r",
                                                       "until": "2026-12-07T24:00"}))).frames[0])
    assert (refused["code"], refused["field"]) == ("bad_message", "until")
    await store.close()
