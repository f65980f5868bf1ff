"""The `openinference` reader: OpenInference LLM spans in OTLP/JSON, written in the test by the
real openinference-instrumentation-openai on the real `openai` client against the scripted judge,
with the session set as OpenInference documents it (`using_attributes(session_id=...)`)."""

import json

import orjson
import pytest

from flowrate.errors import ExitCode
from flowrate.inputs.conversation import chat_date
from flowrate.inputs.files import InputSet
from tests.helpers import read_rows
from tests.inputs.sources.test_otel import collector_lines, write_lines
from tests.inputs.sources.traces import EXCHANGES, SYSTEM, TOOL_RESULT, USER_TURNS, Recorder, chat

SESSION = "sess-oi-1"


@pytest.fixture
def recorded(judge):
    """The conversation's four LLM spans, one trace each, every call in the session of user u-7."""
    from openinference.instrumentation import using_attributes
    from openinference.instrumentation.openai import OpenAIInstrumentor

    recorder = Recorder()
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=recorder.tracer_provider)
    try:
        chat(judge, turn=lambda number: using_attributes(session_id=SESSION, user_id="u-7", tags=["harbor"]))
    finally:
        instrumentor.uninstrument()
    return recorder


def test_the_session_over_four_llm_spans_is_judged_once_as_one_conversation(judge, recorded, run_flowrate, tmp_path):
    (tmp_path / "phoenix.json").write_bytes(orjson.dumps(recorded.traces_json()))

    result = run_flowrate("eval", "phoenix.json", "--api-base", judge.base_url, "-o", "out.jsonl")

    assert result.returncode == 0, result.stderr
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["id"] == SESSION and row["error"] is None and row["number_of_turns"] == 3
    assert judge.requests == 1
    judged = json.dumps(judge.bodies[0]["messages"])
    assert all(text in judged for text in (*USER_TURNS, "Your checking balance is $120.", "get_balance"))


def test_the_turns_roles_tool_call_chat_date_and_metadata_come_from_the_spans(recorded, tmp_path):
    path = write_lines(tmp_path / "phoenix.jsonl", collector_lines(recorded))

    [record] = list(InputSet([str(path)]).records())

    assert record.problems == [] and record.format == "openinference"
    case = record.case
    assert case.id == SESSION and case.chatbot_role == SYSTEM
    assert [(turn.input, turn.actual_output) for turn in case.turns] == EXCHANGES
    assert case.turns[1].tool_activity == [
        'call get_balance({"account": "checking"})',
        f"result get_balance: {TOOL_RESULT}",
    ]
    spans = sorted(recorded.spans.get_finished_spans(), key=lambda span: span.start_time)
    metadata = case.metadata
    assert metadata["session_id"] == SESSION and metadata["user"] == "u-7" and metadata["tags"] == ["harbor"]
    assert metadata["model"] == "gpt-4o" and metadata["service_name"] == "harbor-bot"
    assert metadata["span_ids"] == [format(span.context.span_id, "016x") for span in spans]
    assert chat_date(case) == metadata["started_at"][:10]
    assert metadata["ended_at"] >= metadata["started_at"]


def test_a_message_without_role_is_named_by_file_line_span_and_attribute(recorded, run_flowrate, tmp_path):
    lines = collector_lines(recorded)
    [span] = lines[1]["resourceSpans"][0]["scopeSpans"][0]["spans"]
    span["attributes"] = [pair for pair in span["attributes"] if pair["key"] != "llm.input_messages.1.message.role"]
    write_lines(tmp_path / "phoenix.jsonl", lines)

    result = run_flowrate("validate", "phoenix.jsonl")

    assert result.returncode == ExitCode.USAGE
    assert f"phoenix.jsonl:2: span {span['spanId']}: attribute llm.input_messages.1.message.role: is missing" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr


def test_messages_hidden_by_the_instrumentation_are_a_problem_not_empty_turns(
    judge, monkeypatch, run_flowrate, tmp_path
):
    from openinference.instrumentation import TraceConfig, using_session
    from openinference.instrumentation.openai import OpenAIInstrumentor

    recorder = Recorder()
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=recorder.tracer_provider, config=TraceConfig(hide_input_text=True))
    try:
        chat(judge, turn=lambda number: using_session(SESSION))
    finally:
        instrumentor.uninstrument()
    write_lines(tmp_path / "phoenix.jsonl", collector_lines(recorder))

    result = run_flowrate("eval", "phoenix.jsonl", "--api-base", judge.base_url, "-o", "out.jsonl")

    assert result.returncode == ExitCode.USAGE and judge.requests == 0
    assert "content: hidden by the instrumentation (__REDACTED__)" in result.stderr
    assert "(and 3 more span(s) of conversation 'sess-oi-1')" in result.stderr


def test_input_messages_left_out_by_the_instrumentation_are_a_problem_not_a_reply_alone(judge, run_flowrate, tmp_path):
    from openinference.instrumentation import TraceConfig, using_session
    from openinference.instrumentation.openai import OpenAIInstrumentor

    recorder = Recorder()
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=recorder.tracer_provider, config=TraceConfig(hide_input_messages=True))
    try:
        chat(judge, turn=lambda number: using_session(SESSION))
    finally:
        instrumentor.uninstrument()
    write_lines(tmp_path / "phoenix.jsonl", collector_lines(recorder))

    result = run_flowrate("validate", "phoenix.jsonl")

    assert result.returncode == ExitCode.USAGE
    assert "phoenix.jsonl:1: span " in result.stderr
    assert "no llm.input_messages: the instrumentation hid them" in result.stderr
