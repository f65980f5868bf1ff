"""Key issues name their turn as an integer field (issue 46): the reply's schema asks for each issue
as {"turn": N, "issue": "..."}, the worked examples show that shape, a reply in it is read into
rows as "turn N: ...", and judge-bench scores the turns so named against people's."""

import json

from flowrate.rubric.issues import issue_line, issue_object, structured_reply
from flowrate.rubric.model import load_rubric
from flowrate.scores.reading import judgement_text, parse_reply
from flowrate.scores.schema import reply_schema
from tests.helpers import read_rows, turn_record, write_jsonl


def test_the_reply_schema_asks_each_key_issue_as_an_integer_turn_and_its_text():
    for rubric in (load_rubric(), load_rubric("virtual_agent")):
        schema = reply_schema(rubric)
        parts = list(schema["properties"]["criteria"]["properties"].values()) if rubric.is_suite else [schema]
        for part in parts:
            items = part["properties"]["key_issues"]["items"]
            assert items["properties"] == {"turn": {"type": "integer"}, "issue": {"type": "string"}}
            assert items["required"] == ["turn", "issue"] and items["additionalProperties"] is False


def test_the_worked_examples_show_their_key_issues_in_the_shape_the_judge_must_write():
    rubric = load_rubric()
    shown = [json.loads(m["content"]) for m in rubric.prefix_messages if m["role"] == "assistant"]
    issues = [issue for reply in shown for issue in reply["key_issues"]]
    assert issues and all(set(issue) == {"turn", "issue"} and isinstance(issue["turn"], int) for issue in issues)
    assert {"turn": 3, "issue": "asks for the booking number a third time instead of cancelling"} in issues
    suite = load_rubric("virtual_agent")
    suite_shown = [json.loads(m["content"]) for m in suite.prefix_messages if m["role"] == "assistant"]
    suite_issues = [i for reply in suite_shown for part in reply["criteria"].values() for i in part["key_issues"]]
    assert suite_issues and all(isinstance(issue["turn"], int) for issue in suite_issues)


def test_a_reply_with_structured_issues_is_read_into_turn_lines_and_written_back_in_the_same_shape():
    rubric = load_rubric()
    reply = json.dumps(
        {
            "reason": "r",
            "key_issues": [{"turn": 3, "issue": "asks again"}, {"turn": "4", "issue": " ignores\nthe question "}],
            "verdict": "minor",
        }
    )
    judgement = parse_reply(reply, rubric)
    rating = judgement.ratings[rubric.name]
    assert rating.key_issues == ["turn 3: asks again", "turn 4: ignores the question"]
    clean = json.loads(judgement_text(judgement.ratings, rubric))  # what the cache keeps of a repaired reply
    assert clean["key_issues"] == [{"turn": 3, "issue": "asks again"}, {"turn": 4, "issue": "ignores the question"}]
    assert parse_reply(json.dumps(clean), rubric).ratings[rubric.name].key_issues == rating.key_issues


def test_issues_as_strings_from_a_judge_not_held_to_the_schema_are_still_read():
    rubric = load_rubric()
    judgement = parse_reply('{"reason": "r", "key_issues": ["turn 2: loops", "no turn"], "verdict": "minor"}', rubric)
    assert judgement.ratings[rubric.name].key_issues == ["turn 2: loops", "no turn"]


def test_an_issue_without_a_usable_turn_keeps_its_text_and_names_no_turn():
    assert issue_line({"turn": None, "issue": "loops"}) == "loops"
    assert issue_line({"turn": True, "issue": "loops"}) == "loops"
    assert issue_line({"turn": "three", "issue": "loops"}) == "loops"
    assert issue_line({"turn": 5, "issue": ""}) == "turn 5"
    assert issue_object("Turn 7 - repeats itself") == {"turn": 7, "issue": "repeats itself"}
    assert issue_object("the whole conversation loops") == "the whole conversation loops"
    suite_reply = {"criteria": {"a": {"key_issues": ["turn 1: x"], "rating": 2}}}
    assert structured_reply(suite_reply) == {
        "criteria": {"a": {"key_issues": [{"turn": 1, "issue": "x"}], "rating": 2}}
    }


def test_judge_bench_scores_the_turns_of_structured_issues_against_the_turns_people_flagged(
    judge, run_flowrate, tmp_path
):
    data = tmp_path / "sets"
    data.mkdir()
    labels = [
        {
            behaviour: {"human": [int(n == 2), int(n == 2)], "gpt": 0}
            for behaviour in ("redundant", "ignore", "irrelevant")
        }
        for n in range(1, 5)
    ]
    record = turn_record("a0", "MARK-T0", "ok") | {
        "turns": [{"input": f"MARK-T0 {n}", "actual_output": "ok"} for n in range(4)],
        "labels": {"flow_violation_rate": 0.25},
        "turn_behavior_labels": labels,
    }
    write_jsonl(data / "abc_eval_test_behaviors.jsonl", [record])
    judge.script("MARK-T0", {"verdict": "minor", "key_issues": [{"turn": 2, "issue": "asks again"}]})
    result = run_flowrate(
        "judge-bench", "--model", "smol", "--api-base", judge.base_url, "--data-dir", data,
        "--sets", "abc-eval", "--json", "bench.json", "--work-dir", "work",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    [row] = read_rows(next((tmp_path / "work").rglob("*.jsonl")))
    assert row["key_issues"] == ["turn 2: asks again"]
    [score] = json.loads((tmp_path / "bench.json").read_text())["scores"]
    by = {entry["behaviour"]: entry for entry in score["turns"]["judge"]}
    assert (by["redundant"]["precision"], by["redundant"]["recall"], by["redundant"]["f1"]) == (100.0, 100.0, 100.0)
