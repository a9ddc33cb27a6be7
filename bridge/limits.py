"""Limits that follow the world and the address, not the connection.

No sockets, no clock of its own: the server passes its loop's monotonic clock.

- :class:`RateLimit`: a token bucket. The server keeps one per world for the forwarder's frames,
  so reconnecting does not refill it. It keeps one per overlay viewer connection too.
- :class:`Limits`: the operator's settings (``fate-bridge serve`` flags). The defaults suit a home
  table; docs/security.md explains each.
- :class:`Admission`: the state those limits are checked against. See below.
- :class:`RegistrationRates`: registrations through an invite code, per address and in total.

:class:`Admission` counts connections open per address and in total. It counts connections that have
not said ``hello`` yet; the oldest is evicted for a new one. It counts new connections per address
per second. And it counts failed ``hello``s per address and world.

After ``free_failed_hellos``, each failure locks that world out for that address. Each lockout is
twice as long as the last, up to ``max_hello_delay``, a few seconds. Past ``ADDRESS_WORLDS`` times
as many failures for all worlds together, the whole address is locked out alike. Hellos in that time
are refused before the store is read. So a token-guessing flood costs the bridge almost nothing. A
correct token from the flooded address gets in at most ``max_hello_delay`` after the flood stops.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Literal

RATE_PER_SECOND = 20.0  # per world: a table makes a few decisions a minute; a replay burst after reconnect
RATE_BURST_SECONDS = 5.0  # ... re-sends at most the queued messages at once: 100 frames
FORGET_FAILURES_SECONDS = 3600.0  # an address's failed hellos are forgotten an hour after the last
MAX_TRACKED_ADDRESSES = 10_000  # per table below; the oldest are dropped first (bounded memory)
TARPIT_SECONDS = 1.0  # a refused connection waits this long for its 503: a flooder that waits for
# answers (every simple client) slows down to its concurrency per second ...
TARPIT_MAX = 128  # ... but at most this many wait at once (each holds a file descriptor); past it,
# refusals are answered at once
ADDRESS_WORLDS = 4  # an address's failed hellos for all worlds together lock it out past this many
# times ``free_failed_hellos``: guessing many world ids is throttled too, one world's guesses are not
ANY_WORLD = None  # the failure key of an address's hellos for all worlds together
LOOPBACK = ("127.0.0.1", "::1")  # this machine's own address, as a peer of the bridge


class RateLimit:
    """A token bucket: ``rate`` frames per second on average, bursts up to ``burst``.

    ``clock`` returns seconds (monotonic); ``allow()`` takes one token or says no."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float]) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self.tokens = float(burst)
        self.last = clock()

    def _refill(self) -> None:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now

    def allow(self) -> bool:
        """Take one token if there is one; tokens refill at ``rate`` per second, up to ``burst``."""
        self._refill()
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True

    def available(self) -> bool:
        """True when :meth:`allow` would say yes (takes nothing)."""
        self._refill()
        return self.tokens >= 1

    def wait(self) -> float:
        """Seconds until :meth:`allow` would say yes (0: now; takes nothing)."""
        self._refill()
        return max(0.0, (1 - self.tokens) / self.rate)


@dataclass(frozen=True, slots=True)
class Limits:
    """What one bridge accepts; every count is a maximum.

    Defaults suit a home table: one GM's browser and a few overlay pages. A host serving many tables
    raises the connection counts."""

    connections_total: int = 512  # open WebSocket/TCP connections, all addresses together
    connections_per_address: int = 32  # a GM's browser + up to 20 overlay pages + reloads
    pending_hello: int = 64  # connections (all addresses) without hello yet; then the oldest goes
    connect_rate: float = 5.0  # new connections per second per address, on average ...
    connect_burst: int = 40  # ... in bursts of this many (every overlay page reconnecting at once)
    free_failed_hellos: int = 5  # failed hellos per address and world before its lockout (typos)
    max_hello_delay: float = 5.0  # seconds: the longest lockout (1 s, 2 s, 4 s, ... up to this): it
    # caps the load a flood makes (tokens are 256 random bits, never guessed), and how long a
    # correct token from the flooding address (a GM behind the same NAT) waits once it stops
    failed_hello_rate: float = 10.0  # failed hellos per second from addresses never seen succeed
    new_address_rate: float = 20.0  # new connections per second, all addresses that never completed a
    # hello together (a flood spread over many addresses): one accept and a 503 past it, no handshake
    new_address_burst: int = 100  # ... in bursts of this many (the GMs reconnecting after a restart)
    trusted_addresses: tuple[str, ...] = LOOPBACK  # counted as having completed a hello: this
    # machine's own checks (a Docker HEALTHCHECK, a reverse proxy beside the bridge) and, added by
    # the host, a load balancer's health checks, which never say hello and must pass a flood


