"""How well the judge agrees with people: correlations with bootstrap intervals, kappa, confusion.

scipy and numpy are imported by the functions that need them, so no other command pays for them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

from pydantic import BaseModel

from flowrate.analysis.statistics import Statistic, bootstrap_ci95, rounded
from flowrate.errors import ConfigError
from flowrate.inputs.files import InputSet, iter_cases
from flowrate.inputs.selection import raise_for_problems, scan
from flowrate.results.rows import EvaluationRow
from flowrate.results.summary import shown_value

MAX_KAPPA_LEVELS = 11  # an integer scale with more levels is not "small"
CORRELATIONS = ("spearman", "kendall", "pearson")


class Kappa(BaseModel):
    value: float | None


class Confusion(BaseModel):
    """Counts of conversations by human label (rows) and verdict (columns)."""

    labels: list[int]
    verdicts: list[str]
    counts: list[list[int]]


class AgreementReport(BaseModel):
    label: str
    metric: str
    n: int
    spearman: Statistic
    kendall: Statistic
    pearson: Statistic
    kappa: Kappa | None
    confusion: Confusion | None


class Pair(NamedTuple):
    """One conversation judged and labeled: the judge's `value` (verdict or rating, as shown),
    its `score`, and the human `label`."""

    value: str
    score: float
    label: float


def agreement_report(
    pairs: list[Pair],
    label: str,
    metric: str = "conversational_flow_rate",
    scale: list[tuple[str, float]] | None = None,
) -> AgreementReport:
    """Agreement between one metric's judgements and human labels for the same conversations:
    `label` names the human label and `metric` the metric, as the report shows them.

    `scale` lists every value the metric can give, with its score, lowest first (from the
    rubric); the confusion table then shows every value, seen or not. `pairs` are `Pair`s
    (`pair_up`) or plain (value, score, label) tuples: they are read by position."""
    import numpy as np

    scores = np.array([score for _, score, _ in pairs], dtype=float)
    labels = np.array([value for _, _, value in pairs], dtype=float)
    results = {name: correlation(name, scores, labels) for name in CORRELATIONS}
    kappa, confusion = _ordinal_agreement(pairs, labels, scale)
    return AgreementReport(label=label, metric=metric, n=len(pairs), kappa=kappa, confusion=confusion, **results)


def correlation(name: str, scores, labels) -> Statistic:
    """The correlation `name` (one of `CORRELATIONS`: Spearman, Kendall tau-b, Pearson) of the
    arrays `scores` and `labels`, paired by position, with its bootstrap interval over the
    pairs; no value where either side has no spread or there are fewer than 3 pairs.

    The interval's 1,000 resamples are computed at once (`correlations_by_row`), not by a call
    to scipy per resample: 0.5 s of CPU for each interval on 10 pairs, and 62 times less."""
    import warnings

    import numpy as np
    from scipy import stats

    measure = {
        "spearman": lambda a, b: stats.spearmanr(a, b).statistic,
        "kendall": lambda a, b: stats.kendalltau(a, b, variant="b").statistic,
        "pearson": lambda a, b: stats.pearsonr(a, b).statistic,
    }[name]
    if len(scores) < 3 or np.ptp(scores) == 0 or np.ptp(labels) == 0:
        return Statistic(value=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a resample with no spread has no correlation: left out
        value = measure(scores, labels)
        interval = bootstrap_ci95(lambda index: correlations_by_row(name, scores[index], labels[index]), len(scores))
    return Statistic(value=rounded(value), ci95=interval)


def correlations_by_row(name: str, scores, labels):
    """The correlation `name` of each row of the 2-D arrays `scores` and `labels` with the same
    row of the other, NaN where a row has no spread: what scipy gives one row at a time.

    Pearson is scipy's own along the rows and Kendall's tau-b comes from the same integer
    counts as scipy's, so both are scipy's figures to the bit; Spearman is Pearson over
    scipy's average ranks, within 1e-15 of `spearmanr`, which goes through `np.corrcoef`
    (`tests/analysis/test_agreement.py` holds all three)."""
    from scipy import stats

    if name == "kendall":
        return _kendall_tau_b_by_row(scores, labels)
    if name == "spearman":
        scores, labels = stats.rankdata(scores, axis=1), stats.rankdata(labels, axis=1)
    return stats.pearsonr(scores, labels, axis=1).statistic


def _kendall_tau_b_by_row(scores, labels, cells_at_once: int = 4_000_000):
    """Kendall's tau-b of each row pair, counted from the row's table of (score, label) values:
    concordant minus discordant pairs, and the pairs tied on each side, in integers, then
    divided as `scipy.stats.kendalltau` divides. Rows are taken `cells_at_once` table cells at
    a time, which bounds the memory whatever the number of distinct values."""
    import numpy as np

    _, x = np.unique(scores, return_inverse=True)
    _, y = np.unique(labels, return_inverse=True)
    x, y = x.reshape(scores.shape), y.reshape(labels.shape)
    rows, n = x.shape
    width, height = int(x.max()) + 1, int(y.max()) + 1
    pairs = n * (n - 1) // 2
    step = max(1, cells_at_once // (width * height))
    tau = np.empty(rows)
    for start in range(0, rows, step):
        block = slice(start, start + step)
        count = x[block].shape[0]
        cells = x[block] * height + y[block] + np.arange(count)[:, None] * (width * height)
        table = np.bincount(cells.ravel(), minlength=count * width * height).reshape(count, width, height)
        both_up = np.zeros_like(table)  # pairs with a cell that is higher on both sides
        both_up[:, :-1, :-1] = table[:, ::-1, ::-1].cumsum(1).cumsum(2)[:, ::-1, ::-1][:, 1:, 1:]
        crossed = np.zeros_like(table)  # higher score, lower label
        crossed[:, :-1, 1:] = table[:, ::-1, :].cumsum(1)[:, ::-1, :].cumsum(2)[:, 1:, :-1]
        concordant_minus_discordant = (table * (both_up - crossed)).sum(axis=(1, 2))
        per_score, per_label = table.sum(axis=2), table.sum(axis=1)
        score_ties = (per_score * (per_score - 1) // 2).sum(axis=1)
        label_ties = (per_label * (per_label - 1) // 2).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            figure = concordant_minus_discordant / np.sqrt(pairs - score_ties) / np.sqrt(pairs - label_ties)
        figure = np.clip(figure, -1.0, 1.0)
        figure[(score_ties == pairs) | (label_ties == pairs)] = np.nan
        tau[block] = figure
    return tau


def _ordinal_agreement(pairs: list[Pair], labels, scale) -> tuple[Kappa | None, Confusion | None]:
    """For labels on a small integer scale: judgements mapped onto that scale by their score
    (lowest label at 0.0, highest at 1.0, rounded), a confusion table and quadratic kappa.
    The confusion's columns are the judge's values seen, lowest score first."""
    import numpy as np

    if not len(labels) or not np.all(labels == np.round(labels)):
        return None, None
    low, high = int(labels.min()), int(labels.max())
    if high == low or high - low + 1 > MAX_KAPPA_LEVELS:
        return None, None
    value_scores = dict(scale or []) | {value: score for value, score, _ in pairs}
    order = sorted(value_scores, key=lambda value: value_scores[value])
    levels = list(range(low, high + 1))
    counts = [[0] * len(order) for _ in levels]
    for value, _, human in pairs:
        counts[int(human) - low][order.index(value)] += 1
    mapped = np.array([round(low + score * (high - low)) for _, score, _ in pairs], dtype=int) - low
    truth = labels.astype(int) - low
    size = len(levels)
    observed = np.zeros((size, size))
    np.add.at(observed, (truth, mapped), 1)
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0)) / observed.sum()
    weights = np.array([[(i - j) ** 2 for j in range(size)] for i in range(size)]) / (size - 1) ** 2
    disagreement = (weights * expected).sum()
    kappa = None if disagreement == 0 else round(float(1 - (weights * observed).sum() / disagreement), 4)
    return Kappa(value=kappa), Confusion(labels=levels, verdicts=order, counts=counts)


def pair_up(
    labels: dict[str, float], rows: Iterable[EvaluationRow], label: str, metric: str = "conversational_flow_rate"
) -> tuple[list[Pair], int]:
    """One metric's judgements joined with human labels by conversation id, sorted by id so that
    the same inputs give the same bootstrap intervals however the rows arrive; and how many
    labeled conversations have no usable row of that metric (missing, or an error row)."""
    paired: dict[str, Pair] = {}
    for row in rows:
        value = labels.get(row.id)
        if row.metric == metric and row.score is not None and value is not None and not math.isnan(value):
            paired[row.id] = Pair(shown_value(row), row.score, value)
    if not paired:
        raise ConfigError(f"no judged conversation of metric {metric!r} carries the label {label!r}")
    return [paired[key] for key in sorted(paired)], len(labels) - len(paired)


def labels_named(paths: list[str], label: str) -> dict[str, float]:
    """Each conversation's human label `label`, by id; records without it are left out."""
    inputs = InputSet(paths)
    try:
        raise_for_problems(scan(inputs))
        labels: dict[str, float] = {}
        seen: set[str] = set()
        for record in iter_cases(inputs):
            seen.update(record.labels)
            value = record.labels.get(label)
            case = record.case
            if (
                value is not None and case is not None and case.id is not None
            ):  # iter_cases yields valid records, each with its id
                labels[case.id] = float(value)
    finally:
        inputs.close()
    if not labels:
        known = ", ".join(sorted(seen)) or "none"
        raise ConfigError(f"no record carries the label {label!r} (labels found: {known})")
    return labels
