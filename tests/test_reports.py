"""CI gates and reports (issue 10): JUnit, GitHub's summary and annotations, gates, compare,
and the HTML report in headless Chromium."""

import json
import shutil
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

import pytest

from flowrate.inputs.conversation import Source
from flowrate.results.book import ReportBook
from flowrate.results.rows import EvaluationRow
from flowrate.results.summary import RunSummary
from tests.conftest import turn_record, write_jsonl

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def mixed(tmp_path, judge):
    """Four conversations: two pass, one fails, one is an error; one more is invalid and one excluded."""
    judge.script(
        "MARK-MINOR", {"verdict": "minor", "reason": "loops", "key_issues": ["turn 2: asks again for the order number"]}
    )
    judge.script("MARK-500", {"status": 500})
    records = [
        turn_record("ok1", "hi", "hello"),
        turn_record("ok2", "hi again", "hello again"),
        turn_record("bad", "MARK-MINOR", "x", "y", "z"),
        turn_record("err", "MARK-500", "x"),
        {**turn_record("hr", "q", "a"), "metadata": {"topic": "HR"}},
    ]
    path = write_jsonl(tmp_path / "c.jsonl", records)
    with path.open("a") as handle:
        handle.write('{"id": "broken", "turns": []}\n')
    return path


def judge_mixed(run_flowrate, judge, path, *extra):
    """`flowrate eval` of the mixed conversations: no retries, invalid records skipped."""
    return run_flowrate(
        "eval", path, "--api-base", judge.base_url, "--max-retries", "0", "--skip-invalid", *extra, "-o", "out.jsonl"
    )


def test_junit_parses_back_with_the_right_counts(judge, run_flowrate, tmp_path):
    path = mixed(tmp_path, judge)
    result = judge_mixed(run_flowrate, judge, path, "--exclude", "topic=HR", "--junit", "junit.xml")
    assert result.returncode == 3 and "JUnit report: junit.xml" in result.stderr
    root = ET.parse(tmp_path / "junit.xml").getroot()
    [suite] = root.findall("testsuite")
    assert suite.get("name") == "conversational_flow_rate"
    counts = {key: int(suite.get(key)) for key in ("tests", "failures", "errors", "skipped")}
    assert counts == {"tests": 6, "failures": 1, "errors": 1, "skipped": 2}
    assert {key: root.get(key) for key in counts} == {key: str(value) for key, value in counts.items()}
    cases = {case.get("name"): case for case in suite.findall("testcase")}
    bad = cases["bad"]
    assert bad.get("classname") == str(path) and bad.get("file") == str(path) and bad.get("line") == "3"
    failure = bad.find("failure")
    assert failure.get("type") == "minor" and "turn 2: asks again for the order number" in failure.text
    assert cases["err"].find("error").get("type") == "InternalServerError"
    assert cases["hr"].find("skipped").get("message") == "left out by --exclude"
    assert cases["broken"].find("skipped").get("message") == "invalid input"  # named by its id, though invalid
    assert cases["broken"].get("line") == "6"


def test_junit_past_the_limit_lists_gates_and_the_worst_rows(tmp_path):
    from flowrate.reports.junit import write_junit

    book, summary = ReportBook(full_limit=10, worst=5), RunSummary()
    for n in range(30):
        row = _row(f"c{n:02d}", score=n / 30, threshold=0.5)
        book.add(row)
        summary.add(row, n)
    from flowrate.results.gates import apply_gates
    from flowrate.settings.options import GateSettings

    apply_gates(summary, GateSettings({"min_pass_rate": 0.9}, {}))
    write_junit(tmp_path / "j.xml", book, summary)
    suite = ET.parse(tmp_path / "j.xml").getroot().find("testsuite")
    names = [case.get("name") for case in suite.findall("testcase")]
    assert names == ["conversational_flow_rate min_pass_rate", "c00", "c01", "c02", "c03", "c04"]
    properties = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert properties["truncated"] == "30 rows: one testcase per gate and the 5 worst rows"
    assert properties["testcases_left_out"] == "25"
    # the counts are true: 15 of the 30 rows fail, and the gate
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("31", "16", "0")


