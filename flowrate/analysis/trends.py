"""Trends: per period and metric, conversations graded, mean score and pass rate; with labels,
the mean human score, the adjusted mean and the upper/lower deviation band. Computed in SQL
over the history's tables (or an in-memory copy of results files), so a million rows answer
in seconds.
"""

from __future__ import annotations

import html
from collections import defaultdict
from typing import Any

from flowrate.analysis.calibration import AT_LEAST, side
from flowrate.exit_codes import ConfigError
from flowrate.reports.escape import json_for_script

PERIODS = {"day": "%Y-%m-%d", "week": "%G-W%V", "month": "%Y-%m"}
DATES = {"evaluated": "CAST(evaluated_at AS DATE)", "chat": "chat_date"}
SPARKS = "▁▂▃▄▅▆▇█"


def trends(
    connection: Any, by: str = "week", date: str = "evaluated", metric: str | None = None, labels: bool = False
) -> list[dict]:
    """One object per period and metric, in the documented JSON shape.

    `by` is day, week or month; `date` evaluated or chat (rows without a chat date are left
    out of a chat-date trend: `undated_rows` counts them); `metric` keeps that metric only;
    `labels` adds the mean human score, the adjusted mean and the bands from the `labels` table."""
    if by not in PERIODS:
        raise ConfigError(f"option by: {by!r} must be day, week or month")
    if date not in DATES:
        raise ConfigError(f"option date: {date!r} must be evaluated or chat")
    # The selection is a CTE of each query, its parameters bound there: DuckDB 2.0 refuses a
    # prepared parameter inside CREATE VIEW.
    periodic = (
        f"WITH periodic AS (SELECT strftime({DATES[date]}, '{PERIODS[by]}') AS period, * FROM rows"
        f" WHERE {DATES[date]} IS NOT NULL{' AND metric = ?' if metric else ''})"
    )
    parameters = [metric] if metric else []
    found = connection.execute(
        f"""{periodic} SELECT period, metric, count(DISTINCT conversation_id),
        avg(score) FILTER (WHERE score IS NOT NULL),
        avg(CASE WHEN success THEN 1.0 ELSE 0.0 END) FILTER (WHERE score IS NOT NULL)
        FROM periodic GROUP BY ALL ORDER BY period, metric""",
        parameters,
    ).fetchall()
    result = [
        {
            "period": key,
            "metric": name,
            "conversations": count,
            "mean_score": _round(mean),
            "pass_rate": _round(rate),
            "mean_label": None,
            "mean_adjusted": None,
            "upper": None,
            "lower": None,
        }
        for key, name, count, mean, rate in found
    ]
    if labels:
        _add_labels(connection, result, periodic, parameters)
    return result


def undated_rows(connection: Any, metric: str | None = None) -> int:
    """How many rows (of `metric`, or of every metric) have no chat date: a chat-date trend leaves them out."""
    query = "SELECT count(*) FROM rows WHERE chat_date IS NULL" + (" AND metric = ?" if metric else "")
    return connection.execute(query, [metric] if metric else []).fetchone()[0]


def _add_labels(connection: Any, result: list[dict], periodic: str, parameters: list) -> None:
    """Per period and metric: mean label, and the calibration bands of `flowrate.calibration`.
    `periodic` is the CTE that selects the trend's rows, `parameters` its bound values."""
    pairs = connection.execute(
        f"""{periodic}, human AS (SELECT conversation_id, metric, avg(score) AS h FROM labels GROUP BY ALL)
        SELECT p.period, p.metric, p.score, human.h FROM periodic p JOIN human USING (conversation_id, metric)
        WHERE p.score IS NOT NULL""",
        parameters,
    ).fetchall()
    grouped: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for key, name, score, human in pairs:
        grouped[(key, name)].append((score, human))
    bands = []
    for item in result:
        cases = grouped.get((item["period"], item["metric"]), [])
        if not cases:
            continue
        deltas = [human - score for score, human in cases]
        item["mean_label"] = _round(sum(human for _, human in cases) / len(cases))
        item["upper"] = (side([d for d in deltas if d > 0]) or {}).get("deviation")
        item["lower"] = (side([d for d in deltas if d < 0]) or {}).get("deviation")
        nonzero = [d for d in deltas if d != 0]
        band = sum(nonzero) / len(nonzero) if len(nonzero) >= AT_LEAST else 0.0
        bands.append((item["period"], item["metric"], band))
    if not bands:
        return
    connection.execute("CREATE OR REPLACE TEMP TABLE bands (period VARCHAR, metric VARCHAR, band DOUBLE)")
    connection.executemany("INSERT INTO bands VALUES (?, ?, ?)", bands)
    adjusted = dict(
        ((key, name), mean)
        for key, name, mean in connection.execute(
            f"""{periodic} SELECT p.period, p.metric, avg(least(1.0, greatest(0.0, p.score + b.band)))
            FROM periodic p JOIN bands b USING (period, metric) WHERE p.score IS NOT NULL GROUP BY ALL""",
            parameters,
        ).fetchall()
    )
    for item in result:
        if (item["period"], item["metric"]) in adjusted:
            item["mean_adjusted"] = _round(adjusted[(item["period"], item["metric"])])


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)


