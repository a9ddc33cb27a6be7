"""Audit: the GM's "Fate audit" window reads the world's trail."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from .base import BridgeMessage, Id, OutPart, Part, Query


QueryTime = Annotated[str, Meta(
    max_length=40,  # the longest time: 2026-12-07T04:17:09.123456789+01:00 (35)
    description="A time, ISO 8601: a date (2026-11-29), or a date and hour with optional minutes, seconds "
                "and fraction (2026-11-29T20, 2026-11-29 20:00:05.5), in UTC unless a zone follows "
                "(2026-11-29T21:00+01:00); compared as an instant. Read by bridge/times.py, which refuses "
                "what is not a time (bad_message naming the field).",
)]


class AuditQuery(Query, tag="audit_query", kw_only=True, frozen=True):
    """Ask for a page of the world's audit trail, newest first. Answered ``audit_page``.

    Filters are optional and combine. ``since`` (inclusive) and ``until`` (exclusive) are times
    (:mod:`bridge.times`). One that is not a time is refused ``bad_message``, naming the field.
    ``before_seq`` continues from a previous page's ``next_before``.
    """

    actor_id: Id | None = None
    ruleset: Annotated[str, Meta(max_length=32)] | None = None
    outcome: Annotated[str, Meta(max_length=32)] | None = None
    since: QueryTime | None = None
    until: QueryTime | None = None
    before_seq: Annotated[int, Meta(ge=1, le=2**53)] | None = None
    limit: Annotated[int, Meta(ge=1, le=200)] = 50


class AuditColumns(OutPart, kw_only=True, frozen=True):
    """What a decision's audit record is listed and filtered by; each ruleset fills what it has.

    ``outcome``: the Fate outcome (``lost``/``kept``/``spent``/``choice``), ``graded``,
    ``settings``, another ruleset's result word, or the error code of a refusal. ``message_id``
    links to the ChatMessage. ``detail`` is one readable line of the result.
    """

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


class AuditSummary(AuditColumns, kw_only=True, frozen=True):
    """One audit record as the audit window lists it.

    Its columns, plus ``seq`` (the world's audit sequence number), ``ts`` (UTC), the message
    ``type``, its ``event_id`` and the Foundry user who asked.
    """

    seq: int
    ts: str
    type: str
    event_id: str | None
    user_id: str | None


class AuditPage(BridgeMessage, tag="audit_page", kw_only=True, frozen=True):
    """A page of audit records, newest first.

    ``next_before`` is the ``before_seq`` of the next, older page; null at the end.
    """

    query_id: str
    records: list[AuditSummary]
    next_before: int | None


# Records under one receipt signature at most: a path of at most 5 hashes, so that 100 of the
# largest receipts fit one receipts_check frame (a store batch of 64 decisions takes two signatures).
MAX_RECEIPT_BATCH = 32
MAX_RECEIPT_PATH = (MAX_RECEIPT_BATCH - 1).bit_length()
B64Hash = Annotated[str, Meta(max_length=43, description="A SHA-256 hash, base64url without padding.")]


class Receipt(Part, kw_only=True, omit_defaults=True, frozen=True):
    """A signed receipt for one audit record (docs/protocol.md, Receipts; bridge/receipts.py).

    - ``seq``: the world's record number.
    - ``record_hash``: that record's chain hash (hex SHA-256).
    - ``key_id``: the first 16 hex digits of SHA-256 of the signing Ed25519 public key.
    - ``sig``: a base64url (unpadded) Ed25519 signature.

    v1 has no batch fields: ``sig`` signs :func:`bridge.receipts.receipt_bytes`. In v2, ``sig``
    signs :func:`bridge.receipts.batch_bytes` of a Merkle tree over the ``batch_size`` records
    signed together. The record is leaf ``batch_index`` (0-based). ``path`` holds the sibling hashes
    from that leaf up (RFC 6962).

    The fields are only bounded, not pattern-checked. A receipt edited in the chat log is answered
    ``changed`` by ``receipts_check``; it does not refuse the whole query.
    """

    world_id: Id
    seq: Annotated[int, Meta(ge=1, le=2**53)]
    record_hash: Annotated[str, Meta(max_length=128)]
    key_id: Annotated[str, Meta(max_length=64)]
    sig: Annotated[str, Meta(max_length=256)]
    batch_size: Annotated[int, Meta(ge=1, le=MAX_RECEIPT_BATCH)] | None = None
    batch_index: Annotated[int, Meta(ge=0, le=MAX_RECEIPT_BATCH - 1)] | None = None
    path: Annotated[list[B64Hash], Meta(max_length=MAX_RECEIPT_PATH)] | None = None


MAX_RECEIPTS_PER_CHECK = 100  # <= 642 bytes each (a 128-character ASCII world id): 100 fit one 64 KiB frame


class ReceiptsCheck(Query, tag="receipts_check", kw_only=True, frozen=True):
    """Ask whether the world's audit trail still holds, unchanged, the records these receipts point at.

    The receipts are collected from the chat log. Read-only: no decision, no record. At most
    ``MAX_RECEIPTS_PER_CHECK`` receipts per query; send more in several. Answered
    ``receipts_checked``.
    """

    receipts: Annotated[list[Receipt], Meta(max_length=MAX_RECEIPTS_PER_CHECK)]


ReceiptStatus = Literal["ok", "missing", "changed"]


class ReceiptResult(OutPart, kw_only=True, frozen=True):
    """One receipt's answer.

    - ``ok``: the record is there with that hash, and the signature is the bridge's.
    - ``missing``: the signature is the bridge's, but no record has that ``seq`` any more.
    - ``changed``: the signature does not verify with the bridge's key, the receipt names another
      world, or the record now has another hash.

    ``record_hash`` echoes the receipt's.
    """

    seq: int
    status: ReceiptStatus
    record_hash: str


class ReceiptsChecked(BridgeMessage, tag="receipts_checked", kw_only=True, frozen=True):
    """Answer to ``receipts_check``: ``results[i]`` answers ``receipts[i]``."""

    query_id: str
    results: list[ReceiptResult]


class AuditReport(Query, tag="audit_report", kw_only=True, frozen=True):
    """Ask for the world's audit report (bridge/report.py). Read-only.

    It is the same self-contained HTML page as ``fate-bridge audit report``. It covers from ``since``
    to before ``until``, times as ``audit_query``'s; the whole trail when absent. Answered
    ``audit_report_page``. A bridge that draws no reports (``resolve``) answers ``not_found``.
    """

    since: QueryTime | None = None
    until: QueryTime | None = None


class AuditReportPage(BridgeMessage, tag="audit_report_page", kw_only=True, frozen=True):
    """The report page, for the browser to save or show sandboxed.

    ``html`` is a whole HTML document with inline SVG charts and no script. A
    Content-Security-Policy in it forbids any.
    """

    query_id: str
    html: str


CLIENT = (AuditQuery, ReceiptsCheck, AuditReport)
BRIDGE = (AuditPage, ReceiptsChecked, AuditReportPage)
