"""Audit (issue 3): the GM's "Fate audit" window reads the world's trail."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from .base import BridgeMessage, Id, OutPart, Query


UTC_TIME_PATTERN = r"^\d{4}-\d{2}-\d{2}([T ]\d{2}(:\d{2}(:\d{2}(\.\d{1,6})?)?)?Z?)?$"
UtcTime = Annotated[str, Meta(
    pattern=UTC_TIME_PATTERN,
    description="A UTC time as ISO-8601 text, from a date (2026-11-29) to milliseconds.",
)]


class AuditQuery(Query, tag="audit_query", kw_only=True):
    """Ask for a page of the world's audit trail, newest first. Filters are optional and
    combine; ``since``/``until`` are ISO-8601 UTC timestamps (inclusive/exclusive);
    ``before_seq`` continues from a previous page's ``next_before``. Answered ``audit_page``."""

    actor_id: Id | None = None
    ruleset: Annotated[str, Meta(max_length=32)] | None = None
    outcome: Annotated[str, Meta(max_length=32)] | None = None
    since: UtcTime | None = None
    until: UtcTime | None = None
    before_seq: Annotated[int, Meta(ge=1, le=2**53)] | None = None
    limit: Annotated[int, Meta(ge=1, le=200)] = 50


class AuditColumns(OutPart, kw_only=True):
    """What a decision's audit record is listed and filtered by; each ruleset fills what it has.
    ``outcome``: the Fate outcome (``lost``/``kept``/``spent``/``choice``), ``graded``,
    ``settings``, another ruleset's result word, or the error code of a refusal. ``message_id``
    links to the ChatMessage; ``detail`` is one readable line of the result."""

    ruleset: str | None = None
    message_id: str | None = None
    actor_id: str | None = None
    actor_name: str | None = None
    test_name: str | None = None
    outcome: str
    level_before: int | None = None
    level_after: int | None = None
    label_before: str | None = None
    label_after: str | None = None
    fate_roll: int | None = None
    point_name: str | None = None
    detail: str | None = None


class AuditSummary(AuditColumns, kw_only=True):
    """One audit record as the audit window lists it: its columns plus ``seq`` (the world's
    audit sequence number), ``ts`` (UTC), the message ``type``, its ``event_id`` and the Foundry
    user who asked."""

    seq: int
    ts: str
    type: str
    event_id: str | None
    user_id: str | None


class AuditPage(BridgeMessage, tag="audit_page", kw_only=True):
    """A page of audit records, newest first; ``next_before`` is the ``before_seq`` of the next
    (older) page, or null at the end."""

    query_id: str
    records: list[AuditSummary]
    next_before: int | None


CLIENT = (AuditQuery,)
BRIDGE = (AuditPage,)
