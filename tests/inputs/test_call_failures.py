"""Calls that gave the user no ordinary reply: a failed call keeps its user message with the failure
as the bot's reply (never a stopped run or a dropped message), and a model's refusal is its reply.
The responses are the `openai` SDK's own models (`ChatCompletion`, and `ErrorObject`, the `error`
of the API's error body), dumped as the API returns them."""

import json

from flowrate.inputs.files import InputSet, with_duplicates_marked
from tests.helpers import local_eval, read_rows
from tests.inputs.sources.platforms import exchanges
from tests.inputs.sources.sdk_logs import ANSWER, FOLLOW_UP, FORECAST, QUESTION, openai_chat_calls, write_jsonl

OVERLOADED = "The server is overloaded. Please retry."


def failed(call):
    """`call` as a log keeps it when the API answered with its error body (HTTP 503)."""
    from openai.types.shared import ErrorObject

    error = ErrorObject.model_validate({"message": OVERLOADED, "type": "server_error", "param": None, "code": None})
    return {"request": call["request"], "response": {"error": error.model_dump(mode="json")}}


def read(path):
    inputs = InputSet([str(path)])
    try:
        return list(with_duplicates_marked(inputs.records(), {}))
    finally:
        inputs.close()


def replies(record):
    return [(user, reply) for user, reply, _ in exchanges(record.case)]


def test_a_failed_last_call_keeps_its_user_message_with_the_failure_as_the_reply(judge, run_flowrate, tmp_path):
    calls = openai_chat_calls(metadata={"conversation_id": "conv-42"})
    write_jsonl(tmp_path / "log.jsonl", [*calls[:2], failed(calls[2])])

    [record] = read(tmp_path / "log.jsonl")

    assert record.problems == []
    assert replies(record) == [(QUESTION, ANSWER), (FOLLOW_UP, f"[no reply: the call failed: {OVERLOADED}]")]
    result = run_flowrate(*local_eval(judge, "log.jsonl", "--metric", "conversational_flow_rate"))
    assert result.returncode == 0, result.stderr
    assert [row["id"] for row in read_rows(tmp_path / "out.jsonl")] == ["conv-42"]
    assert json.dumps(f"[no reply: the call failed: {OVERLOADED}]")[1:-1] in judge.bodies[-1]["messages"][-1]["content"]


def test_a_failed_call_retried_with_success_leaves_the_reply_that_came(tmp_path):
    calls = openai_chat_calls(metadata={"conversation_id": "conv-42"})
    write_jsonl(tmp_path / "log.jsonl", [calls[0], calls[1], failed(calls[2]), calls[2]])

    [record] = read(tmp_path / "log.jsonl")

    assert record.problems == [] and replies(record) == [(QUESTION, ANSWER), (FOLLOW_UP, FORECAST)]


def test_a_failed_call_the_user_asked_past_keeps_the_failure_where_it_was(tmp_path):
    calls = openai_chat_calls(metadata={"conversation_id": "conv-42"})
    again = json.loads(json.dumps(calls[2]))
    again["request"]["messages"].append({"role": "user", "content": "Hello?"})
    write_jsonl(tmp_path / "log.jsonl", [calls[0], calls[1], failed(calls[2]), again])

    [record] = read(tmp_path / "log.jsonl")

    assert record.problems == []
    assert replies(record) == [
        (QUESTION, ANSWER),
        (FOLLOW_UP, f"[no reply: the call failed: {OVERLOADED}]"),
        ("Hello?", FORECAST),
    ]


def test_a_refusal_is_the_assistants_reply_in_its_call_and_in_the_history_after_it(tmp_path):
    from openai.types.chat import ChatCompletion

    refusal = "I'm sorry, I can't help with that."
    calls = openai_chat_calls(metadata={"conversation_id": "conv-42"})
    declined = ChatCompletion.model_validate(
        {
            **calls[1]["response"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": None, "refusal": refusal},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
        }
    )
    calls[1]["response"] = declined.model_dump(mode="json")
    sent_back = declined.choices[0].message.model_dump(exclude_none=True)  # as a client appends it to the history
    calls[2]["request"]["messages"][4] = sent_back
    write_jsonl(tmp_path / "log.jsonl", calls)

    [record] = read(tmp_path / "log.jsonl")

    assert record.problems == [] and replies(record) == [(QUESTION, refusal), (FOLLOW_UP, FORECAST)]
