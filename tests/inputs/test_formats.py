"""Conversations from files: the turn and OpenAI chat formats in JSONL, JSON and YAML, a UTF-8 BOM,
`flowrate validate`, and each bad record named by file, line and field (a YAML alias bomb included)."""

import json
import time

import pytest

from flowrate.errors import InputError
from flowrate.inputs.files import InputSet, iter_cases
from flowrate.inputs.selection import raise_for_problems, scan
from tests.helpers import read_rows, turn_record, write_jsonl


def read(*paths):
    inputs = InputSet([str(p) for p in paths])
    report = scan(inputs)
    return report, [record for record in iter_cases(inputs)]


def problems_of(path):
    report, _ = read(path)
    return report.problems


BOMB = """conversations:
  - id: bomb
    metadata:
      bomb: "1"
      a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
      b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
      c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
      d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
      e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
      f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
      g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
      h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
      i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
    turns:
      - {input: hi, actual_output: hello}
  - id: fine
    metadata: {bomb: "1", shared: &s {channel: chat}, again: *s}
    turns:
      - {input: hi, actual_output: hello}
"""


def test_turn_format_jsonl_with_blank_lines(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(
        json.dumps(turn_record("a", "hi", "hello")) + "\n\n" + json.dumps(turn_record(None, "yo", "ok")) + "\n"
    )
    report, records = read(path)
    assert report.valid == 2 and dict(report.formats) == {"turns": 2}
    assert records[0].case.id == "a"
    assert records[1].case.id == "c.jsonl:3"  # default id: file name and line
    assert records[1].case.turns[0].input == "yo" and records[1].case.turns[0].actual_output == "ok"
    assert records[1].source.line == 3


def test_openai_chat_format_merges_sides_and_keeps_tools(tmp_path):
    record = {
        "id": "chat",
        "messages": [
            {"role": "system", "content": "You are a bank."},
            {"role": "developer", "content": "Be brief."},
            {"role": "assistant", "content": "Hi, how can I help?"},
            {"role": "user", "content": "Card lost."},
            {"role": "user", "content": [{"type": "text", "text": "Please block it."}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "1", "type": "function", "function": {"name": "block_card", "arguments": '{"card": "4821"}'}}
                ],
            },
            {"role": "tool", "tool_call_id": "1", "name": "block_card", "content": "ok"},
            {"role": "assistant", "content": "Blocked."},
            {"role": "user", "content": "And a new one?"},
        ],
    }
    report, records = read(write_jsonl(tmp_path / "chat.jsonl", [record]))
    case = records[0].case
    assert dict(report.formats) == {"messages": 1}
    assert case.chatbot_role == "You are a bank.\n\nBe brief."
    assert [(t.input, t.actual_output) for t in case.turns] == [
        ("", "Hi, how can I help?"),
        ("Card lost.\nPlease block it.", "Blocked."),
        ("And a new one?", None),  # the user was left hanging
    ]
    assert case.turns[1].tool_activity == ['call block_card({"card": "4821"})', "result block_card: ok"]


def test_json_array_and_object_and_yaml(tmp_path):
    array = tmp_path / "a.json"
    array.write_text(
        json.dumps(
            [
                turn_record("j1", "a", "b"),
                {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]},
            ]
        )
    )
    wrapped = tmp_path / "b.json"
    wrapped.write_text(json.dumps({"conversations": [turn_record("j3", "a", "b")]}))
    listed = tmp_path / "c.yaml"
    listed.write_text("- id: y1\n  turns:\n    - input: hi\n      actual_output: hello\n")
    mapped = tmp_path / "d.yml"
    mapped.write_text("conversations:\n  - turns:\n      - {input: hi, actual_output: there}\n")
    report, records = read(tmp_path)  # a directory: every input file inside
    assert report.files == 4 and report.valid == 5
    assert [r.case.id for r in records] == ["j1", "a.json#1", "j3", "y1", "d.yml#0"]
    assert records[4].source.line == 2


def test_trailing_user_utterance_becomes_an_unanswered_turn(tmp_path):
    record = turn_record("fed", "Hi!", "Hi! What's up?", trailing_user_utterance="Nothing much")
    _, records = read(write_jsonl(tmp_path / "f.jsonl", [record]))
    assert records[0].case.turns[-1].actual_output is None


def test_a_utf8_bom_is_accepted(tmp_path, run_flowrate):
    bom = b"\xef\xbb\xbf"
    (tmp_path / "a.jsonl").write_bytes(bom + json.dumps(turn_record("a", "x", "y")).encode() + b"\n")
    (tmp_path / "b.json").write_bytes(bom + json.dumps([turn_record("b", "x", "y")]).encode())
    (tmp_path / "c.yaml").write_bytes(bom + b"- id: c\n  turns: [{input: x, actual_output: y}]\n")
    result = run_flowrate("validate", ".", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["valid"] == 3


def test_validate_counts_formats(run_flowrate, tmp_path):
    answered = {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]}
    write_jsonl(tmp_path / "a.jsonl", [turn_record("a", "b", "c"), answered])
    result = run_flowrate("validate", tmp_path, "--json")
    assert result.returncode == 0
    assert json.loads(result.stdout) == {"files": 1, "valid": 2, "invalid": 0, "formats": {"turns": 1, "messages": 1}}
    assert "2 valid conversation(s) in 1 file(s): 1 in messages format, 1 in turns format" in result.stderr
    (tmp_path / "b.jsonl").write_text('{"turns": [{"input": 1, "actual_output": "x"}]}\n')
    result = run_flowrate("validate", tmp_path)
    assert (
        result.returncode == 2
        and f"{tmp_path / 'b.jsonl'}:1: turns[0].input: must be a string, got a number" in result.stderr
    )


