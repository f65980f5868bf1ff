"""API logs written with the vendors' own SDK types, offline: one conversation of two user turns
and a tool call, as each API logs it, call by call (each call's input repeats the history, or
continues the previous response). The responses are the SDK's models (`openai.types`,
`anthropic.types`) validated and dumped as the API returns them; the requests are the request
bodies of the API references (platform.openai.com/docs/api-reference/chat/create,
/responses/create; platform.claude.com/docs/en/api/messages)."""

import json

SYSTEM = "You are a weather assistant."
QUESTION = "What's the weather in Paris?"
ARGUMENTS = {"city": "Paris"}
RESULT = '{"temp_c": 18, "sky": "sunny"}'
ANSWER = "It is 18°C and sunny in Paris."
FOLLOW_UP = "And tomorrow?"
FORECAST = "Tomorrow brings rain and 14°C."
START_S = 1767225600  # 2026-01-01T00:00:00Z
CALL = f"call get_weather({json.dumps(ARGUMENTS, separators=(',', ':'))})"
TOOL_RESULT = f"result get_weather: {RESULT}"


def openai_chat_calls(metadata=None):
    """The three Chat Completions calls, as {"request", "response"} pairs."""
    from openai.types.chat import ChatCompletion

    tool_call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
    }
    history = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    replies = [
        {"role": "assistant", "content": None, "tool_calls": [tool_call]},
        {"role": "assistant", "content": ANSWER},
        {"role": "assistant", "content": FORECAST},
    ]
    calls = []
    for number, reply in enumerate(replies):
        if number == 1:
            history.append({"role": "tool", "tool_call_id": "call_1", "content": RESULT})
        if number == 2:
            history.append({"role": "user", "content": [{"type": "text", "text": FOLLOW_UP}]})
        request = {"model": "gpt-4o", "messages": list(history), "user": "user-7", "store": True}
        if metadata is not None:
            request["metadata"] = metadata
        finish = "tool_calls" if reply.get("tool_calls") else "stop"
        response = ChatCompletion.model_validate(
            {
                "id": f"chatcmpl-{number}",
                "object": "chat.completion",
                "created": START_S + 10 * number,
                "model": "gpt-4o-2024-08-06",
                "choices": [{"index": 0, "message": reply, "finish_reason": finish, "logprobs": None}],
                "usage": {"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28},
                "metadata": metadata,
            }
        ).model_dump(mode="json")
        calls.append({"request": request, "response": response})
        history.append(reply)
    return json.loads(json.dumps(calls))  # no message shared between calls, as when read from a log


def _response(number, output, previous=None):
    from openai.types.responses import Response

    return Response.model_validate(
        {
            "id": f"resp_{number}",
            "object": "response",
            "created_at": START_S + 10 * number,
            "model": "gpt-4.1-2025-04-14",
            "instructions": SYSTEM,
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "previous_response_id": previous,
            "status": "completed",
            "user": "user-7",
            "metadata": {"channel": "web"},
        }
    ).model_dump(mode="json")


def openai_responses_calls():
    """The three Responses calls, each continuing the previous one by `previous_response_id`."""
    message = {"type": "message", "id": "msg_{}", "role": "assistant", "status": "completed"}
    reasoning = {"type": "reasoning", "id": "rs_0", "summary": [{"type": "summary_text", "text": "HIDDEN REASONING"}]}
    function_call = {
        "type": "function_call",
        "id": "fc_0",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city":"Paris"}',
        "status": "completed",
    }
    outputs = [
        [reasoning, function_call],
        [{**message, "id": "msg_1", "content": [{"type": "output_text", "text": ANSWER, "annotations": []}]}],
        [{**message, "id": "msg_2", "content": [{"type": "output_text", "text": FORECAST, "annotations": []}]}],
    ]
    inputs = [
        [{"role": "user", "content": QUESTION}],
        [{"type": "function_call_output", "call_id": "call_1", "output": RESULT}],
        [{"role": "user", "content": [{"type": "input_text", "text": FOLLOW_UP}]}],
    ]
    calls = []
    for number, (given, output) in enumerate(zip(inputs, outputs)):
        previous = f"resp_{number - 1}" if number else None
        request = {"model": "gpt-4.1", "instructions": SYSTEM, "input": given, "previous_response_id": previous}
        calls.append({"request": request, "response": _response(number, output, previous)})
    return json.loads(json.dumps(calls))  # no message shared between calls, as when read from a log


def anthropic_calls():
    """The three Messages calls, as {"request", "response", "timestamp", "metadata"} records."""
    from anthropic.types import Message

    thinking = {"type": "thinking", "thinking": "HIDDEN THINKING", "signature": "c2ln"}
    tool_use = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": ARGUMENTS}
    replies = [
        [thinking, {"type": "text", "text": "Let me check."}, tool_use],
        [{"type": "text", "text": ANSWER}],
        [{"type": "text", "text": FORECAST}],
    ]
    history = [{"role": "user", "content": QUESTION}]
    calls = []
    for number, content in enumerate(replies):
        if number == 1:
            result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": RESULT}]}
            history.append({"role": "user", "content": [result]})
        if number == 2:
            history.append({"role": "user", "content": [{"type": "text", "text": FOLLOW_UP}]})
        request = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "system": [{"type": "text", "text": SYSTEM}],
            "messages": list(history),
            "metadata": {"user_id": "user-7"},
        }
        response = Message.model_validate(
            {
                "id": f"msg_{number}",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5-20250929",
                "content": content,
                "stop_reason": "tool_use" if number == 0 else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 30, "output_tokens": 12},
            }
        ).model_dump(mode="json")
        timestamp = f"2026-01-01T00:00:{10 * number:02d}Z"
        calls.append(
            {"request": request, "response": response, "timestamp": timestamp, "metadata": {"session_id": "s-42"}}
        )
        history.append({"role": "assistant", "content": content})
    return json.loads(json.dumps(calls))  # no message shared between calls, as when read from a log


