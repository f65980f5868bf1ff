"""Metrics as rubric data: the virtual-agent suite in one call with its weighted mean, Repetitive
Pattern Detection's inverted scale, and a rubric of your own."""

import json

import pytest

from flowrate import (
    ConversationalEvalTestCase,
    EvalTestCase,
    RepetitivePatternDetectionMetric,
    VirtualAgentSuite,
    evaluate_conversations,
)
from flowrate.metrics.rubric_metric import RubricMetric
from flowrate.rubric.model import load_rubric
from tests.helpers import (
    NO_WAIT,
    RATINGS,
    ROOT,
    SUITE_MARK,
    ScriptedClient,
    distinct,
    read_rows,
    suite_reply,
    transport,
    write_jsonl,
)

SUITE = load_rubric("virtual_agent")


def _run(metrics):
    import asyncio

    case = ConversationalEvalTestCase(turns=[EvalTestCase(input="Where is order 12?", actual_output="It ships today.")])
    return asyncio.run(evaluate_conversations([case], metrics))


def test_the_suite_makes_one_call_and_nine_rows_per_conversation(judge, run_flowrate, tmp_path):
    judge.script(SUITE_MARK, {"content": suite_reply()})
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "flowrate.yaml").write_text("weights: {request_completion: 2}\n")
    path = write_jsonl(tmp_path / "c.jsonl", distinct(3))
    result = run_flowrate(
        "eval",
        path,
        "--metric",
        "virtual_agent",
        "--api-base",
        judge.base_url,
        "--weight",
        "conciseness=3",
        "-o",
        "out.jsonl",
    )
    assert judge.requests == 3, result.stderr
    body = judge.bodies[0]
    assert body["response_format"]["json_schema"]["schema"]["properties"]["criteria"]["required"] == list(RATINGS)
    rows = read_rows(tmp_path / "out.jsonl")
    assert len(rows) == 27 and {row["id"] for row in rows} == {"c0", "c1", "c2"}
    by_metric = {row["metric"]: row for row in rows if row["id"] == "c1"}
    assert list(by_metric) == [*RATINGS, "user_satisfaction"]
    for criterion in SUITE.criteria:
        row = by_metric[criterion.name]
        assert row["suite"] == "virtual_agent" and row["scale"] == criterion.scale.points
        assert 1 <= row["rating"] <= row["scale"] and row["score"] == row["rating"] / row["scale"]  # exact, not rounded
        assert row["key_issues"] == [f"turn 1: {criterion.name} issue"]
    weights = {name: 1.0 for name in RATINGS} | {"request_completion": 2.0, "conciseness": 3.0}
    expected = sum(by_metric[n]["score"] * w for n, w in weights.items()) / sum(weights.values())
    satisfaction = by_metric["user_satisfaction"]
    assert satisfaction["weights"] == weights and satisfaction["score"] == pytest.approx(expected, rel=0, abs=1e-12)
    assert satisfaction["success"] == (satisfaction["score"] >= 0.7)
    assert sum(row["cost_usd"] for row in rows) > 0 and by_metric["coherence"]["cost_usd"] == 0.0
    assert result.returncode == 1  # slot_filling 2/3 and conciseness 1/3 fail at 0.7
    assert "Coherence: 3 rows, pass rate 100.0%, mean 5.00 on 5" in result.stderr


