"""What a person sees on stderr: progress while a run goes, a summary at the end.

It depends on results (rows and the run's summary) only, never on the judging engine."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from flowrate.analysis.agreement import AgreementReport
from flowrate.analysis.calibration import Calibration, Deviation
from flowrate.analysis.compare import Comparison
from flowrate.analysis.trends import ONE_ROW_EACH, TrendPoint
from flowrate.inputs.selection import LEFT_OUT_SKIPS, skipped_lines
from flowrate.reports.escape import log_line
from flowrate.results.events import RunListener
from flowrate.results.rows import EvaluationRow
from flowrate.results.summary import DryRunEstimate, MetricStats, RunSummary, format_score, shown_value

PLAIN_PROGRESS_EVERY_S = 10.0
LEFT_OUT_REASONS = {
    "sample": "--sample",
    "min_words": "--min-words",
    "only": "--only",
    "exclude": "--exclude",
    "limit": "--limit",
}


def shown(text: str) -> str:
    """One line of untrusted text (ids, reasons, file names) for stderr, where people and CI
    runners read it: control characters shown as `\\xNN` (rows keep the text exact), and never
    a workflow command to GitHub's runner (`escape.log_line`)."""
    return log_line(text)


def table_text(text: str) -> Text:
    """Untrusted text for a table's title, header or cell: one line, and never rich markup."""
    return Text(shown(text))


class Reporter(RunListener):
    """A run's progress on stderr, as its listener: a bar on a terminal, a plain line every few
    seconds otherwise, each notice as a line, and with `verbose` every row.

    Its clock starts when it is entered, as the run's wall time does, and 100 % is shown
    only when every row is in."""

    def __init__(self, console: Console, total: int = 0, verbose: bool = False):
        self.console = console
        self.total = total
        self.verbose = verbose
        self.done = 0
        self.errors = 0
        self._started = time.monotonic()
        self._last_line = self._started
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> Reporter:
        if self.console.is_terminal:
            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[errors]} errors"),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self._bar.start()
            self._task = self._bar.add_task("starting", total=self.total, errors=0)
        return self

    def started(self, total_rows: int) -> None:
        self.total = total_rows
        self._show(total=total_rows)

    def notice(self, text: str) -> None:
        self.console.print(shown(f"flowrate: {text}"), markup=False, highlight=False)

    def resumed(self, row: EvaluationRow) -> None:
        self.row(row)

    def stage(self, text: str) -> None:
        """What the run is doing before rows come: `loading the judge…`, then `judging`."""
        if not self._show(description=text) and text != "judging":
            self.console.print(f"flowrate: {text}", markup=False, highlight=False)

    def _show(self, **fields: Any) -> bool:
        """Update the progress bar's `fields`; False when there is no bar (not a terminal)."""
        if self._bar is None or self._task is None:
            return False
        self._bar.update(self._task, **fields)
        return True

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def row(self, row: EvaluationRow) -> None:
        self.done += 1
        self.errors += row.error is not None
        if self.verbose:
            self.console.print(shown(describe_row(row)), markup=False, highlight=False)
        if self._show(completed=self.done, errors=self.errors):
            return
        now = time.monotonic()
        if now - self._last_line >= PLAIN_PROGRESS_EVERY_S:
            self._last_line = now
            share = f" ({self.done * 100 // self.total}%)" if self.total else ""  # 100 % only when all are in
            self.console.print(
                f"flowrate: {self.done}/{self.total} rows{share}, {self.errors} errors, {now - self._started:.0f}s",
                markup=False,
                highlight=False,
            )


def describe_row(row: EvaluationRow) -> str:
    """One human line per row, for verbose output."""
    name = f" {row.metric}" if row.metric != "conversational_flow_rate" else ""
    if row.error:
        return f"[{row.id}]{name} error {row.error.type}: {row.error.message}"
    assert row.score is not None, "a row without an error has a score (the engine's rows, `read_rows`)"
    mark = "pass" if row.success else "FAIL"
    issues = "; ".join(row.key_issues) or "no key issues"
    agreement = f" agreement {row.agreement:.0%}" if row.agreement is not None else ""
    cached = " (cached)" if row.cached else ""
    score = format_score(row.score, row.threshold, digits=1 if row.verdict or row.rating else 2)
    judged = f"{shown_value(row)} {score}" if row.verdict or row.rating else score
    return f"[{row.id}]{name} {judged} {mark}{agreement}{cached}: {row.reason} ({issues})"


def title_of(metric: str) -> str:
    return metric.replace("_", " ").title()


