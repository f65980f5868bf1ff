"""A judge report that does not flatter: the judge against people's labels, per metric.

Percent agreement flatters a judge on imbalanced data: when 208 of 228 conversations pass, a
judge that always answers "pass" scores 91.2 %. So beside pass/fail agreement this report gives
the base rate (the score of always answering the majority class), Cohen's kappa (agreement
beyond what the two sides' own pass rates give by chance), and the true-positive and
true-negative rates for the failing class (of the conversations people failed, the share the
judge failed too; of those they passed, the share it passed). Then the confusion matrix on the
metric's own scale, Spearman and Kendall tau-b, the worst disagreements, agreement between the
reviewers themselves, and the same figures per language. Every figure has a seeded bootstrap
95 % interval over conversations (1000 resamples), so the same data give the same intervals.

The human answer for a conversation is the mean of its labels, as calibration takes it, put on
the nearest value of the metric's scale; it passes when that mean reaches the row's threshold.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, NamedTuple

from pydantic import BaseModel

from flowrate.analysis.agreement import correlation
from flowrate.analysis.interrater import PeopleAgreement, nearest_value, people_agreement
from flowrate.analysis.labels import Label
from flowrate.analysis.statistics import Statistic, bootstrap_ci95, rounded
from flowrate.results.rows import EvaluationRow
from flowrate.results.summary import shown_value

WORST_SHOWN = 10
LANGUAGE_FIELDS = ("language", "lang")


class ScaleConfusion(BaseModel):
    """Conversations by the human answer (rows) and the judge's (columns), over every value of
    the metric's scale, lowest first."""

    values: list[str]
    counts: list[list[int]]


class PassFail(BaseModel):
    """Pass/fail agreement with people. The failing class is the positive one: `true_positive`
    counts conversations both failed, `false_negative` those people failed and the judge passed."""

    n: int
    true_positive: int
    false_negative: int
    false_positive: int
    true_negative: int
    majority: str
    agreement: Statistic
    base_rate: Statistic
    kappa: Statistic
    true_positive_rate: Statistic
    true_negative_rate: Statistic


class Figures(BaseModel):
    """The figures over one set of labelled conversations (a metric, or one language of it)."""

    n: int
    pass_fail: PassFail
    confusion: ScaleConfusion | None
    spearman: Statistic
    kendall: Statistic


class Disagreement(BaseModel):
    """One conversation where judge and people differ, `gap` = human score - judge score."""

    id: str
    metric: str
    judge_value: str
    judge_score: float
    human_value: str
    human_score: float
    labels: int
    gap: float


class MetricJudgeReport(Figures):
    """One metric: its figures, the worst disagreements (largest |gap| first), agreement between
    the reviewers (None: no conversation has two), and the figures per language."""

    metric: str
    worst: list[Disagreement]
    people: PeopleAgreement | None
    languages: dict[str, Figures]


class JudgeReport(BaseModel):
    """The report: per metric with labelled, judged conversations; `unpaired` counts, per
    metric the rows have, the labelled conversations with no usable row (missing, or an error
    row). Labels of a metric the rows do not have are not reported."""

    metrics: dict[str, MetricJudgeReport]
    unpaired: dict[str, int]


class Judged(NamedTuple):
    """One labelled conversation: the judge's value and score, whether it passed, and the people's."""

    id: str
    judge_value: str
    judge_score: float
    judge_pass: bool
    human_score: float
    human_pass: bool
    labels: int


def latest_rows(rows: list[EvaluationRow]) -> dict[tuple[str, str], EvaluationRow]:
    """One row per conversation and metric: the one evaluated last (a history holds every run's)."""
    found: dict[tuple[str, str], EvaluationRow] = {}
    for row in rows:
        key = (row.id, row.metric)
        if key not in found or row.evaluated_at >= found[key].evaluated_at:
            found[key] = row
    return found


def language_of(metadata: dict[str, Any]) -> str | None:
    """A conversation's language from its metadata (`language`, else `lang`), lower-cased."""
    for field in LANGUAGE_FIELDS:
        value = metadata.get(field)
        if isinstance(value, str) and value.strip():
            return value.strip().lower()
    return None