def read_file(path, format=None):
    """The records of `path` (valid or not) and the notices the read gave."""
    from flowrate.inputs.files import InputSet

    inputs = InputSet([str(path)], format=format)
    records = list(inputs.records())
    inputs.close()
    return records, inputs.notices


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def assert_weather(record, format, first_reply=ANSWER, times=("2026-01-01T00:00:00Z", "2026-01-01T00:00:20Z")):
    """`record` is the weather conversation, read by the `format` reader: two turns, the tool's
    call and result in the first, the system prompt as the chatbot's role, dated by its first call."""
    assert record.problems == [] and record.format == format
    case = record.case
    assert case.chatbot_role == SYSTEM
    assert [(turn.input, turn.actual_output) for turn in case.turns] == [(QUESTION, first_reply), (FOLLOW_UP, FORECAST)]
    assert case.turns[0].tool_activity == [CALL, TOOL_RESULT] and case.turns[1].tool_activity == []
    assert (case.metadata["started_at"], case.metadata["ended_at"]) == times


def langsmith_runs(metadata=None):
    """The runs LangSmith records of the conversation, written offline by LangChain's own tracer
    (`langchain_core`'s LangChainTracer, posting nothing) around a scripted chat model, as
    LangSmith's `schemas.Run` exports them: a trace per user turn (the first with two llm runs
    around the tool call), the thread key in each run's `extra.metadata`."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
    from langchain_core.runnables import RunnableLambda
    from langchain_core.tracers.langchain import LangChainTracer
    from langsmith import Client, schemas

    runs = []
    client = Client(api_url="http://127.0.0.1:9", api_key="offline", info={}, auto_batch_tracing=False)

    class Recorder(LangChainTracer):
        def __init__(self, **kwargs):
            super().__init__(**{**kwargs, "client": client})

        def _persist_run_single(self, run):
            pass

        def _update_run_single(self, run):
            fields = {key: value for key, value in run.model_dump().items() if key in schemas.Run.model_fields}
            runs.append(json.loads(schemas.Run(**fields).model_dump_json()))

    call = {"name": "get_weather", "args": ARGUMENTS, "id": "call_1"}
    replies = [AIMessage(content="", tool_calls=[call]), AIMessage(content=ANSWER), AIMessage(content=FORECAST)]
    model = GenericFakeChatModel(messages=iter(replies))

    def turn(history, config):
        reply = model.invoke(history, config=config)
        if reply.tool_calls:
            history.extend([reply, ToolMessage(RESULT, tool_call_id="call_1")])
            reply = model.invoke(history, config=config)
        history.append(reply)
        return reply

    config = {"callbacks": [Recorder(project_name="weather")], "run_name": "weather-bot"}
    if metadata is not None:
        config["metadata"] = metadata
    history = [SystemMessage(SYSTEM), HumanMessage(QUESTION)]
    RunnableLambda(turn).invoke(history, config=config)
    history.append(HumanMessage(FOLLOW_UP))
    RunnableLambda(turn).invoke(history, config=config)
    return runs


def beginnings_notice(path, count, first, longer):
    """The notice of `count` conversations with no key that begin as the longer `longer` does."""
    return (
        f"{path}: {count} conversation(s) with no conversation key begin as a longer one of the file does (the"
        f" first: {first!r}, the beginning of {longer!r}): when they are the runs of one conversation, each is"
        " judged as a conversation of its own; a conversation key on their calls, or --conversation-key, makes"
        " them one"
    )
