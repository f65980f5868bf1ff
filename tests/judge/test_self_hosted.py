"""A self-hosted judge: its default timeout, its slots, and the context window it tells or does not."""

import pytest

from flowrate.judge.address import JudgeAddress
from flowrate.judge.backend import HOSTED_TIMEOUT_S, SELF_HOSTED_TIMEOUT_S
from flowrate.judge.litellm_backend import LiteLLMBackend
from flowrate.settings.options import EvalSettings
from tests.helpers import chat_bodies, distinct, local_eval, long_conversation, read_rows, write_jsonl


def test_a_self_hosted_model_gets_a_long_default_timeout_and_a_hosted_one_the_usual(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert EvalSettings().timeout is None  # no --timeout: the judge decides
    assert (
        LiteLLMBackend(JudgeAddress.parse("smol", "http://127.0.0.1:1/v1")).default_timeout_s()
        == SELF_HOSTED_TIMEOUT_S
        == 600
    )
    assert LiteLLMBackend(JudgeAddress.parse("ollama:llama3")).default_timeout_s() == SELF_HOSTED_TIMEOUT_S
    assert LiteLLMBackend(JudgeAddress.parse("gpt-4o")).default_timeout_s() == HOSTED_TIMEOUT_S == 60


def test_a_timed_out_call_on_a_one_slot_server_is_not_sent_again_behind_itself(judge, run_flowrate, tmp_path):
    judge.behave_as("llama-cpp-python", cold_start_s=2.0, slots=1)
    path = write_jsonl(tmp_path / "c.jsonl", distinct(1))
    result = run_flowrate(*local_eval(judge, path, "--timeout", "0.5", "--max-retries", "3"))
    assert result.returncode == 3
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["error"]["type"] == "Timeout"
    assert len(chat_bodies(judge, "json_object")) == 1  # no retry queued behind the abandoned attempt
    assert judge.max_working == 1


def test_a_server_serving_several_at_once_gets_timed_out_calls_again(judge, run_flowrate, tmp_path):
    judge.behave_as("vllm", n_ctx=100_000)
    judge.script("question", {"hang": True}, {"verdict": "minor"})
    path = write_jsonl(tmp_path / "c.jsonl", distinct(1))
    assert run_flowrate(*local_eval(judge, path, "--timeout", "0.5")).returncode == 1
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["verdict"] == "minor" and row["attempts"] == 2


@pytest.mark.parametrize(
    "profile, slots, most",
    [("llama-cpp-python", 1, 1), ("llama-server", 2, 2), ("llama-server", 1, 1), ("vllm", 1, 4)],
)
def test_a_self_hosted_server_gets_no_more_calls_at_once_than_it_works_on(
    judge, run_flowrate, tmp_path, profile, slots, most
):
    judge.behave_as(profile, n_ctx=100_000, total_slots=slots)
    judge.latency_s = 0.2
    path = write_jsonl(tmp_path / "c.jsonl", distinct(5))  # the first finds the schema form alone
    assert run_flowrate(*local_eval(judge, path, "-j", "4")).returncode == 0
    assert judge.max_in_flight == most
    rows = read_rows(tmp_path / "out.jsonl")
    assert all(row["error"] is None for row in rows)
    if most == 1:
        assert sum(row["wait_s"] for row in rows) > 0.3  # the wait for the server's slot is a wait, not latency


@pytest.mark.parametrize("profile, endpoint", [("vllm", "/v1/models"), ("llama-server", "/props")])
def test_the_window_a_server_tells_is_learned_once_and_long_conversations_fit_it(
    judge, run_flowrate, tmp_path, profile, endpoint
):
    judge.behave_as(profile, n_ctx=6000)
    records = [long_conversation(), *distinct(3)]
    path = write_jsonl(tmp_path / "c.jsonl", records)
    result = run_flowrate(*local_eval(judge, path))
    assert result.returncode == 0, result.stderr
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    assert rows["long"]["truncated"] is True and all(row["error"] is None for row in rows.values())
    assert judge.probes.count(endpoint) == 1


def test_a_window_the_server_names_only_in_its_refusal_is_learned_there_and_the_conversation_refitted(
    judge, run_flowrate, tmp_path
):
    judge.behave_as("llama-cpp-python", n_ctx=6000)
    longer = long_conversation(70) | {"id": "longer"}
    path = write_jsonl(tmp_path / "c.jsonl", [long_conversation(), *distinct(2), longer])
    result = run_flowrate(*local_eval(judge, path, "-j", "1", "--max-retries", "5"))
    assert result.returncode == 0, result.stderr
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    assert all(row["error"] is None for row in rows.values())
    assert rows["long"]["truncated"] is True and rows["longer"]["truncated"] is True
    refused = [status for status in judge.statuses if status == 400]
    assert len(refused) == 1  # the first long one; the next was planned for the window at once
    schema_bodies = chat_bodies(judge, "json_object")
    assert len(schema_bodies) == 5  # the refused prompt, its refit, two short ones and the longer one
    assert rows["long"]["attempts"] == 3  # the schema form refused (500), the window refused (400), the refit


def test_a_refusal_that_names_no_window_says_which_option_makes_long_conversations_fit(judge, run_flowrate, tmp_path):
    judge.behave_as("llama-cpp-python")
    judge.script("MARK-TURN-1 ", {"status": 400, "message": "the prompt is too long for this model"})
    path = write_jsonl(tmp_path / "c.jsonl", [long_conversation(), *distinct(1)])
    result = run_flowrate(*local_eval(judge, path, "-j", "1"))
    assert result.returncode == 3, result.stderr
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    assert (
        "pass --max-input-tokens (max_input_tokens in Python) with the model's window"
        in rows["long"]["error"]["message"]
    )
    assert rows["c0"]["error"] is None


@pytest.mark.parametrize("profile", ["vllm", "llama-server"])
def test_a_server_that_counts_tokens_gets_its_window_filled_by_its_own_counts(judge, run_flowrate, tmp_path, profile):
    judge.behave_as(profile, n_ctx=6000)
    path = write_jsonl(tmp_path / "c.jsonl", [long_conversation(200)])
    result = run_flowrate(*local_eval(judge, path))
    assert result.returncode == 0, result.stderr
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["truncated"] is True and row["error"] is None
    [body] = [body for body in chat_bodies(judge) if body.get("response_format")]
    prompt_tokens = sum(len(message["content"]) for message in body["messages"]) // 4  # as the server counts
    assert 0.8 * 6000 < prompt_tokens + body["max_tokens"] <= 6000  # past the 65 % kept for an estimate
    assert "/tokenize" in judge.probes


def test_after_a_refit_the_per_turn_look_asks_the_turns_the_refitted_transcript_shows(judge, run_flowrate, tmp_path):
    import orjson

    judge.behave_as("llama-cpp-python", n_ctx=6000)
    path = write_jsonl(tmp_path / "c.jsonl", [long_conversation()])
    result = run_flowrate(*local_eval(judge, path, "-j", "1", "--max-retries", "5", "--turn-look"))
    assert result.returncode == 0, result.stderr
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["error"] is None and row["truncated"] is True
    grading = [body for body in chat_bodies(judge) if "follows_on" not in orjson.dumps(body).decode()]
    looks = [body for body in chat_bodies(judge) if "follows_on" in orjson.dumps(body).decode()]
    shown = [
        orjson.loads(line)["turn"] for line in grading[-1]["messages"][-1]["content"].splitlines() if '"turn"' in line
    ]
    assert 1 in shown and 60 in shown and len(shown) < 60  # the refitted transcript leaves the middle out
    assert [int(turn) for turn in row["turn_p_problem"]] == shown
    assert len(looks) == len(shown)  # a look per turn shown, none asked of the plan the server refused
