"""What a call costs: unknown (null, never zero) when no price is known for the model or a custom
client gives none."""

from flowrate import ConversationalEvalTestCase, ConversationalFlowRateMetric, EvalTestCase, evaluate_conversations
from tests.helpers import NO_WAIT, ScriptedClient, conversation, transport, verdict


async def test_unknown_price_is_null_not_zero(judge, api_key):
    metric = ConversationalFlowRateMetric(
        model="my-local-model", api_base=judge.base_url, retry=NO_WAIT, transport=transport()
    )
    [result] = await evaluate_conversations([conversation("a", "b")], [metric])
    assert result.metrics_data[0].score == 1.0 and result.metrics_data[0].evaluation_cost is None


async def test_a_custom_client_may_return_the_text_alone():
    class TextOnly(ScriptedClient):
        async def chat_complete(self, messages, temperature):
            return (await super().chat_complete(messages, temperature))[0]

    metric = ConversationalFlowRateMetric(model=TextOnly(verdict("mostly")), retry=NO_WAIT)
    case = ConversationalEvalTestCase(turns=[EvalTestCase(input="a", actual_output="b")])
    [result] = await evaluate_conversations([case], [metric])
    assert result.metrics_data[0].score == 0.9 and result.metrics_data[0].evaluation_cost is None