def _metric_table(name: str, stats: MetricStats) -> Table:
    """One metric: its rows, pass rate and mean (on 5 for rated criteria), and how many rows
    got each verdict, rating or score, best first."""
    pass_rate = f"{stats.pass_rate:.1%}" if stats.pass_rate is not None else "n/a"
    if stats.mean_score is None:
        mean = "n/a"
    elif stats.scale is not None:
        mean = f"{stats.mean_score * 5:.2f} on 5 (score {stats.mean_score:.3f})"
    else:
        mean = f"{stats.mean_score:.3f}"
    title = f"{title_of(name)}: {stats.rows} rows, pass rate {pass_rate}, mean {mean}"
    if stats.errors:
        title += f", {stats.errors} errors"
    table = Table(title=table_text(title), title_justify="left", show_header=True)
    values = sorted(stats.distribution, key=lambda value: stats.value_scores[value], reverse=True)
    for value in values:
        table.add_column(table_text(value), justify="right")
    if values:
        table.add_row(*(str(stats.distribution[value]) for value in values))
    return table


def print_summary(console: Console, summary: RunSummary, output: str | None) -> None:
    """The end-of-run summary: a table per metric, totals, and the failing conversations."""
    for name, stats in summary.metrics.items():
        print_table(console, _metric_table(name, stats), keys=())

    pass_rate = f"{summary.pass_rate:.1%}" if summary.pass_rate is not None else "n/a"
    mean = f"{summary.mean_score:.3f}" if summary.mean_score is not None else "n/a"
    console.print(
        f"passed {summary.passed}  failed {summary.failed}  errors {summary.errors}  skipped {summary.skipped}  "
        f"pass rate {pass_rate}  mean score {mean}",
        markup=False,
        highlight=False,
    )
    unpriced = f" (+ {summary.rows_without_cost} rows with unknown price)" if summary.rows_without_cost else ""
    if summary.resumed:  # the file's rows were partly paid for by earlier runs: say which is which
        console.print(
            f"this run: tokens {summary.run_prompt_tokens} prompt + {summary.run_completion_tokens} completion"
            f"  cost ${summary.run_cost_usd:.4f}  wall time {summary.wall_time_s:.1f}s",
            markup=False,
            highlight=False,
        )
        console.print(
            f"the file in all: tokens {summary.prompt_tokens} prompt + {summary.completion_tokens} completion"
            f"  cost ${summary.cost_usd:.4f}{unpriced}",
            markup=False,
            highlight=False,
        )
    else:
        console.print(
            f"tokens {summary.prompt_tokens} prompt + {summary.completion_tokens} completion"
            f"  cost ${summary.cost_usd:.4f}{unpriced}  wall time {summary.wall_time_s:.1f}s",
            markup=False,
            highlight=False,
        )
    if summary.token_details:
        console.print(f"of the tokens: {summary.token_details}", markup=False, highlight=False)
    several = len(summary.metrics) > 1

    def note(item) -> str:
        return f"{item.id} [{item.metric}]: {item.detail}" if several else f"{item.id}: {item.detail}"

    _print_notes(console, "failed", [note(n) for n in summary.failures], summary.failed)
    _print_notes(console, "errors", [note(n) for n in summary.error_notes], summary.errors)
    _print_notes(console, "skipped", summary.skipped_notes, summary.skipped)
    _print_notes(console, "unstable (samples split)", [note(n) for n in summary.unstable_notes], summary.unstable)
    _print_notes(console, "uncertain (judge unsure)", [note(n) for n in summary.uncertain_notes], summary.uncertain)
    for gate in summary.gates:
        default = gate.gate == "max_failures" and gate.limit == 0
        if not (default and gate.passed):
            mark = "passed" if gate.passed else "FAILED"
            console.print(shown(f"gate {mark}: {gate.describe()}"), markup=False, highlight=False)
    for line in skipped_lines(summary.left_out):
        console.print(line, markup=False, highlight=False)
    if filtered := {reason: count for reason, count in summary.left_out.items() if reason not in LEFT_OUT_SKIPS}:
        reasons = ", ".join(f"{LEFT_OUT_REASONS.get(reason, reason)} {count}" for reason, count in filtered.items())
        console.print(f"left out by the selection (not errors): {reasons}", markup=False, highlight=False)
    if summary.redacted_conversations:
        console.print(summary.redaction_note, markup=False, highlight=False)
    if summary.unreachable_skipped:
        console.print(
            f"unreachable: {summary.unreachable_skipped} conversation(s) not judged, the judge could not be reached",
            markup=False,
        )
    if summary.refused_skipped:
        console.print(
            f"refused: {summary.refused_skipped} conversation(s) not judged, the judge refused every call the same way",
            markup=False,
        )
    if summary.truncated:
        console.print(
            f"truncated: {summary.truncated} conversation(s) had their middle left out to fit the judge's context",
            markup=False,
        )
    replies = [
        (summary.repaired, "repaired (nearly valid JSON)"),
        (summary.reasked, "re-asked"),
        (summary.cut, "cut at their token limit"),
        (summary.copied, "copied a rubric example (unusable)"),
    ]
    if any(count for count, _ in replies):
        shown_counts = ", ".join(f"{count} {what}" for count, what in replies if count)
        console.print(f"judge replies: {shown_counts}", markup=False, highlight=False)
    if summary.cached or summary.resumed:
        console.print(
            f"cached {summary.cached}  resumed from the output file {summary.resumed}", markup=False, highlight=False
        )
    if summary.budget_skipped:
        console.print(
            f"budget: {summary.budget_skipped} conversation(s) not judged, the --max-cost budget was spent",
            markup=False,
        )
    if summary.interrupted and summary.not_judged:
        console.print(
            f"interrupted: {summary.not_judged} conversation(s) not judged yet; their rows are not in the output",
            markup=False,
        )
    elif summary.interrupted:
        console.print("interrupted after every conversation was judged: the results are complete", markup=False)
    if output and output != "-":
        console.print(f"results: {output}", markup=False, highlight=False)


