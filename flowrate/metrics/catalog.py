"""The metrics flowrate ships, by name, and the metrics of a run built from its settings."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from flowrate.errors import ConfigError
from flowrate.judge.cache import ResponseCache
from flowrate.judge.retry import RetryPolicy
from flowrate.rubric.model import PACKAGED, Scale, load_rubric
from flowrate.settings.groups import GateOptions
from flowrate.settings.options import JudgeSettings

OFFLINE = "repetition_check"
NAMES = [*PACKAGED, OFFLINE]


@dataclass
class MetricInfo:
    """What `flowrate metrics` lists for one metric."""

    name: str
    title: str
    calls_per_conversation: int
    rows: list[tuple[str, str, str]]  # (row name, scale, description)
    weights: dict[str, float] | None = None


def describe(name: str, weights: dict[str, float] | None = None) -> MetricInfo:
    """A packaged metric's criteria, scales, weights and calls per conversation."""
    if name == OFFLINE:
        from flowrate.metrics import repetition

        rule = (
            f"score 1 - {repetition.PENALTY} x findings, at least 0: near-duplicate replies, questions asked again"
            " after an answer, empty replies, an unanswered last message"
        )
        return MetricInfo(OFFLINE, "Repetition check (offline, no LLM)", 0, [(OFFLINE, "score", rule)])
    rubric = load_rubric(name)
    rows = [(c.name, c.scale.describe(), c.description) for c in rubric.criteria]
    shown_weights = None
    if rubric.user_satisfaction:
        shown_weights = {c.name: float((weights or {}).get(c.name, 1.0)) for c in rubric.criteria}
        rows.append(("user_satisfaction", "score", "SUM(score x weight) / SUM(weight) over the criteria; no call"))
    return MetricInfo(rubric.name, rubric.title, 1, rows, shown_weights)


def build_metrics(settings: JudgeSettings, cache: ResponseCache | None, gates: GateOptions | None = None) -> list:
    """The metrics a run judges with, from its judge `settings`: each `--metric` name, and the
    `--rubric` file's metric (which replaces the default when no `--metric` is named), sharing
    the run's response `cache`. Raises `ConfigError` for an unknown name, when two metrics would
    write rows of the same name, or for a weight, threshold or gate (in `gates`) naming nothing."""
    from flowrate.metrics.repetition import RepetitionCheck
    from flowrate.metrics.rubric_metric import RubricMetric

    sources = metric_sources(settings)
    retry = RetryPolicy(
        max_retries=settings.max_retries,
        timeout=settings.timeout,
        backoff=settings.backoff,
        backoff_max=settings.backoff_max,
    )
    metrics = []
    made_by: dict[str, str] = {}
    for shown, source in sources:
        metric: RepetitionCheck | RubricMetric
        if source == OFFLINE:
            metric = RepetitionCheck(settings.threshold, settings.thresholds, settings.date_field)
        else:
            metric = RubricMetric(
                source,
                model=settings.model,
                threshold=settings.threshold,
                api_base=settings.api_base,
                language=settings.language,
                retry=retry,
                samples=settings.samples,
                max_input_tokens=settings.max_input_tokens,
                cache=cache,
                thresholds=settings.thresholds,
                weights=settings.weights,
                date_field=settings.date_field,
                cut_logs=settings.cut_logs,
                transport=settings.transport,
                choice=settings.score_choice,
            )
            if metric.backend is not None:  # the config's prices of models the price list lacks
                metric.backend.prices = settings.prices
        for row_name in metric.row_names:
            if row_name in made_by:
                raise ConfigError(f"metric name {row_name!r} is made by both {made_by[row_name]} and {shown}")
            made_by[row_name] = shown
        metrics.append(metric)
    check_names(settings, gates or GateOptions())
    return metrics


def metric_sources(settings: JudgeSettings) -> list[tuple[str, str | Path]]:
    """The metrics a run judges with, as (the name shown, a packaged name or a rubric file): each
    `--metric` name, and the `--rubric` file (which replaces the default when no `--metric` is
    named). Raises `ConfigError` for an unknown name."""
    names = list(dict.fromkeys(settings.metric))
    if settings.rubric and names == ["conversational_flow_rate"] and not settings.metric_named:
        names = []
    for name in names:
        if name not in NAMES:
            raise ConfigError(f"option metric: unknown metric {name!r} (known: {', '.join(NAMES)})")
    sources: list[tuple[str, str | Path]] = [(name, name) for name in names]
    if settings.rubric:
        sources.append((settings.rubric, Path(settings.rubric)))
    return sources


