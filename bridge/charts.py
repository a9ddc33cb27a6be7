"""Charts as inline SVG, drawn in plain Python for the audit report (bridge/report.py).

No plotting library: the report comes with the bridge's own install. Each chart is a string ``<svg
...>...</svg>`` with a ``viewBox``; the page scales it to its column. It has no script and no
outside reference. Every text is XML-escaped. Sizes are in SVG user units (CSS pixels at 1:1).

A chart is one or more :class:`Panel` s (axes with their marks) laid out by :func:`figure`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

FONT = 12  # px: tick labels and legends
TITLE_FONT = 13
CHAR_WIDTH = 0.6  # a label's width per character, in font sizes (a sans-serif's average, rounded up)
TICK = "#555555"
GRID = "#e3e3e3"
INK, FAIR, ACCENT, MUTED = "#2b4c7e", "#c0392b", "#e0a030", "#7f8c8d"  # the report's: counts, a fair die's, two more
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
           "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")  # lines of several series, in turn


@dataclass(frozen=True)
class Panel:
    """One drawn panel: SVG elements in its own coordinates, ``width`` x ``height`` units."""

    width: float
    height: float
    body: str


@dataclass(frozen=True)
class Series:
    """One named series: ``values`` per category (bars) or per ``xs`` point (lines)."""

    name: str
    values: Sequence[float]
    color: str
    dashed: bool = False
    xs: Sequence[float] | None = None


def text_width(text: str, size: float = FONT) -> float:
    """About how wide ``text`` is drawn at ``size`` px (for margins; never measured)."""
    return len(text) * size * CHAR_WIDTH


def nice_ticks(top: float, count: int = 5, *, integer: bool = True) -> list[float]:
    """Ticks 0, step, 2 step, ... up to the first at or above ``top``.

    The step is 1, 2 or 5 times a power of ten, giving about ``count`` ticks. They are whole numbers
    when ``integer``. ``top`` <= 0 gives ``[0, 1]``."""
    if top <= 0:
        return [0, 1]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    if integer:
        step = max(1, round(step))
    ticks = [0.0]
    while ticks[-1] < top - 1e-9:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def _number(value: float) -> str:
    return f"{value:g}"


def _text(x: float, y: float, text: str, *, anchor: str = "middle", size: float = FONT, weight: str = "normal",
          rotate: float | None = None, baseline: str = "middle", color: str = "#222222") -> str:
    transform = f' transform="rotate({_number(rotate)} {x:.1f} {y:.1f})"' if rotate is not None else ""
    bold = f' font-weight="{weight}"' if weight != "normal" else ""
    return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" dominant-baseline="{baseline}" '
            f'font-size="{_number(size)}" fill="{color}"{bold}{transform}>{escape(text)}</text>')


def _line(x1: float, y1: float, x2: float, y2: float, color: str, *, width: float = 1, dashed: bool = False) -> str:
    dash = ' stroke-dasharray="6 4"' if dashed else ""
    return f'<path d="M{x1:.1f} {y1:.1f}L{x2:.1f} {y2:.1f}" stroke="{color}" stroke-width="{_number(width)}"{dash}/>'


def _rect(x: float, y: float, width: float, height: float, color: str, title: str) -> str:
    return (f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(width, 0):.1f}" height="{max(height, 0):.1f}" fill="{color}">'
            f'<title>{escape(title)}</title></rect>')


def legend(entries: list[tuple[str, str, str]], *, x: float, y: float, columns: int = 1,
           column_width: float | None = None) -> tuple[str, float, float]:
    """A legend at (x, y): ``entries`` ``(label, color, kind)`` with kind ``box``, ``line`` or
    ``dashed``; in ``columns`` columns. Returns (SVG, width, height)."""
    width = column_width or max(text_width(label) for label, _, _ in entries) + 30
    parts = []
    for index, (label, color, kind) in enumerate(entries):
        ex = x + (index % columns) * width
        ey = y + (index // columns) * (FONT + 6) + FONT / 2
        if kind == "box":
            parts.append(f'<rect x="{ex:.1f}" y="{ey - 5:.1f}" width="14" height="10" fill="{color}"/>')
        else:
            parts.append(_line(ex, ey, ex + 18, ey, color, width=2, dashed=kind == "dashed"))
        parts.append(_text(ex + 22, ey, label, anchor="start"))
    rows = math.ceil(len(entries) / columns)
    return "".join(parts), width * min(columns, len(entries)), rows * (FONT + 6)


def column_panel(labels: list[str], values: Sequence[float], *, color: str, width: float = 640, height: float = 260,
                 value_name: str = "", category_name: str = "", title: str = "", rotate_labels: bool = False,
                 reference: float | None = None, markers: list[float] | None = None, marker_color: str = "#c0392b",
                 legend_entries: list[tuple[str, str, str]] | None = None) -> Panel:
    """Vertical bars, one per label, on a count axis from 0.

    ``reference`` draws a dashed level line across them, e.g. a fair die's expected count.
    ``markers`` draws a short line on each bar: its own expected count."""
    longest = max((text_width(label) for label in labels), default=0)
    top_margin = (TITLE_FONT + 10 if title else 8) + (FONT + 10 if legend_entries else 0)
    bottom = (longest * 0.75 + 12 if rotate_labels else FONT + 10) + (FONT + 10 if category_name else 0)
    ticks = nice_ticks(max([*values, reference or 0, *(markers or [])], default=0))
    left = max(text_width(_number(ticks[-1])) + 12, 30) + (FONT + 8 if value_name else 0)
    plot_w, plot_h = width - left - 10, height - top_margin - bottom
    scale = plot_h / ticks[-1]
    y_of = lambda v: top_margin + plot_h - v * scale  # noqa: E731
    parts = [_text(2, 4 + TITLE_FONT / 2, title, anchor="start", size=TITLE_FONT, weight="bold")] if title else []
    if legend_entries:
        parts.append(legend(legend_entries, x=left, y=top_margin - FONT - 8, columns=len(legend_entries))[0])
    for tick in ticks:
        parts.append(_line(left, y_of(tick), left + plot_w, y_of(tick), GRID))
        parts.append(_text(left - 6, y_of(tick), _number(tick), anchor="end", color=TICK))
    slot = plot_w / max(len(labels), 1)
    for index, (label, value) in enumerate(zip(labels, values)):
        x = left + index * slot
        parts.append(_rect(x + slot * 0.12, y_of(value), slot * 0.76, value * scale, color, f"{label}: {_number(value)}"))
        if markers is not None:
            parts.append(_line(x + slot * 0.04, y_of(markers[index]), x + slot * 0.96, y_of(markers[index]), marker_color, width=2.5))
        cx = x + slot / 2
        if rotate_labels:
            parts.append(_text(cx, top_margin + plot_h + 8, label, anchor="end", rotate=-60, size=FONT - 1))
        else:
            parts.append(_text(cx, top_margin + plot_h + 6 + FONT / 2, label))
    if reference is not None:
        parts.append(_line(left, y_of(reference), left + plot_w, y_of(reference), marker_color, width=1.5, dashed=True))
    parts.append(_line(left, top_margin + plot_h, left + plot_w, top_margin + plot_h, TICK))
    if value_name:
        parts.append(_text(10, top_margin + plot_h / 2, value_name, rotate=-90))
    if category_name:
        parts.append(_text(left + plot_w / 2, height - FONT / 2 - 2, category_name))
    return Panel(width, height, "".join(parts))


def bar_panel(categories: list[str], series: list[Series], *, width: float = 640, value_name: str = "",
              title: str = "", show_legend: bool = True) -> Panel:
    """Horizontal bars, one row per category, on a count axis from 0.

    The series are stacked left to right; one series gives plain bars. The legend is above the bars."""
    row = 26
    left = min(max((text_width(c) for c in categories), default=0) + 12, width * 0.4)
    top_margin: float = (TITLE_FONT + 10 if title else 4)
    parts = [_text(2, 4 + TITLE_FONT / 2, title, anchor="start", size=TITLE_FONT, weight="bold")] if title else []
    if show_legend and len(series) > 1:
        column = max(text_width(s.name) for s in series) + 34
        columns = max(1, min(len(series), int(width // column)))  # longer labels (German): more rows, none cut off
        svg, _, lh = legend([(s.name, s.color, "box") for s in series], x=max(0.0, min(left, width - column * columns)),
                            y=top_margin, columns=columns, column_width=column)
        parts.append(svg)
        top_margin += lh + 6
    plot_w = width - left - 16
    totals = [sum(s.values[i] for s in series) for i in range(len(categories))]
    ticks = nice_ticks(max(totals, default=0))
    scale = plot_w / ticks[-1]
    plot_h = row * len(categories)
    for tick in ticks:
        x = left + tick * scale
        parts.append(_line(x, top_margin, x, top_margin + plot_h, GRID))
        parts.append(_text(x, top_margin + plot_h + 6 + FONT / 2, _number(tick), color=TICK))
    for index, category in enumerate(categories):
        y = top_margin + index * row
        parts.append(_text(left - 8, y + row / 2, category if text_width(category) <= left - 12
                           else category[:max(int((left - 12) / (FONT * CHAR_WIDTH)) - 1, 1)] + "…", anchor="end"))
        start = 0.0
        for s in series:
            value = s.values[index]
            if value:
                parts.append(_rect(left + start * scale, y + row * 0.15, value * scale, row * 0.7, s.color,
                                   f"{category}: {_number(value)} {s.name}".strip()))
            start += value
    parts.append(_line(left, top_margin, left, top_margin + plot_h, TICK))
    height = top_margin + plot_h + FONT + 12
    if value_name:
        parts.append(_text(left + plot_w / 2, height + FONT / 2, value_name))
        height += FONT + 8
    return Panel(width, height, "".join(parts))


def step_panel(series: list[Series], *, width: float = 640, height: float = 280, x_name: str = "",
               value_name: str = "") -> Panel:
    """Step lines, one per series with its own ``xs``: each value holds until the next x.

    The legend is to the right."""
    entries = [(s.name, s.color, "dashed" if s.dashed else "line") for s in series]
    legend_w = max(text_width(name) for name, _, _ in entries) + 30
    xs = [x for s in series for x in s.xs or ()]
    ticks = nice_ticks(max((v for s in series for v in s.values), default=0))
    left = max(text_width(_number(ticks[-1])) + 12, 30) + (FONT + 8 if value_name else 0)
    plot_w, plot_h = width - left - legend_w - 16, height - 8 - (2 * FONT + 20 if x_name else FONT + 12)
    x_min, x_max = min(xs, default=0), max(xs, default=1)
    x_ticks = nice_ticks(x_max - x_min if x_max > x_min else 1)
    x_of = lambda x: left + (x - x_min) / (x_ticks[-1] or 1) * plot_w  # noqa: E731
    y_of = lambda v: 8 + plot_h - v / ticks[-1] * plot_h  # noqa: E731
    parts = []
    for tick in ticks:
        parts.append(_line(left, y_of(tick), left + plot_w, y_of(tick), GRID))
        parts.append(_text(left - 6, y_of(tick), _number(tick), anchor="end", color=TICK))
    for tick in x_ticks:
        parts.append(_text(x_of(x_min + tick), 8 + plot_h + 6 + FONT / 2, _number(x_min + tick), color=TICK))
    for s in series:
        points = list(zip(s.xs or (), s.values))
        if not points:
            continue
        path = f"M{x_of(points[0][0]):.1f} {y_of(points[0][1]):.1f}"
        for (_, previous), (x, value) in zip(points, points[1:]):
            path += f"L{x_of(x):.1f} {y_of(previous):.1f}L{x_of(x):.1f} {y_of(value):.1f}"
        dash = ' stroke-dasharray="3 3"' if s.dashed else ""
        parts.append(f'<path d="{path}" fill="none" stroke="{s.color}" stroke-width="2"{dash}>'
                     f'<title>{escape(s.name)}</title></path>')
    parts.append(_line(left, 8 + plot_h, left + plot_w, 8 + plot_h, TICK))
    parts.append(_line(left, 8, left, 8 + plot_h, TICK))
    parts.append(legend(entries, x=left + plot_w + 16, y=8)[0])
    if value_name:
        parts.append(_text(10, 8 + plot_h / 2, value_name, rotate=-90))
    if x_name:
        parts.append(_text(left + plot_w / 2, height - FONT / 2 - 2, x_name))
    return Panel(width, height, "".join(parts))


def figure(panels: list[Panel], *, label: str, across: bool = False, gap: float = 18) -> str:
    """The panels as one ``<svg>``, one under the other; with ``across``, side by side.

    ``label`` is its accessible name."""
    if across:
        width = sum(p.width for p in panels) + gap * (len(panels) - 1)
        height = max(p.height for p in panels)
    else:
        width = max(p.width for p in panels)
        height = sum(p.height for p in panels) + gap * (len(panels) - 1)
    parts, offset = [], 0.0
    for panel in panels:
        x, y = (offset, 0.0) if across else (0.0, offset)
        parts.append(f'<g transform="translate({x:.1f} {y:.1f})">{panel.body}</g>')
        offset += (panel.width if across else panel.height) + gap
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
            f'width="{width:.0f}" height="{height:.0f}" role="img" aria-label={quoteattr(label)} '
            f'font-family="system-ui, -apple-system, &quot;Segoe UI&quot;, sans-serif">'
            f'{"".join(parts)}</svg>')
