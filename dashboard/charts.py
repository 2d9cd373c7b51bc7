"""Line charts as inline SVG, drawn on the server (pure): the pages need no script to show TPS
and lag over time, and a screenshot or a text browser sees the same picture."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from shoal.dashboard.limits import CHART_HEIGHT, CHART_WIDTH

MARGIN_LEFT = 56
MARGIN_BOTTOM = 22
MARGIN_TOP = 26  # room for the title
PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2")


@dataclass(frozen=True, slots=True)
class Line:
    label: str
    points: Sequence[tuple[float, float]]
    """(unix time in seconds, value), oldest first."""


def _nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 5 x 10^k at or above `value` (the y axis' top)."""
    if value <= 0:
        return 1.0
    scale = 1.0
    while scale * 10 <= value:
        scale *= 10
    while scale > value:
        scale /= 10
    for step in (1, 2, 5, 10):
        if step * scale >= value:
            return step * scale
    return 10 * scale


def _label(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1_000:
        return f"{value / 1_000:g}k"
    return f"{value:g}"


def line_chart(title: str, lines: Sequence[Line], *, unit: str = "") -> str:
    """An SVG chart of `lines` on one time axis; "no samples yet" when there are none to draw."""
    width, height = CHART_WIDTH, CHART_HEIGHT
    plot_w, plot_h = width - MARGIN_LEFT - 8, height - MARGIN_TOP - MARGIN_BOTTOM
    points = [point for line in lines for point in line.points]
    parts = [
        f'<svg class="chart" role="img" aria-label="{escape(title)}" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        f'<text class="title" x="{MARGIN_LEFT}" y="{MARGIN_TOP - 2}">{escape(title)}</text>',
    ]
    if len(points) < 2:
        parts.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle">no samples yet</text></svg>')
        return "".join(parts)
    t_min = min(t for t, _ in points)
    t_max = max(*(t for t, _ in points), t_min + 1)
    top = _nice_ceiling(max(v for _, v in points))
    for fraction in (0.0, 0.5, 1.0):
        y = MARGIN_TOP + plot_h * (1 - fraction)
        parts.append(f'<line class="grid" x1="{MARGIN_LEFT}" x2="{width - 8}" y1="{y:.1f}" y2="{y:.1f}"/>')
        parts.append(
            f'<text class="axis" x="{MARGIN_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{_label(top * fraction)}{escape(unit)}</text>"
        )
    minutes = (t_max - t_min) / 60
    parts.append(
        f'<text class="axis" x="{width - 8}" y="{height - 6}" text-anchor="end">now</text>'
        f'<text class="axis" x="{MARGIN_LEFT}" y="{height - 6}">{minutes:.0f} min ago</text>'
    )
    for index, line in enumerate(lines):
        if not line.points:
            continue
        color = PALETTE[index % len(PALETTE)]
        coords = " ".join(
            f"{MARGIN_LEFT + plot_w * (t - t_min) / (t_max - t_min):.1f},{MARGIN_TOP + plot_h * (1 - v / top):.1f}"
            for t, v in line.points
        )
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{coords}"/>')
        parts.append(
            f'<text class="legend" x="{width - 8 - 150 * index}" y="{MARGIN_TOP - 2}" text-anchor="end" '
            f'fill="{color}">'
            f"{escape(line.label)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)