async def test_scores_are_stored_exact_and_the_weighted_mean_is_built_from_exact_parts(judge, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    judge.script(SUITE_MARK, {"content": suite_reply({"slot_filling": 2, "truthfulness": 2, "conciseness": 2})})
    metric = RubricMetric(
        "virtual_agent", model="gpt-4o", api_base=judge.base_url, retry=NO_WAIT, transport=transport()
    )
    case = ConversationalEvalTestCase(turns=[EvalTestCase(input="a", actual_output="b")])
    [result] = await evaluate_conversations([case], [metric])
    scores = {data.name: data.score for data in result.metrics_data}
    assert scores["slot_filling"] == 2 / 3 and scores["slot_filling"] != 0.6667
    parts = [RATINGS[name] / c.scale.points for name, c in zip(RATINGS, SUITE.criteria)]
    parts[2] = parts[5] = parts[6] = 2 / 3
    assert scores["user_satisfaction"] == sum(parts) / len(parts)


def test_a_suite_reply_off_its_scale_is_reasked_then_an_error_row_for_every_criterion():
    bad = suite_reply({"conciseness": 4})  # conciseness is rated on 3 points
    client = ScriptedClient(bad, bad)
    [result] = _run([VirtualAgentSuite(model=client, retry=NO_WAIT)])
    assert (
        len(client.calls) == 2
        and "rating 4 for conciseness is not on its scale 1..3" in client.calls[1][0][-1]["content"]
    )
    assert [data.name for data in result.metrics_data] == [*RATINGS, "user_satisfaction"]
    assert all(data.error is not None and data.error.type == "UnparsableReply" for data in result.metrics_data)


def test_the_python_api_returns_one_result_per_criterion():
    suite = VirtualAgentSuite(model=ScriptedClient(suite_reply()), weights={"coherence": 4}, retry=NO_WAIT)
    rpd = RepetitivePatternDetectionMetric(
        model=ScriptedClient('{"reason": "r", "key_issues": [], "verdict": "minor"}')
    )
    [result] = _run([suite, rpd])
    names = [data.name for data in result.metrics_data]
    assert names == [*RATINGS, "user_satisfaction", "repetitive_pattern_detection"]
    coherence = result.metrics_data[names.index("coherence")]
    assert (coherence.score, coherence.evaluation_log["rating"], coherence.evaluation_log["scale"]) == (1.0, 5, 5)
    satisfaction = result.metrics_data[names.index("user_satisfaction")]
    assert satisfaction.evaluation_log["weights"]["coherence"] == 4.0
    assert result.metrics_data[-1].score == 0.9


def test_repetitive_pattern_detection_scale_is_inverted_and_unknown_labels_never_pass():
    for verdict, score in (("none", 1.0), ("minor", 0.9), ("partial", 0.7), ("mostly", 0.3), ("fully", 0.0)):
        reply = json.dumps(
            {"reason": "r", "key_issues": ["turns 1 and 3: asks for the order number"], "verdict": verdict}
        )
        metric = RepetitivePatternDetectionMetric(model=ScriptedClient(reply), retry=NO_WAIT)
        [result] = _run([metric])
        assert result.metrics_data[0].score == score
    client = ScriptedClient('{"reason": "r", "key_issues": [], "verdict": "a lot"}', '{"verdict": "lots"}')
    [result] = _run([RepetitivePatternDetectionMetric(model=client, retry=NO_WAIT)])
    data = result.metrics_data[0]
    assert len(client.calls) == 2 and data.error.type == "UnparsableReply" and data.success is None
    assert '"verdict": "none|minor|partial|mostly|fully"' in client.calls[1][0][-1]["content"]


def test_a_rubric_of_your_own_declares_its_criteria_and_scales(judge, run_flowrate, tmp_path):
    reply = {
        "criteria": {
            "resolution": {"reason": "r", "key_issues": [], "verdict": "partly"},
            "politeness": {"reason": "r", "key_issues": [], "rating": 3},
        }
    }
    judge.script("support conversation", {"content": json.dumps(reply)})
    write_jsonl(tmp_path / "c.jsonl", distinct(1))
    result = run_flowrate(
        "eval",
        "c.jsonl",
        "--rubric",
        ROOT / "configs" / "rubric.example.yaml",
        "--api-base",
        judge.base_url,
        "-o",
        "o.jsonl",
    )
    rows = {row["metric"]: row for row in read_rows(tmp_path / "o.jsonl")}
    assert list(rows) == ["resolution", "politeness", "user_satisfaction"] and judge.requests == 1
    assert (rows["resolution"]["verdict"], rows["resolution"]["score"]) == ("partly", 0.5)
    assert (rows["politeness"]["rating"], rows["politeness"]["score"]) == (3, 1.0)
    assert rows["user_satisfaction"]["score"] == 0.75 and result.returncode == 1


def test_two_metrics_are_two_objects_each_usable_as_a_key():
    first = RubricMetric("virtual_agent", model="gpt-4o")
    second = RubricMetric("virtual_agent", model="gpt-4o")
    assert first != second and first == first  # a metric is its own: it carries its run's learned state
    assert len({first, second}) == 2


def test_every_score_choice_given_to_the_python_api_reaches_the_metric():
    from dataclasses import fields

    from flowrate import ConversationalFlowRateMetric
    from flowrate.settings.groups import ScoreChoice

    choice = ScoreChoice(
        score="combined", reply_order="verdict-first", uncertain_below=0.7, logprobs=True, reasoning_effort="high",
        turn_look=True,
    )  # fmt: skip
    assert {f.name for f in fields(ScoreChoice)} == {"score", "reply_order", "uncertain_below", "logprobs",
                                                    "reasoning_effort", "turn_look"}  # fmt: skip
    metric = ConversationalFlowRateMetric(model="gpt-4o", choice=choice)
    assert metric.judge.score_choice == choice and metric.planner.turn_look