HelloWaitReason = Literal["failed_hellos", "failed_hello_budget", "hellos_in_flight"]  # Admission.hello_delay's
FailureKey = tuple[str, str | None]  # (address, world id as the hello gave it, or ANY_WORLD)


@dataclass(slots=True)
class _Failures:
    count: int
    last: float
    locked_until: float


class Admission:
    """The counters :class:`Limits` are checked against, shared by every connection of one server.

    Addresses are strings (the peer's IP). Every table is bounded (``MAX_TRACKED_ADDRESSES``)."""

    def __init__(self, limits: Limits, clock: Callable[[], float],
                 evict: Callable[[Hashable], None] | None = None) -> None:
        self.limits, self.clock, self.evict = limits, clock, evict
        self.total = 0
        self._pending: OrderedDict[Hashable, None] = OrderedDict()  # oldest first
        self.tarpitted = 0
        self._open: dict[str, int] = {}
        self._in_flight: dict[FailureKey, int] = {}  # hellos being checked, per failure key
        self._connects: OrderedDict[str, RateLimit] = OrderedDict()
        self._failures: OrderedDict[FailureKey, _Failures] = OrderedDict()
        self._succeeded: OrderedDict[str, None] = OrderedDict()
        self._failure_budget = RateLimit(limits.failed_hello_rate,
                                         max(1, int(limits.failed_hello_rate * 5)), clock)
        self._strangers = RateLimit(limits.new_address_rate, limits.new_address_burst, clock)

    @property
    def pending(self) -> int:
        """How many counted connections have not completed their hello."""
        return len(self._pending)

    def connect(self, address: str, conn: Hashable) -> str | None:
        """Count a new connection ``conn`` from ``address``, or say why it is refused.

        A counted connection starts pending its hello. A refused connection is not counted. The
        reasons:

        - ``connections_total``, ``connections_per_address``, ``connect_rate``.
        - ``new_address_rate``: ``address`` never completed a hello, and the bucket all such addresses
          share is empty. So a flood spread over many addresses is refused at its accept. The addresses
          of the GMs and their overlay pages are not held by it.
        - ``pending_hello``: ``pending_hello`` connections are pending, and there is no ``evict``.

        With ``evict``, the oldest pending connection is passed to it instead, to be closed. It
        stays counted until :meth:`disconnect`. So silent connections cannot keep a GM out. An
        attacker would have to open them faster than a browser says hello."""
        limits = self.limits
        if self.total >= limits.connections_total:
            return "connections_total"
        if self._open.get(address, 0) >= limits.connections_per_address:
            return "connections_per_address"
        if self.pending >= limits.pending_hello and self.evict is None:
            return "pending_hello"
        bucket = self._connects.get(address)
        if bucket is None:
            bucket = RateLimit(limits.connect_rate, limits.connect_burst, self.clock)
            _remember(self._connects, address, bucket)
        if not bucket.allow():
            return "connect_rate"
        if not self.known(address) and not self._strangers.allow():
            return "new_address_rate"
        if self.pending >= limits.pending_hello and self.evict is not None:
            oldest, _ = self._pending.popitem(last=False)
            self.evict(oldest)
        self.total += 1
        self._pending[conn] = None
        self._open[address] = self._open.get(address, 0) + 1
        return None

    def tarpit(self) -> float:
        """Seconds a refused connection waits for its answer (``TARPIT_SECONDS``), counted until
        :meth:`untarpit`.

        0 (answer at once) while ``TARPIT_MAX`` are waiting."""
        if self.tarpitted >= TARPIT_MAX:
            return 0.0
        self.tarpitted += 1
        return TARPIT_SECONDS

    def untarpit(self) -> None:
        """A refused connection that waited got its answer."""
        self.tarpitted -= 1

    def said_hello(self, conn: Hashable) -> None:
        """``conn`` completed its hello: it no longer counts as pending (nor can be evicted)."""
        self._pending.pop(conn, None)

    def disconnect(self, address: str, conn: Hashable) -> None:
        """A counted connection ``conn`` from ``address`` closed."""
        self.total -= 1
        self._pending.pop(conn, None)
        _release(self._open, address)

    def _keys(self, address: str, world_id: str) -> tuple[tuple[FailureKey, int], tuple[FailureKey, int]]:
        """The two failure keys a hello from ``address`` for ``world_id`` counts under.

        Each comes with its free failures. One is the world's own. The other is the address's, for
        all worlds together."""
        free = self.limits.free_failed_hellos
        return ((address, world_id), free), ((address, ANY_WORLD), free * ADDRESS_WORLDS)

    def known(self, address: str) -> bool:
        """True when ``address`` completed a hello since the bridge started, or is trusted
        (``Limits.trusted_addresses``). Known addresses skip the new-address bucket and the
        bridge-wide failure budget."""
        return address in self._succeeded or address in self.limits.trusted_addresses

    def hello_delay(self, address: str, world_id: str = "") -> tuple[float, HelloWaitReason | Literal[""]]:
        """Seconds before ``address`` may try a hello for ``world_id`` again, and why.

        ``(0.0, "")`` means now. ``world_id`` is ``""`` for a first frame naming no world. The
        wait is nonzero, with its reason:

        - ``failed_hellos``: that world, or the whole address, is locked out after failed hellos.
          At most ``max_hello_delay``.
        - ``failed_hello_budget``: 1 s, while the bridge-wide budget of failed hellos is spent and
          ``address`` is not :meth:`known`.
        - ``hellos_in_flight``: 1 s, while as many of its hellos are being checked as it has
          failures left before a lockout (one after a lockout). So concurrent guesses cannot
          overtake the count. None of them need have failed.

        A known address with no failure may have any number checked at once. Think of a GM's
        overlay pages reconnecting together."""
        now = self.clock()
        keys = self._keys(address, world_id)
        locked = max((f.locked_until for key, _ in keys if (f := self._failures.get(key)) is not None),
                     default=0.0)
        if locked > now:
            return locked - now, "failed_hellos"
        known = self.known(address)
        if not known and not self._failure_budget.available():
            return 1.0, "failed_hello_budget"
        for key, free in keys:
            failures = self._failures.get(key)
            failed = failures.count if failures is not None else 0
            if (failed or not known) and self._in_flight.get(key, 0) >= max(1, free - failed):
                return 1.0, "hellos_in_flight"
        return 0.0, ""

    def hello_begin(self, address: str, world_id: str = "") -> None:
        """A hello from ``address`` for ``world_id`` is being checked (call :meth:`hello_end` after)."""
        for key, _ in self._keys(address, world_id):
            self._in_flight[key] = self._in_flight.get(key, 0) + 1

    def hello_end(self, address: str, world_id: str = "") -> None:
        """The hello :meth:`hello_begin` announced was answered."""
        for key, _ in self._keys(address, world_id):
            _release(self._in_flight, key)

    def hello_failed(self, address: str, world_id: str = "") -> None:
        """Count a failed hello from ``address`` for ``world_id``.

        A failed hello is an unknown world, a wrong token, or a first frame that is not a hello.
        Past ``free_failed_hellos`` for the world, the world is locked out. Past ``ADDRESS_WORLDS``
        times as many for all worlds together, the address is. The lockout is 1 s, then 2 s, 4 s ...
        up to ``max_hello_delay``."""
        now = self.clock()
        self._failure_budget.allow()
        for key, free in self._keys(address, world_id):
            failures = self._failures.get(key)
            if failures is None or now - failures.last > FORGET_FAILURES_SECONDS:
                failures = _Failures(0, now, 0.0)
            failures.count += 1
            failures.last = now
            over = failures.count - free
            if over > 0:
                failures.locked_until = now + min(2.0 ** min(over - 1, 32), self.limits.max_hello_delay)
            _remember(self._failures, key, failures)

    def hello_succeeded(self, address: str) -> None:
        """``address`` completed a hello: the bridge-wide failure budget no longer applies to it.

        Its own failures still count: a success does not buy more guesses."""
        _remember(self._succeeded, address, None)