def _row(conversation_id, score, threshold=0.7, metric="conversational_flow_rate", path="c.jsonl", line=1, **extra):
    return EvaluationRow(
        id=conversation_id,
        source=Source(path=path, line=line),
        metric=metric,
        verdict=extra.pop("verdict", None),
        score=score,
        threshold=threshold,
        success=score >= threshold,
        model=extra.pop("model", "gpt-4o"),
        rubric_version="sha256:x",
        evaluated_at=datetime.now(UTC),
        **extra,
    )


def test_github_summary_and_annotations_when_the_environment_says_github(judge, run_flowrate, tmp_path, cli_env):
    judge.script("MARK-NONE", {"verdict": "none", "key_issues": ["turn 1: 100% off, ignores: the user\nentirely"]})
    records = [turn_record(f"f{n},x:y", "MARK-NONE", "x") for n in range(12)] + [turn_record("ok", "hi", "hello")]
    write_jsonl(tmp_path / "c.jsonl", records)
    summary_file = tmp_path / "step-summary.md"
    summary_file.write_text("earlier step\n")
    env = dict(cli_env, GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(summary_file))
    result = run_flowrate("eval", "c.jsonl", "--api-base", judge.base_url, "-o", "out.jsonl", env=env)
    assert result.returncode == 1
    text = summary_file.read_text()
    assert text.startswith("earlier step\n## flowrate") and "| `conversational_flow_rate` | 13 | 7.7% |" in text
    assert "### Worst failures" in text and len(text.encode()) < 1024 * 1024
    errors = [line for line in result.stdout.splitlines() if line.startswith("::error ")]
    assert len(errors) == 10
    assert errors[0] == (
        "::error file=c.jsonl,line=1,title=flowrate conversational_flow_rate%3A f0%2Cx%3Ay::"
        "none: turn 1: 100%25 off, ignores: the user%0Aentirely"
    )
    assert result.stdout.splitlines()[-1] == "::notice::2 more failing rows; see the step summary"


def test_the_step_summary_is_cut_under_1_mib():
    from flowrate.reports.github import cut

    text = "".join(f"| line {n} |\n" for n in range(200_000))
    kept = cut(text, 1024 * 1024)
    assert len(kept.encode()) <= 1024 * 1024 and kept.endswith("limited to 1 MiB)_\n")
    assert "| line 0 |" in kept


def test_gates_change_the_exit_code_as_documented(judge, run_flowrate, tmp_path):
    judge.script("MARK-NONE", {"verdict": "none", "key_issues": ["turn 1: ignores"]})
    records = [turn_record(f"ok{n}", f"hi {n}", "hello") for n in range(3)] + [turn_record("bad", "MARK-NONE", "x")]
    write_jsonl(tmp_path / "c.jsonl", records)
    base = ("eval", "c.jsonl", "--api-base", judge.base_url)
    assert run_flowrate(*base).returncode == 1  # by default any failure fails the run
    assert run_flowrate(*base, "--min-pass-rate", "0.75").returncode == 0
    failed = run_flowrate(*base, "--min-pass-rate", "0.9")
    assert failed.returncode == 1
    assert (
        "gate FAILED: conversational_flow_rate: min_pass_rate: 0.7500, at least 0.9 needed (short by 0.1500)"
        in failed.stderr
    )
    assert run_flowrate(*base, "--max-failures", "1").returncode == 0
    too_many = run_flowrate(*base, "--max-failures", "0", "--min-mean-score", "0.7")
    assert too_many.returncode == 1 and "max_failures: 1 failure, at most 0 allowed (1 too many)" in too_many.stderr
    assert "gate passed: conversational_flow_rate: min_mean_score: 0.7500, at least 0.7 needed" in too_many.stderr
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "flowrate.yaml").write_text("gates: {conversational_flow_rate: {min_pass_rate: 0.5}}\n")
    assert run_flowrate(*base).returncode == 0


