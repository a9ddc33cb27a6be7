"""Whether the store can write its database now.

An outage of storage is one state, with one log line when it starts and one when it ends. Never
a traceback per request. Outages include a full disk, a read-only file system, PostgreSQL
unreachable, a lock held too long, the database file deleted under the bridge.

:class:`StorageHealth` holds that state. The store marks it down when an operation fails for
one of :data:`REASONS`; the backend tells which (``_fault_reason``). While down, the store
refuses decisions at once: :class:`~bridge.errors.StorageUnavailable`, answered ``unavailable``
with :data:`RETRY_AFTER_MS`. It probes the database every :data:`PROBE_SECONDS` until it answers
(the backend's ``_probe_sync``). A committed batch marks it up too. Meanwhile ``GET /healthz``
answers 503 and the gauge ``fate_bridge_storage_available`` is 0.
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


# How long storage must stay writable after it came back before the outage's end is logged, when
# no batch has committed meanwhile: a full disk's probe may commit where the next batch cannot
# (space the log file holds already), and a batch failing then continues the same outage, with
# no second pair of lines.
CONFIRM_SECONDS = 1.0


class StorageHealth:
    """The store's storage state: available, down (since when, why), or recovering.

    Recovering: requests are let through again, but the outage's end is not confirmed yet.
    Thread-safe: batches fail on the writer thread and on the event loop, and the probe runs on a
    thread of its own. ``label``: the database as logs name it, without password.
    """

    def __init__(self, label: str) -> None:
        self.label = label
        self.reason: str | None = None  # None: requests are let through
        self.detail = ""
        self._since = 0.0
        self._recovering: str | None = None  # the reason of an outage whose end is not confirmed yet
        self._back_at = 0.0
        self._lock = threading.Lock()

    @property
    def available(self) -> bool:
        return self.reason is None

    @property
    def recovering(self) -> bool:
        """Storage answered again after an outage whose end is not logged yet."""
        return self._recovering is not None

    def refusal(self) -> StorageUnavailable:
        """What a request gets while storage is down."""
        return StorageUnavailable(self.reason or "unreachable", RETRY_AFTER_MS)

    def down(self, reason: str, detail: str) -> bool:
        """Storage failed for ``reason``, one of :data:`REASONS`; ``detail`` is the error's text, for the log.

        Returns True when requests were let through until now; the caller then starts probing. An
        outage's one start line is written only when none is open. A failure while down, or while
        recovering (:data:`CONFIRM_SECONDS`), continues the same outage.
        """
        with self._lock:
            went_down = self.reason is None
            started = went_down and self._recovering is None
            if started:
                self._since = time.monotonic()
            self._recovering = None
            self.reason, self.detail = reason, detail
        if started:
            log.error("storage_unavailable", reason=reason, database=self.label, detail=detail,
                      retry_after_ms=RETRY_AFTER_MS)
        return went_down

    def up(self, *, confirmed: bool = True) -> None:
        """Storage answered again: requests are let through at once.

        The outage's end is logged once, if there was one. With ``confirmed`` (a batch committed), it is
        logged now. Else (a probe's write committed), only once storage has stayed writable
        :data:`CONFIRM_SECONDS`.
        """
        now = time.monotonic()
        with self._lock:
            if self.reason is not None:
                self._recovering, self.reason = self.reason, None
                self._back_at = now
            if self._recovering is None or (not confirmed and now - self._back_at < CONFIRM_SECONDS):
                return
            reason, self._recovering = self._recovering, None
        log.warning("storage_available", reason=reason, database=self.label,
                    seconds=round(now - self._since, 3))
