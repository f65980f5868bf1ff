"""stdout and stderr: results on stdout keep the summary on stderr; stdin in, verbose rows out."""

import json

from tests.helpers import turn_record


def test_output_to_stdout_keeps_the_summary_on_stderr(judge, run_flowrate, conversations):
    path = conversations(turn_record("a", "hi", "hello"), turn_record("b", "hi", "again"))
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "-")
    assert result.returncode == 0
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted(row["id"] for row in rows) == ["a", "b"]
    assert "Conversational Flow Rate" in result.stderr and "Conversational Flow Rate" not in result.stdout


def test_stdin_input_and_verbose(judge, run_flowrate):
    judge.script("MARK-MOSTLY", {"verdict": "mostly", "reason": "small lapse", "key_issues": ["turn 1: redundant"]})
    text = json.dumps(turn_record(None, "MARK-MOSTLY", "x")) + "\n"
    result = run_flowrate("eval", "-", "--api-base", judge.base_url, "-o", "-", "-v", input=text)
    assert result.returncode == 0, result.stderr
    [row] = [json.loads(line) for line in result.stdout.splitlines()]
    assert row["id"] == "<stdin>:1" and row["verdict"] == "mostly"
    assert "[<stdin>:1] mostly 0.9 pass: small lapse (turn 1: redundant)" in result.stderr
