"""The Python API, with a CustomLLMClient and with the scripted judge over HTTP."""

import asyncio
import json

import pytest

from flowrate import (
    ConversationalEvalTestCase,
    ConversationalFlowRateMetric,
    CustomLLMClient,
    EvalTestCase,
    JudgeAccessError,
    RetryPolicy,
    evaluate_conversations,
)
from tests.conftest import TEST_KEY

NO_WAIT = RetryPolicy(max_retries=2, timeout=5, backoff=0, backoff_max=0)


class ScriptedClient(CustomLLMClient):
    def __init__(self, *replies):
        self.replies = list(replies)
        self.calls = []

    async def chat_complete(self, messages, temperature):
        self.calls.append((messages, temperature))
        return self.replies[min(len(self.calls) - 1, len(self.replies) - 1)], 0.001

    def get_model_name(self):
        return "scripted-client"


def conversation(*texts, id=None):
    return ConversationalEvalTestCase(
        id=id, turns=[EvalTestCase(input=texts[i], actual_output=texts[i + 1]) for i in range(0, len(texts), 2)]
    )


def verdict(value, issues=()):
    return json.dumps({"reason": "because", "key_issues": list(issues), "verdict": value})


@pytest.mark.parametrize(
    "value, score, threshold, success",
    [
        ("partial", 0.7, 0.7, True),  # the edge: 0.7 passes at 0.7
        ("partial", 0.7, 0.71, False),
        ("mostly", 0.9, 0.9, True),
        ("minor", 0.3, 0.7, False),
        ("none", 0.0, 0.0, True),
    ],
)
async def test_score_and_threshold(value, score, threshold, success):
    metric = ConversationalFlowRateMetric(model=ScriptedClient(verdict(value)), threshold=threshold, retry=NO_WAIT)
    [result] = await evaluate_conversations([conversation("hi", "hello")], [metric])
    data = result.metrics_data[0]
    assert (data.score, data.success) == (score, success)


def test_the_eval_lib_example_runs_unchanged():
    client = ScriptedClient(verdict("mostly", ["turn 2: asks again for the order number"]))
    metric = ConversationalFlowRateMetric(model=client, threshold=0.7, verbose=False)
    case = ConversationalEvalTestCase(
        turns=[
            EvalTestCase(input="Where is order 12?", actual_output="Which order?"),
            EvalTestCase(input="12", actual_output="Order 12 ships today."),
        ]
    )
    [result] = asyncio.run(evaluate_conversations([case], [metric]))
    data = result.metrics_data[0]
    assert data.name == "conversational_flow_rate"
    assert (data.score, data.success, data.reason, data.evaluation_cost) == (0.9, True, "because", 0.001)
    log = data.evaluation_log
    assert log["verdict"] == "mostly" and log["number_of_turns"] == 2 and log["threshold"] == 0.7
    assert log["key_issues"] == ["turn 2: asks again for the order number"] and log["final_reason"] == "because"
    messages, temperature = client.calls[0]
    assert temperature == 0.0 and "Which order?" in messages[-1]["content"]


async def test_unparsable_reply_gets_one_reask_then_an_error_row():
    client = ScriptedClient("I liked it.", "Still no JSON, sorry.")
    metric = ConversationalFlowRateMetric(model=client, retry=NO_WAIT)
    [result] = await evaluate_conversations([conversation("a", "b")], [metric])
    data = result.metrics_data[0]
    assert len(client.calls) == 2
    assert "could not be used" in client.calls[1][0][-1]["content"]
    assert data.score is None and data.success is None
    assert data.error.type == "UnparsableReply"


async def test_reask_recovers_the_verdict():
    client = ScriptedClient('{"verdict": "great"}', verdict("fully"))
    metric = ConversationalFlowRateMetric(model=client, retry=NO_WAIT)
    [result] = await evaluate_conversations([conversation("a", "b")], [metric])
    assert result.metrics_data[0].score == 1.0 and len(client.calls) == 2


