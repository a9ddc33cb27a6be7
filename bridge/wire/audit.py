"""Audit (issue 3): the GM's "Fate audit" window reads the world's trail."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from .base import BridgeMessage, ClientMessage, Id, OutPart



class AuditQuery(ClientMessage, tag="audit_query", kw_only=True):
    """Ask for a page of the world's audit trail, newest first. Filters are optional and
    combine; ``since``/``until`` are ISO-8601 UTC timestamps (inclusive/exclusive);
    ``before_seq`` continues from a previous page's ``next_before``. Answered ``audit_page``."""

    query_id: Id
    actor_id: Id | None = None
    ruleset: Annotated[str, Meta(max_length=32)] | None = None
    outcome: Annotated[str, Meta(max_length=32)] | None = None
    since: Annotated[str, Meta(max_length=40)] | None = None
    until: Annotated[str, Meta(max_length=40)] | None = None
    before_seq: Annotated[int, Meta(ge=1)] | None = None
    limit: Annotated[int, Meta(ge=1, le=200)] = 50


class AuditSummary(OutPart, kw_only=True):
    """One audit record as the audit window lists it. ``seq`` is the world's audit sequence
    number; ``outcome`` is the Fate outcome, ``graded``, ``settings`` or the error code of a
    refusal; ``message_id`` links to the ChatMessage."""

    seq: int
    ts: str
    type: str
    event_id: str | None
    user_id: str | None
    ruleset: str | None
    message_id: str | None
    actor_id: str | None
    actor_name: str | None
    test_name: str | None
    outcome: str
    level_before: int | None
    level_after: int | None
    label_before: str | None
    label_after: str | None
    fate_roll: int | None
    point_name: str | None


class AuditPage(BridgeMessage, tag="audit_page", kw_only=True):
    """A page of audit records, newest first; ``next_before`` is the ``before_seq`` of the next
    (older) page, or null at the end."""

    query_id: str
    records: list[AuditSummary]
    next_before: int | None


CLIENT = (AuditQuery,)
BRIDGE = (AuditPage,)
