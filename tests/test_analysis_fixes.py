"""The analysis commands after issue 14: trends, calibrate, compare, merge, cache stats and
chat dates, each fix with the test that failed before it."""

import json
import shutil
import subprocess
from datetime import UTC, datetime

import pytest

from flowrate.inputs.conversation import ConversationalEvalTestCase, Source, chat_date
from flowrate.results.rows import EvaluationRow
from tests.conftest import FLOWRATE, read_rows, turn_record, write_jsonl

CHROMIUM = shutil.which("chromium")
HOSTILE_METRICS = ["<!--<script>", "</script><script>alert(1)</script>", "a&amp;<b>x</b>"]


def row(conversation_id, metric, score, **extra):
    return EvaluationRow(
        id=conversation_id,
        source=Source(path="c.jsonl", line=1),
        metric=metric,
        score=score,
        threshold=0.7,
        success=None if score is None else score >= 0.7,
        model=extra.pop("model", "gpt-4o"),
        rubric_version="sha256:x",
        evaluated_at=extra.pop("evaluated_at", datetime(2026, 3, 2, 9, tzinfo=UTC)),
        **extra,
    )


def write_rows(path, rows):
    path.write_text("".join(item.model_dump_json() + "\n" for item in rows))
    return path


def label(conversation_id, metric, score, day="2026-03-01"):
    return {"conversation_id": conversation_id, "metric": metric, "score": score, "labeled_at": day}


def two_metric_rows():
    """Metrics a and b over two ISO weeks (10 and 11)."""
    return [
        row("c1", "a", 0.5),
        row("c2", "a", 0.9),
        row("c1", "b", 0.3),
        row("c3", "a", 1.0, evaluated_at=datetime(2026, 3, 9, 9, tzinfo=UTC)),
        row("c3", "b", 0.7, evaluated_at=datetime(2026, 3, 9, 9, tzinfo=UTC)),
    ]


def open_page(sync_api, path, errors):
    playwright = sync_api.sync_playwright().start()
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
    page = browser.new_context(offline=True).new_page()
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("dialog", lambda dialog: (errors.append(f"dialog: {dialog.message}"), dialog.dismiss()))
    page.goto(path.as_uri())
    return playwright, browser, page


# -- trends --------------------------------------------------------------------------------------
def test_trends_metric_keeps_only_that_metric_from_a_history_and_from_results(run_flowrate, tmp_path):
    write_rows(tmp_path / "rows.jsonl", two_metric_rows())
    assert run_flowrate("history", "import", "rows.jsonl", "--history", "h.duckdb").returncode == 0
    for source in (["--history", "h.duckdb"], ["rows.jsonl"]):
        result = run_flowrate("trends", *source, "--metric", "a", "--json")
        assert result.returncode == 0, result.stderr
        items = json.loads(result.stdout)
        assert [(i["period"], i["metric"], i["conversations"], i["mean_score"]) for i in items] == [
            ("2026-W10", "a", 2, 0.7),
            ("2026-W11", "a", 1, 1.0),
        ]
    labeled = write_jsonl(tmp_path / "labels.jsonl", [label("c1", "b", 0.5), label("c1", "a", 0.6)])
    with_labels = run_flowrate("trends", "rows.jsonl", "--metric", "b", "--labels", labeled, "--json")
    assert with_labels.returncode == 0, with_labels.stderr
    assert [(i["metric"], i["mean_label"]) for i in json.loads(with_labels.stdout)] == [("b", 0.5), ("b", None)]


def test_trends_on_a_history_that_does_not_exist_is_exit_2_and_creates_nothing(run_flowrate, tmp_path):
    for command in (["trends", "--history", "typo.duckdb"], ["calibrate", "--history", "typo.duckdb"]):
        result = run_flowrate(*command)
        assert result.returncode == 2, result.stderr
        assert "typo.duckdb" in result.stderr and "does not exist" in result.stderr
        assert "Traceback" not in result.stderr
        assert not (tmp_path / "typo.duckdb").exists()