def test_merge_applies_the_gates(run_flowrate, tmp_path):
    rows = [_row(f"c{n}", score=1.0 if n else 0.0) for n in range(4)]
    (tmp_path / "a.jsonl").write_text("".join(row.model_dump_json() + "\n" for row in rows[:2]))
    (tmp_path / "b.jsonl").write_text("".join(row.model_dump_json() + "\n" for row in rows[2:]))
    assert run_flowrate("merge", "a.jsonl", "b.jsonl", "-o", "m.jsonl").returncode == 1
    assert run_flowrate("merge", "a.jsonl", "b.jsonl", "-o", "m.jsonl", "--min-pass-rate", "0.75").returncode == 0


def _results(path, scores, **extra):
    path.write_text(
        "".join(_row(f"c{n:02d}", score=score, **extra).model_dump_json() + "\n" for n, score in enumerate(scores))
    )
    return path


def test_compare_exits_1_on_a_crafted_regression_and_0_on_noise(run_flowrate, tmp_path):
    import random

    rng = random.Random(7)
    levels = [1.0, 0.9, 0.7, 0.3, 0.0]
    baseline = [rng.choice(levels) for _ in range(60)]
    noisy = [score if rng.random() < 0.9 else rng.choice(levels) for score in baseline]
    worse = [max(0.0, round(score - 0.3, 1)) if n % 2 == 0 else score for n, score in enumerate(baseline)]
    _results(tmp_path / "base.jsonl", baseline)
    _results(tmp_path / "noise.jsonl", noisy)
    _results(tmp_path / "worse.jsonl", worse)
    noise = run_flowrate("compare", "base.jsonl", "noise.jsonl", "--json")
    assert noise.returncode == 0, noise.stderr
    report = json.loads(noise.stdout)
    [metric] = report["metrics"]
    assert metric["paired"] == 60 and metric["ci95"][0] < 0 < metric["ci95"][1] and not metric["significant_drop"]
    regression = run_flowrate("compare", "base.jsonl", "worse.jsonl", "--markdown")
    assert regression.returncode == 1 and "SIGNIFICANT DROP" in regression.stderr
    assert "**significant drop**" in regression.stdout and "**Regressions**" in regression.stdout
    changes = json.loads(run_flowrate("compare", "base.jsonl", "worse.jsonl", "--json").stdout)["changes"]
    assert changes[0]["delta"] < 0 and all(change["delta"] < 0 for change in changes)
    assert run_flowrate("compare", "base.jsonl", "noise.jsonl", "--fail-on-any-regression").returncode == 1
    assert run_flowrate("compare", "base.jsonl", "worse.jsonl", "--tolerance", "0.5").returncode == 0


def test_compare_warns_when_the_judge_changed_and_counts_one_sided_rows(run_flowrate, tmp_path):
    _results(tmp_path / "a.jsonl", [1.0, 0.7, 0.3])
    _results(tmp_path / "b.jsonl", [1.0, 0.7], model="gpt-4o-mini")
    result = run_flowrate("compare", "a.jsonl", "b.jsonl", "--json")
    report = json.loads(result.stdout)
    assert report["metrics"][0]["only_baseline"] == 1 and report["metrics"][0]["only_current"] == 0
    assert "different models (gpt-4o vs gpt-4o-mini)" in result.stderr


@pytest.fixture
def report_page(judge, run_flowrate, tmp_path):
    path = mixed(tmp_path, judge)
    result = judge_mixed(run_flowrate, judge, path, "--html", "report.html")
    assert "HTML report: report.html" in result.stderr, result.stderr
    return tmp_path / "report.html"


def test_the_html_report_is_one_self_contained_file(report_page, run_flowrate, tmp_path):
    page = report_page.read_text()
    assert "http://" not in page and "https://" not in page and "<script src" not in page and "<link" not in page
    again = run_flowrate("report", "out.jsonl", "--inputs", "c.jsonl", "--html", "again.html")
    assert again.returncode == 0 and "HTML report: again.html (5 rows)" in again.stderr
    assert (tmp_path / "again.html").read_text().count('class="chart"') == 1


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs Debian's chromium)")
def test_the_html_report_in_headless_chromium(report_page, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright driver is not installed")
    errors = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--no-first-run",
            ],
        )
        context = browser.new_context(offline=True)
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
        browser.close()
    assert errors == []
    assert (tmp_path / "report.png").stat().st_size > 1000
