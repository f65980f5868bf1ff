"""What judge-bench measures of a judge's distribution (issue 28): the agreement with people of
each score a row carries (the verdict's, the expected score of its distribution, the verdict-first
look's, the combined one, the mean of its samples), the share of ties each leaves, the calibration
of its level probabilities where people rated on the judge's own scale, and the conversations
where the judge's expected score and people's are furthest apart. Data only."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable

from pydantic import BaseModel

from flowrate.analysis.agreement import agreement_report, pair_up
from flowrate.analysis.statistics import Statistic
from flowrate.errors import ConfigError
from flowrate.results.rows import EvaluationRow
from flowrate.rubric.model import Scale

#: each score judge-bench reports, and how a row gives it (None: the row has none)
SCORES: dict[str, Callable[[EvaluationRow], float | None]] = {
    "verdict": lambda row: row.verdict_score if row.verdict_score is not None else row.score,
    "expected": lambda row: row.expected_score if row.level_probs_from == "logprobs" else None,
    "verdict_first": lambda row: row.verdict_first_score,
    "combined": lambda row: row.combined_score,
    "checklist": lambda row: row.checklist_score,
    "samples_mean": lambda row: row.expected_score if row.level_probs_from == "samples" else None,
}
CALIBRATION_BINS = 10  # equal-width bins of the top level's probability, as in Guo et al. 2017
GAPS_SHOWN = 5


class ScoreAgreement(BaseModel):
    """One of a row's scores against people's label: over the `n` conversations that have it,
    Spearman and Kendall with their intervals, and the share of conversation pairs it ties
    (`ties`: a tie ranks nothing)."""

    score: str
    n: int
    spearman: Statistic
    kendall: Statistic
    ties: float | None


class Gap(BaseModel):
    """A conversation whose judge's expected score and people's label, on [0, 1], are far apart."""

    id: str
    verdict: str | None
    expected_score: float
    people: float  #: people's label, scaled to [0, 1] by the set's scale
    gap: float  #: expected_score - people


def by_score(rows: list[EvaluationRow], labels: dict[str, float], label: str, metric: str) -> list[ScoreAgreement]:
    """The agreement of each score in `SCORES` that some of `rows` (of `metric`, usable) carry
    with the human `labels` (by conversation id)."""
    found = []
    mine = [row for row in rows if row.metric == metric and row.error is None]
    for name, value_of in SCORES.items():
        scored = [row.model_copy(update={"score": value_of(row)}) for row in mine if value_of(row) is not None]
        if not scored:
            continue
        try:
            pairs, _ = pair_up(labels, scored, label, metric)
        except ConfigError:
            continue
        report = agreement_report(pairs, label, metric)
        ties = tie_share([pair.score for pair in pairs])
        found.append(
            ScoreAgreement(score=name, n=len(pairs), spearman=report.spearman, kendall=report.kendall, ties=ties)
        )
    return found


def tie_share(values: list[float]) -> float | None:
    """The share of pairs of `values` that are equal (None for fewer than two)."""
    n = len(values)
    if n < 2:
        return None
    counts = Counter(round(value, 9) for value in values)
    return round(sum(c * (c - 1) for c in counts.values()) / (n * (n - 1)), 4)


def calibration_error(rows: list[EvaluationRow], labels: dict[str, float], metric: str, scale: Scale) -> float | None:
    """The expected calibration error of the judge's most likely level against people's level,
    where people rated on the judge's own scale (every label one of the scale's scores); None
    otherwise, or without distributions."""
    levels = scale.levels
    if levels is None:
        return None
    by_score_of = {score: level for level, score in levels.items()}
    usable = [row for row in rows if row.metric == metric and row.level_probs and row.id in labels]
    if not usable or any(labels[row.id] not in by_score_of for row in usable):
        return None
    bins: dict[int, list[tuple[float, bool]]] = {}
    for row in usable:
        assert row.level_probs is not None
        level, p = max(row.level_probs.items(), key=lambda item: (item[1], item[0]))
        bins.setdefault(min(int(p * CALIBRATION_BINS), CALIBRATION_BINS - 1), []).append(
            (p, level == by_score_of[labels[row.id]])
        )
    total = len(usable)
    error = sum(
        len(held) / total * abs(sum(p for p, _ in held) / len(held) - sum(right for _, right in held) / len(held))
        for held in bins.values()
    )
    return round(error, 4)


def largest_gaps(
    rows: list[EvaluationRow], labels: dict[str, float], metric: str, scale: tuple[float, float]
) -> list[Gap]:
    """The `GAPS_SHOWN` conversations whose expected score is furthest from people's label, the
    label scaled to [0, 1] by the set's `scale` (lowest, highest; a nan scale: labels taken as they are)."""
    low, high = scale
    spread = (high - low) if not (math.isnan(low) or math.isnan(high)) and high > low else None
    gaps = []
    for row in rows:
        value = labels.get(row.id)
        if row.metric != metric or row.expected_score is None or value is None or math.isnan(value):
            continue
        people = (value - low) / spread if spread else value
        gap = round(row.expected_score - people, 4)
        gaps.append(
            Gap(
                id=row.id,
                verdict=row.verdict,
                expected_score=round(row.expected_score, 4),
                people=round(people, 4),
                gap=gap,
            )
        )
    return sorted(gaps, key=lambda gap: (-abs(gap.gap), gap.id))[:GAPS_SHOWN]
