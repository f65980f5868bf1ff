"""Calibration: how far the judge sits from people, per metric, and scores adjusted by it.

For each metric, over the labeled conversations (labels dated inside the window), with
a = the judge's score and h = the mean label (every label of the conversation, whoever gave
it), both row scores in [0, 1], delta = h - a:

- upper deviation: when MORE than 30 conversations have delta > 0, drop the floor(10 %) with
  the largest |delta| and take the mean delta of the rest ("the main 90 %"); else none;
- lower deviation: the same over delta < 0 (a negative number);
- error band: when AT LEAST 30 conversations have a nonzero delta, SUM(h - a) over them / their
  number; adjusted score = judge score + error band, clamped to [0, 1]. Else no band, and the
  adjusted score is the judge score.

User satisfaction: auto = the weighted mean of the judge's criteria scores (the weights on the
`user_satisfaction` rows); human = the same mean with the label where a criterion is labeled;
gap = human - auto, over conversations with at least one labeled criterion; bands as above;
adjusted = auto + SUM(gap) / (conversations with a label), clamped, when there are at least 30
of them. The source's "adjusted = SUM(gap) / distinct evaluations" is read as that band added
to auto, as at the metric level.
"""

from __future__ import annotations

import calendar
import math
import re
from collections import defaultdict
from datetime import date, timedelta

from pydantic import BaseModel, Field

from flowrate.analysis.interrater import several_reviewers
from flowrate.analysis.labels import Label
from flowrate.errors import ConfigError
from flowrate.results.summary import EvaluationRow, mean4
from flowrate.rubric.model import USER_SATISFACTION
from flowrate.scores.reading import weighted_mean

MORE_THAN = 30  # cases on one side before a deviation is reported
AT_LEAST = 30  # conversations with a nonzero delta before the band adjusts scores
OUTLIER_SHARE = 0.10


def window_start(as_of: date, window: str) -> date:
    """The first day inside `window` (`6mo`: six calendar months, `90d`: ninety days) before `as_of`."""
    match = re.fullmatch(r"(\d+)(mo|d)", window.strip())
    if not match:
        raise ConfigError(f"option window: {window!r} must be months (6mo) or days (90d)")
    count, unit = int(match.group(1)), match.group(2)
    if unit == "d":
        return as_of - timedelta(days=count)
    month = as_of.month - count
    year = as_of.year + (month - 1) // 12
    month = (month - 1) % 12 + 1
    return date(year, month, min(as_of.day, calendar.monthrange(year, month)[1]))


def in_window(labels: list[Label], as_of: date, window: str) -> list[Label]:
    start = window_start(as_of, window)
    return [label for label in labels if start <= label.labeled_at <= as_of]


class Deviation(BaseModel):
    """One side of the judge's deviation from people: `n` cases with a delta on that side, and
    `deviation`, the mean delta of the main 90 % of them (score units, 4 places)."""

    n: int
    deviation: float


class MetricCalibration(BaseModel):
    """One metric's figures (score units, 4 places): label lines in the window, the labeled
    conversations that have a row, the upper and lower deviations (None: not more than 30
    cases on that side), the error band (None: fewer than 30 nonzero deltas), and the mean
    score and mean adjusted score over all the metric's rows, error rows left out.
    `several_reviewers` counts the labeled conversations with labels of more than one named
    labeler (their mean is h, as for any conversation with several labels)."""

    labels: int
    labeled_conversations: int
    several_reviewers: int
    upper: Deviation | None
    lower: Deviation | None
    error_band: float | None
    mean_score: float | None
    mean_adjusted: float | None


class SatisfactionCalibration(BaseModel):
    """The user_satisfaction figures (score units, 4 places): conversations with at least one
    labeled criterion, the mean gap (human - auto) over them, its upper and lower deviations,
    and the mean auto and mean adjusted satisfaction over every conversation the suite rated."""

    labeled_conversations: int
    mean_gap: float | None
    upper: Deviation | None
    lower: Deviation | None
    mean_auto: float | None
    mean_adjusted: float | None


class Calibration(BaseModel):
    """The calibration report. Its JSON (`model_dump`) is the documented shape: `as_of` (an
    ISO date), `window`, `metrics` by name, `user_satisfaction`. `bands` (each metric's
    unrounded error band, for `adjusted_rows`) is left out of it."""

    as_of: date
    window: str
    metrics: dict[str, MetricCalibration]
    user_satisfaction: SatisfactionCalibration | None
    bands: dict[str, float] = Field(default_factory=dict, exclude=True)


def side(deltas: list[float]) -> Deviation | None:
    """One side's deviation, or None when it has not more than `MORE_THAN` cases."""
    if len(deltas) <= MORE_THAN:
        return None
    kept = sorted(deltas, key=abs)[: len(deltas) - math.floor(len(deltas) * OUTLIER_SHARE)]
    return Deviation(n=len(deltas), deviation=round(sum(kept) / len(kept), 4))


def _clamp(value: float) -> float:
    return min(1.0, max(0.0, value))


