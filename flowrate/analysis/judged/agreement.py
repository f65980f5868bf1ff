"""`flowrate agreement PATH... --label NAME`: how well the judge agrees with the human label on
each record, from the rows of an earlier run or from a run made for it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from flowrate.analysis.agreement import AgreementReport, agreement_report, labels_named, pair_up
from flowrate.analysis.judged import Evaluated
from flowrate.metrics.catalog import metric_making, scale_values
from flowrate.results.events import KeepRows, RunListener
from flowrate.results.files import read_rows
from flowrate.settings.options import EvalSettings

EvaluateWith = Callable[[list[str], EvalSettings, list[RunListener]], Evaluated]
"""One evaluation whose rows go to the listeners given too (the CLI's `run_with_progress`)."""


@dataclass
class LabelAgreement:
    """The `report`, with how many records had the label (`labelled`), how many of those had no
    usable row (`unpaired`: missing, or an error row), and whether the judge run made for it had
    errors or was interrupted (`incomplete`)."""

    report: AgreementReport
    labelled: int
    unpaired: int
    incomplete: bool


def agree_with_labels(
    paths: list[str],
    label: str,
    metric: str,
    rubric: str | None,
    *,
    results: Path | None = None,
    settings: EvalSettings | None = None,
    evaluate: EvaluateWith | None = None,
) -> LabelAgreement:
    """The agreement of `metric` (a metric, or a criterion of a suite) with the label `label` of
    the records in `paths`: on the rows of `results` when given, else on a run of `evaluate`
    under `settings` grading the metric that makes `metric`; `rubric` gives its scale."""
    labels = labels_named(paths, label)
    if results is not None:
        rows, incomplete = list(read_rows(results)), False
    else:
        if settings is None or evaluate is None:
            raise ValueError("without results, give the settings and the evaluate of a run")
        kept = KeepRows()
        summary = evaluate(paths, settings.model_copy(update={"metric": [metric_making(metric)]}), [kept]).summary
        rows, incomplete = kept.rows, summary.errors > 0 or summary.interrupted
    pairs, unpaired = pair_up(labels, rows, label, metric)
    report = agreement_report(pairs, label, metric, scale_values(metric, rubric))
    return LabelAgreement(report, len(labels), unpaired, incomplete)
