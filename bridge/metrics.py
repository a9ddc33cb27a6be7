"""What a host scrapes: ``GET /metrics`` in the Prometheus text format.

One :class:`Metrics` per server; :func:`bridge.server.start` makes it. Each has its own
``prometheus_client.CollectorRegistry``. So several servers or stores in one process (tests, the
bench) never share or double-count. Both store backends use the same names:

 name | type | labels | what |
---|---|---|---|
 ``fate_bridge_decisions_total`` | counter | ruleset, result | Decisions answered. ``result`` is ``ok``, ``refused`` or ``replayed`` (a repeated event_id). |
 ``fate_bridge_refusals_total`` | counter | ruleset, code | Decisions refused by the rules, by the error's ``code``. ``internal``: any message that failed with an internal error. ``unavailable``: any message refused during a storage outage. |
 ``fate_bridge_decision_seconds`` | histogram | | From a decision's frame handed to the session to its reply ready. The store's COMMIT is included. |
 ``fate_bridge_batch_decisions`` | histogram | | Decisions written in each group-commit batch. |
 ``fate_bridge_connections`` | gauge | | Open connections: forwarders, viewers, not yet past hello. |
 ``fate_bridge_worlds_in_memory`` | gauge | | Worlds whose state the store holds in memory. |
 ``fate_bridge_world_loads_total`` | counter | | Worlds read from the database into memory. |
 ``fate_bridge_world_load_seconds`` | histogram | | How long each of those loads took. |
 ``fate_bridge_lease_takeovers_total`` | counter | | Worlds whose lease another bridge process took from this one. PostgreSQL; 0 on SQLite. |
 ``fate_bridge_storage_available`` | gauge | | 1 while the store can write its database, 0 during a storage outage: disk full, read-only, unreachable, locked, its file gone (:mod:`bridge.store.health`). |

Nothing else records anything. The hot path adds one counter increment and one histogram observation
per decision, and one observation per batch. The store knows nothing of Prometheus. It calls plain
callbacks that :meth:`Metrics.watch` sets (:attr:`bridge.store.writer.BatchWriter.on_batch`,
``on_world_load``). No label carries a world id, token or name.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

METRICS_PATH = "/metrics"
CONTENT_TYPE = CONTENT_TYPE_LATEST

# Decisions take ~1 ms in memory plus a COMMIT (SQLite: ~1 ms; PostgreSQL: a round trip); a
# slow disk or a world's first load shows in the upper buckets.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64)  # GROUP_COMMIT_MAX (bridge.store.writer) is 64
LOAD_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 100.0)


class Metrics:
    """The metrics of one server; the module docstring gives names and meanings.

    ``clock``: seconds of a monotonic clock. The session reads it around each decision; it has no
    clock of its own, and the server passes its event loop's. ``connections``: how many connections
    are open now, read at each scrape."""

    def __init__(self, clock: Callable[[], float], connections: Callable[[], int] = lambda: 0) -> None:
        self.clock = clock
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.decisions = Counter("fate_bridge_decisions", "Decisions answered, by ruleset and result "
                                 "(ok, refused, replayed).", ("ruleset", "result"), registry=r)
        self.refusals = Counter("fate_bridge_refusals", "Decisions refused by the rules, by ruleset "
                                "and error code; code internal: any message that failed.",
                                ("ruleset", "code"), registry=r)
        self.latency = Histogram("fate_bridge_decision_seconds", "Seconds from a decision's frame to "
                                 "its committed reply.", buckets=LATENCY_BUCKETS, registry=r)
        self.batches = Histogram("fate_bridge_batch_decisions", "Decisions written per group-commit batch.",
                                 buckets=BATCH_BUCKETS, registry=r)
        self.world_loads = Histogram("fate_bridge_world_load_seconds", "Seconds to read a world's state "
                                     "from the database into memory.", buckets=LOAD_BUCKETS, registry=r)
        self.loads = Counter("fate_bridge_world_loads", "Worlds read from the database into memory.",
                             registry=r)
        self.takeovers = Counter("fate_bridge_lease_takeovers", "Worlds whose lease another bridge "
                                 "process took from this one.", registry=r)
        Gauge("fate_bridge_connections", "Open connections.", registry=r).set_function(connections)
        self._children: dict[tuple[str, str], Counter] = {}  # (ruleset, result) -> its counter
        self._worlds_in_memory: Callable[[], int] = lambda: 0
        Gauge("fate_bridge_worlds_in_memory", "Worlds whose state is held in memory.",
              registry=r).set_function(lambda: self._worlds_in_memory())
        self._storage_available: Callable[[], bool] = lambda: True
        Gauge("fate_bridge_storage_available", "1 while the store can write its database, 0 during "
              "a storage outage.", registry=r).set_function(lambda: float(self._storage_available()))

    def watch(self, store: object) -> None:
        """Count ``store``'s batches, world loads and worlds in memory here.

        ``store`` is a :class:`~bridge.store.writer.BatchWriter`; another store is left alone."""
        if hasattr(store, "on_batch"):
            store.on_batch = self.batches.observe
            store.on_world_load = self.world_loaded  # type: ignore[attr-defined]
            self._worlds_in_memory = store.worlds_in_memory  # type: ignore[attr-defined]
            health = store.health  # type: ignore[attr-defined]
            self._storage_available = lambda: health.available

    def decided(self, ruleset: str | None, code: str | None, replayed: bool, seconds: float) -> None:
        """One decision answered in ``seconds``.

        ``code`` is its refusal's error code, None when it passed. ``replayed``: a repeated event_id
        returned the stored reply."""
        ruleset = ruleset or "shared"  # the dice session messages every ruleset shares
        result = "replayed" if replayed else "ok" if code is None else "refused"
        child = self._children.get((ruleset, result))
        if child is None:  # labels() looks the child up under a lock: once per pair, not per decision
            child = self._children[(ruleset, result)] = self.decisions.labels(ruleset, result)
        child.inc()
        if code is not None and not replayed:
            self.refusals.labels(ruleset, code).inc()
        self.latency.observe(seconds)

    def failed(self, ruleset: str | None, code: str = "internal") -> None:
        """A message failed with an internal error, or with ``code`` ``unavailable`` while storage
        was down.

        ``ruleset`` is the message's, None for a shared one. It is counted as a refusal, with the
        code its error reply carries."""
        self.refusals.labels(ruleset or "shared", code).inc()

    def world_loaded(self, seconds: float) -> None:
        """A world's state was read into memory in ``seconds``."""
        self.loads.inc()
        self.world_loads.observe(seconds)

    def lease_taken(self) -> None:
        """Another process took the lease of a world this process served."""
        self.takeovers.inc()

    def exposition(self) -> bytes:
        """The Prometheus text exposition of every metric (``GET /metrics``'s body)."""
        return generate_latest(self.registry)
