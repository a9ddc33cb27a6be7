"""What the bridge remembers about a world, as the decision core sees it.

The records are msgspec Structs stored as JSON by the store; :class:`WorldState` is the small,
synchronous view a decision gets inside its one transaction (``bridge.store.Store.decide``), so
the decision core stays free of I/O and every read it makes is consistent with its writes.
"""

from __future__ import annotations

from typing import Protocol

import msgspec

from . import wire


class GradedRecord(msgspec.Struct, kw_only=True, frozen=True):
    """A graded ``test_rolled`` (S1-S3): the snapshot it was graded from and the reply sent.

    ``seq`` is the world's decision sequence number when the snapshot arrived: charges the bridge
    consumed after it are subtracted from the snapshot's (see ``docs/protocol.md``). ``basis`` is
    the Skill Base basis the bridge used (S6)."""

    message_id: str
    seq: int
    actor: wire.SohlActor
    test: wire.SohlTest
    visibility: wire.Visibility
    basis: list[str]
    level: int
    reply: wire.TestGraded


class FateRecord(msgspec.Struct, kw_only=True, frozen=True):
    """The Fate Test rolled against a result (S9-S11). Its existence marks the result fated.

    ``pending`` is true while a Fate Test CS waits for ``fate_choice``; then ``outcome`` is
    ``choice`` and ``gain``/``level_after`` are None. ``charges_before`` is the point's charges as
    the bridge counted them when the Fate Test was rolled (None = unlimited). ``reply`` is the
    latest ``fate_resolved`` sent for it (None only while the decision builds it; never stored)."""

    message_id: str
    seq: int
    actor_id: str
    point_id: str
    charges_before: int | None
    fate_roll: int
    fate_ml: int
    fate_level: int
    outcome: wire.Outcome
    gain: int | None
    level_before: int
    level_after: int | None
    charges_after: int | None
    user_id: str
    pending: bool
    reply: wire.FateResolved | None = None


class WorldState(Protocol):
    """One world's stored state, read and written inside one decision's transaction.

    Writes become visible to later decisions only if the decision returns normally; a decision
    that raises leaves nothing behind."""

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

    def graded(self, message_id: str) -> GradedRecord | None:
        """The graded test of ChatMessage ``message_id``, or None if never graded."""
        ...

    def put_graded(self, record: GradedRecord) -> None:
        """Insert or replace the graded test of ``record.message_id``."""
        ...

    def fate(self, message_id: str) -> FateRecord | None:
        """The Fate Test rolled against ``message_id``, or None if the result is unfated."""
        ...

    def put_fate(self, record: FateRecord) -> None:
        """Insert or replace the Fate Test record of ``record.message_id``."""
        ...

    def charges_spent_since(self, actor_id: str, point_id: str, seq: int) -> int:
        """How many charges the bridge consumed from the point after decision ``seq``."""
        ...

    def add_spend(self, actor_id: str, point_id: str, message_id: str, seq: int) -> None:
        """Record one charge consumed from the point by decision ``seq``."""
        ...
