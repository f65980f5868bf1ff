"""Trends: per period and metric, conversations graded, mean score and pass rate; with labels,
the mean human score, the adjusted mean and the upper/lower deviation band. Computed in SQL
over the history's tables (or an in-memory copy of results files), so a million rows answer
in seconds. Data only: the terminal table and the HTML page are in `flowrate.reports`.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pydantic import BaseModel

from flowrate.analysis.calibration import AT_LEAST, side
from flowrate.errors import ConfigError

PERIODS = {"day": "%Y-%m-%d", "week": "%G-W%V", "month": "%Y-%m"}
DATES = {"evaluated": "CAST(evaluated_at AS DATE)", "chat": "chat_date"}
ONE_ROW_EACH = (
    "each conversation counts once a period and metric, by its latest verdict (an error only when it has none)"
)


class TrendPoint(BaseModel):
    """One period and metric (scores in score units, 4 places): the conversations graded, their
    mean score and pass rate; with labels, the mean human score, the mean score adjusted by the
    period's error band, and the upper and lower deviations (None where they do not apply).
    Its fields, in this order, are the keys of `flowrate trends --json`."""

    period: str
    metric: str
    conversations: int
    mean_score: float | None
    pass_rate: float | None
    mean_label: float | None = None
    mean_adjusted: float | None = None
    upper: float | None = None
    lower: float | None = None


def trends(
    connection: Any, by: str = "week", date: str = "evaluated", metric: str | None = None, labels: bool = False
) -> list[TrendPoint]:
    """One point per period and metric, in period then metric order, from the history tables on
    `connection` (a DuckDB connection, `history.connect`). A conversation judged more than once
    in a period counts once, by one row (`ONE_ROW_EACH`), as `agreement` takes each one's latest.

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
        f" WHERE {DATES[date]} IS NOT NULL{' AND metric = ?' if metric else ''}"
        " QUALIFY row_number() OVER (PARTITION BY period, metric, conversation_id"
        " ORDER BY score IS NULL, evaluated_at DESC, model, rubric_version) = 1)"
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
        TrendPoint(period=key, metric=name, conversations=count, mean_score=_round(mean), pass_rate=_round(rate))
        for key, name, count, mean, rate in found
    ]
    if not labels:
        return result
    figures = _label_figures(connection, periodic, parameters)
    return [point.model_copy(update=figures.get((point.period, point.metric), {})) for point in result]


def undated_rows(connection: Any, metric: str | None = None) -> int:
    """How many rows (of `metric`, or of every metric) have no chat date: a chat-date trend leaves them out."""
    query = "SELECT count(*) FROM rows WHERE chat_date IS NULL" + (" AND metric = ?" if metric else "")
    return connection.execute(query, [metric] if metric else []).fetchone()[0]


def _label_figures(connection: Any, periodic: str, parameters: list) -> dict[tuple[str, str], dict[str, float | None]]:
    """By (period, metric) with labels: the mean label, the calibration deviations of
    `flowrate.analysis.calibration` and the adjusted mean, as `TrendPoint` fields.
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
    figures: dict[tuple[str, str], dict[str, float | None]] = {}
    bands = []
    for (key, name), cases in grouped.items():
        deltas = [human - score for score, human in cases]
        upper, lower = side([d for d in deltas if d > 0]), side([d for d in deltas if d < 0])
        figures[(key, name)] = {
            "mean_label": _round(sum(human for _, human in cases) / len(cases)),
            "upper": None if upper is None else upper.deviation,
            "lower": None if lower is None else lower.deviation,
        }
        nonzero = [d for d in deltas if d != 0]
        band = sum(nonzero) / len(nonzero) if len(nonzero) >= AT_LEAST else 0.0
        bands.append((key, name, band))
    if not bands:
        return figures
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
    for group, mean in adjusted.items():
        figures[group]["mean_adjusted"] = _round(mean)
    return figures


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)
