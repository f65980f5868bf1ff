"""JUnit XML, as GitHub, GitLab and Jenkins read it, written with the standard library.

One `testsuite` per metric; one `testcase` per conversation (`classname` the source file,
`file` and `line` attributes); `failure` for a row below its threshold, `error` for a row
the judge could not judge, `skipped` for conversations the run left out. Past `full_limit`
rows of a metric, the suite holds one testcase per gate and the worst rows, and says so
in its properties: CI systems choke on huge reports.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from flowrate.results import CaseResult, ReportBook, RunSummary

SKIP_REASONS = {
    "sample": "left out by --sample",
    "min_words": "left out by --min-words",
    "only": "left out by --only",
    "exclude": "left out by --exclude",
    "limit": "left out by --limit",
    "invalid": "invalid input",
    "budget": "not judged: the --max-cost budget was spent",
    "unreachable": "not judged: the judge could not be reached",
}


def write_junit(path: str | Path, book: ReportBook, summary: RunSummary) -> None:
    """Write the JUnit file for a run: `book` holds its rows and skipped conversations."""
    root = ET.Element("testsuites", name="flowrate")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for metric, stats in summary.metrics.items():
        suite = ET.SubElement(root, "testsuite", name=metric)
        properties = ET.SubElement(suite, "properties")
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        elapsed = 0.0
        if book.truncated(metric):
            shown = book.listed(metric)
            _property(
                properties,
                "truncated",
                f"{book.counts[metric]} rows: one testcase per gate and the {len(shown)} worst rows",
            )
            for gate in (g for g in summary.gates if g.metric == metric):
                case = ET.SubElement(suite, "testcase", classname="flowrate.gates", name=f"{metric} {gate.gate}")
                counts["tests"] += 1
                if not gate.passed:
                    counts["failures"] += 1
                    ET.SubElement(case, "failure", message=gate.describe(), type="gate").text = gate.describe()
        for item in book.listed(metric):
            elapsed += item.latency_s
            outcome = _add_case(suite, item)
            if outcome != "passed":
                counts[outcome] += 1
            counts["tests"] += 1
        for skipped in book.skipped:
            case = ET.SubElement(suite, "testcase", classname=skipped.path or "flowrate", name=skipped.id)
            _where(case, skipped.path, skipped.line)
            ET.SubElement(case, "skipped", message=SKIP_REASONS.get(skipped.reason, skipped.reason))
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
    case = ET.SubElement(
        suite, "testcase", classname=item.path or "flowrate", name=item.id, time=f"{item.latency_s:.3f}"
    )
    _where(case, item.path, item.line)
    if item.error is not None:
        ET.SubElement(case, "error", message=_clean(item.error), type=item.error_type or "error").text = _clean(
            item.error
        )
        return "errors"
    if item.success is False:
        issues = "\n".join(f"- {issue}" for issue in item.key_issues)
        message = f"{item.value}: {item.reason or ''}".strip()
        body = f"{item.value} (score {item.score})\n{item.reason or ''}\n{issues}".strip()
        ET.SubElement(case, "failure", message=_clean(message), type=str(item.value)).text = _clean(body)
        return "failures"
    return "passed"


def _where(case: ET.Element, path: str | None, line: int | None) -> None:
    if path:
        case.set("file", path)
    if line is not None:
        case.set("line", str(line))


def _property(properties: ET.Element, name: str, value: str) -> None:
    ET.SubElement(properties, "property", name=name, value=value)


def _clean(text: str) -> str:
    """XML 1.0 has no place for most control characters: they are dropped."""
    return "".join(ch for ch in text if ch in "\t\n\r" or ord(ch) >= 0x20)
