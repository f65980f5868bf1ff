"""Conversational Flow Rate through the Python API: its score, its threshold, and eval_lib's example."""

import asyncio

import pytest

from flowrate import ConversationalEvalTestCase, ConversationalFlowRateMetric, EvalTestCase, evaluate_conversations
from tests.helpers import NO_WAIT, ScriptedClient, conversation, verdict


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
