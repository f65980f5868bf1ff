"""Comparing a run with a baseline: what changed per conversation, and per metric whether
the drop is more than noise (a seeded, paired bootstrap of the mean score delta)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from flowrate.analysis.statistics import bootstrap_ci95
from flowrate.errors import ConfigError
from flowrate.results.files import read_rows
from flowrate.results.rows import EvaluationRow
from flowrate.results.summary import mean4, shown_value

MEAN_DELTA_RESAMPLES = 2000


class Change(BaseModel):
    id: str
    metric: str
    before: str
    after: str
    delta: float  # score after - score before


class MetricComparison(BaseModel):
    metric: str
    paired: int  # conversations judged on both sides: the means and pass rates are over these
    mean_before: float | None
    mean_after: float | None
    mean_delta: float | None
    ci95: list[float] | None  # of the mean delta
    pass_rate_before: float | None
    pass_rate_after: float | None
    only_baseline: int
    only_current: int
    errors_baseline: int
    errors_current: int
    regressions: int
    improvements: int
    significant_drop: bool


class Comparison(BaseModel):
    baseline: str
    current: str
    tolerance: float
    metrics: list[MetricComparison]
    changes: list[Change]  # regressions first, then improvements, each by size
    warnings: list[str]

    @property
    def regressed(self) -> bool:
        return any(metric.significant_drop for metric in self.metrics)


def compare_files(baseline: str | Path, current: str | Path, tolerance: float = 0.0) -> Comparison:
    """Match two results files by (id, metric). Means and pass rates are over the paired rows
    (judged on both sides); the rows of one side only and the error rows are counted apart. A metric's drop is significant when the upper
    end of the 95 % interval of its mean delta lies below -`tolerance`.

    Nothing to compare is a `ConfigError`, never a pass: a file with no row, or no
    conversation judged (scored) in both files."""
    before = {(row.id, row.metric): row for row in read_rows(Path(baseline))}
    after = {(row.id, row.metric): row for row in read_rows(Path(current))}
    for path, rows in ((baseline, before), (current, after)):
        if not rows:
            raise ConfigError(f"{path}: no result rows; nothing to compare")
    warnings = _judge_warnings(before.values(), after.values())
    metrics = sorted({metric for _, metric in before} | {metric for _, metric in after})
    results, changes = [], []
    for metric in metrics:
        mine_before = {key: row for key, row in before.items() if key[1] == metric}
        mine_after = {key: row for key, row in after.items() if key[1] == metric}
        paired = [
            (mine_before[key], mine_after[key])
            for key in sorted(mine_before.keys() & mine_after.keys())
            if mine_before[key].score is not None and mine_after[key].score is not None
        ]
        deltas = [_score(new) - _score(old) for old, new in paired]
        for old, new in paired:
            if shown_value(old) != shown_value(new):
                changes.append(
                    Change(
                        id=old.id,
                        metric=metric,
                        before=shown_value(old),
                        after=shown_value(new),
                        delta=round(_score(new) - _score(old), 4),
                    )
                )
        interval = _bootstrap(deltas)
        results.append(
            MetricComparison(
                metric=metric,
                paired=len(paired),
                mean_before=mean4([_score(old) for old, _ in paired]),
                mean_after=mean4([_score(new) for _, new in paired]),
                mean_delta=mean4(deltas),
                ci95=interval,
                pass_rate_before=_rate([old for old, _ in paired]),
                pass_rate_after=_rate([new for _, new in paired]),
                only_baseline=len(mine_before.keys() - mine_after.keys()),
                only_current=len(mine_after.keys() - mine_before.keys()),
                errors_baseline=sum(row.error is not None for row in mine_before.values()),
                errors_current=sum(row.error is not None for row in mine_after.values()),
                regressions=sum(delta < 0 for delta in deltas),
                improvements=sum(delta > 0 for delta in deltas),
                significant_drop=interval is not None and interval[1] < -tolerance,
            )
        )
    if not any(result.paired for result in results):
        raise ConfigError(
            f"no conversation was judged in both {baseline} and {current} (rows matched by id and metric,"
            " error rows left out); nothing to compare"
        )
    changes.sort(key=lambda change: (change.delta >= 0, change.delta if change.delta < 0 else -change.delta, change.id))
    return Comparison(
        baseline=str(baseline),
        current=str(current),
        tolerance=tolerance,
        metrics=results,
        changes=changes,
        warnings=warnings,
    )


def _score(row: EvaluationRow) -> float:
    """The score of a row `compare_files` paired: it pairs scored rows only."""
    assert row.score is not None
    return row.score


def _judge_warnings(before, after) -> list[str]:
    warnings = []
    for what in ("model", "rubric_version"):
        old = sorted({getattr(row, what) for row in before})
        new = sorted({getattr(row, what) for row in after})
        if old != new:
            warnings.append(
                f"the two files were judged with different {what.replace('_', ' ')}s ({', '.join(old)} vs {', '.join(new)}):"
                " a different judge, so changes may not be the bot's"
            )
    return warnings


def _bootstrap(deltas: list[float]) -> list[float] | None:
    """The 95 % interval of the mean delta, by a seeded bootstrap over the paired conversations
    (sorted by id by the caller, so the same files give the same interval)."""
    import numpy as np

    values = np.array(deltas, dtype=float)
    return bootstrap_ci95(lambda index: values[index].mean(axis=1), len(values), MEAN_DELTA_RESAMPLES)


def _rate(rows: list[EvaluationRow]) -> float | None:
    """The share of `rows` (paired, so judged) that passed."""
    return round(sum(bool(row.success) for row in rows) / len(rows), 4) if rows else None
