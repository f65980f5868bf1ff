"""Report files (HTML, JUnit, the history, GitHub's step summary): their paths checked before the
first call, and a late write failure a plain exit 4."""

import pytest

from tests.helpers import distinct, read_rows, write_jsonl


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--html", "nodir/r.html", "--html nodir/r.html: the directory nodir does not exist"),
        ("--junit", "somedir", "--junit somedir: is a directory"),
        ("--history", "nodir/h.duckdb", "--history nodir/h.duckdb: the directory nodir does not exist"),
    ],
)
def test_an_unwritable_report_or_history_path_is_exit_2_before_any_call(
    judge, run_flowrate, tmp_path, option, value, message
):
    (tmp_path / "somedir").mkdir()
    path = write_jsonl(tmp_path / "c.jsonl", distinct(2))
    result = run_flowrate("eval", path, "--api-base", judge.base_url, option, value, "-o", "out.jsonl")
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert judge.requests == 0 and not (tmp_path / "out.jsonl").exists()
    assert "Traceback" not in result.stderr


def test_an_unwritable_github_step_summary_is_exit_2_before_any_call(judge, run_flowrate, tmp_path, cli_env):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(2))
    env = {**cli_env, "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(tmp_path / "gone" / "summary.md")}
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", env=env)
    assert result.returncode == 2 and "GITHUB_STEP_SUMMARY" in result.stderr, result.stderr
    assert judge.requests == 0


def test_a_report_that_fails_late_is_a_plain_exit_4_and_the_rows_are_kept(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(3))
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "--junit", "/dev/full", "-o", "out.jsonl")
    assert result.returncode == 4, result.stderr
    assert "a report could not be written" in result.stderr and "No space left on device" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(read_rows(tmp_path / "out.jsonl")) == 3
