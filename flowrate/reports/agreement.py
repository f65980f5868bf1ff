"""The judge report on the terminal: per metric, pass/fail agreement beside its base rate,
kappa, the failing class's rates, the correlations, the confusion matrix, the worst
disagreements, agreement between reviewers and the figures per language; and two reports side
by side for `flowrate align`."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from flowrate.analysis.interrater import PeopleAgreement
from flowrate.analysis.judge_report import Figures, JudgeReport, MetricJudgeReport
from flowrate.analysis.statistics import Statistic
from flowrate.reports.console import print_table, shown, table_text

ROWS = (
    ("pass/fail agreement", "agreement"),
    ("base rate (always the majority)", "base_rate"),
    ("Cohen's kappa", "kappa"),
    ("failing class: true-positive rate", "true_positive_rate"),
    ("failing class: true-negative rate", "true_negative_rate"),
)


def _figure(value: Statistic, share: bool = True) -> tuple[str, str]:
    """A figure and its interval as text: shares in percent, others to 3 places."""

    def text(number: float) -> str:
        return f"{number:.1%}" if share else f"{number:.3f}"

    if value.value is None:
        return "n/a", ""
    interval = "" if not value.ci95 else f"[{text(value.ci95[0])}, {text(value.ci95[1])}]"
    return text(value.value), interval


def figure_rows(figures: Figures) -> list[tuple[str, str, str]]:
    """(name, value, interval) for every figure of `figures`, in the order the report gives them."""
    found = []
    for name, field in ROWS:
        found.append((name, *_figure(getattr(figures.pass_fail, field), share=field != "kappa")))
    for name, field in (("spearman", "spearman"), ("kendall tau-b", "kendall")):
        found.append((name, *_figure(getattr(figures, field), share=False)))
    return found


def print_judge_report(console: Console, report: JudgeReport) -> None:
    """Every metric of `report`, then a line per metric with labelled conversations the rows lack."""
    for metric in report.metrics.values():
        _print_metric(console, metric)
    for name, count in report.unpaired.items():
        console.print(
            shown(
                f"flowrate: {count} labelled conversation(s) of {name} have no usable row (missing, or an error row)"
            ),
            markup=False,
            highlight=False,
        )


def _print_metric(console: Console, metric: MetricJudgeReport) -> None:
    counts = metric.pass_fail
    table = Table(
        title=shown(f"{metric.metric}: judge against people on {metric.n} labelled conversation(s)"),
        title_justify="left",
    )
    for column in ("figure", "value", "95% bootstrap interval"):
        table.add_column(column, justify="left" if column == "figure" else "right")
    for row in figure_rows(metric):
        table.add_row(*row)
    print_table(console, table)
    console.print(
        f"people failed {counts.true_positive + counts.false_negative}, passed"
        f" {counts.false_positive + counts.true_negative}; the judge caught {counts.true_positive} of the"
        f" failures and passed {counts.false_negative} of them; always answering {counts.majority!r} scores the"
        " base rate",
        markup=False,
        highlight=False,
    )
    if metric.confusion is not None:
        confusion = Table(title="people (rows) by the judge (columns)", title_justify="left")
        confusion.add_column("people")
        for value in metric.confusion.values:
            confusion.add_column(table_text(value), justify="right")
        for value, counts_of_value in zip(metric.confusion.values, metric.confusion.counts):
            confusion.add_row(table_text(value), *map(str, counts_of_value))
        print_table(console, confusion)
    if metric.worst:
        worst = Table(title=f"the {len(metric.worst)} worst disagreement(s)", title_justify="left")
        for column in ("id", "judge", "people", "gap", "labels"):
            worst.add_column(column, justify="left" if column in ("id", "judge", "people") else "right")
        for item in metric.worst:
            worst.add_row(
                table_text(item.id),
                table_text(item.judge_value),
                table_text(item.human_value),
                f"{item.gap:+.2f}",
                str(item.labels),
            )
        print_table(console, worst)
    if metric.people is not None:
        console.print(people_line(metric.people), markup=False, highlight=False)
    if metric.languages:
        languages = Table(title="per language", title_justify="left")
        for column in ("language", "n", "agreement", "base rate", "kappa", "TPR fail", "TNR fail", "spearman"):
            languages.add_column(column, justify="left" if column == "language" else "right")
        for name, figures in metric.languages.items():
            languages.add_row(table_text(name), str(figures.n), *[row[1] for row in figure_rows(figures)[:6]])
        print_table(console, languages)


def people_line(people: PeopleAgreement) -> str:
    """Agreement between reviewers in one line."""
    alpha, alpha_interval = _figure(people.alpha, share=False)
    exact, exact_interval = _figure(people.exact_agreement)
    return shown(
        f"between people: {people.conversations} conversation(s) with two or more of {people.reviewers}"
        f" reviewer(s); Krippendorff's alpha ({people.level}) {alpha} {alpha_interval}; exact agreement"
        f" {exact} {exact_interval} over {people.pairs} pair(s)"
    )


def print_side_by_side(console: Console, metric: str, before: Figures | None, after: Figures | None) -> None:
    """The held-out figures of the old rubric (`before`) and the new (`after`), one row a figure."""
    table = Table(title=shown(f"{metric} on the held-out conversations"), title_justify="left")
    for column in ("figure", "old rubric", "new rubric"):
        table.add_column(column, justify="left" if column == "figure" else "right")
    old = figure_rows(before) if before is not None else []
    new = figure_rows(after) if after is not None else []
    names = [row[0] for row in (old or new)]
    for index, name in enumerate(names):
        cells = []
        for rows in (old, new):
            cells.append(f"{rows[index][1]} {rows[index][2]}".strip() if rows else "n/a")
        table.add_row(name, *cells)
    table.add_row("n", str(before.n if before else 0), str(after.n if after else 0))
    print_table(console, table)