def calibrate_metric(rows: list[EvaluationRow], labels: list[Label]) -> tuple[MetricCalibration, float | None]:
    """One metric's figures from its `rows` and `labels`, and its error band (None: no adjustment)."""
    judged = {row.id: row.score for row in rows if row.score is not None}
    by_conversation: dict[str, list[float]] = defaultdict(list)
    for label in labels:
        by_conversation[label.conversation_id].append(label.score)
    deltas = {key: sum(scores) / len(scores) - judged[key] for key, scores in by_conversation.items() if key in judged}
    several = several_reviewers([label for label in labels if label.conversation_id in judged])
    nonzero = [delta for delta in deltas.values() if delta != 0]
    band = sum(nonzero) / len(nonzero) if len(nonzero) >= AT_LEAST else None
    scores = list(judged.values())
    adjusted = [_clamp(score + band) for score in scores] if band is not None else scores
    figures = MetricCalibration(
        labels=len(labels),
        labeled_conversations=len(deltas),
        several_reviewers=several,
        upper=side([delta for delta in deltas.values() if delta > 0]),
        lower=side([delta for delta in deltas.values() if delta < 0]),
        error_band=None if band is None else round(band, 4),
        mean_score=mean4(scores),
        mean_adjusted=mean4(adjusted),
    )
    return figures, band


def calibrate_satisfaction(
    rows: list[EvaluationRow], labels: list[Label]
) -> tuple[SatisfactionCalibration | None, float | None]:
    """The user_satisfaction figures of `rows` and `labels` (None when no row is a
    user_satisfaction row) and its band."""
    satisfaction = [row for row in rows if row.metric == USER_SATISFACTION and row.score is not None]
    if not satisfaction:
        return None, None
    criteria: dict[str, dict[str, float]] = defaultdict(dict)
    for row in rows:
        if row.score is not None and row.suite is not None and row.metric != USER_SATISFACTION:
            criteria[row.id][row.metric] = row.score
    labeled: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for label in labels:
        labeled[label.conversation_id][label.metric].append(label.score)
    gaps: list[float] = []
    autos: list[float] = []
    for row in satisfaction:
        weights = row.weights or {}
        judge = criteria.get(row.id, {})
        auto = row.score
        assert auto is not None  # `satisfaction` holds scored rows only
        autos.append(auto)
        mine = {name: scores for name, scores in labeled.get(row.id, {}).items() if name in judge}
        if not mine:
            continue
        human_scores = {
            name: (sum(mine[name]) / len(mine[name]) if name in mine else score) for name, score in judge.items()
        }
        human = weighted_mean(human_scores, weights)  # computed as auto was, on the user_satisfaction row
        gaps.append(human - auto)
    band = sum(gaps) / len(gaps) if len(gaps) >= AT_LEAST else None
    adjusted = [_clamp(auto + band) for auto in autos] if band is not None else autos
    figures = SatisfactionCalibration(
        labeled_conversations=len(gaps),
        mean_gap=mean4(gaps),
        upper=side([gap for gap in gaps if gap > 0]),
        lower=side([gap for gap in gaps if gap < 0]),
        mean_auto=mean4(autos),
        mean_adjusted=mean4(adjusted),
    )
    return figures, band


def calibrate(rows: list[EvaluationRow], labels: list[Label], as_of: date, window: str) -> Calibration:
    """The calibration of the judge's `rows` against people's `labels` dated inside `window`
    (`6mo`, `90d`) before `as_of`, with each metric's error band. Every row counts; the window
    limits labels only."""
    kept = in_window(labels, as_of, window)
    by_metric_rows: dict[str, list[EvaluationRow]] = defaultdict(list)
    for row in rows:
        by_metric_rows[row.metric].append(row)
    by_metric_labels: dict[str, list[Label]] = defaultdict(list)
    for label in kept:
        by_metric_labels[label.metric].append(label)
    metrics, bands = {}, {}
    for metric in sorted(by_metric_rows):
        if metric == USER_SATISFACTION:
            continue
        figures, band = calibrate_metric(by_metric_rows[metric], by_metric_labels.get(metric, []))
        metrics[metric] = figures
        if band is not None:
            bands[metric] = band
    satisfaction, band = calibrate_satisfaction(rows, kept)
    if band is not None:
        bands[USER_SATISFACTION] = band
    return Calibration(as_of=as_of, window=window, metrics=metrics, user_satisfaction=satisfaction, bands=bands)


def adjusted_rows(rows: list[EvaluationRow], bands: dict[str, float]) -> list[dict]:
    """The `rows` as JSON objects with `adjusted_score` added: score + the metric's band (from
    `bands`, by metric), clamped; the score itself where the metric has no band; null for
    error rows."""
    out = []
    for row in rows:
        data = row.model_dump(mode="json")
        band = bands.get(row.metric)
        data["adjusted_score"] = (
            None if row.score is None else round(_clamp(row.score + band) if band is not None else row.score, 4)
        )
        out.append(data)
    return out
