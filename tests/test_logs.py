"""The log pipeline's cheap parts (issue 17) write what structlog's own processors write."""

from __future__ import annotations

import datetime
import re

import pytest
import structlog

from bridge.logs import _console_line, _UTCStamp

EVENTS = [
    {"event": "decision", "level": "info", "timestamp": "2026-12-01T11:44:29.903923Z", "world_id": "w",
     "n": 3, "none": None, "listed": [1, "a"], "spaced": "a b", "quoted": 'say "x"', "eq": "a=b",
     "empty": "", "flag": False},
    {"event": "hello", "level": "warning", "timestamp": "T"},
    {"event": "e" * 40, "level": "info", "timestamp": "T", "k": "v"},
    {"event": "internal_error", "level": "error", "timestamp": "T", "type": "X",
     "exception": "Traceback (most recent call last):\nZeroDivisionError: division by zero"},
    {"event": "with_stack", "level": "info", "timestamp": "T", "stack": "Stack (most recent call last):\n  here"},
    {"event": "both", "level": "error", "timestamp": "T", "stack": "Stack:\n  here",
     "exception": "Traceback (most recent call last):\nValueError: no"},
    {"event": "no_time", "level": "info", "k": 1},
    {"event": "no_level", "timestamp": "T"},
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e["event"][:12])
def test_console_line_is_structlogs_console_renderer_without_colours(event):
    expected = structlog.dev.ConsoleRenderer(colors=False)(None, "info", dict(event))
    assert _console_line(None, "info", dict(event)) == expected


@pytest.mark.parametrize("now", [1795000000.0123456, 1795003599.999999, 951782400.5])  # 2000-02-29 too
def test_utc_stamp_writes_iso_utc_with_microseconds_like_timestamper(monkeypatch, now):
    monkeypatch.setattr("bridge.logs.time.time", lambda: now)
    expected = datetime.datetime.fromtimestamp(int(now), datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    assert _UTCStamp()(None, "info", {})["timestamp"] == f"{expected}.{int((now - int(now)) * 1e6):06d}Z"
    theirs = structlog.processors.TimeStamper(fmt="iso", utc=True)(None, "info", {})["timestamp"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", theirs)  # the same shape


def test_utc_stamp_follows_the_clock_across_seconds(monkeypatch):
    now = iter([100.5, 100.75, 101.25])
    monkeypatch.setattr("bridge.logs.time.time", lambda: next(now))
    stamp = _UTCStamp()
    assert [stamp(None, "info", {})["timestamp"] for _ in range(3)] == [
        "1970-01-01T00:01:40.500000Z", "1970-01-01T00:01:40.750000Z", "1970-01-01T00:01:41.250000Z"]
