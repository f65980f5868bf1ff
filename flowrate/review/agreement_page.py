"""The agreement page: the judge report of `flowrate agreement --results --history` over the
rows the app was started on and the labels in its history (imported ones and each reviewer's
current answer), per metric, each of the worst disagreements linking to its row."""

from __future__ import annotations

from typing import Any

from flowrate.review.pages import link, text


def agreement_body(state: Any) -> str:
    """The page's body: per metric the pass/fail figures beside the base rate, Cohen's kappa,
    the failing class's rates, Spearman and Kendall, all with their intervals, the confusion
    matrix on the metric's scale, agreement between reviewers, and the worst disagreements."""
    from flowrate.analysis.judge_report import agreement_page_data

    with state.history() as connection:
        data = agreement_page_data(connection, rows=state.queue_rows)
    if not data["metrics"]:
        return "<p>No labelled conversation has a row here yet: label some in the queues first.</p>"
    return "".join(_metric_section(name, figures) for name, figures in data["metrics"].items())


def _figure(interval: dict[str, Any] | None, share: bool = True) -> str:
    if not interval or interval.get("value") is None:
        return "n/a"
    shown = (lambda value: f"{value:.1%}") if share else (lambda value: f"{value:.3f}")
    ci = interval.get("ci95")
    return shown(interval["value"]) + (f" [{shown(ci[0])}, {shown(ci[1])}]" if ci else "")


def _metric_section(name: str, figures: dict[str, Any]) -> str:
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
                f"Krippendorff's alpha ({text(people['level'])}) {_figure(people['alpha'], share=False)}, "
                f"exact agreement {_figure(people['exact_agreement'])}",
            )
        )
    table = "".join(f"<tr><th scope='row'>{text(label)}</th><td>{value}</td></tr>" for label, value in lines)
    return (
        f"<section class='metric'><h2>{text(name)}</h2><table class='figures'>{table}</table>"
        f"{_confusion(figures.get('confusion'))}{_worst(figures['worst'])}</section>"
    )


def _confusion(confusion: dict[str, Any] | None) -> str:
    if not confusion:
        return ""
    values = confusion["values"]
    head = "".join(f"<th scope='col'>{text(value)}</th>" for value in values)
    body = "".join(
        f"<tr><th scope='row'>{text(value)}</th>" + "".join(f"<td>{count}</td>" for count in counts) + "</tr>"
        for value, counts in zip(values, confusion["counts"])
    )
    return (
        "<table class='confusion'><caption>people (rows) against the judge (columns)</caption>"
        f"<thead><tr><th></th>{head}</tr></thead><tbody>{body}</tbody></table>"
    )


def _worst(worst: list[dict[str, Any]]) -> str:
    if not worst:
        return ""
    items = "".join(
        f"<li>{link('/row', case['id'], id=case['id'], metric=case['metric'])}: judge {text(case['judge_value'])},"
        f" people {text(case['human_value'])} ({case['labels']} label{'s' if case['labels'] != 1 else ''})</li>"
        for case in worst
    )
    return f"<h3>The worst disagreements</h3><ol class='worst'>{items}</ol>"