def http_metric(judge, **kwargs):
    return ConversationalFlowRateMetric(
        model="gpt-4o", api_base=judge.base_url, retry=kwargs.pop("retry", NO_WAIT), **kwargs
    )


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)


async def test_one_call_per_conversation_and_at_most_j_in_flight(judge, api_key):
    judge.latency_s = 0.05
    cases = [conversation("hi", f"hello {n}", id=f"c{n}") for n in range(24)]
    results = await evaluate_conversations(cases, [http_metric(judge)], concurrency=4)
    assert judge.requests == 24
    assert judge.max_in_flight == 4
    assert [r.test_case.id for r in results] == [f"c{n}" for n in range(24)]
    body = judge.bodies[0]
    assert body["temperature"] == 0 and body["response_format"]["type"] == "json_schema"
    assert "n" not in body


async def test_rate_limit_then_success_counts_attempts(judge, api_key):
    judge.script("MARK-429", {"status": 429, "retry_after": 1}, {"status": 500}, {"verdict": "partial"})
    [result] = await evaluate_conversations([conversation("MARK-429", "x")], [http_metric(judge)])
    data = result.metrics_data[0]
    assert data.score == 0.7 and data.evaluation_log["attempts"] == 3


async def test_exhausted_retries_become_an_error_row(judge, api_key):
    judge.script("MARK-500", {"status": 500})
    [failing, fine] = await evaluate_conversations(
        [conversation("MARK-500", "x", id="bad"), conversation("ok", "ok", id="good")], [http_metric(judge)]
    )
    data = failing.metrics_data[0]
    assert data.error.type == "InternalServerError" and data.score is None
    assert data.evaluation_log["attempts"] == 3  # 1 + max_retries
    assert judge.calls_for("MARK-500") == 3
    assert fine.metrics_data[0].score == 1.0


async def test_a_hung_call_times_out_and_is_retried(judge, api_key):
    judge.script("MARK-HANG", {"hang": True}, {"verdict": "minor"})
    policy = RetryPolicy(max_retries=1, timeout=0.5, backoff=0, backoff_max=0)
    [result] = await evaluate_conversations([conversation("MARK-HANG", "x")], [http_metric(judge, retry=policy)])
    assert result.metrics_data[0].score == 0.3 and judge.calls_for("MARK-HANG") == 2


async def test_malformed_http_reply_is_reasked(judge, api_key):
    judge.script("MARK-MAL", {"content": '```json\n{"verdict": "superb"}\n```'}, {"content": "no verdict"})
    [result] = await evaluate_conversations([conversation("MARK-MAL", "x")], [http_metric(judge)])
    assert result.metrics_data[0].error.type == "UnparsableReply" and judge.calls_for("MARK-MAL") == 2


async def test_rejected_key_raises_and_is_not_retried(judge, api_key):
    judge.script("MARK-401", {"status": 401})
    with pytest.raises(JudgeAccessError, match="OPENAI_API_KEY"):
        await evaluate_conversations([conversation("MARK-401", "x")], [http_metric(judge)])
    assert judge.calls_for("MARK-401") == 1


async def test_missing_key_fails_before_any_call(judge, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    metric = ConversationalFlowRateMetric(model="anthropic:claude-3-5-sonnet-latest", retry=NO_WAIT)
    with pytest.raises(JudgeAccessError, match="set ANTHROPIC_API_KEY"):
        await evaluate_conversations([conversation("a", "b")], [metric])


async def test_error_messages_never_carry_the_key(judge, api_key):
    judge.script("MARK-ECHO", {"status": 500, "echo_auth": True})
    [result] = await evaluate_conversations([conversation("MARK-ECHO", "x")], [http_metric(judge)])
    message = result.metrics_data[0].error.message
    assert "Bearer ***" in message and TEST_KEY not in message


async def test_unknown_price_is_null_not_zero(judge, api_key):
    metric = ConversationalFlowRateMetric(model="my-local-model", api_base=judge.base_url, retry=NO_WAIT)
    [result] = await evaluate_conversations([conversation("a", "b")], [metric])
    assert result.metrics_data[0].score == 1.0 and result.metrics_data[0].evaluation_cost is None