@pytest.mark.parametrize(
    "line, expected",
    [
        ('{"id": "x", "turns": [', "bad.jsonl:1: invalid JSON"),
        ('{"id": "x"}', "bad.jsonl:1: has neither `turns` nor `messages`"),
        ('{"id": "x", "turns": []}', "bad.jsonl:1: turns: must not be empty"),
        ('{"id": "x", "messages": []}', "bad.jsonl:1: messages: must not be empty"),
        ('{"id": "x", "turns": [{"actual_output": "a"}]}', "bad.jsonl:1: turns[0].input: is missing"),
        ('{"id": "x", "turns": [{"input": "a"}]}', "bad.jsonl:1: turns[0].actual_output: is missing"),
        (
            '{"id": "x", "turns": [{"input": "a", "actual_output": null}]}',
            "bad.jsonl:1: turns[0].actual_output: must be a string, got null",
        ),
        (
            '{"id": "x", "turns": [{"input": 5, "actual_output": "a"}]}',
            "bad.jsonl:1: turns[0].input: must be a string, got a number",
        ),
        (
            '{"id": "x", "messages": [{"role": "bot", "content": "a"}]}',
            "bad.jsonl:1: messages[0].role: unknown role 'bot'",
        ),
        (
            '{"id": "x", "messages": [{"role": "user", "content": 3}]}',
            "bad.jsonl:1: messages[0].content: must be a string or a list, got a number",
        ),
        (
            '{"id": "x", "messages": [{"role": "system", "content": "s"}]}',
            "bad.jsonl:1: messages: has no user or assistant message",
        ),
        ("[1, 2]", "bad.jsonl:1: a conversation must be an object, got a list"),
    ],
)
def test_each_input_error_names_file_line_and_field(tmp_path, line, expected):
    path = tmp_path / "bad.jsonl"
    path.write_text(line + "\n")
    problems = problems_of(path)
    assert len(problems) == 1
    assert problems[0].startswith(expected.replace("bad.jsonl", str(path)))


def test_duplicate_id_is_an_error_naming_both_places(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [turn_record("same", "a", "b"), turn_record("same", "c", "d")])
    assert problems_of(path) == [f"{path}:2: id: duplicate id 'same' (first seen at {path}:1)"]


def test_yaml_errors_carry_index_and_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(
        "- id: ok\n  turns:\n    - {input: a, actual_output: b}\n- id: broken\n  turns:\n    - {input: a}\n"
    )
    assert problems_of(path) == [f"{path}#1 (line 4): turns[0].actual_output: is missing"]


def test_every_problem_is_listed_then_raised(tmp_path):
    path = tmp_path / "many.jsonl"
    path.write_text("\n".join(f'{{"id": {n}, "turns": []}}' for n in range(60)) + "\n")
    report, _ = read(path)
    with pytest.raises(InputError) as caught:
        raise_for_problems(report)
    assert caught.value.total == 60
    assert caught.value.problems[-1] == "... and 10 more problems"


def test_missing_path_and_unknown_type(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(InputError) as caught:
        InputSet([str(tmp_path / "nope.jsonl"), str(tmp_path / "notes.txt")])
    assert caught.value.problems == [
        f"{tmp_path / 'nope.jsonl'}: no such file or directory",
        f"{tmp_path / 'notes.txt'}: unknown file type (expected .jsonl, .json, .yaml, .yml, .parquet or .csv,"
        " or one of them compressed: .gz, .bz2, .xz)",
    ]


def test_a_yaml_file_that_is_not_utf8_is_a_problem_not_a_crash(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("- id: x\n  turns: [{input: 'caf\xe9', actual_output: b}]\n".encode("latin-1"))
    assert problems_of(path) == [f"{path}: not UTF-8 text (byte 30)"]


def test_a_yaml_alias_bomb_is_refused_by_file_and_line_before_selection(judge, run_flowrate, tmp_path):
    (tmp_path / "bomb.yaml").write_text(BOMB)
    started = time.monotonic()
    result = run_flowrate("eval", "bomb.yaml", "--only", "bomb=1", "--api-base", judge.base_url)
    assert time.monotonic() - started < 20
    assert result.returncode == 2, result.stderr
    assert "bomb.yaml:2: its aliases expand to more than 100,000 values" in result.stderr
    assert judge.requests == 0
    skipped = run_flowrate("eval", "bomb.yaml", "--only", "bomb=1", "--skip-invalid", "--api-base", judge.base_url)
    assert skipped.returncode == 0, skipped.stderr
    assert [row["id"] for row in read_rows(tmp_path / "flowrate-results.jsonl")] == ["fine"]


def test_aliases_are_counted_as_the_values_they_expand_to_without_building_them():
    import yaml

    from flowrate.inputs.containers import MAX_YAML_VALUES, _expanded_size

    composed = yaml.compose("- &a [1, 2]\n- [*a, *a, *a]\n")
    assert _expanded_size(composed, MAX_YAML_VALUES) == 1 + (1 + 2) + (1 + 3 * 3)
    assert _expanded_size(composed, 5) == 6  # counting stops past the limit