def row_scales(settings: JudgeSettings) -> dict[str, Scale | None]:
    """Every row the metrics of `settings` make (`metric_sources`), with its scale (None: a score
    with no scale, as a suite's user_satisfaction or the offline check). Raises `ConfigError` as
    `metric_sources` does."""
    rows: dict[str, Scale | None] = {}
    for _, source in metric_sources(settings):
        if source == OFFLINE:
            rows[OFFLINE] = None
            continue
        rubric = load_rubric(source)
        scales = {criterion.name: criterion.scale for criterion in rubric.criteria}
        rows.update({name: scales.get(name) for name in rubric.row_names})
    return rows


def known_row_names(rubric_path: str | None = None) -> list[str]:
    """Every row name a threshold or a gate may name: each packaged metric's rows, the offline
    check, and the rows of the rubric file given."""
    rubrics = [load_rubric(name) for name in PACKAGED] + ([load_rubric(Path(rubric_path))] if rubric_path else [])
    return list(dict.fromkeys([*(row for rubric in rubrics for row in rubric.row_names), OFFLINE]))


def known_criteria(rubric_path: str | None = None) -> list[str]:
    """Every criterion a weight may name: the criteria of each suite (a rubric with a weighted mean)."""
    rubrics = [load_rubric(name) for name in PACKAGED] + ([load_rubric(Path(rubric_path))] if rubric_path else [])
    return list(dict.fromkeys(c.name for rubric in rubrics if rubric.user_satisfaction for c in rubric.criteria))


def check_weights(weights: dict[str, float], rubric_path: str | None = None) -> None:
    """Raise `ConfigError` for a weight on a criterion no suite has, a negative weight, or
    weights that leave a suite's criteria summing to 0 (its mean would be undefined)."""
    known = known_criteria(rubric_path)
    for name, weight in weights.items():
        if name not in known:
            raise ConfigError(f"option weights: unknown criterion {name!r} (known: {', '.join(known)})")
        if weight < 0:
            raise ConfigError(f"option weights: the weight of {name} must not be negative")
    rubrics = [load_rubric(name) for name in PACKAGED] + ([load_rubric(Path(rubric_path))] if rubric_path else [])
    for rubric in rubrics:
        if rubric.user_satisfaction and sum(weights.get(c.name, 1.0) for c in rubric.criteria) <= 0:
            raise ConfigError(
                f"option weights: the weights of {rubric.name}'s criteria sum to 0; at least one must be above 0"
            )


def check_names(settings: JudgeSettings, gates: GateOptions) -> None:
    """Raise `ConfigError` for a weight, threshold or gate that names nothing flowrate makes:
    a typo would otherwise be ignored without a word."""
    if not (settings.weights or settings.thresholds or gates.gates):
        return  # nothing named: no rubric to read for it
    check_weights(settings.weights, settings.rubric)
    known = known_row_names(settings.rubric)
    for option, names in (("thresholds", settings.thresholds), ("gates", gates.gates)):
        for name in names:
            if name not in known:
                raise ConfigError(f"option {option}: unknown metric {name!r} (known: {', '.join(known)})")


def metric_making(row_name: str) -> str:
    """The packaged metric whose rows include `row_name` (a suite for its criteria), or
    `row_name` itself when none does (an error then names it)."""
    for name in PACKAGED:
        if row_name in load_rubric(name).row_names:
            return name
    return row_name


def find_scale(row_name: str, rubric_path: str | None = None) -> Scale | None:
    """The scale of a criterion, in the given rubric or a packaged one; None for a score with
    no scale (user_satisfaction, repetition_check) or a name no rubric has."""
    rubrics = [load_rubric(rubric_path)] if rubric_path else []
    rubrics += [load_rubric(name) for name in PACKAGED]
    return next((c.scale for rubric in rubrics for c in rubric.criteria if c.name == row_name), None)


def scale_values(row_name: str, rubric_path: str | None = None) -> list[tuple[str, float]] | None:
    """Every value a metric's rows can carry, as shown in rows and reports, with its score,
    lowest first; None when it has no scale."""
    scale = find_scale(row_name, rubric_path)
    if scale is None:
        return None
    if scale.levels is not None:
        return [(str(value), scale.score(value)) for value in scale.values]
    return [(f"{value}/{scale.points}", scale.score(value)) for value in scale.values]
