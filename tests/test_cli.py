"""`flowrate` as users run it: the real process, its exit codes, stdout and stderr."""

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from tests.conftest import FLOWRATE, TEST_KEY, read_rows, turn_record, wait_for_requests, write_jsonl

ROOT = Path(__file__).resolve().parents[1]
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
    "truncated",
    "samples",
    "agreement",
    "sample_verdicts",
    "weights",
    "cached",
    "batch",
    "batch_id",
    "response_format",
    "repaired",
    "reasked",
    "cut",
    "raw_reply",
]


@pytest.fixture
def conversations(tmp_path):
    def make(*records, name="c.jsonl"):
        return write_jsonl(tmp_path / name, records)

    return make


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


def test_threshold_option_moves_the_edge(judge, run_flowrate, conversations):
    judge.script("MARK-PARTIAL", {"verdict": "partial"})
    path = conversations(turn_record("p", "MARK-PARTIAL", "x"))
    assert run_flowrate("eval", path, "--api-base", judge.base_url, "--threshold", "0.7").returncode == 0
    assert run_flowrate("eval", path, "--api-base", judge.base_url, "--threshold", "0.71").returncode == 1


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


def test_skip_invalid_judges_the_rest_and_lists_the_skipped(judge, run_flowrate, tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps(turn_record("ok", "a", "b")) + "\n" + '{"id": "x", "turns": []}\n')
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "--skip-invalid", "-o", "out.jsonl")
    assert result.returncode == 0, result.stderr
    assert [row["id"] for row in read_rows(tmp_path / "out.jsonl")] == ["ok"]
    assert "skipped 1" in result.stderr and f"{path}:2: turns: must not be empty" in result.stderr
    assert judge.requests == 1


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


def test_concurrency_is_bounded_at_the_server(judge, run_flowrate, conversations):
    judge.latency_s = 0.1
    path = conversations(*[turn_record(f"c{n}", "hi", f"hello {n}") for n in range(30)])
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-j", "5")
    assert result.returncode == 0
    assert judge.requests == 30 and judge.max_in_flight == 5


def test_missing_key_exits_2_naming_the_variable(judge, run_flowrate, conversations, cli_env):
    env = {k: v for k, v in cli_env.items() if k != "OPENAI_API_KEY"}
    result = run_flowrate("eval", conversations(turn_record("a", "b", "c")), "--model", "gpt-4o", env=env)
    assert result.returncode == 2
    assert result.stderr.strip() == "flowrate: error: no API key for model 'gpt-4o': set OPENAI_API_KEY"


def test_rejected_key_stops_the_run_at_once(judge, run_flowrate, conversations):
    judge.script("", {"status": 401})  # every request
    path = conversations(*[turn_record(f"c{n}", "a", "b") for n in range(50)])
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-j", "2")
    assert result.returncode == 2
    assert "rejected the API key for model 'gpt-4o' (401): check OPENAI_API_KEY" in result.stderr
    assert judge.requests <= 2
    assert TEST_KEY not in result.stderr + result.stdout


def test_usage_errors_are_typers_exit_2(run_flowrate):
    result = run_flowrate("eval", "x.jsonl", "--concurrency", "many")
    assert result.returncode == 2 and "Invalid value for '--concurrency'" in result.stderr
    assert run_flowrate("eval").returncode == 2


def test_bad_option_value_names_the_option(run_flowrate, conversations):
    result = run_flowrate("eval", conversations(turn_record("a", "b", "c")), "--threshold", "1.5")
    assert result.returncode == 2
    assert result.stderr.strip() == "flowrate: error: option threshold: must be at most 1.0 (got 1.5)"


