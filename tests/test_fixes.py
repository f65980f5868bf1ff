"""The fixes from a new user's trial (issue 7): each test names the behaviour it holds."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from io import StringIO

import pytest

from flowrate import ConversationalEvalTestCase, ConversationalFlowRateMetric, EvalTestCase, evaluate_conversations
from flowrate.judge.limits import Ceiling
from tests.conftest import read_rows, turn_record, wait_for_requests, write_jsonl
from tests.test_api import NO_WAIT, ScriptedClient, verdict


def distinct(count, prefix="c"):
    return [turn_record(f"{prefix}{n}", f"question {prefix}{n}", f"answer {n}") for n in range(count)]


def closed_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# -- data loss ---------------------------------------------------------------------
def test_an_output_that_is_an_input_is_refused_before_anything_is_opened(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "same.jsonl", distinct(3))
    before = path.read_bytes()
    result = run_flowrate("eval", path, "-o", path, "--api-base", judge.base_url)
    assert result.returncode == 2 and path.read_bytes() == before and judge.requests == 0
    assert "is both an input and the --output file" in result.stderr
    data = tmp_path / "data"
    data.mkdir()
    inside = write_jsonl(data / "chats.jsonl", distinct(2))
    result = run_flowrate("eval", data, "-o", inside, "--api-base", judge.base_url)
    assert result.returncode == 2 and inside.read_bytes() and judge.requests == 0
    merged = run_flowrate("merge", "same.jsonl", "-o", "same.jsonl")
    assert merged.returncode == 2 and "is also an input of the merge" in merged.stderr
    assert path.read_bytes() == before


def test_stdin_named_twice_is_read_once(judge, run_process):
    text = "".join(json.dumps(record) + "\n" for record in distinct(2))
    result = run_process("eval", "-", "-", "--api-base", judge.base_url, "-o", "-", input=text)
    assert result.returncode == 0, result.stderr
    assert sorted(json.loads(line)["id"] for line in result.stdout.splitlines()) == ["c0", "c1"]


def test_a_path_given_twice_is_read_once(judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", distinct(5))
    result = run_flowrate("eval", "c.jsonl", tmp_path / "c.jsonl", ".", "--api-base", judge.base_url, "-o", "out.jsonl")
    assert result.returncode == 0, result.stderr
    assert len(read_rows(tmp_path / "out.jsonl")) == 5 and judge.requests == 5


# -- long turns and budgets ----------------------------------------------------------
async def test_a_huge_last_turn_keeps_the_start_and_end_of_the_paste_and_the_whole_reply():
    client = ScriptedClient(verdict("partial"))
    metric = ConversationalFlowRateMetric(model=client, max_input_tokens=6000, retry=NO_WAIT)
    paste = "PASTE-START " + "lorem ipsum dolor " * 150_000 + " PASTE-END"
    reply = "Raise a ticket with the number RT-4471 and attach the log, please: that is all we need."
    case = ConversationalEvalTestCase(turns=[EvalTestCase(input=paste, actual_output=reply)])
    [result] = await evaluate_conversations([case], [metric])
    sent = client.calls[0][0][-1]["content"]
    assert result.metrics_data[0].evaluation_log["truncated"] is True
    assert "PASTE-START" in sent and "PASTE-END" in sent and "[…]" in sent
    assert json.dumps(reply)[1:-1] in sent  # the reply, whole


async def test_a_huge_turn_in_the_middle_is_clipped_and_the_end_survives():
    client = ScriptedClient(verdict("partial"))
    metric = ConversationalFlowRateMetric(model=client, max_input_tokens=6000, retry=NO_WAIT)
    huge = "MIDDLE-START " + "word " * 400_000 + " MIDDLE-END"
    case = ConversationalEvalTestCase(
        turns=[
            EvalTestCase(input="My router is broken.", actual_output="Which model is it?"),
            EvalTestCase(input=huge, actual_output="Thanks for the log."),
            EvalTestCase(input="So?", actual_output="FINAL-REPLY: a replacement ships today."),
        ]
    )
    [result] = await evaluate_conversations([case], [metric])
    sent = client.calls[0][0][-1]["content"]
    assert result.metrics_data[0].evaluation_log["truncated"] is True
    assert "MIDDLE-START" in sent and "MIDDLE-END" in sent and "FINAL-REPLY: a replacement ships today." in sent
    assert "My router is broken." in sent and len(sent) < 60_000


def test_a_budget_below_what_the_rubric_needs_is_a_usage_error(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(2))
    for extra in ([], ["--dry-run"]):
        result = run_flowrate("eval", path, "--api-base", judge.base_url, "--max-input-tokens", "3000", *extra)
        assert result.returncode == 2, result.stderr
        assert "option max_input_tokens: 3000 cannot hold the rubric and a conversation" in result.stderr
        assert "the minimum for this rubric and model is" in result.stderr
    assert judge.requests == 0


async def test_tpm_holds_over_every_60_second_window_whatever_the_call_size():
    now = [0.0]

    async def sleep(seconds):
        now[0] += seconds

    ceiling = Ceiling(per_minute=10_000, clock=lambda: now[0], sleep=sleep)
    taken = []
    for _ in range(12):
        await ceiling.take(2_600)
        taken.append((now[0], 2_600))
    for start, _ in taken:
        assert sum(amount for when, amount in taken if start <= when < start + 60) <= 10_000
    await ceiling.take(15_000)  # larger than a whole minute: waits for an empty window, then goes alone
    assert now[0] >= taken[-1][0] + 60 and ceiling.oversized == 1


# -- gates that passed on nothing -------------------------------------------------------
def test_a_run_that_selects_no_conversation_exits_2_unless_allowed(judge, run_flowrate, tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "a.jsonl").write_text("\n")
    (tmp_path / "bad.jsonl").write_text('{"turns": []}\n')
    for args, stdin in (
        (["empty.jsonl"], None),
        (["dir"], None),
        (["-"], ""),
        (["bad.jsonl", "--skip-invalid"], None),
    ):
        result = run_flowrate("eval", *args, "--api-base", judge.base_url, input=stdin)
        assert result.returncode == 2, (args, result.stderr)
        assert "nothing to judge" in result.stderr and args[0].replace("-", "") in result.stderr
    allowed = run_flowrate("eval", "empty.jsonl", "--api-base", judge.base_url, "--allow-empty")
    assert allowed.returncode == 0 and judge.requests == 0


# -- resume ------------------------------------------------------------------------------
def test_resume_derives_success_again_for_a_new_threshold(judge, run_flowrate, tmp_path):
    judge.script("question c1", {"verdict": "partial"})
    path = write_jsonl(tmp_path / "c.jsonl", distinct(3))
    assert run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl").returncode == 0
    calls = judge.requests
    again = run_flowrate(
        "eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--resume", "--threshold", "0.8"
    )
    assert again.returncode == 1 and judge.requests == calls
    row = next(row for row in read_rows(tmp_path / "out.jsonl") if row["id"] == "c1")
    assert (row["threshold"], row["success"]) == (0.8, False)


def test_resume_refuses_another_model_or_rubric(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(2))
    run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl")
    other = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--resume", "-m", "gpt-4o-mini")
    assert other.returncode == 2
    assert "judged with model 'gpt-4o', this run uses 'gpt-4o-mini'" in other.stderr
    rubric = tmp_path / "r.yaml"
    rubric.write_text(_packaged_rubric() + "\n# mine\n")
    changed = run_flowrate(
        "eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--resume", "--rubric", rubric
    )
    assert changed.returncode == 2 and "judged with rubric version" in changed.stderr


def _packaged_rubric():
    from pathlib import Path

    return (Path(__file__).resolve().parents[1] / "flowrate" / "rubrics" / "conversational_flow.yaml").read_text()


def test_a_resumed_summary_counts_only_the_conversations_of_this_input(judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "all.jsonl", distinct(20))
    assert run_flowrate("eval", "all.jsonl", "--api-base", judge.base_url, "-o", "out.jsonl").returncode == 0
    write_jsonl(tmp_path / "some.jsonl", distinct(5))
    result = run_flowrate("eval", "some.jsonl", "--api-base", judge.base_url, "-o", "out.jsonl", "--resume")
    assert result.returncode == 0
    assert "passed 5  failed 0" in result.stderr
    assert "15 row(s) are for conversations not in this input" in result.stderr


# -- models, agreement, cache -----------------------------------------------------------
def test_a_model_no_provider_serves_is_exit_2_before_any_call(run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(2))
    for model in ("gpt4o", "foo/bar"):
        for extra in ([], ["--dry-run"]):
            result = run_flowrate("eval", path, "-m", model, *extra)
            assert result.returncode == 2, result.stderr
            assert f"no provider serves model {model!r}" in result.stderr


def test_agreement_names_the_labeled_conversations_with_no_usable_row(run_flowrate, tmp_path):
    from tests.test_judge_quality import labeled_records

    script, records = labeled_records()
    write_jsonl(tmp_path / "labeled.jsonl", records)
    rows = [_row(f"d{n}", value) for n, (value, _) in enumerate(script[:5])]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = run_flowrate("agreement", "labeled.jsonl", "--label", "Coherent", "--results", "rows.jsonl")
    assert result.returncode == 3
    assert "3 of 8 labeled conversation(s) have no usable conversational_flow_rate row in rows.jsonl" in result.stderr


def _row(conversation_id, value, score=None):
    scores = {"fully": 1.0, "mostly": 0.9, "partial": 0.7, "minor": 0.3, "none": 0.0}
    return {
        "id": conversation_id,
        "metric": "conversational_flow_rate",
        "verdict": value,
        "score": scores[value] if score is None else score,
        "threshold": 0.7,
        "success": scores[value] >= 0.7,
        "model": "gpt-4o",
        "rubric_version": "sha256:x",
        "evaluated_at": "2026-11-30T00:00:00Z",
    }


def test_agreement_intervals_do_not_depend_on_row_order():
    from flowrate.analysis.agreement import agreement_report, pair_up
    from flowrate.results.rows import EvaluationRow

    values = ["none", "minor", "partial", "mostly", "fully"] * 6
    rows = [EvaluationRow.model_validate(_row(f"k{n:02d}", value)) for n, value in enumerate(values)]
    labels = {f"k{n:02d}": float((n * 7) % 5) for n in range(len(values))}
    forward = agreement_report(pair_up(labels, rows, "L")[0], "L")
    backward = agreement_report(pair_up(labels, list(reversed(rows)), "L")[0], "L")
    assert forward == backward and forward.spearman.ci95 is not None


def test_the_same_model_at_another_endpoint_is_another_judge(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(2))
    assert run_flowrate("eval", path, "--api-base", judge.base_url).returncode == 0
    other = judge.base_url.replace("127.0.0.1", "localhost")
    assert run_flowrate("eval", path, "--api-base", other).returncode == 0
    assert judge.requests == 4


# -- a judge that cannot be reached -----------------------------------------------------------
def test_a_closed_port_stops_the_run_quickly_and_lists_every_conversation(run_flowrate, tmp_path, cli_env):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(300))
    base = f"http://127.0.0.1:{closed_port()}/v1"
    env = dict(cli_env, FLOWRATE_BACKOFF="1", FLOWRATE_BACKOFF_MAX="60")  # the real waits, cut by the stop
    started = time.monotonic()
    result = run_flowrate("eval", path, "--api-base", base, "-o", "out.jsonl", env=env)
    assert time.monotonic() - started < 30
    assert result.returncode == 3
    rows = read_rows(tmp_path / "out.jsonl")
    skipped = int(result.stderr.split("unreachable: ")[1].split()[0])
    assert len(rows) + skipped == 300 and len({row["id"] for row in rows}) == len(rows)
    assert all("\n" not in row["error"]["message"] for row in rows)
    assert f"the judge at {base} could not be reached" in result.stderr
    assert "--retry-errors" in result.stderr and "Traceback" not in result.stderr


async def test_the_api_returns_a_not_judged_error_for_each_conversation_an_unreachable_judge_left(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdef")
    base = f"http://127.0.0.1:{closed_port()}/v1"
    metric = ConversationalFlowRateMetric(model="gpt-4o", api_base=base, retry=NO_WAIT)
    cases = [
        ConversationalEvalTestCase(id=f"c{n}", turns=[EvalTestCase(input=f"q{n}", actual_output="a")])
        for n in range(40)
    ]
    results = await evaluate_conversations(cases, [metric], concurrency=4)
    assert [len(result.metrics_data) for result in results] == [1] * 40
    kinds = {result.metrics_data[0].error.type for result in results}
    assert "NotJudged" in kinds and all(result.metrics_data[0].score is None for result in results)


def test_a_wrong_path_on_a_live_server_stops_at_once_with_one_line(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(5))
    result = run_flowrate("eval", path, "-m", "ollama:llama3", "--api-base", judge.base_url)
    assert result.returncode == 2
    [line] = [line for line in result.stderr.splitlines() if line.startswith("flowrate: error:")]
    assert "does not know model 'ollama:llama3' (404): check the model name and the path in --api-base" in line
    assert "Traceback" not in result.stderr


def test_ctrl_c_ends_rate_waits_at_once_and_starts_no_new_request(judge, tmp_path, start_process):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(40))
    process = start_process("eval", path, "--api-base", judge.base_url, "--rpm", "6", "-o", "out.jsonl")
    wait_for_requests(judge, 1)
    time.sleep(0.3)
    seen = judge.requests
    process.send_signal(signal.SIGINT)
    started = time.monotonic()
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert time.monotonic() - started < 6 and judge.requests == seen
    assert "resume with: flowrate eval" in stderr and "--resume" in stderr
    assert "Traceback" not in stderr


def test_an_interruption_after_every_row_says_the_results_are_complete():
    from flowrate.evaluation.engine import RunSummary
    from flowrate.reports.console import print_summary

    console = _plain_console()
    print_summary(console, RunSummary(judged=2, passed=2, interrupted=True, expected_rows=2), None)
    text = console.file.getvalue()
    assert "results are complete" in text and "not judged" not in text


# -- crashes and messages -----------------------------------------------------------------------
def test_output_path_problems_are_plain_exit_2_before_any_call(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(1))
    (tmp_path / "somedir").mkdir()
    for output, message in (("nodir/out.jsonl", "the directory nodir does not exist"), ("somedir", "is a directory")):
        result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", output)
        assert result.returncode == 2 and message in result.stderr, result.stderr
    merged = run_flowrate("merge", "c.jsonl", "-o", "nodir/x")
    assert merged.returncode == 2 and "the directory nodir does not exist" in merged.stderr
    assert judge.requests == 0


def test_a_closed_pipe_stops_quietly_with_sigpipes_status(judge, tmp_path, start_process):
    judge.latency_s = 0.02
    path = write_jsonl(tmp_path / "c.jsonl", distinct(300))
    process = start_process("eval", path, "--api-base", judge.base_url, "-o", "-", "-j", "4", text=False)
    assert json.loads(process.stdout.readline())["id"]
    process.stdout.close()
    stderr = process.stderr.read().decode()
    process.wait(timeout=60)
    assert process.returncode == 141, stderr
    assert "Traceback" not in stderr and judge.requests < 300


def test_each_hint_only_where_it_applies(run_flowrate, tmp_path, judge):
    (tmp_path / "bad.jsonl").write_text('{"turns": []}\n')
    validated = run_flowrate("validate", "bad.jsonl")
    assert validated.returncode == 2 and "--skip-invalid" not in validated.stderr
    missing = run_flowrate("eval", "nope.jsonl", "--api-base", judge.base_url)
    assert missing.returncode == 2 and "--skip-invalid" not in missing.stderr
    judged = run_flowrate("eval", "bad.jsonl", "--api-base", judge.base_url)
    assert judged.returncode == 2 and "--skip-invalid" in judged.stderr


def test_automatic_ids_use_the_path_inside_the_given_directory(judge, run_flowrate, tmp_path):
    for name in ("sub1", "sub2"):
        (tmp_path / "logs" / name).mkdir(parents=True)
        write_jsonl(tmp_path / "logs" / name / "t.jsonl", [turn_record(None, f"hi from {name}", "hello")])
    result = run_flowrate("eval", "logs", "--api-base", judge.base_url, "-o", "out.jsonl")
    assert result.returncode == 0, result.stderr
    assert sorted(row["id"] for row in read_rows(tmp_path / "out.jsonl")) == ["sub1/t.jsonl:1", "sub2/t.jsonl:1"]


def test_the_default_output_and_other_results_files_are_not_read_as_input(judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", distinct(2))
    assert run_flowrate("eval", ".", "--api-base", judge.base_url).returncode == 0
    again = run_flowrate("eval", ".", "--api-base", judge.base_url)
    assert again.returncode == 0, again.stderr
    (tmp_path / "flowrate-results.jsonl").rename(tmp_path / "old.jsonl")
    third = run_flowrate("eval", ".", "--api-base", judge.base_url)
    assert third.returncode == 0 and "old.jsonl: passed over, it is a flowrate results file" in third.stderr
    named = run_flowrate("eval", "old.jsonl", "--api-base", judge.base_url)
    assert named.returncode == 2 and "this is a flowrate results file, not conversations" in named.stderr


def test_a_dry_run_with_everything_cached_costs_nothing(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(2))
    run_flowrate("eval", path, "--api-base", judge.base_url, "-m", "my-local-model")
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-m", "my-local-model", "--dry-run")
    assert "2 cached, 0 call(s)" in result.stderr and "estimated cost $0.0000" in result.stderr


def test_control_characters_in_ids_are_escaped_on_screen_and_kept_in_rows(judge, run_flowrate, tmp_path):
    judge.script("MARK-NONE", {"verdict": "none", "key_issues": ["turn 1: ignores"]})
    odd = "bad\x1b[31m\nid"
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record(odd, "MARK-NONE", "x")])
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl")
    assert result.returncode == 1
    assert "bad\\x1b[31m\\x0aid: none" in result.stderr and "\x1b" not in result.stderr
    assert read_rows(tmp_path / "out.jsonl")[0]["id"] == odd


def test_messages_say_what_is_accepted(tmp_path, run_flowrate, cli_env):
    (tmp_path / "c.jsonl").write_text('{"id": 7.0, "turns": [{"input": "a", "actual_output": "b"}]}\n')
    result = run_flowrate("validate", "c.jsonl")
    assert "id: must be a string or a whole number, got the decimal number 7.0" in result.stderr
    write_jsonl(tmp_path / "ok.jsonl", distinct(1))
    env = {k: v for k, v in cli_env.items() if k not in ("GOOGLE_API_KEY", "GEMINI_API_KEY")}
    gemini = run_flowrate("eval", "ok.jsonl", "-m", "google:gemini-2.0-flash", env=env)
    assert gemini.returncode == 2
    assert "set GOOGLE_API_KEY (LiteLLM also reads GEMINI_API_KEY)" in gemini.stderr


def test_the_continue_command_is_the_command_as_invoked(monkeypatch):
    from flowrate.cli import common as cli

    monkeypatch.setattr(sys, "argv", ["/opt/venv/flowrate/__main__.py", "eval", "c.jsonl"])
    assert cli.continue_command("--resume") == f"{sys.executable} -m flowrate eval c.jsonl --resume"
    monkeypatch.setattr(sys, "argv", ["/somewhere/not/on/path/flowrate", "eval", "c.jsonl", "--resume"])
    assert cli.continue_command("--retry-errors") == "/somewhere/not/on/path/flowrate eval c.jsonl --retry-errors"


def test_row_timing_is_the_judges_not_the_schedulers(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(7))
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "--rpm", "60", "-j", "1", "-o", "out.jsonl")
    assert result.returncode == 0
    rows = read_rows(tmp_path / "out.jsonl")
    waited = [row for row in rows if row["wait_s"] >= 0.5]  # five at once, then one a second
    assert waited and all(row["latency_s"] < row["wait_s"] for row in waited)  # the wait is not in the latency
    assert [row["evaluated_at"] for row in rows] == sorted(row["evaluated_at"] for row in rows)


async def test_a_custom_client_may_return_the_text_alone():
    class TextOnly(ScriptedClient):
        async def chat_complete(self, messages, temperature):
            return (await super().chat_complete(messages, temperature))[0]

    metric = ConversationalFlowRateMetric(model=TextOnly(verdict("mostly")), retry=NO_WAIT)
    case = ConversationalEvalTestCase(turns=[EvalTestCase(input="a", actual_output="b")])
    [result] = await evaluate_conversations([case], [metric])
    assert result.metrics_data[0].score == 0.9 and result.metrics_data[0].evaluation_cost is None


def test_a_utf8_bom_is_accepted(tmp_path, run_flowrate):
    bom = b"\xef\xbb\xbf"
    (tmp_path / "a.jsonl").write_bytes(bom + json.dumps(turn_record("a", "x", "y")).encode() + b"\n")
    (tmp_path / "b.json").write_bytes(bom + json.dumps([turn_record("b", "x", "y")]).encode())
    (tmp_path / "c.yaml").write_bytes(bom + b"- id: c\n  turns: [{input: x, actual_output: y}]\n")
    result = run_flowrate("validate", ".", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["valid"] == 3


# -- the first minutes ---------------------------------------------------------------------------
def test_a_missing_key_is_told_before_litellm_is_imported(cli_env, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", distinct(1))
    env = {k: v for k, v in cli_env.items() if k != "OPENAI_API_KEY"}
    code = (
        "import sys, runpy; sys.argv=['flowrate','eval','c.jsonl','-m','gpt-4o']\n"
        "try:\n runpy.run_module('flowrate', run_name='__main__')\nexcept SystemExit as e: print('exit', e.code)\n"
        "print('litellm' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert result.stdout.split() == ["exit", "2", "False"], result.stderr
    assert "no API key for model 'gpt-4o': set OPENAI_API_KEY" in result.stderr


def test_help_shows_defaults_and_plain_flags_and_version(run_flowrate):
    help_text = run_flowrate("eval", "--help", env=dict(os.environ, COLUMNS="200")).stdout
    assert "[default: 0.7]" in help_text and "[default: gpt-4o]" in help_text
    assert "<bool>" not in help_text and "--skip-invalid " in help_text
    version = run_flowrate("--version")
    assert version.returncode == 0 and version.stdout.startswith("flowrate ")


@pytest.mark.parametrize("args", [["--help"], ["validate", "c.jsonl"]])
def test_help_and_validate_do_not_load_the_judging_engine(args, cli_env, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", distinct(1))
    code = (
        f"import sys, runpy; sys.argv=['flowrate', *{args!r}]\n"
        "try:\n runpy.run_module('flowrate', run_name='__main__')\nexcept SystemExit: pass\n"
        "print(sorted(m for m in ('litellm', 'flowrate.metrics.rubric_metric', 'flowrate.judge.litellm_backend', 'rich.progress') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env, cwd=tmp_path)
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stdout + result.stderr


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


def _plain_console():
    from rich.console import Console

    return Console(file=StringIO(), force_terminal=False, width=200)


def _row_model():
    from flowrate.results.rows import EvaluationRow

    return EvaluationRow.model_validate(_row("x", "fully"))