def _print_notes(console: Console, title: str, notes: list[str], total: int) -> None:
    if not notes:
        return
    console.print(f"{title}:", markup=False)
    for note in notes:
        console.print(shown(f"  {note}"), markup=False, highlight=False)
    if total > len(notes):
        console.print(f"  ... and {total - len(notes)} more", markup=False)


def print_agreement(console: Console, report: AgreementReport) -> None:
    """Correlations with their intervals, then kappa and the confusion table where they apply."""
    table = Table(title=f"Agreement with human label {report.label!r} (n={report.n})", title_justify="left")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_column("95% bootstrap interval", justify="right")
    for name in ("spearman", "kendall", "pearson"):
        statistic = getattr(report, name)
        value = "n/a" if statistic.value is None else f"{statistic.value:.3f}"
        interval = "" if not statistic.ci95 else f"[{statistic.ci95[0]:.3f}, {statistic.ci95[1]:.3f}]"
        table.add_row(name if name != "kendall" else "kendall tau-b", value, interval)
    if report.kappa is not None:
        table.add_row("quadratic kappa", "n/a" if report.kappa.value is None else f"{report.kappa.value:.3f}", "")
    print_table(console, table)
    if report.confusion is not None:
        confusion = Table(title=f"human label (rows) by {report.metric} (columns)", title_justify="left")
        confusion.add_column("label")
        for verdict in report.confusion.verdicts:
            confusion.add_column(table_text(verdict), justify="right")
        for level, counts in zip(report.confusion.labels, report.confusion.counts):
            confusion.add_row(str(level), *map(str, counts))
        print_table(console, confusion)


def print_dry_run(console: Console, estimate: DryRunEstimate, model: str) -> None:
    """What a run would send and cost, after the notices a run would give before judging."""
    for notice in estimate.notices:
        console.print(shown(f"flowrate: {notice}"), markup=False, highlight=False)
    cost = "unknown (no price for this model)" if estimate.cost_usd is None else f"${estimate.cost_usd:.4f}"
    if estimate.cached_tokens and estimate.cost_usd is not None:
        cost += (
            f" ({estimate.cached_tokens} of the prompt tokens, the rubric's prefix, priced as read from the"
            f" provider's prompt cache; ${estimate.uncached_cost_usd:.4f} if nothing is cached, as --max-cost reserves)"
        )
    console.print(
        f"dry run for {model}: {estimate.conversations} conversation(s), {estimate.cached} cached, "
        f"{estimate.calls} call(s), {estimate.prompt_tokens} prompt tokens, "
        f"about {estimate.completion_tokens} completion tokens, estimated cost {cost}; nothing was called",
        markup=False,
        highlight=False,
    )


