"""A batch request line asks for what the same request online asks for: its temperature, its
reply limit, and one line per request the judging step gives (a sample each where the server
does not serve `n`, the verdict-first look of `--score combined`)."""

import orjson

from flowrate.evaluation.provider_batch import request_lines
from flowrate.metrics.rubric_metric import RubricMetric
from flowrate.metrics.step import Judging
from flowrate.settings.groups import ScoreChoice
from tests.helpers import conversation


def test_a_batch_line_carries_the_online_requests_temperature_and_max_tokens():
    for samples in (1, 3):
        metric = RubricMetric(None, model="gpt-4o", samples=samples)
        case = conversation("Where is my order?", "It ships today.")
        [line] = request_lines("flow-x", Judging(metric, case))
        body = orjson.loads(line)["body"]
        assert body["temperature"] == metric.temperature == (0.0 if samples == 1 else 0.7)
        assert body["max_tokens"] == metric.budget.reply_token_limit
        assert body.get("n", 1) == samples


def test_a_combined_score_puts_the_verdict_first_look_beside_the_request_in_the_batch():
    metric = RubricMetric(None, model="gpt-4o", choice=ScoreChoice(score="combined", logprobs=True))
    case = conversation("Where is my order?", "It ships today.")
    lines = [orjson.loads(line) for line in request_lines("flow-x", Judging(metric, case))]
    assert [line["custom_id"] for line in lines] == ["flow-x", "flow-x-look"]
    judge, look = (line["body"] for line in lines)
    assert judge["messages"] == look["messages"] and look["max_tokens"] < judge["max_tokens"]
    assert "reason" not in orjson.dumps(look["response_format"]).decode()


def test_a_batch_line_for_a_reasoning_model_is_shaped_by_the_provider_rules_as_online():
    """platform.openai.com/docs/guides/reasoning: no temperature, no max_tokens, the reasoning effort."""
    metric = RubricMetric(None, model="o4-mini")
    [line] = request_lines("flow-x", Judging(metric, conversation("Where is my order?", "It ships today.")))
    body = orjson.loads(line)["body"]
    assert "temperature" not in body and "max_tokens" not in body
    assert body["reasoning_effort"] == "low"
    assert body["prompt_cache_key"] == f"flowrate-conversational_flow_rate-{metric.rubric.version}"