def _remember(table: OrderedDict, key: Hashable, value: object) -> None:
    """Put ``key`` last in ``table``, dropping the oldest entry past ``MAX_TRACKED_ADDRESSES``."""
    table[key] = value
    table.move_to_end(key)
    if len(table) > MAX_TRACKED_ADDRESSES:
        table.popitem(last=False)


REGISTER_PER_ADDRESS = (1 / 60, 5)  # (per second, burst): a GM registers once; five tries for
# typos, then one a minute: a code cannot be guessed (192 bits), but tries fill the log
REGISTER_TOTAL = (1 / 6, 30)  # all addresses together: ten a minute, thirty at once (a host who
# posted a code for a community's tables); more means a flood from many addresses


class RegistrationRates:
    """Registrations through an invite code (``register``): one bucket per address, and one for all.

    A try takes a token from both. A browser asking again about its waiting request takes none; it
    polls until the host decides. The address table is bounded (``MAX_TRACKED_ADDRESSES``)."""

    def __init__(self, clock: Callable[[], float], per_address: tuple[float, int] = REGISTER_PER_ADDRESS,
                 total: tuple[float, int] = REGISTER_TOTAL) -> None:
        self.clock, self.per_address = clock, per_address
        self._total = RateLimit(total[0], total[1], clock)
        self._by_address: OrderedDict[str, RateLimit] = OrderedDict()

    def _of(self, address: str) -> RateLimit:
        bucket = self._by_address.get(address)
        if bucket is None:
            bucket = RateLimit(self.per_address[0], self.per_address[1], self.clock)
        _remember(self._by_address, address, bucket)
        return bucket

    def wait(self, address: str) -> float:
        """Seconds before ``address`` may try a registration (0: now)."""
        return max(self._of(address).wait(), self._total.wait())

    def take(self, address: str) -> None:
        """Count one try from ``address`` (call after :meth:`wait` said 0)."""
        self._of(address).allow()
        self._total.allow()

    def gate(self, address: str) -> RegistrationGate:
        """This table as one connection from ``address`` sees it (what a session is handed)."""
        return RegistrationGate(self, address)