def sparkline(values: list[float | None]) -> str:
    """Scores in [0, 1] as block characters, a space where there is none."""
    return "".join(" " if value is None else SPARKS[min(int(value * len(SPARKS)), len(SPARKS) - 1)] for value in values)


def render_html(items: list[dict]) -> str:
    """One self-contained page: per metric a line chart of the mean score with the deviation band
    around it, the mean human score beside it, and conversations per period as bars."""
    periods = sorted({item["period"] for item in items})
    by_metric: dict[str, dict[str, dict]] = defaultdict(dict)
    for item in items:
        by_metric[item["metric"]][item["period"]] = item
    charts = "\n".join(_chart(name, periods, points) for name, points in by_metric.items())
    return TRENDS_PAGE.replace("{{charts}}", charts).replace("{{data}}", json_for_script(items))


def _chart(name: str, periods: list[str], points: dict[str, dict]) -> str:
    width, height, left, top, plot = max(160, 60 * len(periods) + 60), 260, 40, 10, 160
    step = (width - left - 20) / max(len(periods) - 1, 1)

    def x(index: int) -> float:
        return round(left + index * step, 1)

    def y(value: float) -> float:
        return round(top + plot * (1 - value), 1)

    peak = max((item["conversations"] for item in points.values()), default=1)
    parts = []
    band_top, band_bottom, line, marks, human = [], [], [], [], []
    for index, period in enumerate(periods):
        item = points.get(period)
        if item is None:
            continue
        bar = round(50 * item["conversations"] / peak, 1)
        parts.append(
            f'<rect class="volume" x="{x(index) - 8}" y="{height - 20 - bar}" width="16" height="{bar}"><title>{item["conversations"]} conversations</title></rect>'
        )
        parts.append(f'<text x="{x(index)}" y="{height - 5}" text-anchor="middle">{html.escape(period)}</text>')
        if item["mean_score"] is None:
            continue
        mean = item["mean_score"]
        line.append(f"{x(index)},{y(mean)}")
        marks.append(
            f'<circle class="mean-point" cx="{x(index)}" cy="{y(mean)}" r="3"><title>{html.escape(period)}: mean judge score {mean}</title></circle>'
        )
        high, low = y(min(1.0, mean + (item["upper"] or 0.0))), y(max(0.0, mean + (item["lower"] or 0.0)))
        band_top.append((x(index), high))
        band_bottom.append((x(index), low))
        if item["mean_label"] is not None:
            human.append(
                f'<circle class="human" cx="{x(index)}" cy="{y(item["mean_label"])}" r="4"><title>mean human score {item["mean_label"]}</title></circle>'
            )
    if len(band_top) == 1:  # one period: a polygon of two points draws nothing, so the band is a bar
        (at, high), (_, low) = band_top[0], band_bottom[0]
        band = f'<rect class="band" x="{at - 6}" y="{high}" width="12" height="{round(low - high, 1)}"/>'
    else:
        band = f'<polygon class="band" points="{" ".join(f"{a},{b}" for a, b in band_top + band_bottom[::-1])}"/>'
    return (
        f'<div class="card"><h3>{html.escape(name)}</h3><svg class="trend" data-metric="{html.escape(name)}" width="{width}" height="{height}" role="img">'
        f'<line x1="{left}" y1="{y(0)}" x2="{width - 10}" y2="{y(0)}" class="axis"/><line x1="{left}" y1="{y(1)}" x2="{width - 10}" y2="{y(1)}" class="axis"/>'
        f'<text x="4" y="{y(1) + 4}">1.0</text><text x="4" y="{y(0) + 4}">0.0</text>'
        f'{band}<polyline class="mean" points="{" ".join(line)}"/>'
        f"{''.join(marks)}{''.join(human)}{''.join(parts)}</svg></div>"
    )


TRENDS_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>flowrate trends</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}.card{border:1px solid #ccc;border-radius:6px;padding:.5em 1em;margin:.5em 0}
.band{fill:#4a7bd0;opacity:.2}.mean{fill:none;stroke:#4a7bd0;stroke-width:2}.mean-point{fill:#4a7bd0}.human{fill:#d0582a}.volume{fill:#bbb}
.axis{stroke:#ddd}svg text{font-size:10px}
</style></head><body>
<h1>flowrate trends</h1>
<p>Line and points: mean judge score. Band: the upper and lower deviation of human labels around it. Dots: mean human score. Bars: conversations graded.</p>
{{charts}}
<script type="application/json" id="data">{{data}}</script>
<script>"use strict"; const trends = JSON.parse(document.getElementById("data").textContent); document.title += " (" + trends.length + " points)";</script>
</body></html>
"""