def judge_report(
    rows: list[EvaluationRow],
    labels: list[Label],
    scales: dict[str, list[tuple[str, float]]] | None = None,
    languages: dict[str, str] | None = None,
) -> JudgeReport:
    """The judge's `rows` against people's `labels`, per metric that has both. `scales` gives a
    metric's values with their scores, lowest first (`metrics.catalog.scale_values`), for the
    confusion matrix and the human answer's value; `languages` maps a conversation id to its
    language (`language_of` its metadata) for the figures per language."""
    by_metric: dict[str, list[Label]] = defaultdict(list)
    for label in labels:
        by_metric[label.metric].append(label)
    latest = latest_rows(rows)
    judged_metrics = {metric for _, metric in latest}
    metrics, unpaired = {}, {}
    for metric in sorted(set(by_metric) & judged_metrics):
        grouped: dict[str, list[float]] = defaultdict(list)
        for label in by_metric[metric]:
            grouped[label.conversation_id].append(label.score)
        judged = []
        for key in sorted(grouped):
            row = latest.get((key, metric))
            if row is None or row.score is None:
                continue
            human = sum(grouped[key]) / len(grouped[key])
            judged.append(
                Judged(
                    key,
                    shown_value(row),
                    row.score,
                    bool(row.success),
                    human,
                    human >= row.threshold,
                    len(grouped[key]),
                )
            )
        missing = len(grouped) - len(judged)
        if missing:
            unpaired[metric] = missing
        if not judged:
            continue
        scale = (scales or {}).get(metric)
        by_language: dict[str, list[Judged]] = defaultdict(list)
        for item in judged:
            if languages and item.id in languages:
                by_language[languages[item.id]].append(item)
        metrics[metric] = MetricJudgeReport(
            metric=metric,
            **figures(judged, scale).model_dump(),
            worst=worst(metric, judged, scale),
            people=people_agreement(metric, by_metric[metric], [score for _, score in scale] if scale else None),
            languages={name: figures(items, scale) for name, items in sorted(by_language.items())},
        )
    return JudgeReport(metrics=metrics, unpaired=unpaired)


def human_value(score: float, scale: list[tuple[str, float]] | None) -> str:
    """The people's mean score as a value: the nearest on the scale, else the score itself."""
    if not scale:
        return f"{score:.2f}"
    return scale[nearest_value(score, [value for _, value in scale])][0]


def figures(judged: list[Judged], scale: list[tuple[str, float]] | None) -> Figures:
    """Every figure over `judged` (sorted by id), with its bootstrap interval."""
    import numpy as np

    judge_scores = np.array([item.judge_score for item in judged], dtype=float)
    human_scores = np.array([item.human_score for item in judged], dtype=float)
    return Figures(
        n=len(judged),
        pass_fail=pass_fail(judged),
        confusion=confusion(judged, scale),
        spearman=correlation("spearman", judge_scores, human_scores),
        kendall=correlation("kendall", judge_scores, human_scores),
    )


def pass_fail(judged: list[Judged]) -> PassFail:
    """Pass/fail agreement, base rate, Cohen's kappa and the failing class's true-positive and
    true-negative rates over `judged`, each with a bootstrap interval over conversations."""
    import numpy as np

    judge = np.array([item.judge_pass for item in judged], dtype=bool)
    human = np.array([item.human_pass for item in judged], dtype=bool)

    def interval(name: str) -> Statistic:
        return Statistic(
            value=rounded(_rates(judge[None, :], human[None, :])[name][0]),
            ci95=bootstrap_ci95(lambda index: _rates(judge[index], human[index])[name], len(judged)),
        )

    return PassFail(
        n=len(judged),
        true_positive=int((~judge & ~human).sum()),
        false_negative=int((judge & ~human).sum()),
        false_positive=int((~judge & human).sum()),
        true_negative=int((judge & human).sum()),
        majority="pass" if human.sum() * 2 >= len(human) else "fail",
        agreement=interval("agreement"),
        base_rate=interval("base_rate"),
        kappa=interval("kappa"),
        true_positive_rate=interval("true_positive_rate"),
        true_negative_rate=interval("true_negative_rate"),
    )


