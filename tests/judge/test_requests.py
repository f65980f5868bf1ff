"""What a served judge sends: the request `ServedJudge.chat_request` builds from the model's facts,
whichever transport sends it (flowrate's aiohttp client or LiteLLM), as the scripted server on
127.0.0.1 receives it."""

from flowrate.judge.transports import make_backend
from flowrate.rubric.model import load_rubric
from flowrate.scores.schema import reply_schema

MESSAGES = [{"role": "system", "content": "Rate the flow."}, {"role": "user", "content": "MARK-REQUEST"}]


async def test_both_transports_send_the_request_the_served_judge_builds(judge, transport, api_key):
    judge.behave_as("llama-cpp-python")  # refuses json_schema: the request learns the json_object form
    backend = make_backend("smol", judge.base_url, transport)
    backend.asks_logprobs = True
    schema = backend.structured_output("flow", reply_schema(load_rubric()))
    completion = await backend.complete(MESSAGES, n=1, timeout=5, response_format=schema, max_tokens=300)
    built = backend.chat_request(MESSAGES, 1, schema, 0.0, 300)
    sent = judge.bodies[-1]
    assert completion.response_format == built.form == "json_object_schema"
    assert built.body["response_format"]["type"] == "json_object" and built.body["top_logprobs"] == 10
    assert {key: sent.get(key) for key in built.body} == built.body  # LiteLLM may add keys of its own
    assert [body["response_format"]["type"] for body in judge.bodies] == ["json_schema", "json_object"]
