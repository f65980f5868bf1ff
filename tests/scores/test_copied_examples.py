"""A reply copying the rubric's worked example is not a judgement."""

import json

from flowrate.metrics.rubric_metric import RubricMetric
from flowrate.scores.reading import copied_example, parse_reply
from tests.helpers import SUITE_MARK, distinct, read_rows, reask_text, suite_reply, turn_record, write_jsonl


def test_a_reply_copying_the_rubrics_example_is_reasked_saying_so(judge, run_flowrate, tmp_path):
    judge.script("MARK-COPY", {"copy_example": 0}, {"verdict": "partial", "reason": "Judged this time."})
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("c", "MARK-COPY", "x")])
    run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl")
    assert "repeats the rubric's worked example 1" in reask_text(judge.bodies[1])
    [row] = read_rows(tmp_path / "out.jsonl")
    assert (row["verdict"], row["reason"]) == ("partial", "Judged this time.")
    assert "worked example 1" in row["reasked"]


def test_a_suite_copying_the_example_twice_is_an_error_counted_as_copied(judge, run_flowrate, tmp_path):
    judge.script(SUITE_MARK, {"copy_example": 0})
    path = write_jsonl(tmp_path / "c.jsonl", distinct(1))
    result = run_flowrate("eval", path, "--metric", "virtual_agent", "--api-base", judge.base_url, "-o", "out.jsonl")
    assert result.returncode == 3
    rows = read_rows(tmp_path / "out.jsonl")
    assert len(rows) == 9 and {row["error"]["type"] for row in rows} == {"CopiedExample"}
    assert "8 of 8 criteria" in rows[0]["error"]["message"] and judge.requests == 2


def test_a_short_generic_reason_shared_with_an_example_is_not_a_copy():
    suite = RubricMetric("virtual_agent", model="gpt-4o")
    reading = json.loads(suite_reply())
    reading["criteria"]["truthfulness"]["reason"] = "Nothing made up."  # as in example 2, for one criterion of 8
    assert copied_example(parse_reply(json.dumps(reading), suite.rubric), suite.rubric) is None
