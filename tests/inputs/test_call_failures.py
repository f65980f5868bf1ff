"""Messages that are not an ordinary reply: a failed call keeps its user message with the failure
as the bot's reply (never a stopped run or a dropped message), a model's refusal is its reply, and
a system message in mid-conversation stays where it came. The responses are the `openai` SDK's own models (`ChatCompletion`, and `ErrorObject`, the `error`
of the API's error body), dumped as the API returns them."""

import json

from flowrate.inputs.files import InputSet, with_duplicates_marked
from tests.helpers import local_eval, read_rows
from tests.inputs.sources.platforms import FIXTURES, exchanges
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


def test_a_sharegpt_system_message_in_mid_conversation_stays_where_it_was(tmp_path):
    """The fixture's tool example with a `system` turn between its two exchanges, as a dataset
    records an instruction given mid-conversation: it stays beside the turn it came in, and the
    top-level `system` stays the system prompt."""
    [weather, _] = json.loads((FIXTURES / "sharegpt.json").read_text())
    turns = weather["conversations"]
    weather["conversations"] = [*turns[:4], {"from": "system", "value": "The user is now in Qingdao."}, *turns[4:]]
    path = tmp_path / "mid.json"
    path.write_text(json.dumps([weather]))

    [record] = read(path)

    assert record.problems == [] and record.case.chatbot_role == "You are a weather assistant."
    first, second = record.case.turns
    assert first.tool_activity[-1] == "system: The user is now in Qingdao."
    assert (second.input, second.actual_output, second.tool_activity) == (
        "Do I need an umbrella?",
        "No, no rain is expected today.",
        [],
    )


def test_an_intercom_conversation_the_api_cut_short_is_named_not_judged_as_whole(tmp_path):
    """Retrieve a conversation lists at most 500 parts; `conversation_parts.total_count` says how
    many there are. The fixture's conversation (Intercom's published example) with a count above
    the parts it lists is one the API cut."""
    conversation = json.loads((FIXTURES / "intercom.json").read_text())
    listed = len(conversation["conversation_parts"]["conversation_parts"])
    conversation["conversation_parts"]["total_count"] = 512
    path = tmp_path / "cut.json"
    path.write_text(json.dumps(conversation))

    [record] = read(path)

    assert record.case is None and record.problems == [
        f"{path}#0: conversation '367': conversation_parts: the API listed {listed} of its 512 parts (total_count),"
        " the rest cut off; export the whole conversation"
    ]


def test_a_langfuse_trace_of_no_session_is_still_a_langfuse_trace(tmp_path):
    """The session fixture's traces as the Langfuse SDK's `Trace` model dumps them when they have
    no session: `Trace.dict()` (langfuse 3.0, api/resources/commons/types/trace.py) leaves out
    null fields, so no `sessionId` key; and a `Trace` has no `observations` (`TraceWithDetails` has)."""
    rows = [json.loads(line) for line in (FIXTURES / "langfuse" / "session.jsonl").read_text().splitlines()]
    trace_fields = ("id", "timestamp", "name", "input", "output", "release", "version", "userId", "metadata", "tags")
    traces = [
        {name: row[name] for name in trace_fields if row.get(name) is not None} for row in rows if "traceId" not in row
    ]
    observations = [row for row in rows if "traceId" in row]
    path = tmp_path / "export.jsonl"
    write_jsonl(path, [*traces, *observations])

    records = read(path)

    assert [record.format for record in records] == ["langfuse"] * len(records) and records
    assert all(record.problems == [] for record in records)
    assert {turn.input for record in records for turn in record.case.turns} >= {QUESTION, FOLLOW_UP}


def test_a_failed_router_call_beside_the_conversation_leaves_no_failure_in_it(tmp_path):
    calls = openai_chat_calls(metadata={"conversation_id": "conv-42"})
    router = json.loads(json.dumps(calls[2]))  # the SDK's call, made an intent router's: its own prompt
    router["request"]["messages"] = [
        {"role": "system", "content": "Classify the user's messages as weather or other. Answer one word."},
        {"role": "user", "content": QUESTION},
        {"role": "user", "content": FOLLOW_UP},
    ]
    write_jsonl(tmp_path / "log.jsonl", [calls[0], calls[1], failed(router), calls[2]])

    [record] = read(tmp_path / "log.jsonl")

    assert record.problems == [] and replies(record) == [(QUESTION, ANSWER), (FOLLOW_UP, FORECAST)]
    assert "the call failed" not in json.dumps(record.case.model_dump())
