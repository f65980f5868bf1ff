"""GitHub Actions: a Markdown summary appended to `$GITHUB_STEP_SUMMARY`, and annotations
(`::error file=…,line=…,title=…::…`) at the worst failing conversations' source lines."""

from __future__ import annotations

import os
from pathlib import Path

from flowrate.results import CaseResult, ReportBook, RunSummary

SUMMARY_LIMIT_BYTES = 1024 * 1024 - 4096  # GitHub takes at most 1 MiB per step summary; keep a margin
ANNOTATIONS = 10
WORST_LISTED = 20


def in_github(flag: bool) -> bool:
    """True with `--github`, or when GitHub Actions runs us (`GITHUB_ACTIONS=true`)."""
    return flag or os.environ.get("GITHUB_ACTIONS") == "true"


def step_summary(book: ReportBook, summary: RunSummary) -> str:
    """The Markdown summary: totals per metric, gates, cost, and the worst failures."""
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
        lines += ["**Gates failed:**", ""] + [f"- {_md(gate.describe())}" for gate in failed_gates] + [""]
    worst = worst_failures(book)[:WORST_LISTED]
    if worst:
        lines += ["### Worst failures", "", "| conversation | metric | result | first key issue |", "|---|---|---|---|"]
        for case in worst:
            issue = case.error or (case.key_issues[0] if case.key_issues else case.reason or "")
            lines.append(
                f"| `{_md(case.id)}` | `{case.metric}` | {_md(case.value or case.error_type or '')} | {_md(issue)} |"
            )
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
    """Errors and failing rows of every metric, worst first."""
    cases = [case for metric in book.cases for case in book.worst_of(metric) if case.error or case.success is False]
    return sorted(cases, key=lambda case: case.badness)


def annotations(book: ReportBook) -> list[str]:
    """At most `ANNOTATIONS` error annotations at the worst failing conversations, and a notice
    with how many more there are."""
    worst = [case for case in worst_failures(book) if case.path]
    lines = []
    for case in worst[:ANNOTATIONS]:
        properties = {"file": case.path, "line": case.line or 1, "title": f"flowrate {case.metric}: {case.id}"}
        shown = ",".join(f"{key}={_property(str(value))}" for key, value in properties.items())
        message = case.error or f"{case.value}: " + (case.key_issues[0] if case.key_issues else case.reason or "")
        lines.append(f"::error {shown}::{_data(message)}")
    if len(worst) > ANNOTATIONS:
        lines.append(
            f"::notice::{_data(f'{len(worst) - ANNOTATIONS} more failing conversations; see the step summary')}"
        )
    return lines


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


def _md(text: str) -> str:
    """Text for one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|").replace("`", "'")
