"""OpenAI Chat Completions logs: request/response pairs and stored completions with their
messages, grouped into one conversation by a metadata key; each call alone without one."""

import json

from tests.inputs.sources.sdk_logs import (
    ANSWER,
    QUESTION,
    SYSTEM,
    assert_weather,
    beginnings_notice,
    openai_chat_calls,
    read_file,
    write_jsonl,
)


def test_the_calls_of_one_conversation_key_are_one_conversation_of_two_turns_with_its_tool_call(tmp_path):
    path = write_jsonl(tmp_path / "calls.jsonl", openai_chat_calls(metadata={"conversation_id": "conv-42"}))
    records, notices = read_file(path)
    assert len(records) == 1 and notices == []
    assert_weather(records[0], "openai-chat")
    case = records[0].case
    assert case.id == "conv-42"
    assert {key: case.metadata[key] for key in ("conversation_id", "model", "user", "completion_id")} == {
        "conversation_id": "conv-42",
        "model": "gpt-4o-2024-08-06",
        "user": "user-7",
        "completion_id": "chatcmpl-0",
    }


def test_a_stored_completions_list_with_each_completions_messages_is_read_as_its_calls(tmp_path):
    pairs = openai_chat_calls(metadata={"conversation_id": "conv-42"})
    stored = [
        {**pair["response"], "messages": {"object": "list", "data": pair["request"]["messages"]}} for pair in pairs
    ]
    path = tmp_path / "stored.json"
    path.write_text(json.dumps({"object": "list", "data": stored, "first_id": "chatcmpl-0", "has_more": False}))
    records, _ = read_file(path)
    assert len(records) == 1
    assert_weather(records[0], "openai-chat")
    lines = write_jsonl(tmp_path / "stored.jsonl", stored)  # each line has `messages`, as flowrate's own format
    assert_weather(read_file(lines)[0][0], "openai-chat")


def test_calls_without_a_conversation_key_are_each_a_conversation_and_the_run_is_told_once(tmp_path):
    path = write_jsonl(tmp_path / "calls.jsonl", openai_chat_calls())
    records, notices = read_file(path)
    assert [record.case.id for record in records] == ["chatcmpl-0", "chatcmpl-1", "chatcmpl-2"]
    assert notices == [
        beginnings_notice(path, 2, "chatcmpl-0", "chatcmpl-2"),
        f"{path}: 3 call(s) with no conversation key (request.metadata conversation_id/session_id/thread_id);"
        " each call is one conversation",
    ]
    assert records[1].case.turns[0].input == QUESTION and records[1].case.turns[0].actual_output == ANSWER


def test_a_broken_call_is_named_by_file_line_and_field_and_the_others_are_read(tmp_path):
    calls = openai_chat_calls(metadata={"conversation_id": "conv-42"})
    calls.append(json.loads(json.dumps(calls[0])))
    calls[-1]["request"]["metadata"] = {"conversation_id": "other"}
    calls[-1]["request"]["messages"][1]["role"] = 7
    path = write_jsonl(tmp_path / "calls.jsonl", calls)
    records, _ = read_file(path)
    assert records[0].problems == [f"{path}:4: request.messages[1].role: expected text, got a number"]
    assert_weather(records[1], "openai-chat")


def test_an_edited_history_is_named_not_merged(tmp_path):
    calls = openai_chat_calls(metadata={"conversation_id": "conv-42"})
    calls[2]["request"]["messages"][1]["content"] = "What's the weather in Lyon?"
    path = write_jsonl(tmp_path / "calls.jsonl", calls)
    records, _ = read_file(path)
    assert records[0].case is None
    assert records[0].problems == [
        f"{path}:1: conversation 'conv-42': the history of the call at {path}:3 differs from the call at {path}:2"
        " at message 2: edited or forked, not merged"
    ]


