"""`flowrate eval FILE` judges an API log without `--format`: the format is found from the
file, the calls of one conversation are judged once, as its turns, and reasoning never reaches the judge."""

import pytest

from tests.helpers import local_eval, read_rows
from tests.inputs.sources.sdk_logs import (
    FORECAST,
    QUESTION,
    anthropic_calls,
    openai_chat_calls,
    openai_responses_calls,
    write_jsonl,
)

LOGS = {
    "openai-chat": lambda: openai_chat_calls(metadata={"conversation_id": "conv-42"}),
    "openai-responses": openai_responses_calls,
    "anthropic": anthropic_calls,
}


@pytest.mark.parametrize("format", sorted(LOGS))
def test_eval_judges_each_log_as_one_conversation_without_format(format, run_flowrate, judge, tmp_path):
    path = write_jsonl(tmp_path / "log.jsonl", LOGS[format]())
    result = run_flowrate(*local_eval(judge, path, "--metric", "conversational_flow_rate"))
    assert result.returncode == 0, result.stderr
    rows = read_rows(tmp_path / "out.jsonl")
    assert len(rows) == 1 and rows[0]["chat_date"] == "2026-01-01"
    prompts = [message["content"] for body in judge.bodies for message in body["messages"]]
    sent = "\n".join(text for text in prompts if isinstance(text, str))
    assert QUESTION in sent and FORECAST in sent and "get_weather" in sent
    assert "HIDDEN" not in sent
