"""`flowrate eval FILE`, with no `--format`, judges each platform's fixture through the scripted
judge over HTTP: every conversation judged once, with its turns and tool activity shown, and a
Hugging Face chat dataset in Parquet (a `messages` column of structs beside other columns) too."""

import json

import duckdb
import pytest

from tests.helpers import chat_bodies, ids, local_eval, read_rows, write_jsonl
from tests.inputs.sources.platforms import fixture, read

FIXTURES = {
    "sharegpt.json": ("weather-1", 'call get_weather({"location":"Jinan"})'),
    "intercom.json": ("367", "Tomorrow & before noon."),
    "zendesk.json": ("123", "I have corrected the address."),
    "rasa_tracker.json": ("mysender", "call action_get_weather()"),
    "rasa_events.csv": ("alice", "call action_check_order()"),
    "dialogflow_cx.csv": ("s-7781", 'result order_status: {"status":"shipped","eta":"2026-03-04"}'),
    "servicenow.json": ("b4c2e9a01b2f3010a1b2c3d4e5f60789", "I forgot my password"),
}


@pytest.mark.parametrize("name", FIXTURES)
def test_eval_judges_every_conversation_of_a_platform_file_without_being_told_its_format(
    name, judge, run_flowrate, tmp_path
):
    path = fixture(name, tmp_path)
    records = read(path)
    expected = sorted(record.case.id for record in records if not record.problems)
    unanswered = len(records) - len(expected)  # a conversation nobody answered is no input to judge
    assert [problem for record in records for problem in record.problems if "no assistant text" not in problem] == []
    result = run_flowrate(*local_eval(judge, name, "--no-cache", *(["--skip-invalid"] if unanswered else [])))
    assert result.returncode == 0, result.stderr
    assert ids(read_rows(tmp_path / "out.jsonl")) == expected
    conversation, shown = FIXTURES[name]
    prompts = [body["messages"][-1]["content"] for body in chat_bodies(judge)]
    assert len(prompts) == len(expected)
    in_transcript = json.dumps(shown)[1:-1]  # the prompt holds the transcript as JSON
    assert any(in_transcript in prompt for prompt in prompts), f"{conversation}: {shown!r} not shown to the judge"


def test_a_hugging_face_chat_dataset_in_parquet_is_judged_through_its_messages_column(judge, run_flowrate, tmp_path):
    rows = [
        {
            "prompt": f"How do I boil an egg, take {n}?",
            "prompt_id": f"p{n}",
            "messages": [
                {"content": f"How do I boil an egg, take {n}?", "role": "user"},
                {"content": "Simmer it for eight minutes.", "role": "assistant"},
                {"content": "And a soft one?", "role": "user"},
                {"content": "Six minutes.", "role": "assistant"},
            ],
        }
        for n in range(3)
    ]
    jsonl = write_jsonl(tmp_path / "train.jsonl", rows)
    duckdb.sql(f"COPY (SELECT * FROM read_json('{jsonl}')) TO '{tmp_path / 'train.parquet'}' (FORMAT parquet)")
    assert "STRUCT" in duckdb.sql(f"DESCRIBE SELECT messages FROM '{tmp_path / 'train.parquet'}'").fetchall()[0][1]
    result = run_flowrate(*local_eval(judge, "train.parquet", "--no-cache"))
    assert result.returncode == 0, result.stderr
    assert ids(read_rows(tmp_path / "out.jsonl")) == ["train.parquet#0", "train.parquet#1", "train.parquet#2"]
    prompts = [body["messages"][-1]["content"] for body in chat_bodies(judge)]
    assert all("And a soft one?" in prompt and "Six minutes." in prompt for prompt in prompts)