@dataclass(slots=True)  # not frozen: bridge.session's protocol declares a plain ``address`` attribute
class RegistrationGate:
    """One connection's view of :class:`RegistrationRates`: its ``address``, ``wait()``, ``take()``."""

    rates: RegistrationRates
    address: str

    def wait(self) -> float:
        """Seconds before this connection's address may try a registration (0: now)."""
        return self.rates.wait(self.address)

    def take(self) -> None:
        """Count one try from this connection's address."""
        self.rates.take(self.address)


class WorldRates:
    """One :class:`RateLimit` per world, shared by all its connections one after another."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float]) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self._by_world: dict[str, RateLimit] = {}

    def of(self, world_id: str) -> RateLimit:
        """The bucket of ``world_id`` (made full on first use). Only worlds that passed hello get
        one, so this holds at most one per registered world."""
        limit = self._by_world.get(world_id)
        if limit is None:
            limit = self._by_world[world_id] = self.own()
        return limit

    def own(self) -> RateLimit:
        """A full bucket of the same rate, kept by no world: an overlay viewer connection's."""
        return RateLimit(self.rate, self.burst, self.clock)


def _release(counts: dict, key: Hashable) -> None:
    """One fewer for ``key`` (an address, a failure key) in ``counts``.

    At zero the key goes: the table holds only keys with something counted."""
    left = counts[key] - 1
    if left:
        counts[key] = left
    else:
        del counts[key]