def test_trends_by_chat_date_says_how_many_rows_have_no_chat_date(run_flowrate, tmp_path):
    rows = [row("c1", "a", 0.5, chat_date="2026-03-01"), row("c2", "a", 0.9), row("c3", "a", 0.1), row("c3", "b", 1)]
    write_rows(tmp_path / "rows.jsonl", rows)
    result = run_flowrate("trends", "rows.jsonl", "--date", "chat", "--json")
    assert result.returncode == 0, result.stderr
    assert [(i["metric"], i["conversations"]) for i in json.loads(result.stdout)] == [("a", 1)]
    assert "3 row(s) have no chat date and are left out" in result.stderr
    only_a = run_flowrate("trends", "rows.jsonl", "--date", "chat", "--metric", "a")
    assert "2 row(s) have no chat date and are left out" in only_a.stderr
    by_evaluation = run_flowrate("trends", "rows.jsonl")
    assert "no chat date" not in by_evaluation.stderr


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs Debian's chromium)")
def test_the_trends_page_draws_every_point_of_hostile_metric_names_in_chromium(run_flowrate, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright driver is not installed")
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
    playwright, browser, page = open_page(sync_api, tmp_path / "trends.html", errors)
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
        browser.close()
        playwright.stop()
    assert errors == []


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs Debian's chromium)")
def test_a_single_period_chart_still_draws_the_judge_score_in_chromium(run_flowrate, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright driver is not installed")
    write_rows(tmp_path / "rows.jsonl", [row("c1", "a", 0.5), row("c2", "a", 0.9)])
    assert run_flowrate("trends", "rows.jsonl", "--html", "one.html").returncode == 0
    errors = []
    playwright, browser, page = open_page(sync_api, tmp_path / "one.html", errors)
    try:
        point = page.locator("svg.trend circle.mean-point")
        assert point.count() == 1
        box = point.bounding_box()
        assert box is not None and box["width"] > 0 and box["height"] > 0
        assert point.locator("title").text_content() == "2026-W10: mean judge score 0.7"
    finally:
        browser.close()
        playwright.stop()
    assert errors == []


# -- cache stats ---------------------------------------------------------------------------------
def test_cache_stats_on_a_directory_that_does_not_exist_is_exit_2_and_creates_nothing(run_flowrate, tmp_path):
    missing = tmp_path / "nonexistent"
    result = run_flowrate("cache", "stats", "--cache-dir", missing)
    assert result.returncode == 2 and str(missing) in result.stderr and "does not exist" in result.stderr
    assert not missing.exists()
    (tmp_path / "empty").mkdir()
    empty = run_flowrate("cache", "stats", "--cache-dir", tmp_path / "empty", "--json")
    assert empty.returncode == 0 and json.loads(empty.stdout)["entries"] == 0
    assert list((tmp_path / "empty").iterdir()) == []


# -- compare -------------------------------------------------------------------------------------
def test_compare_markdown_renders_a_hostile_id_as_text(run_flowrate, tmp_path):
    from markdown_it import MarkdownIt

    hostile = "x`\n\n### injected heading\n\n<img src=https://evil.example/p.png>\n`![i](https://evil.example/i.png)"
    before = [row(hostile, "a|b`<i>", 0.9, verdict="mostly", model="m`\n# model heading")]
    after = [row(hostile, "a|b`<i>", 0.3, verdict="minor<img src=x>")]
    write_rows(tmp_path / "before.jsonl", before)
    write_rows(tmp_path / "after.jsonl", after)
    result = run_flowrate("compare", "before.jsonl", "after.jsonl", "--markdown")
    assert result.returncode == 0, result.stderr
    tokens = MarkdownIt("commonmark").enable("table").parse(result.stdout)
    flat = [token for token in tokens] + [child for token in tokens for child in token.children or []]
    headings = [tokens[i + 1].content for i, token in enumerate(tokens) if token.type == "heading_open"]
    assert headings == ["flowrate: compared with the baseline"]
    assert [token.type for token in flat if token.type in ("image", "html_inline", "html_block", "link_open")] == []
    text = "".join(token.content for token in flat if token.type == "text")
    assert "### injected heading" in text and "<img src=https://evil.example/p.png>" in text
    assert "minor<img src=x>" in text and "# model heading" in text


def test_compare_markdown_says_how_many_regressions_it_leaves_out(run_flowrate, tmp_path):
    write_rows(tmp_path / "before.jsonl", [row(f"c{n:02d}", "a", 0.9, verdict="mostly") for n in range(25)])
    write_rows(tmp_path / "after.jsonl", [row(f"c{n:02d}", "a", 0.3, verdict="minor") for n in range(25)])
    result = run_flowrate("compare", "before.jsonl", "after.jsonl", "--markdown")
    listed = [line for line in result.stdout.splitlines() if line.startswith("- c")]
    assert len(listed) == 20 and "- and 5 more (`flowrate compare --json` lists every change)" in result.stdout


def test_compare_with_an_empty_baseline_is_exit_2_not_a_pass(run_flowrate, tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    write_rows(tmp_path / "current.jsonl", two_metric_rows())
    result = run_flowrate("compare", "empty.jsonl", "current.jsonl")
    assert result.returncode == 2, result.stderr
    assert "empty.jsonl: no result rows; nothing to compare" in result.stderr
    assert "different models" not in result.stderr and "Traceback" not in result.stderr
    write_rows(tmp_path / "other.jsonl", [row("z1", "a", 0.5)])
    disjoint = run_flowrate("compare", "other.jsonl", "current.jsonl", "--json")
    assert disjoint.returncode == 2 and disjoint.stdout == ""
    assert "no conversation was judged in both" in disjoint.stderr


def test_compare_into_a_closed_pipe_exits_141_every_time(tmp_path, cli_env):
    key = "k" * 400
    write_rows(tmp_path / "before.jsonl", [row(f"{key}{n}", "a", 0.9, verdict="mostly") for n in range(1500)])
    write_rows(tmp_path / "after.jsonl", [row(f"{key}{n}", "a", 0.3, verdict="minor") for n in range(1500)])
    script = f'"{FLOWRATE}" compare before.jsonl after.jsonl --json | head -c1 >/dev/null; echo "${{PIPESTATUS[0]}}"'
    buffered = {key: value for key, value in cli_env.items() if key != "PYTHONUNBUFFERED"}
    for env in (buffered, buffered, {**buffered, "PYTHONUNBUFFERED": "1"}, {**buffered, "PYTHONUNBUFFERED": "1"}):
        done = subprocess.run(
            ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.stdout.strip() == "141", done.stderr[-2000:]
        assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr


# -- calibrate -----------------------------------------------------------------------------------
def test_calibrate_results_with_a_history_reads_the_history_labels(run_flowrate, tmp_path):
    write_rows(tmp_path / "rows.jsonl", two_metric_rows())
    assert run_flowrate("history", "import", "rows.jsonl", "--history", "h.duckdb").returncode == 0
    write_jsonl(tmp_path / "labels.jsonl", [label("c1", "a", 0.2), label("c2", "a", 0.4)])
    assert run_flowrate("labels", "import", "labels.jsonl", "--history", "h.duckdb").returncode == 0
    result = run_flowrate("calibrate", "rows.jsonl", "--history", "h.duckdb", "--as-of", "2026-06-30", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["metrics"]["a"]["labels"] == 2
    trends = run_flowrate("trends", "rows.jsonl", "--history", "h.duckdb", "--metric", "a", "--json")
    assert json.loads(trends.stdout)[0]["mean_label"] == 0.3


def test_calibrate_refuses_an_adjusted_output_that_is_one_of_its_inputs(run_flowrate, tmp_path):
    rows = write_rows(tmp_path / "rows.jsonl", two_metric_rows())
    labels = write_jsonl(tmp_path / "labels.jsonl", [label("c1", "a", 0.2)])
    assert run_flowrate("history", "import", "rows.jsonl", "--history", "h.duckdb").returncode == 0
    before = {path: path.read_bytes() for path in (rows, labels, tmp_path / "h.duckdb")}
    for given, target in (
        (["rows.jsonl", "--labels", "labels.jsonl"], "./rows.jsonl"),
        (["rows.jsonl", "--labels", "labels.jsonl"], "labels.jsonl"),
        (["--history", "h.duckdb"], str(tmp_path / "h.duckdb")),
    ):
        result = run_flowrate("calibrate", *given, "--adjusted-output", target)
        assert result.returncode == 2, result.stderr
        assert f"--adjusted-output {target}: is also an input" in result.stderr
    assert {path: path.read_bytes() for path in before} == before


# -- merge ---------------------------------------------------------------------------------------
def test_merge_reads_a_file_named_twice_once(run_flowrate, tmp_path):
    write_rows(tmp_path / "shard.jsonl", two_metric_rows())
    result = run_flowrate("merge", "shard.jsonl", "./shard.jsonl", tmp_path / "shard.jsonl", "-o", "merged.jsonl")
    assert result.returncode == 1, result.stderr  # two rows fail their threshold: the whole run's exit code
    assert "more than one file" not in result.stderr
    assert len(read_rows(tmp_path / "merged.jsonl")) == 5


# -- chat dates ----------------------------------------------------------------------------------
def case(**metadata):
    return ConversationalEvalTestCase(turns=[{"input": "hi", "actual_output": "hello"}], metadata=metadata)


def test_chat_dates_read_unix_seconds_and_milliseconds_given_as_numbers_or_strings():
    assert chat_date(case(ts="1717243200"), "ts") == "2024-06-01"
    assert chat_date(case(ts=" 1717243200.5 "), "ts") == "2024-06-01"
    assert chat_date(case(ts="1717243200000"), "ts") == "2024-06-01"  # above 1e11: milliseconds
    assert chat_date(case(ts=1717243200000), "ts") == "2024-06-01"
    assert chat_date(case(ts=1717243200), "ts") == "2024-06-01"
    assert chat_date(case(timestamp="2024-06-01T23:30:00-02:00")) == "2024-06-01"  # the date as written
    assert chat_date(case(chat_date="20240601")) == "2024-06-01"
    problems = []
    assert chat_date(case(ts="yesterday"), "ts", problems) is None
    assert chat_date(case(ts=True), "ts", problems) is None
    assert chat_date(case(ts="1e400"), "ts", problems) is None
    assert chat_date(case(other="x"), "ts", problems) is None  # no date at all is not a problem
    assert problems == [
        "metadata.ts: 'yesterday' is not a date",
        "metadata.ts: True is not a date",
        "metadata.ts: '1e400' is not a date",
    ]


def test_eval_counts_unreadable_chat_dates_and_names_the_first(run_flowrate, tmp_path):
    records = [
        turn_record("good", "hi", "hello", metadata={"ts": "1717243200"}),
        turn_record("none", "hi", "hello"),
        turn_record("bad1", "hi", "hello", metadata={"ts": "last tuesday"}),
        turn_record("bad2", "hi", "hello", metadata={"ts": "2024-13-45"}),
    ]
    path = write_jsonl(tmp_path / "c.jsonl", records)
    result = run_flowrate("eval", path, "--metric", "repetition_check", "--date-field", "ts", "-o", "out.jsonl")
    assert result.returncode == 0, result.stderr
    assert (
        f"2 conversation(s) have a chat date that cannot be read (first: {path}:3 id 'bad1':"
        " metadata.ts: 'last tuesday' is not a date); their rows have chat_date null"
    ) in result.stderr
    assert {item["id"]: item["chat_date"] for item in read_rows(tmp_path / "out.jsonl")} == {
        "good": "2024-06-01",
        "none": None,
        "bad1": None,
        "bad2": None,
    }
