"""The trends page: one self-contained HTML page with, per metric, a line chart of the mean
judge score with the deviation band around it, the mean human score beside it, and the
conversations per period as bars. It draws `analysis.trends.TrendPoint`s through the template
`trends.html` (`reports.templating`); this module works out where each mark goes."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from flowrate.analysis.trends import TrendPoint
from flowrate.reports.templating import render


def render_trends(points: list[TrendPoint]) -> str:
    """The page for `points` (`analysis.trends.trends`), as text; its embedded data is the
    points as `flowrate trends --json` gives them."""
    periods = sorted({point.period for point in points})
    by_metric: dict[str, dict[str, TrendPoint]] = defaultdict(dict)
    for point in points:
        by_metric[point.metric][point.period] = point
    charts = [_chart(name, periods, mine) for name, mine in by_metric.items()]
    data = [point.model_dump() for point in points]
    return render(__package__, "trends.html", title="flowrate trends", sheets=["trends.css"], charts=charts, data=data)


def write_trends(path: str | Path, points: list[TrendPoint]) -> None:
    """Write the page for `points` to `path`."""
    Path(path).write_text(render_trends(points), encoding="utf-8")


def _chart(name: str, periods: list[str], points: dict[str, TrendPoint]) -> dict:
    """Where the marks of one metric's chart go: a volume bar per period, a point of the mean
    judge score, a dot of the mean human score, and the band of the human deviation."""
    width, height, left, top, plot = max(160, 60 * len(periods) + 60), 260, 40, 10, 160
    step = (width - left - 20) / max(len(periods) - 1, 1)

    def x(index: int) -> float:
        return round(left + index * step, 1)

    def y(value: float) -> float:
        return round(top + plot * (1 - value), 1)

    peak = max((point.conversations for point in points.values()), default=1)
    volume, band_top, band_bottom, marks, human = [], [], [], [], []
    for index, period in enumerate(periods):
        point = points.get(period)
        if point is None:
            continue
        bar = round(50 * point.conversations / peak, 1)
        volume.append({"x": x(index), "height": bar, "conversations": point.conversations, "period": period})
        if point.mean_score is None:
            continue
        mean = point.mean_score
        marks.append({"x": x(index), "y": y(mean), "period": period, "mean": mean})
        band_top.append((x(index), y(min(1.0, mean + (point.upper or 0.0)))))
        band_bottom.append((x(index), y(max(0.0, mean + (point.lower or 0.0)))))
        if point.mean_label is not None:
            human.append({"x": x(index), "y": y(point.mean_label), "mean": point.mean_label})
    band_bar = None
    if len(band_top) == 1:  # one period: a polygon of two points draws nothing, so the band is a bar
        (at, high), (_, low) = band_top[0], band_bottom[0]
        band_bar = {"x": at, "high": high, "height": round(low - high, 1)}
    return {
        "name": name,
        "width": width,
        "height": height,
        "left": left,
        "top": y(1),
        "bottom": y(0),
        "volume": volume,
        "marks": marks,
        "human": human,
        "line": " ".join(f"{mark['x']},{mark['y']}" for mark in marks),
        "band": " ".join(f"{a},{b}" for a, b in band_top + band_bottom[::-1]),
        "band_bar": band_bar,
    }
