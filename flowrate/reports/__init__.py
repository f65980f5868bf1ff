"""Reports for people and CI systems: JUnit XML, GitHub's step summary and annotations, and
a self-contained HTML page. They read results (a `ReportBook` and a `RunSummary`) only."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from flowrate.errors import ReportsNotWritten

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
    HTML report is written whole or not at all (`write_whole`). Each report is tried whatever
    became of the others (a full disk may take one and not the next); those that could not be
    written are one `ReportsNotWritten` naming every one of them, with the others' notices."""
    notices: list[str] = []
    failed: list[tuple[str, str]] = []  # (the report, why it was not written)
    if junit:
        from flowrate.reports.junit import write_junit

        if _written("--junit", junit, lambda target: write_junit(target, book, summary), failed):
            notices.append(f"JUnit report: {junit}")
    if html:
        from flowrate.reports.html import write_html

        if _written("--html", html, lambda target: write_html(target, book, summary, transcripts or {}), failed):
            notices.append(f"HTML report: {html}")
    if github:
        from flowrate.reports.github import annotation_lines, append_summary, step_summary

        try:
            target = append_summary(step_summary(book, summary))
        except OSError as error:
            # a write the disk refused fails as the file is closed, with no file name on the error
            named = error.filename or os.environ.get("GITHUB_STEP_SUMMARY")
            where = f" {named}" if named else ""
            failed.append((f"the GitHub step summary{where}", error.strerror or str(error)))
        else:
            if target is not None:
                notices.append(f"GitHub step summary appended to {target}")
        if annotate is not None:
            for line in annotation_lines(book, summary):
                annotate(line)
    if failed:
        raise ReportsNotWritten(_not_written(failed), notices)
    return notices


def _written(option: str, path: str, write: Callable[[Path], None], failed: list[tuple[str, str]]) -> bool:
    """`write_whole(path, write)` for the report of `option`: True when it was written, else
    False with the report and why added to `failed`."""
    from flowrate.results.files import write_whole

    try:
        write_whole(path, write)
    except OSError as error:
        failed.append((f"{option} {path}", error.strerror or str(error)))
        return False
    return True


def _not_written(failed: list[tuple[str, str]]) -> str:
    """The message naming every report of `failed` ((report, why) pairs)."""
    if len(failed) == 1:
        ((report, why),) = failed
        return f"a report could not be written ({report}): {why}"
    return f"{len(failed)} reports could not be written: " + "; ".join(f"{report} ({why})" for report, why in failed)
