"""The trends page in headless Chromium: a chart per metric, every point of hostile metric names,
and a single period's point."""

import json
from datetime import UTC, datetime

import pytest

from tests.helpers import CHROMIUM, watched, write_jsonl, write_rows
from tests.helpers import dated_rows as _dated_rows
from tests.helpers import march_label as label
from tests.helpers import march_row as row

HOSTILE_METRICS = ["<!--<script>", "</script><script>alert(1)</script>", "a&amp;<b>x</b>"]


def open_page(chromium, path, errors):
    context = chromium.new_context(offline=True)
    page = watched(context.new_page(), errors)
    page.goto(path.as_uri())
    return context, page


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs Debian's chromium)")
def test_the_trends_page_in_headless_chromium(run_flowrate, chromium, tmp_path):
    rows = _dated_rows() + [
        row("v0", "coherence", 0.8, rating=4, scale=5, evaluated_at=datetime(2026, 3, 2, tzinfo=UTC))
    ]
    (tmp_path / "rows.jsonl").write_text("".join(item.model_dump_json() + "\n" for item in rows))
    assert run_flowrate("trends", "rows.jsonl", "--html", "trends.html").returncode == 0
    errors = []
    context = chromium.new_context(offline=True)
    page = context.new_page()
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto((tmp_path / "trends.html").as_uri())
    assert page.locator("svg.trend").count() == 2
    assert page.locator('svg.trend[data-metric="conversational_flow_rate"] rect.volume').count() == 3
    page.screenshot(path=str(tmp_path / "trends.png"), full_page=True)
    context.close()
    assert errors == [] and (tmp_path / "trends.png").stat().st_size > 1000


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs Debian's chromium)")
def test_the_trends_page_draws_every_point_of_hostile_metric_names_in_chromium(run_flowrate, chromium, tmp_path):
    rows, labels = [], []
    for number, name in enumerate(HOSTILE_METRICS):
        for day in (2, 9, 16):  # three ISO weeks
            key = f"{name} c{day}"
            rows.append(row(key, name, 0.25 * (number + 1), evaluated_at=datetime(2026, 3, day, tzinfo=UTC)))
            labels.append(label(key, name, 0.5))
    write_rows(tmp_path / "rows.jsonl", rows)
    write_jsonl(tmp_path / "labels.jsonl", labels)
    result = run_flowrate("trends", "rows.jsonl", "--labels", "labels.jsonl", "--html", "trends.html", "--json")
    assert result.returncode == 0, result.stderr
    items = json.loads(result.stdout)
    assert len(items) == 9
    errors = []
    context, page = open_page(chromium, tmp_path / "trends.html", errors)
    try:
        drawn = [svg.get_attribute("data-metric") for svg in page.locator("svg.trend").all()]
        assert sorted(drawn) == sorted(HOSTILE_METRICS)
        assert page.locator("svg.trend circle.mean-point").count() == 9
        assert page.locator("svg.trend circle.human").count() == 9
        embedded = page.evaluate("JSON.parse(document.getElementById('data').textContent)")
        assert embedded == items
        assert page.title() == "flowrate trends (9 points)"
        assert page.locator("script").count() == 2
    finally:
        context.close()
    assert errors == []


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs Debian's chromium)")
def test_a_single_period_chart_still_draws_the_judge_score_in_chromium(run_flowrate, chromium, tmp_path):
    write_rows(tmp_path / "rows.jsonl", [row("c1", "a", 0.5), row("c2", "a", 0.9)])
    assert run_flowrate("trends", "rows.jsonl", "--html", "one.html").returncode == 0
    errors = []
    context, page = open_page(chromium, tmp_path / "one.html", errors)
    try:
        point = page.locator("svg.trend circle.mean-point")
        assert point.count() == 1
        box = point.bounding_box()
        assert box is not None and box["width"] > 0 and box["height"] > 0
        assert point.locator("title").text_content() == "2026-W10: mean judge score 0.7"
    finally:
        context.close()
    assert errors == []
