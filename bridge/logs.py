"""The one place logging is configured (called by the CLI); modules only ``get_logger()``.

Logs go to stderr: human-readable key=value lines by default, one JSON object per line with
``--log-format json``. Decisions log one line each (event ``decision``) bound to ``world_id``.
"""

from __future__ import annotations

import logging
import sys

import msgspec
import structlog

LOG_FORMATS = ("console", "json")
_encoder = msgspec.json.Encoder(enc_hook=str)  # anything unusual is logged as its str()


def _json(event: dict, **_: object) -> str:
    """structlog's JSON serializer, with msgspec (one line per decision, on the event loop)."""
    return _encoder.encode(event).decode()


def configure(log_format: str = "console", level: str = "info") -> None:
    """Configure structlog for the process. ``log_format``: ``console`` or ``json``;
    ``level``: a standard level name. Raises ``ValueError`` for an unknown format."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {LOG_FORMATS}, got {log_format!r}")
    renderer = (
        structlog.processors.JSONRenderer(serializer=_json)
        if log_format == "json"
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level.upper()]),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
