"""How well the judge agrees with people: correlations with bootstrap intervals, kappa, confusion.

scipy and numpy are imported by the functions that need them, so no other command pays for them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from pydantic import BaseModel

from flowrate.exit_codes import ConfigError
from flowrate.models import EvaluationRow, Verdict

BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 20240229
MAX_KAPPA_LEVELS = 11  # an integer scale with more levels is not "small"


class Statistic(BaseModel):
    value: float | None
    ci95: list[float] | None = None


class Kappa(BaseModel):
    value: float | None


class Confusion(BaseModel):
    """Counts of conversations by human label (rows) and verdict (columns)."""

    labels: list[int]
    verdicts: list[str]
    counts: list[list[int]]


class AgreementReport(BaseModel):
    label: str
    n: int
    spearman: Statistic
    kendall: Statistic
    pearson: Statistic
    kappa: Kappa | None
    confusion: Confusion | None


def agreement_report(pairs: list[tuple[Verdict, float]], label: str) -> AgreementReport:
    """Agreement between verdicts and human labels for the same conversations."""
    import numpy as np
    from scipy import stats

    scores = np.array([verdict.score for verdict, _ in pairs], dtype=float)
    labels = np.array([value for _, value in pairs], dtype=float)
    measures = {
        "spearman": lambda a, b: stats.spearmanr(a, b).statistic,
        "kendall": lambda a, b: stats.kendalltau(a, b, variant="b").statistic,
        "pearson": lambda a, b: stats.pearsonr(a, b).statistic,
    }
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    resamples = rng.integers(0, len(pairs), size=(BOOTSTRAP_RESAMPLES, len(pairs))) if len(pairs) > 2 else None
    results = {name: _with_interval(measure, scores, labels, resamples) for name, measure in measures.items()}
    kappa, confusion = _ordinal_agreement([verdict for verdict, _ in pairs], labels)
    return AgreementReport(label=label, n=len(pairs), kappa=kappa, confusion=confusion, **results)


def _with_interval(measure, scores, labels, resamples) -> Statistic:
    import warnings

    import numpy as np

    if len(scores) < 3 or np.ptp(scores) == 0 or np.ptp(labels) == 0:
        return Statistic(value=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a resample with no spread has no correlation: left out
        value = float(measure(scores, labels))
        draws = np.array([measure(scores[index], labels[index]) for index in resamples], dtype=float)
    draws = draws[~np.isnan(draws)]
    interval = [round(float(x), 4) for x in np.percentile(draws, [2.5, 97.5])] if len(draws) else None
    return Statistic(value=round(value, 4), ci95=interval)


def _ordinal_agreement(verdicts: list[Verdict], labels) -> tuple[Kappa | None, Confusion | None]:
    """For labels on a small integer scale: verdicts mapped onto that scale by their score
    (lowest label at 0.0, highest at 1.0, rounded), a confusion table and quadratic kappa."""
    import numpy as np

    if not len(labels) or not np.all(labels == np.round(labels)):
        return None, None
    low, high = int(labels.min()), int(labels.max())
    if high == low or high - low + 1 > MAX_KAPPA_LEVELS:
        return None, None
    order = sorted(Verdict, key=lambda v: v.score)
    levels = list(range(low, high + 1))
    counts = [[0] * len(order) for _ in levels]
    for verdict, value in zip(verdicts, labels):
        counts[int(value) - low][order.index(verdict)] += 1
    mapped = np.array([round(low + verdict.score * (high - low)) for verdict in verdicts], dtype=int) - low
    truth = labels.astype(int) - low
    size = len(levels)
    observed = np.zeros((size, size))
    np.add.at(observed, (truth, mapped), 1)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / observed.sum()
    weights = np.array([[(i - j) ** 2 for j in range(size)] for i in range(size)]) / (size - 1) ** 2
    disagreement = (weights * expected).sum()
    kappa = None if disagreement == 0 else round(float(1 - (weights * observed).sum() / disagreement), 4)
    confusion = Confusion(labels=levels, verdicts=[v.value for v in order], counts=counts)
    return Kappa(value=kappa), confusion


def pair_up(
    labels: dict[str, float], rows: Iterable[EvaluationRow], label: str
) -> tuple[list[tuple[Verdict, float]], int]:
    """Verdicts joined with human labels by conversation id, sorted by id so that the same
    inputs give the same bootstrap intervals however the rows arrive; and how many labeled
    conversations have no usable row (missing, or an error row)."""
    paired: dict[str, tuple[Verdict, float]] = {}
    for row in rows:
        value = labels.get(row.id)
        if row.verdict is not None and value is not None and not math.isnan(value):
            paired[row.id] = (row.verdict, value)
    if not paired:
        raise ConfigError(f"no judged conversation carries the label {label!r}")
    return [paired[key] for key in sorted(paired)], len(labels) - len(paired)
