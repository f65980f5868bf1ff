"""GitHub Actions: a Markdown summary appended to `$GITHUB_STEP_SUMMARY`, and annotations
(`::error file=…,line=…,title=…::…`) at the worst failing conversations' source lines."""

from __future__ import annotations

import os
from pathlib import Path

from flowrate.reports.escape import markdown_text, strip_control
from flowrate.results.book import CaseResult, ReportBook
from flowrate.results.summary import RunSummary

SUMMARY_LIMIT_BYTES = 1024 * 1024 - 4096  # GitHub takes at most 1 MiB per step summary; keep a margin
ANNOTATIONS = 10
WORST_LISTED = 20


def step_summary(book: ReportBook, summary: RunSummary) -> str:
    """The Markdown summary of `book` and `summary`: totals per metric, gates, cost, and the
    worst failures. Text from conversations and the judge goes through `markdown_text`."""
    lines = ["## flowrate", "", "| metric | rows | pass rate | mean score | errors |", "|---|---:|---:|---:|---:|"]
    for metric, stats in summary.metrics.items():
        rate = "n/a" if stats.pass_rate is None else f"{stats.pass_rate:.1%}"
        mean = "n/a" if stats.mean_score is None else f"{stats.mean_score:.3f}"
        lines.append(f"| `{metric}` | {stats.rows} | {rate} | {mean} | {stats.errors} |")
    cost = f"${summary.cost_usd:.4f}" + (
        f" (+ {summary.rows_without_cost} rows of unknown price)" if summary.rows_without_cost else ""
    )
    lines += ["", f"Cost {cost}; wall time {summary.wall_time_s:.1f} s; skipped {summary.skipped}.", ""]
    failed_gates = [gate for gate in summary.gates if not gate.passed]
    if failed_gates:
        lines += ["**Gates failed:**", ""] + [f"- {markdown_text(gate.describe())}" for gate in failed_gates] + [""]
    worst = worst_failures(book)[:WORST_LISTED]
    if worst:
        failing = _failing_rows(summary)
        heading = "### Worst failures" + (f" ({len(worst)} of {failing})" if failing > len(worst) else "")
        lines += [heading, "", "| conversation | metric | result | first key issue |", "|---|---|---|---|"]
        for case in worst:
            issue = case.error or (case.key_issues[0] if case.key_issues else case.reason or "")
            result = markdown_text(case.value or case.error_type or "")
            lines.append(f"| {markdown_text(case.id)} | `{case.metric}` | {result} | {markdown_text(issue)} |")
    return cut("\n".join(lines) + "\n", SUMMARY_LIMIT_BYTES)


def cut(text: str, limit: int) -> str:
    """`text` within `limit` bytes, cut at a line and saying so."""
    data = text.encode()
    if len(data) <= limit:
        return text
    note = "\n_(cut here: a step summary is limited to 1 MiB)_\n"
    kept = data[: limit - len(note.encode())].decode(errors="ignore")
    return kept[: kept.rfind("\n") + 1] + note


def worst_failures(book: ReportBook) -> list[CaseResult]:
    """Errors and failing rows of every metric, worst first (ties in input order)."""
    cases = [case for metric in book.cases for case in book.worst_of(metric) if case.error or case.success is False]
    return sorted(cases, key=lambda case: (case.badness, case.place))


def _failing_rows(summary: RunSummary) -> int:
    """Every failing or error row of the run, not only those a report book kept."""
    return sum(stats.failed + stats.errors for stats in summary.metrics.values())


def annotation_lines(book: ReportBook, summary: RunSummary) -> list[str]:
    """At most `ANNOTATIONS` error annotations at the worst failing conversations of `book`, and
    a notice with how many more failing rows `summary` counted. Paths are relative to the
    workspace (`annotation_path`); titles and messages have no control characters and are
    escaped as workflow commands require."""
    worst = [(case, path) for case in worst_failures(book) if (path := case.path)]
    lines = []
    for case, path in worst[:ANNOTATIONS]:
        title = strip_control(f"flowrate {case.metric}: {case.id}")
        properties = {"file": annotation_path(path), "line": case.line or 1, "title": title}
        shown = ",".join(f"{key}={_property(str(value))}" for key, value in properties.items())
        message = case.error or f"{case.value}: " + (case.key_issues[0] if case.key_issues else case.reason or "")
        lines.append(f"::error {shown}::{_data(strip_control(message, keep_newlines=True))}")
    more = _failing_rows(summary) - len(lines)
    if more > 0:
        lines.append(f"::notice::{_data(f'{more} more failing rows; see the step summary')}")
    return lines


def annotation_path(path: str) -> str:
    """`path` as GitHub places annotations: relative to `$GITHUB_WORKSPACE` (the checkout) when
    set, else to the working directory, normalised (`./a/../b.jsonl` is `b.jsonl`), with `/`;
    a path outside it stays absolute."""
    base = os.path.abspath(os.environ.get("GITHUB_WORKSPACE") or os.getcwd())
    full = os.path.abspath(path)
    try:
        relative = os.path.relpath(full, base)
    except ValueError:  # another drive, on Windows
        return Path(full).as_posix()
    outside = relative == os.pardir or relative.startswith(os.pardir + os.sep)
    return Path(full if outside else relative).as_posix()


def append_summary(text: str) -> Path | None:
    """Append to the file GitHub names in `$GITHUB_STEP_SUMMARY`; None when it names none."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(text)
    return Path(target)


def _data(text: str) -> str:
    """Workflow-command data: `%`, CR and LF escaped."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    """A workflow-command property: the data escapes, and `:` and `,` too."""
    return _data(text).replace(":", "%3A").replace(",", "%2C")