def print_comparison(console: Console, comparison: Comparison) -> None:
    """Per metric: the mean delta with its interval and the pass rates; then every change,
    regressions first."""
    for warning in comparison.warnings:
        console.print(shown(f"flowrate: warning: {warning}"), markup=False, highlight=False)
    console.print(shown(f"{comparison.current} against {comparison.baseline}:"), markup=False, highlight=False)
    for metric in comparison.metrics:
        interval = "" if metric.ci95 is None else f" [{metric.ci95[0]:+.4f}, {metric.ci95[1]:+.4f}]"
        delta = "n/a" if metric.mean_delta is None else f"{metric.mean_delta:+.4f}{interval}"
        verdict = "SIGNIFICANT DROP" if metric.significant_drop else "ok"
        console.print(
            shown(
                f"  {metric.metric}: {verdict}; over {metric.paired} paired: mean {_number(metric.mean_before)} ->"
                f" {_number(metric.mean_after)}, delta {delta}, pass rate {_share(metric.pass_rate_before)} ->"
                f" {_share(metric.pass_rate_after)}; not paired: only in baseline {metric.only_baseline},"
                f" only in current {metric.only_current}, errors {metric.errors_baseline} -> {metric.errors_current}"
            ),
            markup=False,
            highlight=False,
        )
    notes = [
        f"{change.id} [{change.metric}]: {change.before} -> {change.after} ({change.delta:+.4f})"
        for change in comparison.changes
    ]
    worse = sum(change.delta < 0 for change in comparison.changes)
    _print_notes(console, f"changed ({worse} worse, {len(comparison.changes) - worse} better)", notes[:50], len(notes))


def print_table(console: Console, table: Table, keys: tuple[int, ...] = (0,), wrapping: tuple[int, ...] = ()) -> None:
    """Print `table` with nothing in it cut, on any width (80 columns, or no terminal: a CI
    log). The cells of the columns but `wrapping` (identifiers, numbers) stay whole on one line,
    headers a word a line, the `wrapping` columns wrapped at their spaces. A table that does not
    fit even so is printed a row at a time: the row's `keys` cells (its identifiers) on a line,
    then each other column's header and cell on a line of their own."""
    for index, column in enumerate(table.columns):
        column.overflow = "fold"
        column.no_wrap = index not in wrapping
        if column.no_wrap and isinstance(column.header, str):
            column.header = column.header.replace(" ", "\n")
    if _needed_width(table) <= console.width:
        console.print(table)
        return
    if table.title:
        console.print(table.title, markup=False, highlight=False)
    columns = [(str(column.header).replace("\n", " "), list(column.cells)) for column in table.columns]
    for row in range(table.row_count):
        cells = [str(cell.plain if isinstance(cell := cells[row], Text) else cell) for _, cells in columns]
        if keys:
            console.print("  ".join(cells[index] for index in keys), markup=False, highlight=False)
        for index, (header, _) in enumerate(columns):
            if index not in keys and cells[index]:
                console.print(f"  {header}: {cells[index]}", markup=False, highlight=False)


def _needed_width(table: Table) -> int:
    """The width `table` needs with nothing cut: a no-wrap column its longest line, a wrapping one
    its longest word, each with its padding, and the borders. (Rich's own measure gives a no-wrap
    column its longest word as its minimum, so a table it says fits is then cut.)"""
    from rich.cells import cell_len

    total = len(table.columns) + 1 if table.box else 0
    for column in table.columns:
        texts = [str(column.header), *(str(cell.plain if isinstance(cell, Text) else cell) for cell in column.cells)]
        pieces = (
            [line for text in texts for line in text.split("\n")]
            if column.no_wrap
            else [word for text in texts for word in text.split()]
        )
        total += max((cell_len(piece) for piece in pieces), default=0) + sum(table.padding[1::2])
    return total


