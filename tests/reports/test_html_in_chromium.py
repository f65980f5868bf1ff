"""The HTML report in headless Chromium (Debian's, through playwright): its table, filters and
transcript, hostile text drawn literally, and text that reads as the page template's
placeholders drawn as itself."""

import json
import re
from datetime import UTC, datetime

import pytest

from tests.helpers import CHROMIUM, dated_row, turn_record, watched, write_jsonl

HOSTILE = [
    "<!--<script>",
    "</script><script>document.title='owned'</script>",
    "<img src=x onerror=\"document.title='owned'\">",
    "javascript:alert(1)",
    "constructor",
    "__proto__",
]


def _hostile_run(tmp_path, judge):
    """Conversations whose ids, turns and metadata are hostile, judged with hostile reasons and
    key issues; the first conversation's verdict comes last, so completion order is not input order."""
    records = []
    for n, text in enumerate(HOSTILE):
        marker = f"MARK-HOSTILE-{n}"
        step = {
            "verdict": "minor" if n % 2 == 0 else "fully",
            "reason": f"reason {text}",
            "key_issues": [f"turn 1: {text}", f"turn 2: ![x](https://evil.example/x.png) {text}"],
        }
        judge.script(marker, {**step, "delay": 1.0} if n == 0 else step)
        records.append(
            turn_record(text, f"{marker} user says {text}", f"bot says {text}", f"more {text}", f"end {text}")
            | {"metadata": {"topic": text, "note": "<!--<script>"}}
        )
    return write_jsonl(tmp_path / "c.jsonl", records)


# Names that read as the placeholders of a page template.
PLACEHOLDER_METRICS = ["{{data}}", "{{cards}}", "{{charts}}"]


def row(conversation_id, metric, score, day):
    verdict = "mostly" if score >= 0.7 else "minor"
    return dated_row(conversation_id, metric, score, datetime(2026, 3, day, 9, tzinfo=UTC), verdict=verdict)


def write_placeholder_rows(path):
    rows = [row(f"c{day}", metric, 0.9 if day == 2 else 0.3, day) for metric in PLACEHOLDER_METRICS for day in (2, 9)]
    path.write_text("".join(item.model_dump_json() + "\n" for item in rows))
    return path


