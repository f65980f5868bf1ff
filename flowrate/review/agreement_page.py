"""The agreement page: the judge report of `flowrate agreement --results --history` over the
rows the app was started on and the labels in its history (imported ones and each reviewer's
current answer), per metric, each of the worst disagreements linking to its row."""

from __future__ import annotations

from typing import Any


def agreement_context(state: Any) -> dict[str, Any]:
    """The page's context (`templates/agreement.html`): per metric the pass/fail figures beside
    the base rate, Cohen's kappa, the failing class's rates, Spearman and Kendall, all with their
    intervals, the confusion matrix on the metric's scale, agreement between reviewers, and the
    worst disagreements."""
    from flowrate.analysis.judge_report import agreement_page_data

    with state.history() as connection:
        data = agreement_page_data(connection, rows=state.queue_rows)
    return {"metrics": [_metric(name, figures) for name, figures in data["metrics"].items()]}


def _figure(interval: dict[str, Any] | None, share: bool = True) -> str:
    if not interval or interval.get("value") is None:
        return "n/a"
    shown = (lambda value: f"{value:.1%}") if share else (lambda value: f"{value:.3f}")
    ci = interval.get("ci95")
    return shown(interval["value"]) + (f" [{shown(ci[0])}, {shown(ci[1])}]" if ci else "")


def _metric(name: str, figures: dict[str, Any]) -> dict[str, Any]:
    passing = figures["pass_fail"]
    lines = [
        ("labelled conversations", str(figures["n"])),
        ("pass/fail agreement", _figure(passing["agreement"])),
        (f"base rate (always {passing['majority']})", _figure(passing["base_rate"])),
        ("Cohen's kappa", _figure(passing["kappa"], share=False)),
        ("failing conversations the judge failed", _figure(passing["true_positive_rate"])),
        ("passing conversations the judge passed", _figure(passing["true_negative_rate"])),
        ("Spearman", _figure(figures["spearman"], share=False)),
        ("Kendall", _figure(figures["kendall"], share=False)),
    ]
    people = figures.get("people")
    if people:
        lines.append(
            (
                f"between {people['reviewers']} reviewers on {people['conversations']} conversations",
                f"Krippendorff's alpha ({people['level']}) {_figure(people['alpha'], share=False)}, "
                f"exact agreement {_figure(people['exact_agreement'])}",
            )
        )
    confusion = figures.get("confusion")
    if confusion:
        confusion = {"values": confusion["values"], "rows": list(zip(confusion["values"], confusion["counts"]))}
    return {"name": name, "lines": lines, "confusion": confusion, "worst": figures["worst"]}
