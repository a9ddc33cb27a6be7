"""The log pipeline's fused parts (issue 17): one processor and a renderer writing what structlog's
own processors and ``JSONRenderer`` write, and :class:`~bridge.logs.TickWriter` as structlog's logger."""

from __future__ import annotations

import asyncio
import io
import json

import pytest
import structlog

from bridge.logs import TickWriter, _json_line, _LineHead, _UTCStamp


def _theirs(name: str, event: dict) -> dict:
    """What structlog's own processors make of ``event`` logged with method ``name``."""
    for processor in (structlog.processors.add_log_level, _UTCStamp(), structlog.processors.format_exc_info):
        event = processor(None, name, event)
    return event


@pytest.mark.parametrize("name", ["info", "warning", "warn", "error", "exception", "debug"])
@pytest.mark.parametrize("exc_info", [None, False, True])
def test_line_head_is_add_log_level_stamp_and_format_exc_info(monkeypatch, name, exc_info):
    monkeypatch.setattr("bridge.logs.time.time", lambda: 1795000000.25)
    event = {"world_id": "w", "event": "decision", "n": 3}
    if exc_info is not None:
        event["exc_info"] = exc_info
    try:
        raise ValueError("no")
    except ValueError:
        ours, theirs = _LineHead()(None, name, dict(event)), _theirs(name, dict(event))
    assert list(ours.items()) == list(theirs.items())  # the same keys in the same order


def test_json_line_is_structlogs_json_renderer():
    event = {"world_id": "w", "event": "decision", "level": "info", "n": 3, "none": None, "listed": [1, "a"]}
    theirs = structlog.processors.JSONRenderer()(None, "info", dict(event))
    assert json.loads(_json_line(None, "info", dict(event))) == json.loads(theirs)
    assert list(json.loads(_json_line(None, "info", dict(event)))) == list(event)


def test_tick_writer_writes_a_ticks_lines_together_after_it():
    out = io.StringIO()
    writer = TickWriter(out)

    async def tick() -> str:
        writer.info("one")
        writer.error("two")
        before = out.getvalue()
        await asyncio.sleep(0)
        return before

    assert asyncio.run(tick()) == ""
    assert out.getvalue() == "one\ntwo\n"
    writer.warning("three")  # no running loop: written at once
    assert out.getvalue() == "one\ntwo\nthree\n"
