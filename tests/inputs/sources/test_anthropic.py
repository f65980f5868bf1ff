"""Anthropic Messages API logs: the calls of one session are one conversation; the system
prompt, tool_use and tool_result blocks keep their roles; thinking is never shown to the judge."""

import json

from tests.inputs.sources.sdk_logs import (
    ANSWER,
    anthropic_calls,
    assert_weather,
    beginnings_notice,
    read_file,
    write_jsonl,
)


def test_the_calls_of_one_session_are_one_conversation_with_its_tool_use_and_no_thinking(tmp_path):
    path = write_jsonl(tmp_path / "messages.jsonl", anthropic_calls())
    records, notices = read_file(path)
    assert len(records) == 1 and notices == []
    assert_weather(records[0], "anthropic", first_reply=f"Let me check.\n{ANSWER}")
    case = records[0].case
    assert case.id == "s-42"
    assert {key: case.metadata[key] for key in ("session_id", "model", "user")} == {
        "session_id": "s-42",
        "model": "claude-sonnet-4-5-20250929",
        "user": "user-7",
    }
    assert "HIDDEN THINKING" not in json.dumps(case.model_dump())


def test_calls_without_a_session_are_each_a_conversation_and_the_run_is_told_once(tmp_path):
    calls = [{key: value for key, value in call.items() if key != "metadata"} for call in anthropic_calls()]
    path = write_jsonl(tmp_path / "messages.jsonl", calls)
    records, notices = read_file(path)
    assert [record.case.id for record in records] == ["msg_0", "msg_1", "msg_2"]
    assert notices == [
        beginnings_notice(path, 2, "msg_0", "msg_2"),
        f"{path}: 3 call(s) with no conversation key (metadata conversation_id/session_id/thread_id);"
        " each call is one conversation",
    ]


def test_a_broken_block_is_named_by_file_line_and_field(tmp_path):
    calls = anthropic_calls()
    calls[2]["request"]["messages"][2]["content"][0] = {"text": "no type"}
    path = write_jsonl(tmp_path / "messages.jsonl", calls)
    records, _ = read_file(path)
    assert records[0].problems == [f"{path}:3: request.messages[2].content[0].type: expected text, missing"]
    assert records[1].problems == [] and len(records[1].case.turns) == 1  # the other calls are read
