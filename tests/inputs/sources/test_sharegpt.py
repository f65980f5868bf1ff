"""ShareGPT: `conversations: [{from, value}]` as LLaMA-Factory's sharegpt datasets hold them, with
the tool call (`function_call`) and its result (`observation`) in the assistant's turn."""

import duckdb
import orjson

from flowrate.inputs.conversation import chat_date
from tests.inputs.sources.platforms import FIXTURES, conversations, exchanges, problems


def test_a_sharegpt_record_with_a_tool_call_becomes_turns_with_the_call_and_its_result():
    found = conversations(FIXTURES / "sharegpt.json")
    assert list(found) == ["weather-1", "plain-2"]
    weather = found["weather-1"]
    assert weather.chatbot_role == "You are a weather assistant."
    assert exchanges(weather) == [
        (
            "What is the weather like in Jinan today?",
            "It is sunny in Jinan today, 20 degrees with 45% humidity.",
            [
                'call get_weather({"location":"Jinan"})',
                'result get_weather: {"temperature": 20, "condition": "sunny", "humidity": 45}',
            ],
        ),
        ("Do I need an umbrella?", "No, no rain is expected today.", []),
    ]
    assert chat_date(weather) is None  # a dataset has no times
    assert exchanges(found["plain-2"]) == [("user instruction", "model response", [])]


def test_a_dataset_as_parquet_reads_as_its_json_reads(tmp_path):
    parquet = tmp_path / "train.parquet"
    duckdb.sql(f"COPY (SELECT * FROM read_json('{FIXTURES / 'sharegpt.json'}')) TO '{parquet}' (FORMAT parquet)")
    assert conversations(parquet) == conversations(FIXTURES / "sharegpt.json")


def test_a_broken_record_is_named_by_file_line_and_field(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    good = {"id": "ok", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}
    robot = {"id": "r", "conversations": [{"from": "human", "value": "hi"}, {"from": "robot", "value": "beep"}]}
    call = {
        "id": "c",
        "conversations": [{"from": "human", "value": "hi"}, {"from": "function_call", "value": "get_weather"}],
    }
    empty = {"conversations": [{"from": "human", "value": None}]}
    lines = [orjson.dumps(record).decode() for record in (good, robot, call, empty)]
    (tmp_path / "d.jsonl").write_text("\n".join(lines) + "\n")
    assert problems("d.jsonl") == [
        "d.jsonl:2: conversation 'r': conversations[1].from: unknown speaker 'robot'"
        " (expected human, user, gpt, assistant, system, function_call, observation)",
        'd.jsonl:3: conversation \'c\': conversations[1].value: a function_call must be JSON {"name", "arguments"}',
        "d.jsonl:4: conversations[0].value: must be text",
    ]
