"""The trends page: one self-contained HTML page with, per metric, a line chart of the mean
judge score with the deviation band around it, the mean human score beside it, and the
conversations per period as bars. It draws `analysis.trends.TrendPoint`s; the page
scaffolding and the embedded data are `reports.html`'s."""

from __future__ import annotations

import html
from collections import defaultdict
from pathlib import Path

from flowrate.analysis.trends import TrendPoint
from flowrate.reports.escape import page_text
from flowrate.reports.html import data_script, page

STYLE = """.card{margin:.5em 0}
.band{fill:#4a7bd0;opacity:.2}.mean{fill:none;stroke:#4a7bd0;stroke-width:2}.mean-point{fill:#4a7bd0}.human{fill:#d0582a}.volume{fill:#bbb}
.axis{stroke:#ddd}"""
INTRO = (
    "<h1>flowrate trends</h1>\n<p>Line and points: mean judge score. Band: the upper and lower deviation of human"
    " labels around it. Dots: mean human score. Bars: conversations graded.</p>\n"
)
SCRIPT = (
    '<script>"use strict"; const trends = JSON.parse(document.getElementById("data").textContent);'
    ' document.title += " (" + trends.length + " points)";</script>\n'
)


def render_trends(points: list[TrendPoint]) -> str:
    """The page for `points` (`analysis.trends.trends`), as text; its embedded data is the
    points as `flowrate trends --json` gives them."""
    periods = sorted({point.period for point in points})
    by_metric: dict[str, dict[str, TrendPoint]] = defaultdict(dict)
    for point in points:
        by_metric[point.metric][point.period] = point
    charts = "\n".join(_chart(name, periods, mine) for name, mine in by_metric.items())
    data = data_script([point.model_dump() for point in points])
    return page("flowrate trends", STYLE, f"{INTRO}{charts}\n{data}\n{SCRIPT}")


def write_trends(path: str | Path, points: list[TrendPoint]) -> None:
    """Write the page for `points` to `path`."""
    Path(path).write_text(render_trends(points), encoding="utf-8")


def _chart(name: str, periods: list[str], points: dict[str, TrendPoint]) -> str:
    width, height, left, top, plot = max(160, 60 * len(periods) + 60), 260, 40, 10, 160
    step = (width - left - 20) / max(len(periods) - 1, 1)

    def x(index: int) -> float:
        return round(left + index * step, 1)

    def y(value: float) -> float:
        return round(top + plot * (1 - value), 1)

    peak = max((point.conversations for point in points.values()), default=1)
    parts = []
    band_top, band_bottom, line, marks, human = [], [], [], [], []
    for index, period in enumerate(periods):
        point = points.get(period)
        if point is None:
            continue
        bar = round(50 * point.conversations / peak, 1)
        parts.append(
            f'<rect class="volume" x="{x(index) - 8}" y="{height - 20 - bar}" width="16" height="{bar}"><title>{point.conversations} conversations</title></rect>'
        )
        parts.append(
            f'<text x="{x(index)}" y="{height - 5}" text-anchor="middle">{html.escape(page_text(period))}</text>'
        )
        if point.mean_score is None:
            continue
        mean = point.mean_score
        line.append(f"{x(index)},{y(mean)}")
        marks.append(
            f'<circle class="mean-point" cx="{x(index)}" cy="{y(mean)}" r="3"><title>{html.escape(page_text(period))}: mean judge score {mean}</title></circle>'
        )
        high, low = y(min(1.0, mean + (point.upper or 0.0))), y(max(0.0, mean + (point.lower or 0.0)))
        band_top.append((x(index), high))
        band_bottom.append((x(index), low))
        if point.mean_label is not None:
            human.append(
                f'<circle class="human" cx="{x(index)}" cy="{y(point.mean_label)}" r="4"><title>mean human score {point.mean_label}</title></circle>'
            )
    if len(band_top) == 1:  # one period: a polygon of two points draws nothing, so the band is a bar
        (at, high), (_, low) = band_top[0], band_bottom[0]
        band = f'<rect class="band" x="{at - 6}" y="{high}" width="12" height="{round(low - high, 1)}"/>'
    else:
        band = f'<polygon class="band" points="{" ".join(f"{a},{b}" for a, b in band_top + band_bottom[::-1])}"/>'
    return (
        f'<div class="card"><h3>{html.escape(page_text(name))}</h3><svg class="trend" data-metric="{html.escape(name)}" width="{width}" height="{height}" role="img">'
        f'<line x1="{left}" y1="{y(0)}" x2="{width - 10}" y2="{y(0)}" class="axis"/><line x1="{left}" y1="{y(1)}" x2="{width - 10}" y2="{y(1)}" class="axis"/>'
        f'<text x="4" y="{y(1) + 4}">1.0</text><text x="4" y="{y(0) + 4}">0.0</text>'
        f'{band}<polyline class="mean" points="{" ".join(line)}"/>'
        f"{''.join(marks)}{''.join(human)}{''.join(parts)}</svg></div>"
    )