def _rates(judge, human) -> dict[str, Any]:
    """Each figure for every row of the boolean matrices `judge` and `human` (pass = True)."""
    import numpy as np

    n = judge.shape[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        observed = (judge == human).mean(axis=1)
        human_pass = human.mean(axis=1)
        judge_pass = judge.mean(axis=1)
        chance = human_pass * judge_pass + (1 - human_pass) * (1 - judge_pass)
        kappa = np.where(chance < 1, (observed - chance) / (1 - chance), np.nan)
        failed = (~human).sum(axis=1)
        passed = human.sum(axis=1)
        return {
            "agreement": observed,
            "base_rate": np.maximum(human_pass, 1 - human_pass) if n else np.full(len(judge), np.nan),
            "kappa": kappa,
            "true_positive_rate": np.where(failed > 0, (~judge & ~human).sum(axis=1) / failed, np.nan),
            "true_negative_rate": np.where(passed > 0, (judge & human).sum(axis=1) / passed, np.nan),
        }


def confusion(judged: list[Judged], scale: list[tuple[str, float]] | None) -> ScaleConfusion | None:
    """The confusion matrix on the scale (None for a metric with none); a judge value off the
    scale (an older rubric's) is put on its nearest value by score."""
    if not scale:
        return None
    names = [name for name, _ in scale]
    scores = [score for _, score in scale]
    counts = [[0] * len(names) for _ in names]
    for item in judged:
        column = names.index(item.judge_value) if item.judge_value in names else nearest_value(item.judge_score, scores)
        counts[nearest_value(item.human_score, scores)][column] += 1
    return ScaleConfusion(values=names, counts=counts)


def worst(metric: str, judged: list[Judged], scale: list[tuple[str, float]] | None) -> list[Disagreement]:
    """The `WORST_SHOWN` conversations where the judge sits farthest from people (by |gap|,
    then by id); conversations where both give the same value are not disagreements."""
    found = []
    for item in judged:
        value = human_value(item.human_score, scale)
        gap = item.human_score - item.judge_score
        if value == item.judge_value or (not scale and abs(gap) < 1e-9):
            continue
        found.append(
            Disagreement(
                id=item.id,
                metric=metric,
                judge_value=item.judge_value,
                judge_score=round(item.judge_score, 4),
                human_value=value,
                human_score=round(item.human_score, 4),
                labels=item.labels,
                gap=round(gap, 4),
            )
        )
    return sorted(found, key=lambda item: (-abs(item.gap), item.id))[:WORST_SHOWN]


def metric_scales(
    rows: list[EvaluationRow], metrics: list[str], rubric_path: str | None = None
) -> dict[str, list[tuple[str, float]]]:
    """Each metric's values with their scores, lowest first, as rows show them: from the
    rubric (`rubric_path`, else the packaged ones), else from the rows themselves (their
    points, or the levels they carry); a metric with neither is left out."""
    from flowrate.metrics.catalog import scale_values

    found = {}
    for metric in metrics:
        values = scale_values(metric, rubric_path)
        if values is None:
            mine = [row for row in rows if row.metric == metric and row.score is not None]
            points = next((row.scale for row in mine if row.scale), None)
            if points:
                values = [(f"{point}/{points}", point / points) for point in range(1, points + 1)]
            elif any(row.verdict for row in mine):
                levels = {row.verdict: row.score for row in mine if row.verdict and row.score is not None}
                values = sorted(levels.items(), key=lambda item: item[1])
        if values:
            found[metric] = values
    return found


def conversation_languages(paths: list[str], ids: set[str]) -> dict[str, str]:
    """The language of each conversation in `paths` with one of `ids`, from its metadata
    (`language` or `lang`); conversations with neither are left out."""
    from flowrate.inputs.files import load_transcripts

    found = {}
    for key, case in load_transcripts(paths, ids).items():
        language = language_of(case.metadata)
        if language is not None:
            found[key] = language
    return found


def report_of(
    rows: list[EvaluationRow],
    labels: list[Label],
    conversations: list[str] | None = None,
    rubric_path: str | None = None,
) -> JudgeReport:
    """`judge_report` with the scales found for the labelled metrics and the languages read
    from `conversations` (files or folders), or else from the files the rows were judged from
    where they still exist."""
    from pathlib import Path

    ids = {label.conversation_id for label in labels}
    paths = conversations or sorted({row.source.path for row in rows if row.source and Path(row.source.path).is_file()})
    languages = conversation_languages(paths, ids) if paths else {}
    scales = metric_scales(rows, sorted({label.metric for label in labels}), rubric_path)
    return judge_report(rows, labels, scales, languages)


def agreement_page_data(
    connection: Any, rows: list[EvaluationRow] | None = None, conversations: list[str] | None = None
) -> dict[str, Any]:
    """The judge report as plain JSON data (the `agreement --results --json` shape), for a page
    of the review app: the history on `connection` gives the labels (imported ones and each
    reviewer's current answer) and, unless `rows` are given, the rows (each conversation and
    metric's latest). `conversations` are files whose metadata gives each conversation's
    language. Each of `metrics[NAME].worst` names a row by `id` and `metric`."""
    from flowrate.analysis.history import stored_labels, stored_rows

    rows = rows if rows is not None else stored_rows(connection)
    return report_of(rows, stored_labels(connection), conversations).model_dump(mode="json")
