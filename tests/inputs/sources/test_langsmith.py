"""LangSmith run exports written by LangChain's own tracer: the llm runs of one thread (by the
`thread_id` metadata key) are one conversation, from JSONL or the bulk export's Parquet; without
a thread key each trace is one conversation; a broken run is named."""

import json

import duckdb

from flowrate.inputs.sources.calls import iso_time, seconds_of
from tests.inputs.sources.sdk_logs import (
    ANSWER,
    CALL,
    FOLLOW_UP,
    FORECAST,
    QUESTION,
    TOOL_RESULT,
    anthropic_calls,
    assert_weather,
    beginnings_notice,
    langsmith_runs,
    read_file,
    write_jsonl,
)


def times_of(runs):
    calls = [run for run in runs if run["run_type"] == "llm"]
    return iso_time(seconds_of(calls[0]["start_time"])), iso_time(max(seconds_of(run["end_time"]) for run in calls))


def test_the_llm_runs_of_one_thread_are_one_conversation_with_its_tool_call(tmp_path):
    runs = langsmith_runs(metadata={"thread_id": "t-42"})
    path = write_jsonl(tmp_path / "runs.jsonl", runs)
    records, notices = read_file(path)
    assert len(records) == 1 and notices == []
    assert_weather(records[0], "langsmith", times=times_of(runs))
    case = records[0].case
    assert case.id == "t-42" and case.metadata["thread_id"] == "t-42"
    assert case.metadata["trace_id"] == runs[0]["trace_id"]


def test_the_bulk_exports_parquet_with_nested_fields_as_json_text_is_read_as_its_runs(tmp_path):
    runs = langsmith_runs(metadata={"session_id": "s-1"})
    rows = [{**run, **{name: json.dumps(run[name]) for name in ("inputs", "outputs", "extra")}} for run in runs]
    source = write_jsonl(
        tmp_path / "rows.jsonl",
        [
            {
                key: row[key]
                for key in (
                    "id",
                    "name",
                    "run_type",
                    "start_time",
                    "end_time",
                    "inputs",
                    "outputs",
                    "extra",
                    "trace_id",
                    "parent_run_id",
                    "dotted_order",
                )
            }
            for row in rows
        ],
    )
    path = tmp_path / "runs.parquet"
    duckdb.sql(
        f"COPY (SELECT * FROM read_json('{source}', columns={{'id': 'VARCHAR', 'name': 'VARCHAR', 'run_type': 'VARCHAR',"
        " 'start_time': 'VARCHAR', 'end_time': 'VARCHAR', 'inputs': 'VARCHAR', 'outputs': 'VARCHAR', 'extra': 'VARCHAR',"
        f" 'trace_id': 'VARCHAR', 'parent_run_id': 'VARCHAR', 'dotted_order': 'VARCHAR'}})) TO '{path}' (FORMAT parquet)"
    )
    records, _ = read_file(path)
    assert len(records) == 1
    assert_weather(records[0], "langsmith", times=times_of(runs))
    assert records[0].case.id == "s-1"


def test_runs_without_a_thread_key_are_a_conversation_per_trace_and_the_run_is_told_once(tmp_path):
    runs = langsmith_runs()
    path = write_jsonl(tmp_path / "runs.jsonl", runs)
    records, notices = read_file(path)
    traces = list(dict.fromkeys(run["trace_id"] for run in runs if run["run_type"] == "llm"))
    assert [record.case.id for record in records] == traces
    assert [len(record.case.turns) for record in records] == [1, 2]  # the second trace's call repeats the first turn
    assert notices == [
        beginnings_notice(path, 1, traces[0], traces[1]),
        f"{path}: 3 llm run(s) with no conversation key (extra.metadata conversation_id/session_id/thread_id);"
        " each trace is one conversation",
    ]


def test_a_broken_run_is_named_by_file_line_and_field(tmp_path):
    runs = langsmith_runs(metadata={"thread_id": "t-42"})
    runs[1]["inputs"]["messages"][0][1]["kwargs"]["type"] = "alien"
    path = write_jsonl(tmp_path / "runs.jsonl", runs)
    records, _ = read_file(path)
    assert records[0].problems == [f"{path}:2: inputs.messages[1].type: unknown message type 'alien'"]


def test_llm_runs_of_anthropic_shaped_messages_keep_their_tool_use_and_never_show_thinking(tmp_path):
    runs = []
    for number, call in enumerate(anthropic_calls()):
        at = call["timestamp"]
        run = {"id": f"run-{number}", "trace_id": f"run-{number}", "run_type": "llm", "start_time": at, "end_time": at}
        run.update(inputs={"messages": call["request"]["messages"]}, outputs=call["response"])
        runs.append({**run, "extra": {"metadata": {"conversation_id": "c-1"}}})
    path = write_jsonl(tmp_path / "runs.jsonl", runs)
    records, _ = read_file(path)
    case = records[0].case
    assert [(turn.input, turn.actual_output) for turn in case.turns] == [
        (QUESTION, f"Let me check.\n{ANSWER}"),
        (FOLLOW_UP, FORECAST),
    ]
    assert case.turns[0].tool_activity == [CALL, TOOL_RESULT]
    assert "HIDDEN THINKING" not in json.dumps(case.model_dump()) and "[thinking]" not in json.dumps(case.model_dump())
