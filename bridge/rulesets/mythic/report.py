"""mythic's part of the audit report: the d100 of its Fate Chart questions join the fair-d100
test (M1)."""

from __future__ import annotations

from ...i18n import ngettext
from ...ruleset import ReportPart


def questions(count: int) -> str:
    """``count`` Fate Chart questions in words, in the current language."""
    return ngettext("%(num)s Mythic Fate Chart question", "%(num)s Mythic Fate Chart questions", count) % {"num": count}


REPORT = ReportPart(d100=questions)
"""What mythic adds to the audit report: its d100s."""
