"""A metric's labelling queue and the answers on its own scale.

The default queue (`QueueRule`) holds every failing conversation, a seeded random share (20 %)
of the passing ones, every conversation whose samples disagree (`agreement` < 1), and every one
the judge was unsure of (`uncertain`: its top level below `eval --uncertain-below`). With
`recent` it is instead ServiceNow's "label random scores": that many random conversations that
nobody has labelled yet, from the last `days` days (by chat date, else by evaluation date).
Error rows and computed scores (`user_satisfaction`) have nothing to label and are left out.
The queue's order is a seeded shuffle, never failing-first, so its order does not tell a blind
reviewer the judge's verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import cache

from flowrate.errors import ConfigError
from flowrate.inputs.selection import stable_hash
from flowrate.results.rows import EvaluationRow

HASH_SPACE = 2**64


@dataclass(frozen=True)
class QueueRule:
    """Which rows a queue takes: `passing_share` of the passing ones (by a hash of `seed` and
    the id), or, with `recent`, that many unlabelled conversations from the last `days` days."""

    passing_share: float = 0.2
    seed: int = 0
    recent: int | None = None
    days: int = 10
    metrics: tuple[str, ...] = ()  # only these metrics (none: every metric with a scale)

    def __post_init__(self) -> None:
        if not 0 <= self.passing_share <= 1:
            raise ConfigError(f"--sample-passing {self.passing_share}: a share between 0 and 1")
        if self.recent is not None and self.recent < 1 or self.days < 0:
            raise ConfigError("--recent takes a count of 1 or more, --days a number of days of 0 or more")


@dataclass(frozen=True)
class Answer:
    """One button of a metric's scale: the `value` shown and stored ("fully", "3"), its
    `score` in [0, 1], and its `key`, the keyboard shortcut."""

    value: str
    score: float
    key: str


def answers_for(row: EvaluationRow, rubric: str | None = None) -> list[Answer] | None:
    """The buttons of `row`'s metric: its levels in the order of its rubric (the file `rubric`,
    `--rubric`, else the packaged one naming the metric), keys 1..; or its points 1..S, each
    point its own key. None for a row with no scale to answer on, or whose verdict is on no
    rubric known here (a rubric of the user's own not given): its buttons cannot be known, and
    its verdict alone must never make them."""
    if row.scale is not None and row.rating is not None:
        return [Answer(str(n), n / row.scale, str(n) if n < 10 else "") for n in range(1, row.scale + 1)]
    if row.verdict is None:
        return None
    levels = dict(_rubric_levels(row.metric, rubric))
    if row.verdict not in levels:
        return None
    return [Answer(name, score, str(n) if n < 10 else "") for n, (name, score) in enumerate(levels.items(), start=1)]


@cache
def _rubric_levels(metric: str, rubric: str | None) -> tuple[tuple[str, float], ...]:
    """The levels of `metric` in rubric file `rubric`, else in its packaged rubric, in the
    rubric's order (read once)."""
    from flowrate.metrics.catalog import find_scale

    scale = find_scale(metric, rubric)
    return tuple(scale.levels.items()) if scale is not None and scale.levels else ()


def unknown_scales(rows: list[EvaluationRow], rubric: str | None) -> list[str]:
    """The metrics whose rows carry a verdict on no rubric known here (see `answers_for`)."""
    found = (row.metric for row in rows if row.error is None and row.verdict is not None and row.rating is None)
    return [metric for metric in dict.fromkeys(found) if not _rubric_levels(metric, rubric)]


def _shuffled(rows: list[EvaluationRow], seed: int) -> list[EvaluationRow]:
    return sorted(rows, key=lambda row: (stable_hash(f"{seed}:order:{row.id}"), row.id))


def _sampled(row: EvaluationRow, rule: QueueRule) -> bool:
    return stable_hash(f"{rule.seed}:{row.id}") < rule.passing_share * HASH_SPACE


def _day_of(row: EvaluationRow) -> date:
    if row.chat_date:
        try:
            return date.fromisoformat(row.chat_date[:10])
        except ValueError:
            pass
    return row.evaluated_at.astimezone(UTC).date()


def build_queue(
    rows: list[EvaluationRow],
    metric: str,
    rule: QueueRule,
    labelled: set[str],
    today: date | None = None,
    rubric: str | None = None,
) -> list[EvaluationRow]:
    """The queue of `metric` over `rows` (each conversation's last row of it). `labelled`: the
    conversations already labelled for it (by anyone), which the `recent` queue passes over;
    `rubric`: the rubric file of the user's own the rows were judged with (`answers_for`)."""
    latest: dict[str, EvaluationRow] = {}
    for row in rows:
        if row.metric == metric and row.error is None and row.success is not None and answers_for(row, rubric):
            latest[row.id] = row
    candidates = list(latest.values())
    if rule.recent is not None:
        today = today or datetime.now(UTC).date()
        start = today - timedelta(days=rule.days)
        fresh = [row for row in candidates if row.id not in labelled and start <= _day_of(row) <= today]
        return _shuffled(fresh, rule.seed)[: rule.recent]
    chosen = [
        row
        for row in candidates
        if not row.success or (row.agreement is not None and row.agreement < 1) or row.uncertain or _sampled(row, rule)
    ]
    return _shuffled(chosen, rule.seed)


def queue_metrics(rows: list[EvaluationRow], rule: QueueRule, rubric: str | None = None) -> list[str]:
    """The metrics with a queue: those whose rows have a scale to answer on (in `rubric`, a
    rubric file, or a packaged one), in the order first met (only `rule.metrics`, when given)."""
    found = list(dict.fromkeys(row.metric for row in rows if row.error is None and answers_for(row, rubric)))
    return [metric for metric in found if not rule.metrics or metric in rule.metrics]
