"""The Vercel AI SDK's own spans in OTLP/JSON, plain and through `@arizeai/openinference-vercel`:
the requests the OpenTelemetry JS SDK's exporter sent of a two-turn chat with a tool, its session
in the telemetry metadata (fixtures/vercel-ai-sdk-otlp, made by the SDK against the scripted
judge)."""

import json
import shutil
from pathlib import Path

import pytest

from flowrate.inputs.files import InputSet
from tests.helpers import read_rows

FIXTURES = Path(__file__).parent / "fixtures" / "vercel-ai-sdk-otlp"
TURNS = [
    ("What's the weather in Paris?", "It is 18°C in Paris."),
    ("Do I need a coat?", "No coat: a light jacket will do."),
]


@pytest.mark.parametrize(("name", "format"), [("spans.jsonl", "otel"), ("openinference.jsonl", "openinference")])
def test_vercel_ai_sdk_spans_of_one_session_are_one_conversation_with_its_tool_call_and_system_prompt(name, format):
    [record] = list(InputSet([str(FIXTURES / name)]).records())

    assert record.problems == [] and record.format == format
    case = record.case
    assert case.id == "weather-chat-1" and case.chatbot_role == "You are a weather assistant."
    assert [(turn.input, turn.actual_output) for turn in case.turns] == TURNS
    assert case.turns[0].tool_activity == [
        'call get_weather({"city":"Paris"})',
        'result get_weather: {"city":"Paris","temp_c":18}',
    ]
    assert case.turns[1].tool_activity == []
    assert case.metadata["session_id"] == "weather-chat-1" and case.metadata["user"] == "user-42"
    assert case.metadata["model"] == "gpt-4o" and len(case.metadata["span_ids"]) == 3  # the doGenerate spans


def test_vercel_ai_sdk_session_is_judged_once_with_every_turn(judge, run_flowrate, tmp_path):
    shutil.copy(FIXTURES / "spans.jsonl", tmp_path / "spans.jsonl")

    result = run_flowrate("eval", "spans.jsonl", "--api-base", judge.base_url, "-o", "out.jsonl")

    assert result.returncode == 0, result.stderr
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["id"] == "weather-chat-1" and row["error"] is None and row["number_of_turns"] == 2
    assert judge.requests == 1
    judged = json.dumps(judge.bodies[0]["messages"], ensure_ascii=False)
    assert all(text in judged for turn in TURNS for text in turn)
    assert "get_weather" in judged and "temp_c" in judged


def test_formats_names_the_vercel_and_langfuse_sdk_spans_and_the_session_keys_read(run_flowrate):
    result = run_flowrate("formats")

    assert result.returncode == 0, result.stderr
    listed = dict(zip(result.stdout.splitlines()[::2], result.stdout.splitlines()[1::2], strict=True))
    otel = next(reads for title, reads in listed.items() if title.startswith("otel: "))
    openinference = next(reads for title, reads in listed.items() if title.startswith("openinference: "))
    assert "ai.prompt.messages" in otel and "langfuse.observation.input" in otel
    assert "ai.telemetry.metadata.sessionId" in otel and "ai.telemetry.metadata.sessionId" in openinference


def test_vercel_ai_sdk_prompt_cut_short_is_a_problem_naming_the_line_span_and_attribute(run_flowrate, tmp_path):
    lines = (FIXTURES / "spans.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    span = first["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    [prompt] = [pair for pair in span["attributes"] if pair["key"] == "ai.prompt.messages"]
    prompt["value"]["stringValue"] = prompt["value"]["stringValue"][:40]  # a log line cut short
    (tmp_path / "spans.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")

    result = run_flowrate("validate", "spans.jsonl")

    assert result.returncode == 2
    assert f"spans.jsonl:1: span {span['spanId']}: attribute ai.prompt.messages: not JSON" in result.stderr
    assert "Traceback" not in result.stderr