def test_tool_call_arguments_reserialized_or_encoded_twice_are_the_same_history_not_a_fork(tmp_path):
    for arguments in ('{"city": "Paris"}', json.dumps('{"city":"Paris"}'), '{\n  "city": "Paris"\n}'):
        calls = openai_chat_calls(metadata={"conversation_id": "conv-42"})
        calls[2]["request"]["messages"][2]["tool_calls"][0]["function"]["arguments"] = arguments
        path = write_jsonl(tmp_path / "calls.jsonl", calls)
        records, _ = read_file(path)
        assert len(records) == 1
        assert_weather(records[0], "openai-chat")


def test_a_reply_repeated_with_other_whitespace_is_the_same_history_not_a_fork(tmp_path):
    calls = openai_chat_calls(metadata={"conversation_id": "conv-42"})
    calls[2]["request"]["messages"][4]["content"] = ANSWER.replace(" ", "  ").replace("and", "\nand") + "\n"
    path = write_jsonl(tmp_path / "calls.jsonl", calls)
    records, _ = read_file(path)
    assert len(records) == 1 and records[0].problems == []
    assert [(turn.input, turn.actual_output) for turn in records[0].case.turns][0] == (QUESTION, ANSWER)


def test_tool_call_arguments_that_differ_in_value_are_still_an_edited_history(tmp_path):
    calls = openai_chat_calls(metadata={"conversation_id": "conv-42"})
    calls[2]["request"]["messages"][2]["tool_calls"][0]["function"]["arguments"] = '{"city": "Lyon"}'
    path = write_jsonl(tmp_path / "calls.jsonl", calls)
    records, _ = read_file(path)
    assert records[0].case is None and "at message 3: edited or forked" in records[0].problems[0]


def test_a_system_prompt_that_carries_the_time_is_read_from_the_first_call_and_noted(tmp_path):
    calls = openai_chat_calls(metadata={"conversation_id": "conv-42"})
    for number, call in enumerate(calls[1:], start=1):
        call["request"]["messages"][0]["content"] = f"{SYSTEM} The time is 2026-01-01T00:00:{10 * number:02d}Z."
    path = write_jsonl(tmp_path / "calls.jsonl", calls)
    records, notices = read_file(path)
    assert len(records) == 1
    assert_weather(records[0], "openai-chat")
    assert notices == [
        f"{path}: the system prompt changed between the calls of 1 conversation(s) (the first: 'conv-42');"
        " each is read with the system prompt of its first call"
    ]


def test_a_router_call_with_its_own_system_prompt_is_left_out_of_the_conversation_and_counted(tmp_path):
    calls = openai_chat_calls(metadata={"conversation_id": "conv-42"})
    router = json.loads(json.dumps(calls[2]))  # the SDK's call, made the router's before the last turn
    router["request"]["messages"] = [
        {"role": "system", "content": "Classify the user's message as weather or other. Answer one word."},
        calls[2]["request"]["messages"][-1],
    ]
    router["response"]["choices"][0]["message"]["content"] = "weather"
    path = write_jsonl(tmp_path / "calls.jsonl", [*calls[:2], router, calls[2]])
    records, notices = read_file(path)
    assert len(records) == 1
    assert_weather(records[0], "openai-chat")
    assert notices == [
        f"{path}: 1 call(s) of 1 conversation(s) were left out: each had a system prompt and a history of its own"
        " (a router's, a guardrail's or another agent's call); a conversation is its chain of calls with the most"
        " user messages"
    ]


def test_a_call_without_the_system_prompt_whose_question_was_edited_is_named_not_taken_for_another_chain(tmp_path):
    calls = openai_chat_calls(metadata={"conversation_id": "conv-42"})
    calls[2]["request"]["messages"] = calls[2]["request"]["messages"][1:]  # no system prompt: only the edit differs
    calls[2]["request"]["messages"][0]["content"] = "What's the weather in Lyon?"
    path = write_jsonl(tmp_path / "calls.jsonl", calls)
    records, _ = read_file(path)
    assert records[0].case is None and "edited or forked" in records[0].problems[0]
