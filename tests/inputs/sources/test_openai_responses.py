"""OpenAI Responses API logs: responses chained by `previous_response_id` are one conversation;
reasoning is never shown to the judge; a chain whose start is missing is named."""

import json

from tests.inputs.sources.sdk_logs import assert_weather, openai_responses_calls, read_file, write_jsonl


def test_a_chain_of_responses_is_one_conversation_with_its_function_call_and_no_reasoning(tmp_path):
    calls = openai_responses_calls()
    path = write_jsonl(tmp_path / "responses.jsonl", [calls[2], calls[0], calls[1]])  # read in order of creation
    records, notices = read_file(path)
    assert len(records) == 1
    assert_weather(records[0], "openai-responses")
    case = records[0].case
    assert case.id == "resp_0"
    assert {key: case.metadata[key] for key in ("channel", "model", "user")} == {
        "channel": "web",
        "model": "gpt-4.1-2025-04-14",
        "user": "user-7",
    }
    assert "HIDDEN REASONING" not in json.dumps(case.model_dump())
    assert notices == [
        f"{path}: 1 response(s) with no conversation key (previous_response_id, conversation,"
        " metadata conversation_id/session_id/thread_id); each chain of responses is one conversation"
    ]


def test_a_response_carrying_its_input_items_list_is_read_as_a_call(tmp_path):
    responses = [
        {**call["response"], "input": {"object": "list", "data": call["request"]["input"]}}
        for call in openai_responses_calls()
    ]
    path = tmp_path / "responses.json"
    path.write_text(json.dumps(responses))
    records, _ = read_file(path)
    assert len(records) == 1
    assert_weather(records[0], "openai-responses")


def test_a_response_whose_previous_response_is_not_in_the_file_is_named(tmp_path):
    calls = openai_responses_calls()
    path = write_jsonl(tmp_path / "responses.jsonl", calls[1:])
    records, _ = read_file(path)
    assert records[0].problems == [
        f"{path}:1: previous_response_id: response 'resp_0' is not in the file (the start is missing)"
    ]
    assert records[1].problems == [
        f"{path}:2: previous_response_id: response 'resp_1' is not in the file (the start is missing)"
    ]


def test_a_broken_output_item_is_named_by_file_line_and_field(tmp_path):
    calls = openai_responses_calls()
    calls[0]["response"]["output"][1]["name"] = None
    path = write_jsonl(tmp_path / "responses.jsonl", calls[:1])
    records, _ = read_file(path)
    assert records[0].problems == [f"{path}:1: response.output[1].name: expected text, missing"]


def test_responses_of_one_conversation_object_continue_it_without_repeating_it(tmp_path):
    calls = openai_responses_calls()
    for call in calls:
        call["request"].pop("previous_response_id")
        call["request"]["conversation"] = "conv_1"
        call["response"].update(previous_response_id=None, conversation={"id": "conv_1"})
    path = write_jsonl(tmp_path / "responses.jsonl", calls)
    records, notices = read_file(path)
    assert len(records) == 1 and notices == []
    assert_weather(records[0], "openai-responses")
    assert records[0].case.id == "conv_1" and records[0].case.metadata["conversation"] == "conv_1"


def test_responses_created_in_the_same_second_and_written_out_of_order_are_chained_by_previous_response_id(tmp_path):
    calls = openai_responses_calls()
    for call in calls:  # created_at is whole seconds: a tool's round trip and the reply can share one
        call["response"]["created_at"] = calls[0]["response"]["created_at"]
    path = write_jsonl(tmp_path / "responses.jsonl", [calls[2], calls[1], calls[0]])
    records, _ = read_file(path)
    assert len(records) == 1
    assert_weather(records[0], "openai-responses", times=("2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z"))
    assert records[0].case.id == "resp_0"