def counted(count: int, noun: str) -> str:
    """`count` and `noun` (a regular English noun phrase ending in its noun), plural unless one: "1 mode", "2 modes"."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def print_calibration(console: Console, report: Calibration) -> None:
    """Per metric of `report`: labels, labeled conversations, the two deviations, the band, mean
    and adjusted mean; then the user_satisfaction figures, if any."""
    table = Table(
        title=f"Calibration as of {report.as_of.isoformat()} (labels of the last {report.window})", title_justify="left"
    )
    for column in (
        "metric",
        "labels",
        "labeled",
        "2+ reviewers",
        "upper (n)",
        "lower (n)",
        "error band",
        "mean score",
        "mean adjusted",
    ):
        table.add_column(column, justify="left" if column == "metric" else "right")

    def deviation(side: Deviation | None) -> str:
        return "none" if side is None else f"{side.deviation:+.4f} ({side.n})"

    for name, figures in report.metrics.items():
        table.add_row(
            table_text(name),
            str(figures.labels),
            str(figures.labeled_conversations),
            str(figures.several_reviewers),
            deviation(figures.upper),
            deviation(figures.lower),
            "none" if figures.error_band is None else f"{figures.error_band:+.4f}",
            _number(figures.mean_score),
            _number(figures.mean_adjusted),
        )
    print_table(console, table)
    satisfaction = report.user_satisfaction
    if satisfaction is not None:
        gap = "none" if satisfaction.mean_gap is None else f"{satisfaction.mean_gap:+.4f}"
        console.print(
            f"user_satisfaction: {satisfaction.labeled_conversations} labeled conversation(s), mean gap {gap},"
            f" upper {deviation(satisfaction.upper)}, lower {deviation(satisfaction.lower)},"
            f" mean auto {_number(satisfaction.mean_auto)}, mean adjusted {_number(satisfaction.mean_adjusted)}",
            markup=False,
            highlight=False,
        )


SPARKS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float | None]) -> str:
    """Scores in [0, 1] as block characters, a space where there is none."""
    return "".join(" " if value is None else SPARKS[min(int(value * len(SPARKS)), len(SPARKS) - 1)] for value in values)


def print_trends(console: Console, points: list[TrendPoint]) -> None:
    """A table of `points` per metric (its title), one line per period, the label columns only
    where labels are; then a sparkline of each metric's mean score."""
    labelled = any(point.mean_label is not None for point in points)
    columns = ["period", "conversations", "mean score", "pass rate"]
    columns += ["mean label", "mean adjusted", "band"] if labelled else []
    for metric in dict.fromkeys(point.metric for point in points):
        table = Table(title=table_text(f"Trends: {metric}"), title_justify="left")
        for column in columns:
            table.add_column(column, justify="left" if column == "period" else "right")
        for point in (point for point in points if point.metric == metric):
            cells: list[Text | str] = [table_text(point.period), str(point.conversations), _number(point.mean_score)]
            cells.append(_share(point.pass_rate))
            if labelled:
                lower, upper = point.lower, point.upper
                band = "" if upper is None and lower is None else f"{lower or 0:+.3f} / {upper or 0:+.3f}"
                cells += [_number(point.mean_label), _number(point.mean_adjusted), band]
            table.add_row(*cells)
        print_table(console, table, wrapping=(6,))  # the band
    console.print(shown(f"trends: {ONE_ROW_EACH}"), markup=False, highlight=False)
    periods = sorted({point.period for point in points})
    for metric in dict.fromkeys(point.metric for point in points):
        means = {point.period: point.mean_score for point in points if point.metric == metric}
        line = sparkline([means.get(period) for period in periods])
        console.print(shown(f"{metric}: {line}  ({periods[0]} to {periods[-1]})"), markup=False, highlight=False)


def comparison_markdown(comparison: Comparison, limit: int = 20) -> str:
    """A fragment for a pull-request comment or a step summary, the first `limit` regressions
    listed. Text from the files (ids, metrics, verdicts, models in warnings) goes through
    `markdown_text`: it renders as itself, never as a heading, a link, an image or HTML."""
    from flowrate.reports.escape import markdown_text

    lines = [
        "### flowrate: compared with the baseline",
        "",
        "| metric | paired | mean before | mean after | delta (95% CI) | pass rate | verdict |",
        "|---|---:|---:|---:|---|---|---|",
    ]
    for metric in comparison.metrics:
        interval = "" if metric.ci95 is None else f" [{metric.ci95[0]:+.4f}, {metric.ci95[1]:+.4f}]"
        delta = "n/a" if metric.mean_delta is None else f"{metric.mean_delta:+.4f}{interval}"
        rate = f"{_share(metric.pass_rate_before)} → {_share(metric.pass_rate_after)}"
        verdict = "**significant drop**" if metric.significant_drop else "ok"
        lines.append(
            f"| {markdown_text(metric.metric)} | {metric.paired} | {_number(metric.mean_before)} | {_number(metric.mean_after)} | {delta} | {rate} | {verdict} |"
        )
    regressions = [change for change in comparison.changes if change.delta < 0]
    if regressions:
        lines += ["", "**Regressions**", ""] + [
            f"- {markdown_text(change.id)} ({markdown_text(change.metric)}):"
            f" {markdown_text(change.before)} → {markdown_text(change.after)}"
            for change in regressions[:limit]
        ]
        if len(regressions) > limit:
            lines.append(f"- and {len(regressions) - limit} more (`flowrate compare --json` lists every change)")
    if comparison.warnings:
        lines += ["", *[f"> {markdown_text(warning)}" for warning in comparison.warnings]]
    return "\n".join(lines) + "\n"