def open_page(chromium, path, errors):
    context = chromium.new_context(offline=True)
    page = context.new_page()
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(path.as_uri())
    return context, page


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs Debian's chromium)")
def test_the_html_report_in_headless_chromium(report_page, chromium, tmp_path):
    errors = []
    context = chromium.new_context(offline=True)
    context.route("http*://**", lambda route: route.abort())
    page = context.new_page()
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(report_page.as_uri())
    assert page.locator("svg.chart").count() == 1
    assert page.locator("#results tbody tr").count() == 5
    page.select_option("#status", "fail")
    assert page.locator("#results tbody tr").count() == 1
    page.locator("#results tbody tr").first.click()
    issue = page.locator('#transcript .turn[data-turn="2"] .issue')
    assert issue.inner_text() == "conversational_flow_rate: turn 2: asks again for the order number"
    page.locator("#results th", has_text="score").click()
    page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    context.close()
    assert errors == []
    assert (tmp_path / "report.png").stat().st_size > 1000


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs Debian's chromium)")
def test_hostile_text_in_every_field_is_drawn_literally_in_the_html_report(judge, run_flowrate, chromium, tmp_path):
    path = _hostile_run(tmp_path, judge)
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--html", "report.html")
    assert result.returncode == 1, result.stderr
    errors = []
    context = chromium.new_context(offline=True)
    context.route("http*://**", lambda route: route.abort())
    page = watched(context.new_page(), errors)
    page.goto((tmp_path / "report.html").as_uri())
    rows = page.locator("#results tbody tr")
    assert rows.count() == len(HOSTILE)
    # input order (the first conversation was judged last), each id as its literal text
    assert [rows.nth(n).locator("td").first.inner_text() for n in range(len(HOSTILE))] == HOSTILE
    for n, text in enumerate(HOSTILE):
        rows.nth(n).click()
        assert page.locator("#transcript h2").inner_text() == text
        turns = page.locator("#transcript .turn")
        assert turns.count() == 2
        assert turns.first.locator(".user").inner_text() == f"user: MARK-HOSTILE-{n} user says {text}"
        assert turns.first.locator(".assistant").inner_text() == f"assistant: bot says {text}"
        if n % 2 == 0:  # the failing ones carry their key issues at turns 1 and 2
            issues = page.locator("#transcript .issue")
            assert issues.first.inner_text() == f"conversational_flow_rate: turn 1: {text}"
    cost = rows.first.locator("td").nth(5).inner_text()
    assert re.fullmatch(r"\d\.\d{1,6}", cost), cost  # money, not 0.006542500000000001
    assert page.locator("img").count() == 0 and page.locator("script").count() == 2
    assert page.title() == "flowrate report"
    context.close()
    assert errors == []


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs Debian's chromium)")
def test_metric_names_that_read_as_template_placeholders_are_drawn_as_themselves_on_both_pages(
    run_flowrate, chromium, tmp_path
):
    write_placeholder_rows(tmp_path / "rows.jsonl")
    trends = run_flowrate("trends", "rows.jsonl", "--html", "trends.html", "--json")
    assert trends.returncode == 0, trends.stderr
    report = run_flowrate("report", "rows.jsonl", "--html", "report.html")
    assert report.returncode == 0, report.stderr
    errors = []
    context, page = open_page(chromium, tmp_path / "trends.html", errors)
    assert sorted(page.locator("svg.trend").evaluate_all("svgs => svgs.map(s => s.dataset.metric)")) == sorted(
        PLACEHOLDER_METRICS
    )
    assert sorted(page.locator(".card h3").all_text_contents()) == sorted(PLACEHOLDER_METRICS)
    assert page.evaluate("JSON.parse(document.getElementById('data').textContent)") == json.loads(trends.stdout)
    assert page.title() == "flowrate trends (6 points)"
    context.close()
    context, page = open_page(chromium, tmp_path / "report.html", errors)
    assert sorted(page.locator("#totals .card h3").all_text_contents()) == sorted(PLACEHOLDER_METRICS)
    assert page.locator("#results tbody tr").count() == 6
    assert page.locator("#count").text_content() == "6 of 6 rows"
    assert page.title() == "flowrate report"
    context.close()
    assert errors == []


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs Debian's chromium)")
def test_bidi_controls_and_line_separators_are_drawn_escaped_in_the_html_report(
    judge, run_flowrate, chromium, tmp_path
):
    odd = "h5-\u202eevil\u202c\x1b"
    judge.script("MARK-BIDI", {"verdict": "minor", "key_issues": ["turn 1: asks\u2028again \u2066twice\u2069"]})
    records = [turn_record(odd, "MARK-BIDI user \u200fsays", "bot\u2029says \u061cno")]
    path = write_jsonl(tmp_path / "c.jsonl", records)
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--html", "report.html")
    assert result.returncode == 1, result.stderr
    shown_id, shown_issue = "h5-\\u202eevil\\u202c\\x1b", "turn 1: asks\\u2028again \\u2066twice\\u2069"
    errors = []
    context = chromium.new_context(offline=True)
    page = watched(context.new_page(), errors)
    page.goto((tmp_path / "report.html").as_uri())
    first = page.locator("#results tbody tr").first
    assert first.locator("td").first.inner_text() == shown_id
    # the label is the analysis's, its white space (U+2028 too) made one space
    assert page.locator("#top-issues td.label").first.inner_text() == "asks again \\u2066twice\\u2069"
    assert page.locator("#top-issues a.example").first.inner_text() == shown_id
    first.click()
    assert page.locator("#transcript h2").inner_text() == shown_id
    turn = page.locator("#transcript .turn").first
    assert turn.locator(".user").inner_text() == "user: MARK-BIDI user \\u200fsays"
    assert turn.locator(".assistant").inner_text() == "assistant: bot\\u2029says \\u061cno"
    assert turn.locator(".issue").inner_text() == f"conversational_flow_rate: {shown_issue}"
    page.locator("#top-issues a.example").first.click()  # the link names the id exactly
    assert page.locator("#transcript .turn").count() == 1
    context.close()
    assert errors == []
