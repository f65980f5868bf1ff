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
