"""A batch request line asks for what the same request online asks for: its temperature and its
reply limit."""

import orjson

from flowrate.metrics.rubric_metric import RubricMetric
from tests.helpers import conversation


def test_a_batch_line_carries_the_online_requests_temperature_and_max_tokens():
    for samples in (1, 3):
        metric = RubricMetric(None, model="gpt-4o", samples=samples)
        plan = metric.plan(conversation("Where is my order?", "It ships today."))
        body = orjson.loads(metric.batch.request("flow-x", plan))["body"]
        assert body["temperature"] == metric.temperature == (0.0 if samples == 1 else 0.7)
        assert body["max_tokens"] == metric.budget.reply_token_limit


def test_a_batch_line_for_a_reasoning_model_is_shaped_by_the_provider_rules_as_online():
    """platform.openai.com/docs/guides/reasoning: no temperature, no max_tokens, the reasoning effort."""
    metric = RubricMetric(None, model="o4-mini")
    plan = metric.plan(conversation("Where is my order?", "It ships today."))
    body = orjson.loads(metric.batch.request("flow-x", plan))["body"]
    assert "temperature" not in body and "max_tokens" not in body
    assert body["reasoning_effort"] == "low"
    assert body["prompt_cache_key"] == f"flowrate-conversational_flow_rate-{metric.rubric.version}"
