"""The console: progress, the summary, rows as one line each, and control characters escaped."""

import json
from io import StringIO

from tests.helpers import evaluation_row as _row
from tests.helpers import local_eval, read_rows, turn_record, verdict_record, write_jsonl


def _plain_console():
    from rich.console import Console

    return Console(file=StringIO(), force_terminal=False, width=200)


def _row_model():
    from flowrate.results.rows import EvaluationRow

    return EvaluationRow.model_validate(verdict_record("x", "fully"))


def test_progress_says_it_is_loading_and_shows_100_percent_only_at_the_end(monkeypatch):
    from flowrate.reports import console as report

    monkeypatch.setattr(report, "PLAIN_PROGRESS_EVERY_S", 0.0)
    console = _plain_console()
    with report.Reporter(console, total=1000) as reporter:
        reporter.stage("loading the judge (gpt-4o)…")
        for _ in range(999):
            reporter.row(_row_model())
    text = console.file.getvalue()
    assert "flowrate: loading the judge (gpt-4o)…" in text
    assert "999/1000 rows (99%)" in text and "100%" not in text


def test_the_summary_lists_failures_in_input_order(judge, run_flowrate, tmp_path):
    judge.script("MARK-SLOW", {"verdict": "none", "key_issues": ["turn 1: slow failure"], "delay": 0.3})
    judge.script("MARK-FAST", {"verdict": "none", "key_issues": ["turn 1: fast failure"]})
    path = write_jsonl(
        tmp_path / "c.jsonl", [turn_record("first", "MARK-SLOW", "x"), turn_record("second", "MARK-FAST", "x")]
    )
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-j", "2")
    assert result.returncode == 1
    assert result.stderr.index("first: none") < result.stderr.index("second: none")


def test_an_interruption_after_every_row_says_the_results_are_complete():
    from flowrate.evaluation.engine import RunSummary
    from flowrate.reports.console import print_summary

    console = _plain_console()
    print_summary(console, RunSummary(judged=2, passed=2, interrupted=True, expected_rows=2), None)
    text = console.file.getvalue()
    assert "results are complete" in text and "not judged" not in text


def test_a_failing_score_never_prints_as_its_threshold():
    from flowrate.reports.console import describe_row
    from flowrate.results.summary import format_score

    assert format_score(2 / 3, 0.7) == "0.67" and format_score(0.6999, 0.7) == "0.6999"
    assert format_score(0.7, 0.7) == "0.70" and format_score(0.69999999999, 0.7, digits=1) == "0.69999999999"
    assert format_score(0.705, 0.705) == "0.705"  # 0.705 is 0.70499… in binary: it passes, and must show so
    assert format_score(0.9, None, digits=1) == "0.9"
    rated = _row("r", 2 / 3, threshold=0.7, rating=2, scale=3, metric="slot_filling")
    assert describe_row(rated).startswith("[r] slot_filling 2/3 0.67 FAIL")
    mean = _row("u", 0.6999, threshold=0.7, metric="user_satisfaction")
    assert describe_row(mean).startswith("[u] user_satisfaction 0.6999 FAIL")


def test_control_characters_in_ids_are_escaped_on_screen_and_kept_in_rows(judge, run_flowrate, tmp_path):
    judge.script("MARK-NONE", {"verdict": "none", "key_issues": ["turn 1: ignores"]})
    odd = "bad\x1b[31m\nid"
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record(odd, "MARK-NONE", "x")])
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl")
    assert result.returncode == 1
    assert "bad\\x1b[31m\\x0aid: none" in result.stderr and "\x1b" not in result.stderr
    assert read_rows(tmp_path / "out.jsonl")[0]["id"] == odd


def test_bidi_controls_and_unicode_line_separators_are_escaped_on_screen_and_kept_in_rows(
    judge, run_flowrate, tmp_path
):
    judge.script("MARK-NONE", {"verdict": "none", "key_issues": ["turn 1: ignores\u2028the \u2067question\u2069"]})
    odd = "h5-\u202eevil\u202c\u200f\u2029\u061c"
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record(odd, "MARK-NONE", "x")])
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--verbose")
    assert result.returncode == 1
    assert "h5-\\u202eevil\\u202c\\u200f\\u2029\\u061c: none" in result.stderr
    assert "ignores\\u2028the \\u2067question\\u2069" in result.stderr
    assert not set("\u202e\u202c\u200f\u2028\u2029\u061c\u2067\u2069") & set(result.stderr)
    # JSONL lines end at LF only: str.splitlines would also split at U+2028 and U+2029
    (line,) = (tmp_path / "out.jsonl").read_text(encoding="utf-8").rstrip("\n").split("\n")
    assert json.loads(line)["id"] == odd


def test_the_cost_line_counts_no_error_row_as_a_row_of_unknown_price(judge, run_flowrate, tmp_path):
    judge.script("MARK-BROKEN", {"status": 500})
    path = write_jsonl(
        tmp_path / "c.jsonl", [turn_record("good", "hello", "hi"), turn_record("broken", "MARK-BROKEN", "x")]
    )
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "--max-retries", "0", "-o", "out.jsonl")
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    assert rows["broken"]["error"] is not None and rows["broken"]["cost_usd"] is None
    assert rows["good"]["cost_usd"] is not None
    assert "errors 1" in result.stderr
    assert "unknown price" not in result.stderr


def test_an_error_row_whose_calls_an_unpriced_judge_answered_is_a_row_of_unknown_price(judge, run_flowrate, tmp_path):
    judge.script("MARK-COPY", {"copy_example": 0})  # the rubric's example, copied again after the re-ask
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("copied", "MARK-COPY", "x")])
    result = run_flowrate(*local_eval(judge, path, "--threshold", "0"))
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["error"]["type"] == "CopiedExample" and row["usage"]["prompt_tokens"] > 0 and row["cost_usd"] is None
    assert "(+ 1 rows with unknown price)" in result.stderr
