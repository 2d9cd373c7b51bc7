"""shoal.dashboard.charts: server-drawn SVG line charts."""

from __future__ import annotations

import re
from xml.etree import ElementTree

from shoal.dashboard.charts import MARGIN_TOP, Line, line_chart

SVG = "{http://www.w3.org/2000/svg}"


def test_a_chart_draws_one_polyline_per_line_inside_its_box() -> None:
    lines = [Line("broker-a", [(1000.0, 0.0), (1010.0, 50.0), (1020.0, 120.0)]), Line("broker-b", [(1000.0, 10.0)])]
    svg = line_chart("Put TPS", lines)
    root = ElementTree.fromstring(svg)
    assert root.attrib["aria-label"] == "Put TPS"
    polylines = root.findall(f"{SVG}polyline")
    assert len(polylines) == 2
    width, height = float(root.attrib["width"]), float(root.attrib["height"])
    for polyline in polylines:
        for x, y in (map(float, point.split(",")) for point in polyline.attrib["points"].split()):
            assert 0 <= x <= width and 0 <= y <= height
    labels = [text.text for text in root.findall(f"{SVG}text")]
    assert "broker-a" in labels and "broker-b" in labels
    assert "200" in labels  # the axis' top: 120 rounded up to 1-2-5 steps


def test_the_highest_point_touches_the_top_when_it_is_a_round_number() -> None:
    svg = line_chart("Lag", [Line("g", [(0.0, 0.0), (60.0, 100.0)])])
    points = re.search(r'points="([^"]+)"', svg)
    assert points is not None
    (_x0, y0), (_x1, y1) = (map(float, point.split(",")) for point in points.group(1).split())
    assert y1 < y0 and abs(y1 - MARGIN_TOP) < 0.01


def test_no_samples_says_so() -> None:
    assert "no samples yet" in line_chart("Lag", [Line("g", [])])


def test_labels_are_escaped() -> None:
    svg = line_chart("<b>", [Line("<script>", [(0.0, 1.0), (1.0, 2.0)])])
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    ElementTree.fromstring(svg)
