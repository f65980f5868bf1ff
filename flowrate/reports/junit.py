"""JUnit XML, as GitHub, GitLab and Jenkins read it, written with the standard library.

One `testsuite` per metric; one `testcase` per conversation, in input order (`classname` the
source file, `file` and `line` attributes); `failure` for a row below its threshold, `error`
for a row the judge could not judge, `skipped` for conversations the run left out. Past
`full_limit` rows of a metric, the suite holds one testcase per gate and the worst rows: CI
systems choke on huge reports. Its `tests`, `failures` and `errors` still count every row, and
its properties and `system-out` say how many testcases were left out. Every attribute and text
goes through `escape.xml_text`: ids and judge replies may hold characters XML 1.0 forbids.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from flowrate.reports.escape import xml_text
from flowrate.results.book import CaseResult, ReportBook
from flowrate.results.summary import RunSummary, format_score

SKIP_REASONS = {
    "sample": "left out by --sample",
    "min_words": "left out by --min-words",
    "only": "left out by --only",
    "exclude": "left out by --exclude",
    "limit": "left out by --limit",
    "open": "left out by --closed-after: still open",
    "judged": "left out by --history: already judged with these turns",
    "invalid": "invalid input",
    "budget": "not judged: the --max-cost budget was spent",
    "unreachable": "not judged: the judge could not be reached",
    "unwritten": "not kept: the results file could not be written",
}
COUNTS = ("tests", "failures", "errors", "skipped")


def write_junit(path: str | Path, book: ReportBook, summary: RunSummary) -> None:
    """Write the JUnit file for a run to `path`: `book` holds its rows and skipped
    conversations, `summary` its true totals and gates."""
    root = _element(None, "testsuites", name="flowrate")
    totals = dict.fromkeys(COUNTS, 0)
    for metric, stats in summary.metrics.items():
        suite = _element(root, "testsuite", name=metric)
        properties = _element(suite, "properties")
        counts = dict.fromkeys(COUNTS, 0)
        truncated = book.truncated(metric)
        if truncated:
            for gate in (g for g in summary.gates if g.metric == metric):
                case = _element(suite, "testcase", classname="flowrate.gates", name=f"{metric} {gate.gate}")
                counts["tests"] += 1
                if not gate.passed:
                    counts["failures"] += 1
                    _element(case, "failure", gate.describe(), message=gate.describe(), type="gate")
        # the worst rows of a truncated suite stay worst first; a full suite is in input order
        listed = book.listed(metric) if truncated else sorted(book.listed(metric), key=lambda case: case.place)
        elapsed = 0.0
        for item in listed:
            elapsed += item.latency_s
            outcome = _add_case(suite, item)
            if outcome != "passed":
                counts[outcome] += 1
            counts["tests"] += 1
        if truncated:
            rows = book.counts[metric]
            left_out = rows - len(listed)
            counts["tests"] += left_out
            counts["failures"] += stats.failed - sum(item.error is None and item.success is False for item in listed)
            counts["errors"] += stats.errors - sum(item.error is not None for item in listed)
            _property(properties, "truncated", f"{rows} rows: one testcase per gate and the {len(listed)} worst rows")
            _property(properties, "testcases_left_out", str(left_out))
            _element(
                suite,
                "system-out",
                f"{left_out} of {rows} rows are not listed as testcases: only the {len(listed)} worst are."
                f" This suite's tests, failures and errors count every row; its time counts the listed"
                f" testcases only. The results file holds every row.",
            )
        for skipped in book.skipped_cases:
            case = _element(suite, "testcase", classname=skipped.path or "flowrate", name=skipped.id)
            _where(case, skipped.path, skipped.line)
            _element(case, "skipped", message=SKIP_REASONS.get(skipped.reason, skipped.reason))
            counts["skipped"] += 1
            counts["tests"] += 1
        _property(properties, "rows", str(stats.rows))
        _property(properties, "pass_rate", "" if stats.pass_rate is None else f"{stats.pass_rate:.4f}")
        _property(properties, "mean_score", "" if stats.mean_score is None else f"{stats.mean_score:.4f}")
        suite.set("time", f"{elapsed:.3f}")
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", f"{summary.wall_time_s:.3f}")
    ET.indent(root)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def _add_case(suite: ET.Element, item: CaseResult) -> str:
    """One testcase; returns what it counts as: "passed", "failures" or "errors"."""
    case = _element(suite, "testcase", classname=item.path or "flowrate", name=item.id, time=f"{item.latency_s:.3f}")
    _where(case, item.path, item.line)
    if item.error is not None:
        _element(case, "error", item.error, message=item.error, type=item.error_type or "error")
        return "errors"
    if item.success is False:
        issues = "\n".join(f"- {issue}" for issue in item.key_issues)
        message = f"{item.value}: {item.reason or ''}".strip()
        score = "" if item.score is None else f" (score {format_score(item.score, item.threshold)})"
        body = f"{item.value}{score}\n{item.reason or ''}\n{issues}".strip()
        _element(case, "failure", body, message=message, type=str(item.value))
        return "failures"
    return "passed"


def _element(parent: ET.Element | None, tag: str, text: str | None = None, **attributes: str) -> ET.Element:
    """A new element (under `parent`, if given) whose text and attributes are XML-safe."""
    safe = {key: xml_text(value) for key, value in attributes.items()}
    element = ET.Element(tag, safe) if parent is None else ET.SubElement(parent, tag, safe)
    if text is not None:
        element.text = xml_text(text)
    return element


def _where(case: ET.Element, path: str | None, line: int | None) -> None:
    if path:
        case.set("file", xml_text(path))
    if line is not None:
        case.set("line", str(line))


def _property(properties: ET.Element, name: str, value: str) -> None:
    _element(properties, "property", name=name, value=value)
