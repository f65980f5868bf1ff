"""The HTML pages (the run's report and the trends page) share one scaffolding in
`reports.html`: text from the results, however it reads, is drawn as itself in Chromium and
never stands in for a part of the page."""

import json
import shutil
from datetime import UTC, datetime

import pytest

from flowrate.inputs.conversation import Source
from flowrate.results.rows import EvaluationRow

CHROMIUM = shutil.which("chromium")
# Names that read as the placeholders of a page template.
PLACEHOLDER_METRICS = ["{{data}}", "{{cards}}", "{{charts}}"]


def row(conversation_id, metric, score, day):
    return EvaluationRow(
        id=conversation_id,
        source=Source(path="c.jsonl", line=1),
        metric=metric,
        score=score,
        threshold=0.7,
        success=score >= 0.7,
        model="gpt-4o",
        rubric_version="sha256:x",
        evaluated_at=datetime(2026, 3, day, 9, tzinfo=UTC),
        verdict="mostly" if score >= 0.7 else "minor",
    )


def write_placeholder_rows(path):
    rows = [row(f"c{day}", metric, 0.9 if day == 2 else 0.3, day) for metric in PLACEHOLDER_METRICS for day in (2, 9)]
    path.write_text("".join(item.model_dump_json() + "\n" for item in rows))
    return path


def open_page(playwright, path, errors):
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
    page = browser.new_context(offline=True).new_page()
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(path.as_uri())
    return browser, page


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs Debian's chromium)")
def test_metric_names_that_read_as_template_placeholders_are_drawn_as_themselves_on_both_pages(run_flowrate, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright driver is not installed")
    write_placeholder_rows(tmp_path / "rows.jsonl")
    trends = run_flowrate("trends", "rows.jsonl", "--html", "trends.html", "--json")
    assert trends.returncode == 0, trends.stderr
    report = run_flowrate("report", "rows.jsonl", "--html", "report.html")
    assert report.returncode == 0, report.stderr
    errors = []
    with sync_api.sync_playwright() as playwright:
        browser, page = open_page(playwright, tmp_path / "trends.html", errors)
        assert sorted(page.locator("svg.trend").evaluate_all("svgs => svgs.map(s => s.dataset.metric)")) == sorted(
            PLACEHOLDER_METRICS
        )
        assert sorted(page.locator(".card h3").all_text_contents()) == sorted(PLACEHOLDER_METRICS)
        assert page.evaluate("JSON.parse(document.getElementById('data').textContent)") == json.loads(trends.stdout)
        assert page.title() == "flowrate trends (6 points)"
        browser.close()
        browser, page = open_page(playwright, tmp_path / "report.html", errors)
        assert sorted(page.locator("#totals .card h3").all_text_contents()) == sorted(PLACEHOLDER_METRICS)
        assert page.locator("#results tbody tr").count() == 6
        assert page.locator("#count").text_content() == "6 of 6 rows"
        assert page.title() == "flowrate report"
        browser.close()
    assert errors == []
