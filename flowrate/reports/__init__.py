"""Reports for people and CI systems: JUnit XML, GitHub's step summary and annotations, and
a self-contained HTML page. They read results (a `ReportBook` and a `RunSummary`) only."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: `validate` imports `reports.escape`, and this package with it
    from flowrate.inputs.conversation import ConversationalEvalTestCase
    from flowrate.results.book import ReportBook
    from flowrate.results.summary import RunSummary


def write_reports(
    book: ReportBook,
    summary: RunSummary,
    *,
    junit: str | None = None,
    html: str | None = None,
    github: bool = False,
    transcripts: dict[str, ConversationalEvalTestCase] | None = None,
    annotate: Callable[[str], None] | None = None,
) -> list[str]:
    """Write the reports a run asked for; returns one notice per report written.

    `annotate` takes each GitHub annotation line (None: annotations are not written). A JUnit or
    HTML report is written whole or not at all (`write_whole`); one that cannot be is an
    `OutputError` naming it."""
    notices = []
    if junit:
        from flowrate.reports.junit import write_junit

        _write_report("--junit", junit, lambda target: write_junit(target, book, summary))
        notices.append(f"JUnit report: {junit}")
    if html:
        from flowrate.reports.html import write_html

        _write_report("--html", html, lambda target: write_html(target, book, summary, transcripts or {}))
        notices.append(f"HTML report: {html}")
    if github:
        from flowrate.reports.github import annotation_lines, append_summary, step_summary

        target = append_summary(step_summary(book, summary))
        if target is not None:
            notices.append(f"GitHub step summary appended to {target}")
        if annotate is not None:
            for line in annotation_lines(book, summary):
                annotate(line)
    return notices


def _write_report(option: str, path: str, write: Callable[[Path], None]) -> None:
    """`write_whole(path, write)` for the report of `option`; a failure names the report."""
    from flowrate.errors import OutputError
    from flowrate.results.files import write_whole

    try:
        write_whole(path, write)
    except OSError as error:
        raise OutputError(f"a report could not be written ({option} {path}): {error.strerror or error}") from None
