"""Langfuse exports: the generations of one session are one conversation (JSONL of traces and
observations, or the API's list response); a real trace exported from Langfuse's UI is read
with its tool call; a broken observation is named."""

import json
from pathlib import Path

from tests.inputs.sources.langfuse_exports import langfuse_export
from tests.inputs.sources.sdk_logs import assert_weather, read_file, write_jsonl

FIXTURES = Path(__file__).parent / "fixtures" / "langfuse"
SESSION = FIXTURES / "session.jsonl"


def session_rows():
    return [json.loads(line) for line in SESSION.read_text().splitlines()]


def test_the_generations_of_one_session_are_one_conversation_with_its_tool_call():
    records, notices = read_file(SESSION)
    assert len(records) == 1 and notices == []
    assert_weather(records[0], "langfuse")
    case = records[0].case
    assert case.id == "sess-42"
    assert {key: case.metadata[key] for key in ("session_id", "user", "tags", "trace_id", "model")} == {
        "session_id": "sess-42",
        "user": "user-7",
        "tags": ["weather"],
        "trace_id": "trace-1",
        "model": "gpt-4o-2024-08-06",
    }


def test_the_api_list_responses_of_observations_and_of_traces_are_read(tmp_path):
    rows = session_rows()
    observations = [row for row in rows if "traceId" in row][::-1]  # the API's newest first
    traces = [row for row in rows if "traceId" not in row]
    path = tmp_path / "export.json"
    meta = {"page": 1, "limit": 50, "totalItems": len(rows), "totalPages": 1}
    path.write_text(json.dumps({"data": observations + traces, "meta": meta}))
    records, _ = read_file(path)
    assert len(records) == 1
    assert_weather(records[0], "langfuse")


def test_a_trace_exported_from_langfuses_ui_is_one_conversation_with_its_tool_call():
    path = FIXTURES / "langgraph-python.trace.json"
    records, notices = read_file(path)
    assert len(records) == 1 and records[0].problems == []
    case = records[0].case
    assert case.id == "e1fde3efec57ce8a69bafd3fb928a7eb"  # no session: the trace
    assert [turn.input for turn in case.turns] == ["Be helpful!\nSearch the web for 'example' and summarize."]
    assert case.turns[0].actual_output.startswith('The search for "example" primarily leads to the website')
    assert case.turns[0].tool_activity == [
        'call Web-Search({"query":"example"})',
        'result Web-Search: [{"url": "https://example.com", "title": "Example Result", "q": "example"}]',
    ]
    assert case.metadata["started_at"].startswith("2025-08-22T09:38:56")
    assert notices == [f"{path}: 2 generation(s) with no conversation key (sessionId); each trace is one conversation"]


def test_a_broken_observation_is_named_by_file_line_and_field(tmp_path):
    rows = session_rows()
    rows[3]["input"][2]["tool_calls"][0]["function"]["name"] = None
    path = write_jsonl(tmp_path / "session.jsonl", rows)
    records, _ = read_file(path)
    assert records[0].problems == [
        f"{path}:4: observation 'gen-2': input[2].tool_calls[0].function.name: expected text, missing"
    ]


def test_a_session_of_traces_whose_input_and_output_hold_messages_is_one_conversation(tmp_path):
    generations = [row for row in session_rows() if row.get("type") == "GENERATION"]
    traces = []
    for number, generation in enumerate(generations[1:]):  # a trace per user turn, as the app logged it
        trace = {"id": f"trace-{number}", "timestamp": generation["startTime"], "sessionId": None, "tags": []}
        traces.append({**trace, "input": json.dumps(generation["input"]), "output": generation["output"]})
    path = tmp_path / "session.json"  # GET /api/public/sessions/{id}
    path.write_text(
        json.dumps({"id": "sess-9", "createdAt": "2026-01-01T00:00:00Z", "projectId": "p", "traces": traces})
    )
    records, notices = read_file(path)
    assert len(records) == 1 and notices == []
    case = records[0].case
    assert case.id == "sess-9"
    assert [(turn.input, turn.actual_output) for turn in case.turns] == [
        ("What's the weather in Paris?", "It is 18°C and sunny in Paris."),
        ("And tomorrow?", "Tomorrow brings rain and 14°C."),
    ]
    assert case.metadata["started_at"] == "2026-01-01T00:00:05Z"


