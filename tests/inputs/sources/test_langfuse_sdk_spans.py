"""The Langfuse SDK's own OpenTelemetry spans in OTLP/JSON: what the Langfuse Python SDK exported
of a three-turn conversation through `langfuse.openai` against the scripted judge, in one session
(fixtures/langfuse-sdk, made by the SDK)."""

import json
import shutil
from pathlib import Path

from flowrate.inputs.files import InputSet
from tests.helpers import read_rows
from tests.inputs.sources.traces import EXCHANGES, SYSTEM, USER_TURNS

SPANS = Path(__file__).parent / "fixtures" / "langfuse-sdk" / "spans.jsonl"


def test_langfuse_sdk_generations_of_one_session_are_one_conversation_with_its_tool_call_and_system_prompt():
    [record] = list(InputSet([str(SPANS)]).records())

    assert record.problems == [] and record.format == "otel"
    case = record.case
    assert case.id == "sess-lf-1" and case.chatbot_role == SYSTEM
    assert [(turn.input, turn.actual_output) for turn in case.turns] == EXCHANGES
    assert case.turns[1].tool_activity == [
        'call get_balance({"account": "checking"})',
        'result get_balance: {"balance": 120}',
    ]
    assert case.turns[0].tool_activity == case.turns[2].tool_activity == []
    metadata = case.metadata
    assert metadata["session_id"] == "sess-lf-1" and metadata["user"] == "user-7" and metadata["tags"] == ["harbor"]
    assert metadata["model"] == "gpt-4o" and len(metadata["span_ids"]) == 4  # one generation a call


def test_langfuse_sdk_session_is_judged_once_with_every_turn(judge, run_flowrate, tmp_path):
    shutil.copy(SPANS, tmp_path / "spans.jsonl")

    result = run_flowrate("eval", "spans.jsonl", "--api-base", judge.base_url, "-o", "out.jsonl")

    assert result.returncode == 0, result.stderr
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["id"] == "sess-lf-1" and row["error"] is None and row["number_of_turns"] == 3
    assert judge.requests == 1
    judged = json.dumps(judge.bodies[0]["messages"])
    assert all(text in judged for text in (*USER_TURNS, "Your checking balance is $120.", "get_balance"))