def test_options_precedence_cli_env_config(judge, run_flowrate, conversations, tmp_path, cli_env):
    judge.script("MARK-PARTIAL", {"verdict": "partial"})
    path = conversations(turn_record("p", "MARK-PARTIAL", "x"))
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "flowrate.yaml").write_text(
        f"api_base: {judge.base_url}\nthreshold: 0.9\noutput: from-config.jsonl\n"
    )
    assert run_flowrate("eval", path).returncode == 1  # the config's threshold 0.9 fails a partial
    assert (tmp_path / "from-config.jsonl").exists()
    env = dict(cli_env, FLOWRATE_THRESHOLD="0.5")
    assert run_flowrate("eval", path, env=env).returncode == 0  # the environment beats the config
    assert run_flowrate("eval", path, "--threshold", "0.8", env=env).returncode == 1  # the command line beats both
    (tmp_path / "other.yaml").write_text("thresold: 0.5\n")
    result = run_flowrate("eval", path, "--config", "other.yaml")
    assert result.returncode == 2 and "other.yaml: unknown option 'thresold'" in result.stderr


def test_interrupt_exits_130_with_a_summary(judge, conversations, tmp_path, start_process):
    judge.latency_s = 0.5
    path = conversations(*[turn_record(f"c{n}", f"question {n}", "b") for n in range(200)])  # distinct: no cache hits
    process = start_process("eval", path, "--api-base", judge.base_url, "-j", "4", "-o", "out.jsonl")
    wait_for_requests(judge, 8)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    rows = read_rows(tmp_path / "out.jsonl")
    assert 4 <= len(rows) < 200 and len({row["id"] for row in rows}) == len(rows)
    assert f"resume with: flowrate eval {path} --api-base {judge.base_url} -j 4 -o out.jsonl --resume" in stderr


def test_validate_counts_formats(run_flowrate, tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [turn_record("a", "b", "c"), {"messages": [{"role": "user", "content": "x"}]}])
    result = run_flowrate("validate", tmp_path, "--json")
    assert result.returncode == 0
    assert json.loads(result.stdout) == {"files": 1, "valid": 2, "invalid": 0, "formats": {"turns": 1, "messages": 1}}
    assert "2 valid conversation(s) in 1 file(s): 1 in messages format, 1 in turns format" in result.stderr
    (tmp_path / "b.jsonl").write_text('{"turns": [{"input": 1, "actual_output": "x"}]}\n')
    result = run_flowrate("validate", tmp_path)
    assert (
        result.returncode == 2
        and f"{tmp_path / 'b.jsonl'}:1: turns[0].input: must be a string, got a number" in result.stderr
    )


def test_python_m_flowrate_and_fast_help_without_litellm(cli_env):
    code = "import sys, runpy; sys.argv=['flowrate','--help']\ntry:\n runpy.run_module('flowrate', run_name='__main__')\nexcept SystemExit: pass\nprint('litellm' in sys.modules)"
    result = subprocess.run(
        [os.path.join(os.path.dirname(FLOWRATE), "python"), "-c", code], capture_output=True, text=True, env=cli_env
    )
    assert result.stdout.strip().endswith("False") and "eval" in result.stdout


def test_readme_documents_every_option_and_exit_code(run_flowrate):
    readme = (ROOT / "README.md").read_text()
    commands = [
        ["eval"], ["validate"], ["agreement"], ["merge"], ["report"], ["compare"], ["metrics"], ["calibrate"],
        ["trends"], ["labels", "template"], ["labels", "import"], ["history", "import"], ["cache", "stats"],
        ["batch", "status"], ["batch", "collect"], ["batch", "cancel"], ["batch", "import-results"],
    ]  # fmt: skip
    for command in commands:
        help_text = run_flowrate(*command, "--help", env=dict(os.environ, COLUMNS="200")).stdout
        assert "Usage:" in help_text, command
        for option in set(re.findall(r"(--[a-z][a-z-]+)", help_text)) - {"--help"}:
            assert f"`{option}" in readme, f"README does not document {' '.join(command)} {option}"
        assert f"flowrate {' '.join(command)}" in readme, f"README does not document flowrate {' '.join(command)}"
    for code in ("0", "1", "2", "3", "130", "141"):
        assert re.search(rf"^\| `?{code}`? \|", readme, re.MULTILINE), f"README does not document exit code {code}"


def test_the_config_sample_lists_every_option():
    from flowrate.settings.options import EvalSettings

    sample = (ROOT / "configs" / "flowrate.yaml").read_text()
    listed = set(re.findall(r"^# ([a-z_]+):", sample, re.MULTILINE))
    assert listed == set(EvalSettings.model_fields)
