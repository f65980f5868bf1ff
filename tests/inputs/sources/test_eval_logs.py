"""`flowrate eval FILE` judges an API log without `--format`: the format is found from the
file, the calls of one conversation are judged once, as its turns, and reasoning never reaches the judge."""

import json
from pathlib import Path

import pytest

from tests.helpers import local_eval, read_rows
from tests.inputs.sources.sdk_logs import (
    FORECAST,
    QUESTION,
    anthropic_calls,
    langsmith_runs,
    openai_chat_calls,
    openai_responses_calls,
    read_file,
    write_jsonl,
)

LANGFUSE_SESSION = Path(__file__).parent / "fixtures" / "langfuse" / "session.jsonl"
LOGS = {
    "openai-chat": lambda: openai_chat_calls(metadata={"conversation_id": "conv-42"}),
    "openai-responses": openai_responses_calls,
    "anthropic": anthropic_calls,
    "langsmith": lambda: langsmith_runs(metadata={"thread_id": "t-42"}),
    "langfuse": lambda: [json.loads(line) for line in LANGFUSE_SESSION.read_text().splitlines()],
}


@pytest.mark.parametrize("format", sorted(LOGS))
def test_eval_judges_each_log_as_one_conversation_without_format(format, run_flowrate, judge, tmp_path):
    records = LOGS[format]()
    path = write_jsonl(tmp_path / "log.jsonl", records)
    chat_date = "2026-01-01"
    if format == "langsmith":  # LangChain's tracer records the runs as they run
        chat_date = min(run["start_time"] for run in records if run["run_type"] == "llm")[:10]
    result = run_flowrate(*local_eval(judge, path, "--metric", "conversational_flow_rate"))
    assert result.returncode == 0, result.stderr
    rows = read_rows(tmp_path / "out.jsonl")
    assert len(rows) == 1 and rows[0]["chat_date"] == chat_date
    prompts = [message["content"] for body in judge.bodies for message in body["messages"]]
    sent = "\n".join(text for text in prompts if isinstance(text, str))
    assert QUESTION in sent and FORECAST in sent and "get_weather" in sent
    assert "HIDDEN" not in sent


def test_eval_of_a_log_without_conversation_keys_judges_each_call_and_says_so_once(run_flowrate, judge, tmp_path):
    path = write_jsonl(tmp_path / "log.jsonl", openai_chat_calls())
    result = run_flowrate(*local_eval(judge, path, "--metric", "conversational_flow_rate"))
    assert result.returncode == 0, result.stderr
    assert [row["id"] for row in read_rows(tmp_path / "out.jsonl")] == ["chatcmpl-0", "chatcmpl-1", "chatcmpl-2"]
    notice = "3 call(s) with no conversation key (request.metadata conversation_id/session_id/thread_id)"
    assert result.stderr.count(notice) == 1, result.stderr


def test_validate_counts_an_api_log_in_its_format_and_says_once_that_it_has_no_conversation_key(run_flowrate, tmp_path):
    calls = [{key: value for key, value in call.items() if key != "metadata"} for call in anthropic_calls()]
    path = write_jsonl(tmp_path / "log.jsonl", calls)
    result = run_flowrate("validate", path)
    assert result.returncode == 0, result.stderr
    assert "3 valid conversation(s) in 1 file(s): 3 in anthropic format" in result.stdout + result.stderr
    assert (
        result.stderr.count("3 call(s) with no conversation key (metadata conversation_id/session_id/thread_id)") == 1
    )


def test_a_log_no_reader_takes_is_refused_naming_the_closest_format_and_its_complaint(run_flowrate, tmp_path):
    call = openai_chat_calls()[0]
    call["response"] = {"id": "x", "output": "no choices"}
    path = write_jsonl(tmp_path / "log.jsonl", [call])
    result = run_flowrate("validate", path)
    assert result.returncode == 2  # ExitCode.USAGE: bad input
    from flowrate.inputs.sources.registry import readers

    assert f"no format reads this (tried {', '.join(reader.name for reader in readers())})" in result.stderr
    assert "closest, openai-chat: has no `response` with `choices`" in result.stderr
    assert "Traceback" not in result.stderr


HOSTILE = [
    (
        "openai-responses",
        {"object": "response", "id": "r", "input": "hi", "output": [], "previous_response_id": ["r0"]},
        "previous_response_id: expected text, got a list",
    ),
    ("langfuse", {"id": "s", "createdAt": "2026-01-01T00:00:00Z", "traces": [5]}, "traces[0]: expected a trace object"),
    ("langfuse", {"id": "t", "timestamp": 1, "sessionId": "s", "observations": 5}, "observations: expected a list"),
    (
        "langsmith",
        {"run_type": "llm", "inputs": {"messages": [{"type": "ai", "content": "", "tool_calls": 5}]}, "outputs": {}},
        "inputs.messages[0].tool_calls: expected a list, got a number",
    ),
]


@pytest.mark.parametrize(("format", "record", "problem"), HOSTILE)
def test_a_record_of_the_wrong_types_is_named_by_its_field_not_raised(format, record, problem, tmp_path):
    path = write_jsonl(tmp_path / "log.jsonl", [record])
    records, _ = read_file(path, format=format)
    assert len(records) == 1 and records[0].case is None
    assert records[0].problems[0].startswith(f"{path}:1: {problem}"), records[0].problems


def test_flowrate_formats_lists_each_api_log_reader_with_the_fields_it_reads(run_flowrate):
    from flowrate.inputs.sources.registry import reader_named

    result = run_flowrate("formats")
    assert result.returncode == 0, result.stderr
    for name in LOGS:
        reader = reader_named(name)
        assert f"{name}: {reader.title}\n    reads {reader.reads}\n" in result.stdout
