"""The times a GM asks the audit trail about, read as instants.

They are ``--since``/``--until`` of ``audit list``, ``export`` and ``report``, and
``since``/``until`` of ``audit_query`` and ``audit_report``.

Pure: no clock. A time is ISO 8601: a date alone (its midnight), or a date and an hour. Minutes,
seconds and a fraction are optional. ``T`` or a space goes between. Examples: ``2026-12-07``,
``2026-12-07T04Z``, ``2026-12-07T04:17``, ``2026-12-07 05:00``, ``2026-12-07T04:17:09.5``. It is UTC
unless a zone follows: ``Z``, ``+01:00``, ``-0530``, ``+01``.

:func:`trail_time` writes the instant as the trail writes a record's ``ts``
(``bridge.store.schema.utc_now``, ``2026-12-07T04:17:09.123Z``). So the store's text comparison
(``ts >= since``, ``ts < until``) compares instants. This is the one reader of such times. The
command line's argparse type and the wire's queries both call it.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone, UTC

from .errors import BadMessage
from .i18n import N_, _, rule_text

_PARTS = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2})(?::(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?)?"
                    r"(?:([Zz])|([+-])(\d{2})(?::?(\d{2}))?)?)?")



_NOT_A_TIME = N_("\"%(text)s\" is not a time: write 2026-12-07, 2026-12-07T04:17 or "
                 "2026-12-07 05:00+01:00 (UTC unless a zone is given)")


def _not_a_time(text: str) -> ValueError:
    """The refusal of ``text``, saying what a time looks like, in the language in use.

    It carries its ``template`` and ``values``. A query's refusal shows it in the world's language
    (:func:`bridge.i18n.rule_text`)."""
    error = ValueError(_(_NOT_A_TIME) % {"text": text})
    error.template, error.values = _NOT_A_TIME, {"text": text}  # type: ignore[attr-defined]
    return error


def parse_time(text: str) -> datetime:
    """``text`` (see the module docstring) as an aware UTC datetime, to the microsecond.

    A finer fraction is rounded up, so that :func:`trail_time` rounds the instant itself. Raises
    ``ValueError`` saying what a time looks like when it is not one. That is: not that shape, or no
    such date or hour (``2026-02-30``, ``25:00``, a zone beyond 23:59)."""
    found = _PARTS.fullmatch(text.strip())
    if found is None:
        raise _not_a_time(text)
    year, month, day, hour, minute, second, fraction, _z, sign, zone_hours, zone_minutes = found.groups()
    try:
        offset = timedelta(0)
        if sign is not None:
            offset = timedelta(hours=int(zone_hours), minutes=int(zone_minutes or 0))
            if offset >= timedelta(days=1) or int(zone_minutes or 0) >= 60:
                raise ValueError("no such zone")
            offset = -offset if sign == "-" else offset
        digits = (fraction or "").ljust(9, "0")
        micro = int(digits[:6]) + (int(digits[6:]) > 0)  # a finer fraction rounded up
        local = datetime(int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0),
                         tzinfo=timezone(offset)) + timedelta(microseconds=micro)
        return local.astimezone(UTC)
    except (ValueError, OverflowError):  # no such date, hour or zone; a zone past the year 9999
        raise _not_a_time(text) from None


def trail_time(text: str) -> str:
    """``text`` as the trail writes a record's time: ``YYYY-MM-DDTHH:MM:SS.mmmZ``, UTC.

    A fraction finer than a millisecond is rounded up. A record's time has milliseconds. So ``ts >=
    t`` and ``ts < t`` then hold for the same records as for the exact instant. Raises
    ``ValueError`` as :func:`parse_time`."""
    instant = parse_time(text)
    micro = instant.microsecond % 1000
    if micro:
        try:
            instant += timedelta(microseconds=1000 - micro)
        except OverflowError:  # the last microsecond of the year 9999
            raise _not_a_time(text) from None
    return instant.strftime("%Y-%m-%dT%H:%M:%S.") + f"{instant.microsecond // 1000:03d}Z"


def query_times(since: str | None, until: str | None) -> tuple[str | None, str | None]:
    """A query's ``since`` and ``until`` (None: not given) as :func:`trail_time`\\ s. Raises
    :class:`~bridge.errors.BadMessage` naming the field (``since`` or ``until``) that is not a time."""
    times = []
    for field, text in (("since", since), ("until", until)):
        try:
            times.append(None if text is None else trail_time(text))
        except ValueError as exc:
            raise BadMessage(rule_text(exc), field=field) from None
    return times[0], times[1]
