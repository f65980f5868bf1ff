"""API keys and credentials: a missing key told before any call, a rejected one stopping the run,
and no key or credential ever in a message."""

import pytest

from flowrate import ConversationalFlowRateMetric, JudgeAccessError, evaluate_conversations
from flowrate.judge.retry import redact_secrets
from tests.helpers import NO_WAIT, TEST_KEY, conversation, distinct, http_metric, turn_record, write_jsonl


async def test_missing_key_fails_before_any_call(judge, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    metric = ConversationalFlowRateMetric(model="anthropic:claude-3-5-sonnet-latest", retry=NO_WAIT)
    with pytest.raises(JudgeAccessError, match="set ANTHROPIC_API_KEY"):
        await evaluate_conversations([conversation("a", "b")], [metric])


def test_missing_key_exits_2_naming_the_variable(judge, run_flowrate, conversations, cli_env):
    env = {k: v for k, v in cli_env.items() if k != "OPENAI_API_KEY"}
    result = run_flowrate("eval", conversations(turn_record("a", "b", "c")), "--model", "gpt-4o", env=env)
    assert result.returncode == 2
    assert result.stderr.strip() == "flowrate: error: no API key for model 'gpt-4o': set OPENAI_API_KEY"


async def test_rejected_key_raises_and_is_not_retried(judge, api_key):
    judge.script("MARK-401", {"status": 401})
    with pytest.raises(JudgeAccessError, match="OPENAI_API_KEY"):
        await evaluate_conversations([conversation("MARK-401", "x")], [http_metric(judge)])
    assert judge.calls_for("MARK-401") == 1


def test_rejected_key_stops_the_run_at_once(judge, run_flowrate, conversations):
    judge.script("", {"status": 401})  # every request
    path = conversations(*[turn_record(f"c{n}", "a", "b") for n in range(50)])
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-j", "2")
    assert result.returncode == 2
    assert "rejected the API key for model 'gpt-4o' (401): check OPENAI_API_KEY" in result.stderr
    assert judge.requests <= 2
    assert TEST_KEY not in result.stderr + result.stdout


async def test_error_messages_never_carry_the_key(judge, api_key):
    judge.script("MARK-ECHO", {"status": 500, "echo_auth": True})
    [result] = await evaluate_conversations([conversation("MARK-ECHO", "x")], [http_metric(judge)])
    message = result.metrics_data[0].error.message
    assert "Bearer ***" in message and TEST_KEY not in message


def test_secrets_are_redacted(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-verysecret")
    assert redact_secrets("Incorrect key sk-ant-verysecret given") == "Incorrect key *** given"


def test_credentials_in_the_api_base_are_refused_without_echoing_them(run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(2))
    result = run_flowrate("eval", path, "--api-base", "http://user:hunter22secret@127.0.0.1:9/v1")
    assert result.returncode == 2
    assert "holds credentials" in result.stderr and "OPENAI_API_KEY" in result.stderr
    assert "hunter22secret" not in result.stderr + result.stdout
