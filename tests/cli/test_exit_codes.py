"""`flowrate` as users run it: the exit codes, from all passing to a closed pipe."""

import json
import subprocess

from tests.helpers import FLOWRATE, read_rows, turn_record, write_rows
from tests.helpers import march_row as row

ROW_FIELDS = [
    "id",
    "source",
    "metric",
    "suite",
    "verdict",
    "rating",
    "scale",
    "score",
    "threshold",
    "success",
    "reason",
    "key_issues",
    "model",
    "usage",
    "cost_usd",
    "latency_s",
    "wait_s",
    "attempts",
    "error",
    "rubric_version",
    "evaluated_at",
    "chat_date",
    "number_of_turns",
    "turns_sha256",
    "truncated",
    "samples",
    "agreement",
    "sample_verdicts",
    "level_probs",
    "outside_prob",
    "level_probs_from",
    "expected_score",
    "verdict_score",
    "verdict_first_probs",
    "verdict_first_score",
    "combined_score",
    "checklist_p_yes",
    "checklist_score",
    "turn_p_problem",
    "problem_turns",
    "fitted_score",
    "score_from",
    "uncertain",
    "weights",
    "cached",
    "batch",
    "batch_id",
    "response_format",
    "repaired",
    "reasked",
    "cut",
    "raw_reply",
    "redactions",
    "redacted_by",
]


def test_all_pass_exit_0_rows_and_summary(judge, run_flowrate, conversations, tmp_path):
    judge.script("MARK-PARTIAL", {"verdict": "partial", "reason": "one lapse", "key_issues": ["turn 1: ignores"]})
    path = conversations(turn_record("a", "hi", "hello"), turn_record("b", "MARK-PARTIAL", "x"))
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    assert list(rows["a"]) == ROW_FIELDS
    assert (rows["b"]["verdict"], rows["b"]["score"], rows["b"]["success"]) == ("partial", 0.7, True)
    assert rows["b"]["source"] == {"path": str(path), "line": 2, "index": None}
    assert rows["a"]["rubric_version"].startswith("sha256:") and rows["a"]["evaluated_at"].endswith("Z")
    assert rows["a"]["usage"]["prompt_tokens"] > 0 and rows["a"]["cost_usd"] > 0
    assert "passed 2  failed 0  errors 0  skipped 0  pass rate 100.0%  mean score 0.850" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_failure_exits_1_and_is_listed(judge, run_flowrate, conversations):
    judge.script("MARK-MINOR", {"verdict": "minor", "reason": "loops", "key_issues": ["turn 2: repeats the question"]})
    path = conversations(turn_record("ok", "hi", "hello"), turn_record("bad", "MARK-MINOR", "x"))
    result = run_flowrate("eval", path, "--api-base", judge.base_url)
    assert result.returncode == 1
    assert "bad: minor: turn 2: repeats the question" in result.stderr


def test_an_error_row_exits_3_and_wins_over_failures(judge, run_flowrate, conversations, tmp_path):
    judge.script("MARK-500", {"status": 500})
    judge.script("MARK-NONE", {"verdict": "none"})
    path = conversations(
        turn_record("err", "MARK-500", "x"), turn_record("fail", "MARK-NONE", "x"), turn_record("ok", "a", "b")
    )
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "--max-retries", "2", "-o", "out.jsonl")
    assert result.returncode == 3
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    assert rows["err"]["error"]["type"] == "InternalServerError" and rows["err"]["success"] is None
    assert rows["err"]["attempts"] == 3 and judge.calls_for("MARK-500") == 3
    assert "err: InternalServerError" in result.stderr
    assert set(rows) == {"err", "fail", "ok"}


def test_invalid_input_exits_2_before_any_call(judge, run_flowrate, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(
        json.dumps(turn_record("ok", "a", "b")) + "\n"
        '{"id": "x", "turns": [{"input": "a"}]}\n'
        "not json\n"
        '{"id": "y", "messages": [{"role": "robot", "content": "hi"}]}\n'
    )
    result = run_flowrate("eval", path, "--api-base", judge.base_url)
    assert result.returncode == 2
    assert judge.requests == 0
    assert f"{path}:2: turns[0].actual_output: is missing" in result.stderr
    assert f"{path}:3: invalid JSON" in result.stderr
    assert f"{path}:4: messages[0].role: unknown role 'robot'" in result.stderr
    assert "3 problem(s) in the input; no conversation was judged" in result.stderr
    assert "Traceback" not in result.stderr


def test_usage_errors_are_typers_exit_2(run_flowrate):
    result = run_flowrate("eval", "x.jsonl", "--concurrency", "many")
    assert result.returncode == 2 and "Invalid value for '--concurrency'" in result.stderr
    assert run_flowrate("eval").returncode == 2


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
