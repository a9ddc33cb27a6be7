"""Test-wide setup: decision log lines go to stderr (as ``fate-bridge serve`` sends them), so
tests reading a command's stdout see only its output."""

from __future__ import annotations

from bridge import logs

logs.configure("console", level="info")
