"""Whether the store can write its database now (issue 35): an outage of storage (a full disk, a
read-only file system, PostgreSQL unreachable, a lock held too long, the database file deleted
under the bridge) is one state with one log line when it starts and one when it ends, never a
traceback per request.

:class:`StorageHealth` holds that state. The store marks it down when an operation fails for one
of :data:`REASONS` (the backend tells which: ``_fault_reason``), refuses decisions at once while it
is down (:class:`~bridge.errors.StorageUnavailable`, answered ``unavailable`` with
:data:`RETRY_AFTER_MS`), and probes the database every :data:`PROBE_SECONDS` until it answers
(the backend's ``_probe_sync``); a committed batch marks it up too. ``GET /healthz`` answers 503
and the gauge ``fate_bridge_storage_available`` is 0 meanwhile.
"""

from __future__ import annotations

import threading
import time

import structlog

from ..errors import StorageUnavailable

log = structlog.get_logger("fate_bridge")

# Why storage is unavailable (the log's and /healthz's ``reason``).
REASONS = ("disk_full", "read_only", "unreachable", "locked", "io_error", "database_file_gone")
# How often a store that is down tries its database again: service returns within this (plus the
# probe's own time) of storage returning.
PROBE_SECONDS = 0.25
# The retry hint sent with ``unavailable``: the module sends the request again after it (twice the
# probe period, so the retry usually finds storage back if it came back meanwhile).
RETRY_AFTER_MS = 500


class StorageHealth:
    """The store's storage state: available, or down since a moment for a reason. Thread-safe:
    batches fail on the writer thread and on the event loop, the probe runs on a thread of its
    own. ``label``: the database as logs name it (no password)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.reason: str | None = None  # None: available
        self.detail = ""
        self._since = 0.0
        self._lock = threading.Lock()

    @property
    def available(self) -> bool:
        return self.reason is None

    def refusal(self) -> StorageUnavailable:
        """What a request gets while storage is down."""
        return StorageUnavailable(self.reason or "unreachable", RETRY_AFTER_MS)

    def down(self, reason: str, detail: str) -> bool:
        """Storage failed for ``reason`` (one of :data:`REASONS`; ``detail``: the error's text, for
        the log). Returns True when this starts an outage (its one log line written then); a
        failure while down already changes nothing but the reason."""
        with self._lock:
            started = self.reason is None
            if started:
                self._since = time.monotonic()
            self.reason, self.detail = reason, detail
        if started:
            log.error("storage_unavailable", reason=reason, database=self.label, detail=detail,
                      retry_after_ms=RETRY_AFTER_MS)
        return started

    def up(self) -> None:
        """Storage answered again: the outage's end is logged once (nothing if there was none)."""
        if self.reason is None:
            return
        with self._lock:
            reason, self.reason = self.reason, None
        if reason is not None:
            log.warning("storage_available", reason=reason, database=self.label,
                        seconds=round(time.monotonic() - self._since, 3))
