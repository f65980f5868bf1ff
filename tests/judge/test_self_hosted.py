"""A self-hosted judge: its default timeout, its slots, and the context window it tells or does not."""

import pytest

from flowrate.judge.backend import HOSTED_TIMEOUT_S, SELF_HOSTED_TIMEOUT_S
from flowrate.judge.litellm_backend import LiteLLMBackend
from flowrate.settings.options import EvalSettings
from tests.helpers import chat_bodies, distinct, local_eval, long_conversation, read_rows, write_jsonl


def test_a_self_hosted_model_gets_a_long_default_timeout_and_a_hosted_one_the_usual(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert EvalSettings().timeout is None  # no --timeout: the judge decides
    assert LiteLLMBackend("smol", "http://127.0.0.1:1/v1").default_timeout_s() == SELF_HOSTED_TIMEOUT_S == 600
    assert LiteLLMBackend("ollama:llama3").default_timeout_s() == SELF_HOSTED_TIMEOUT_S
    assert LiteLLMBackend("gpt-4o").default_timeout_s() == HOSTED_TIMEOUT_S == 60


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


def test_a_window_the_server_does_not_tell_is_named_with_the_option_that_fits_it(judge, run_flowrate, tmp_path):
    judge.behave_as("llama-cpp-python", n_ctx=6000)
    path = write_jsonl(tmp_path / "c.jsonl", [long_conversation(), *distinct(2)])
    result = run_flowrate(*local_eval(judge, path, "-j", "1", "--max-retries", "5"))
    assert result.returncode == 3
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    error = rows["long"]["error"]
    assert error["type"] == "ContextWindowExceededError"
    assert "context window (6000 tokens): pass --max-input-tokens 3900" in error["message"]
    assert rows["long"]["attempts"] <= 2  # the form's probe at most, and no retry
    assert rows["c0"]["error"] is None
    fitted = run_flowrate(*local_eval(judge, path, "--max-input-tokens", "3900"))
    assert fitted.returncode == 0, fitted.stderr
