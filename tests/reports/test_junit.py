"""JUnit XML, read back through ElementTree and minidom: the counts, past the limit, failing
scores, and ids with control characters."""

import xml.dom.minidom
import xml.etree.ElementTree as ET

from flowrate.results.book import ReportBook
from flowrate.results.summary import RunSummary
from tests.helpers import evaluation_row as _row
from tests.helpers import judge_mixed, mixed, turn_record, write_jsonl

CONTROL_IDS = ["\u0001start", "\x1b[31mred\x1b[0m", "form\x0cfeed", "nul\x00 and \ufffe", "ok"]


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
    from flowrate.settings.groups import GateOptions

    apply_gates(summary, GateOptions(min_pass_rate=0.9))
    write_junit(tmp_path / "j.xml", book, summary)
    suite = ET.parse(tmp_path / "j.xml").getroot().find("testsuite")
    names = [case.get("name") for case in suite.findall("testcase")]
    assert names == ["conversational_flow_rate min_pass_rate", "c00", "c01", "c02", "c03", "c04"]
    properties = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert properties["truncated"] == "30 rows: one testcase per gate and the 5 worst rows"
    assert properties["testcases_left_out"] == "25"
    # the counts are true: 15 of the 30 rows fail, and the gate
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("31", "16", "0")


def test_past_10000_rows_the_reports_give_true_counts_and_say_what_they_leave_out(tmp_path):
    from flowrate.reports.github import annotation_lines, step_summary
    from flowrate.reports.junit import write_junit
    from flowrate.results.gates import apply_gates
    from flowrate.settings.groups import GateOptions

    book, summary = ReportBook(), RunSummary()
    for n in range(20_000):
        row = _row(f"c{n:05d}", score=1.0 if n % 5 < 3 else 0.3, line=n + 1)  # a 60 % pass rate
        book.add(row)
        summary.add(row, n)
    apply_gates(summary, GateOptions(min_pass_rate=0.9))
    write_junit(tmp_path / "j.xml", book, summary)
    root = ET.parse(tmp_path / "j.xml").getroot()
    suite = root.find("testsuite")
    counts = {key: suite.get(key) for key in ("tests", "failures", "errors", "skipped")}
    assert counts == {"tests": "20001", "failures": "8001", "errors": "0", "skipped": "0"}  # rows and the gate
    assert {key: root.get(key) for key in counts} == counts
    assert len(suite.findall("testcase")) == 1001
    properties = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert properties["testcases_left_out"] == "19000"
    assert "19000 of 20000 rows are not listed" in suite.find("system-out").text
    lines = annotation_lines(book, summary)
    assert len(lines) == 11 and lines[-1] == "::notice::7990 more failing rows; see the step summary"
    assert "### Worst failures (20 of 8000)" in step_summary(book, summary)


def test_failing_scores_show_below_the_threshold_in_junit_and_github(tmp_path):
    from flowrate.reports.github import step_summary
    from flowrate.reports.junit import write_junit

    book, summary = ReportBook(), RunSummary()
    row = _row("u", 0.6999, threshold=0.7, metric="user_satisfaction", reason="close")
    book.add(row)
    summary.add(row)
    write_junit(tmp_path / "j.xml", book, summary)
    failure = ET.parse(tmp_path / "j.xml").getroot().find("testsuite/testcase/failure")
    assert failure.get("message") == "0.6999: close" and "(score 0.6999)" in failure.text
    assert "| u | `user_satisfaction` | 0\\.6999 | close |" in step_summary(book, summary)


def test_an_id_with_control_characters_still_gives_well_formed_junit(judge, run_flowrate, tmp_path):
    judge.script("MARK-CTL", {"verdict": "minor", "reason": "bad\x08\x1b[1m", "key_issues": ["turn 1: \x01x\x7f"]})
    records = [turn_record(key, "MARK-CTL", "x") for key in CONTROL_IDS]
    path = write_jsonl(tmp_path / "c\x01.jsonl", records)
    with path.open("a") as handle:
        handle.write('{"id": "\\u0002broken", "turns": []}\n')
    result = run_flowrate(
        "eval", path.name, "--api-base", judge.base_url, "--skip-invalid", "-o", "out.jsonl", "--junit", "j.xml"
    )
    assert result.returncode == 1, result.stderr
    root = ET.parse(tmp_path / "j.xml").getroot()
    document = xml.dom.minidom.parse(str(tmp_path / "j.xml"))
    names = [case.getAttribute("name") for case in document.getElementsByTagName("testcase")]
    assert names == [case.get("name") for case in root.iter("testcase")]
    expected = ["start", "red", "formfeed", "nul and ", "ok", "broken"]
    assert names == expected
    assert {case.get("classname") for case in root.iter("testcase")} == {"c.jsonl"}
    failure = root.find("testsuite/testcase/failure")
    assert failure.get("message") == "minor: bad" and "- turn 1: x" in failure.text
    [skipped] = [case for case in root.iter("testcase") if case.find("skipped") is not None]
    assert skipped.get("line") == "6" and skipped.find("skipped").get("message") == "invalid input"