def test_a_trace_of_two_pydantic_ai_agents_is_the_conversation_of_the_one_the_user_talks_to():
    path = langfuse_export("pydantic-ai-tools")  # a joke writer of two user turns, then its critic's call
    records, notices = read_file(path)
    assert len(records) == 1 and records[0].problems == []
    case = records[0].case
    assert case.chatbot_role.startswith("You are a creative joke writer.")
    assert [turn.input for turn in case.turns] == [
        "Select and call THREE of the available tools to get joke suggestions about 'programming'.",
        "Now write a funny joke about 'programming' based on the suggestions you received. Just output the joke,"
        " nothing else.",
    ]
    assert case.turns[0].tool_activity[0] == 'call get_pun_suggestion({"topic":"programming"})'
    assert len(case.turns[0].tool_activity) == 6
    assert case.turns[0].actual_output.startswith("I gathered some great ideas for a programming joke!")
    assert case.turns[1].actual_output == "Why do programmers hate nature?  \nIt has too many bugs!"
    assert notices == [
        f"{path}: 1 call(s) of 1 conversation(s) were left out: each had a system prompt and a history of its own"
        " (a router's, a guardrail's or another agent's call); a conversation is its chain of calls with the most"
        " user messages",
        f"{path}: 4 generation(s) with no conversation key (sessionId); each trace is one conversation",
    ]


def test_the_calls_of_a_microsoft_agent_framework_trace_each_given_only_new_messages_are_one_history():
    path = langfuse_export("microsoft-agent")  # the question, then the tool's result alone
    records, _ = read_file(path)
    assert len(records) == 1 and records[0].problems == []
    [turn] = records[0].case.turns
    assert (turn.input, turn.actual_output) == (
        "What's the weather in Tokyo?",
        "Current conditions in Tokyo, Japan: stormy, high around 23°C.",
    )
    assert turn.tool_activity[0] == 'call get_weather({"location":"Tokyo, Japan"})'
    assert len(turn.tool_activity) == 2 and "stormy with a high of 23" in turn.tool_activity[1]


def test_a_microsoft_agent_framework_trace_keeps_its_agents_system_prompt_and_names_the_tool_of_each_result():
    """The system prompt is on the agent's `invoke_agent` observation, not on its generations; the
    tool's result comes alone in the second call (by its call's id), wrapped in the framework's
    `function_result` content."""
    records, _ = read_file(langfuse_export("microsoft-agent"))
    [record] = records
    assert record.problems == []
    assert record.case.chatbot_role == "You are a helpful assistant."
    [turn] = record.case.turns
    assert turn.tool_activity == [
        'call get_weather({"location":"Tokyo, Japan"})',
        "result get_weather: The weather in Tokyo, Japan is stormy with a high of 23°C.",
    ]


def test_the_result_of_a_tool_the_last_call_asked_for_is_read_from_its_tool_observation():
    """The Vercel AI SDK example stopped once its tool had run: the tool's result is only on the
    TOOL observation, named by the call's id (`ai.toolCall.id`)."""
    records, _ = read_file(langfuse_export("vercel-aisdk"))
    [record] = records
    assert record.problems == []
    [turn] = record.case.turns
    assert (turn.input, turn.actual_output) == ("What is the weather like today in San Francisco?", "")
    assert turn.tool_activity == [
        'call getWeather({"location":"San Francisco"})',
        'result getWeather: {"location":"San Francisco","temperature":64}',
    ]


def test_a_llamaindex_completion_in_langfuse_is_its_prompt_and_completion():
    """LlamaIndex's `complete` through OpenInference: the generation's input is the call's
    arguments (`{"args": [...]}`), its prompt the span attribute `llm.prompts`."""
    records, _ = read_file(langfuse_export("llamaindex"))
    [record] = records
    assert record.problems == []
    assert record.case.id == "session_abc"
    [turn] = record.case.turns
    assert turn.input == "What is Langfuse?"
    assert turn.actual_output.startswith("Langfuse is a tool designed to help developers monitor and debug")
