"""Pearson's chi-square goodness-of-fit test, in plain Python.

No science library: the audit report comes with the bridge's own install. :func:`fit_test` tests
observed counts against the counts a fair die or a fair shuffle makes. :func:`chi_square_sf` gives
its p-value.

The audit report tests the bridge's d100 with it (bridge/report.py). A ruleset tests its own draws:
hmtw's tarot decks (bridge/rulesets/hmtw/report.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MIN_EXPECTED = 5  # the chi-square test's usual rule: every expected count at least 5


@dataclass(frozen=True)
class FitTest:
    """Pearson's chi-square goodness-of-fit test of observed counts against expected ones."""

    statistic: float
    p_value: float
    degrees: int
    valid: bool  # every expected count is at least MIN_EXPECTED


def chi_square_sf(statistic: float, degrees: int) -> float:
    """P(X >= ``statistic``) for X chi-square distributed with ``degrees`` degrees of freedom.

    This is the regularized upper incomplete gamma function Q(degrees/2, statistic/2). Below a + 1
    it uses its power series; above, its continued fraction (modified Lentz). See Numerical Recipes,
    3rd ed., 6.2. It is good to about 1e-14 relative. Raises ``ValueError`` for ``degrees`` < 1 or a
    negative ``statistic``."""
    if degrees < 1 or statistic < 0:
        raise ValueError(f"chi-square needs degrees >= 1 and statistic >= 0, got {degrees}, {statistic}")
    a, x = degrees / 2, statistic / 2
    if x == 0:
        return 1.0
    front = math.exp(-x + a * math.log(x) - math.lgamma(a))
    if x < a + 1:  # P(a, x) by the series sum x^n / (a (a+1) ... (a+n))
        term = total = 1 / a
        n = a
        while abs(term) > abs(total) * 1e-16:
            n += 1
            term *= x / n
            total += term
        return max(0.0, 1 - front * total)
    tiny = 1e-300
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = d if abs(d) > tiny else tiny
        c = b + an / c
        c = c if abs(c) > tiny else tiny
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-16:
            break
    return front * h


def fit_test(observed: list[int], expected: list[float]) -> FitTest | None:
    """Pearson's chi-square test of ``observed`` against ``expected`` counts, with len - 1 degrees
    of freedom.

    Both have the same length and total. None when nothing was observed."""
    if sum(observed) == 0 or len(observed) < 2:
        return None
    statistic = sum((o - e) ** 2 / e for o, e in zip(observed, expected))
    degrees = len(observed) - 1
    return FitTest(statistic, chi_square_sf(statistic, degrees), degrees, min(expected) >= MIN_EXPECTED)
