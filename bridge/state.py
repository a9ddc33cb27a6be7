"""What the bridge remembers about a world, as the decision core sees it.

Every ruleset keeps its state as records: msgspec Structs stored as JSON. Each is under a ``kind``
(e.g. ``"sohl.graded"``, namespaced by ruleset) and a ``key`` (e.g. the ChatMessage id).

:class:`WorldState` is the small, synchronous view a decision gets inside its one transaction
(``bridge.store.Store.decide``). So the decision core stays free of I/O. Every read it makes is
consistent with its writes. And the audit trail can record every read generically.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

import msgspec

from . import wire

R = TypeVar("R", bound=msgspec.Struct)


class WorldState(Protocol):
    """One world's stored state, read and written inside one decision's transaction.

    Writes become visible to later decisions only if the decision returns normally. A decision that
    raises leaves nothing behind."""

    world_id: str

    def settings(self) -> wire.WorldSettings:
        """The world's settings (S12 default ``everyone``)."""
        ...

    def put_settings(self, settings: wire.WorldSettings) -> None:
        """Replace the world's settings."""
        ...

    def next_seq(self) -> int:
        """Allocate the world's next decision sequence number (1, 2, ...)."""
        ...

    def get(self, kind: str, key: str, type: type[R]) -> R | None:
        """The record of ``kind`` under ``key`` decoded as ``type``, or None."""
        ...

    def put(self, kind: str, key: str, record: msgspec.Struct) -> None:
        """Insert or replace the record of ``kind`` under ``key``."""
        ...

    def peek(self, kind: str, key: str, type: type[R]) -> R | None:
        """The record as :meth:`get` reads it, to describe a decision, never to make one.

        It serves a refusal's audit columns. It is not one of the decision's inputs, so it is not
        recorded in its audit record. It is None when a recorded decision is replayed."""
        ...
