"""Benchmark 6: the HTML report of 10,000 conversations: its size, and how long headless
Chromium takes to open it and draw the table. Target: a few MB, open in a few seconds.

python bench/report_size.py [--n 10000]
"""

import argparse
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from common import write_conversations

from flowrate.inputs.conversation import Source
from flowrate.inputs.files import load_transcripts
from flowrate.reports.html import write_html
from flowrate.results.book import ReportBook
from flowrate.results.rows import EvaluationRow
from flowrate.results.summary import RunSummary

LEVELS = [("fully", 1.0), ("mostly", 0.9), ("partial", 0.7), ("minor", 0.3), ("none", 0.0)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=10_000)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        inputs = write_conversations(Path(scratch) / "c.jsonl", options.n)
        book, summary = ReportBook(), RunSummary()
        for n in range(options.n):
            verdict, score = LEVELS[n % len(LEVELS)]
            row = EvaluationRow(
                id=f"bench-{n}",
                source=Source(path=str(inputs), line=n + 1),
                metric="conversational_flow_rate",
                verdict=verdict,
                score=score,
                threshold=0.7,
                success=score >= 0.7,
                reason="The assistant answers the question and closes the case.",
                key_issues=[] if score >= 0.7 else ["turn 2: asks again for the reference given in turn 1"],
                model="gpt-4o",
                rubric_version="sha256:x",
                evaluated_at=datetime.now(UTC),
                cost_usd=0.0012,
            )
            book.add(row)
            summary.add(row, n)
        started = time.perf_counter()
        page = Path(scratch) / "report.html"
        write_html(page, book, summary, load_transcripts([str(inputs)], {f"bench-{n}" for n in range(options.n)}))
        written = time.perf_counter() - started
        size_mb = page.stat().st_size / 1e6
        print(f"{options.n} conversations: page {size_mb:.2f} MB, written in {written:.2f} s")
        chromium = shutil.which("chromium")
        if chromium is None:
            print("chromium not found: open time not measured")
            return
        from playwright.sync_api import sync_playwright

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
            tab = browser.new_page()
            started = time.perf_counter()
            tab.goto(page.as_uri())
            tab.wait_for_function(f"document.querySelectorAll('#results tbody tr').length === {options.n}")
            opened = time.perf_counter() - started
            started = time.perf_counter()
            tab.select_option("#status", "fail")
            filtered = time.perf_counter() - started
            browser.close()
        print(f"opened with all {options.n} rows drawn in {opened:.2f} s; filtering to failures {filtered:.2f} s")


if __name__ == "__main__":
    main()
