"""Metrics as rubric data (issue 8): the virtual-agent suite in one call, Repetitive Pattern
Detection, the offline repetition check, per-metric thresholds and the selection filters."""

import json
from pathlib import Path

import pytest

from flowrate import (
    ConversationalEvalTestCase,
    EvalTestCase,
    RepetitivePatternDetectionMetric,
    VirtualAgentSuite,
    evaluate_conversations,
)
from flowrate.rubric.model import load_rubric
from tests.conftest import read_rows, turn_record, write_jsonl
from tests.test_api import NO_WAIT, ScriptedClient

ROOT = Path(__file__).resolve().parents[1]
SUITE_MARK = "on eight criteria"  # in the virtual-agent rubric's instructions only
RPD_MARK = "REPETITIVE PATTERNS"  # in Repetitive Pattern Detection's only
SUITE = load_rubric("virtual_agent")
RATINGS = {
    "request_completion": 4,
    "intent_accuracy": 5,
    "slot_filling": 2,
    "smoothness": 3,
    "context_retention": 4,
    "truthfulness": 3,
    "conciseness": 1,
    "coherence": 5,
}


def suite_reply(ratings=None, **override):
    ratings = {**RATINGS, **(ratings or {})}
    criteria = {
        name: {"reason": f"{name} reason", "key_issues": [f"turn 1: {name} issue"], "rating": rating}
        for name, rating in ratings.items()
    }
    criteria.update(override)
    return json.dumps({"criteria": criteria})


def distinct(count, prefix="c"):
    return [turn_record(f"{prefix}{n}", f"question {prefix}{n}", f"answer {n}") for n in range(count)]


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


def test_three_metrics_make_three_calls_per_conversation(judge, run_flowrate, tmp_path):
    judge.script(SUITE_MARK, {"content": suite_reply()})
    judge.script(RPD_MARK, {"verdict": "none"})
    path = write_jsonl(tmp_path / "c.jsonl", distinct(4))
    metrics = [
        "--metric",
        "virtual_agent",
        "--metric",
        "repetitive_pattern_detection",
        "--metric",
        "conversational_flow_rate",
    ]
    run_flowrate("eval", path, *metrics, "--api-base", judge.base_url, "-o", "out.jsonl")
    assert judge.requests == 12 and judge.calls_for(SUITE_MARK) == 4 and judge.calls_for(RPD_MARK) == 4
    rows = read_rows(tmp_path / "out.jsonl")
    assert len(rows) == 4 * 11 and len({(row["id"], row["metric"]) for row in rows}) == 44
    rpd = next(row for row in rows if row["metric"] == "repetitive_pattern_detection")
    assert (rpd["verdict"], rpd["score"], rpd["success"]) == ("none", 1.0, True)


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


def _run(metrics):
    import asyncio

    case = ConversationalEvalTestCase(turns=[EvalTestCase(input="Where is order 12?", actual_output="It ships today.")])
    return asyncio.run(evaluate_conversations([case], metrics))


def test_thresholds_per_metric_come_from_the_config(judge, run_flowrate, tmp_path):
    judge.script(SUITE_MARK, {"content": suite_reply()})
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "flowrate.yaml").write_text(
        "metric: [virtual_agent]\nthreshold: 0.3\nthresholds: {coherence: 1.0, intent_accuracy: 0.9, context_retention: 0.9}\n"
    )
    write_jsonl(tmp_path / "c.jsonl", distinct(1))
    result = run_flowrate("eval", "c.jsonl", "--api-base", judge.base_url, "-o", "out.jsonl")
    rows = {row["metric"]: row for row in read_rows(tmp_path / "out.jsonl")}
    assert (rows["coherence"]["threshold"], rows["coherence"]["success"]) == (1.0, True)
    assert (rows["context_retention"]["threshold"], rows["context_retention"]["success"]) == (0.9, False)
    assert (rows["conciseness"]["threshold"], rows["conciseness"]["success"]) == (0.3, True)
    assert result.returncode == 1 and "c0 [context_retention]: 4/5" in result.stderr


def test_metric_names_must_be_unique_across_the_metrics_loaded(run_flowrate, tmp_path):
    rubric = tmp_path / "mine.yaml"
    text = (ROOT / "configs" / "rubric.example.yaml").read_text().replace("name: politeness", "name: coherence")
    rubric.write_text(text.replace("politeness", "coherence"))
    write_jsonl(tmp_path / "c.jsonl", distinct(1))
    result = run_flowrate("eval", "c.jsonl", "--metric", "virtual_agent", "--rubric", rubric)
    assert result.returncode == 2
    assert f"metric name 'coherence' is made by both virtual_agent and {rubric}" in result.stderr
    unknown = run_flowrate("eval", "c.jsonl", "--metric", "flow")
    assert unknown.returncode == 2 and "unknown metric 'flow'" in unknown.stderr


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


def test_the_repetition_check_needs_no_key_and_flags_the_samples_that_loop(run_flowrate, cli_env, tmp_path):
    env = {key: value for key, value in cli_env.items() if key != "OPENAI_API_KEY"}
    result = run_flowrate(
        "eval", ROOT / "sample_conversations", "--metric", "repetition_check", "-o", "out.jsonl", env=env
    )
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    flagged = {key: row["key_issues"] for key, row in rows.items() if row["key_issues"]}
    assert flagged == {
        "en-repeated-question": ["turn 3: repeats the question of turn 1 after the user answered"],
        "en-ignored-answer": ["turn 2: repeats the question of turn 1 after the user answered"],
        "en-left-hanging": ["turn 3: the user's last message has no reply"],
        "ru-loop": [
            "turn 2: repeats the reply of turn 1 (100% alike)",
            "turn 3: repeats the question of turn 1 after the user answered",
        ],
        "pt-repeated-question": ["turn 3: repeats the question of turn 1 after the user answered"],
    }
    assert all(rows[key]["score"] == 1.0 and rows[key]["success"] for key in rows if key not in flagged)
    assert rows["ru-loop"]["score"] == 0.2 and rows["en-left-hanging"]["score"] == 0.6
    assert result.returncode == 1 and all(row["cost_usd"] == 0.0 for row in rows.values())
    assert "loading the judge" not in result.stderr


def test_the_repetition_check_flags_empty_replies_and_spares_a_polite_goodbye():
    from flowrate.metrics.repetition import findings

    case = ConversationalEvalTestCase(
        turns=[
            EvalTestCase(input="hi", actual_output=""),
            EvalTestCase(input="hello?", actual_output="Sorry, how can I help?"),
            EvalTestCase(input="Thanks, bye!", actual_output=None),
        ]
    )
    assert findings(case) == ["turn 1: empty reply"]


@pytest.mark.parametrize(
    "args, reason",
    [(["--sample", "0.5"], "--sample"), (["--limit", "3"], "--limit"), (["--min-words", "6"], "--min-words")],
)
def test_filters_choose_the_same_conversations_every_run(judge, run_flowrate, tmp_path, args, reason):
    records = distinct(20) + [turn_record("long", "a b c d e f g", "h i j k")]
    write_jsonl(tmp_path / "c.jsonl", records)
    chosen = []
    for output in ("one.jsonl", "two.jsonl"):
        result = run_flowrate("eval", "c.jsonl", *args, "--api-base", judge.base_url, "-o", output)
        assert result.returncode == 0, result.stderr
        chosen.append(sorted(row["id"] for row in read_rows(tmp_path / output)))  # rows come in completion order
        assert f"left out by the selection (not errors): {reason} {21 - len(chosen[-1])}" in result.stderr
    assert chosen[0] == chosen[1] and 0 < len(chosen[0]) < 21


def test_a_sample_is_the_same_across_shards(judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", distinct(40))
    whole = run_flowrate("eval", "c.jsonl", "--sample", "0.5", "--api-base", judge.base_url, "-o", "all.jsonl")
    assert whole.returncode == 0
    parts = []
    for index in (1, 2):
        run_flowrate(
            "eval",
            "c.jsonl",
            "--sample",
            "0.5",
            "--shard",
            f"{index}/2",
            "--api-base",
            judge.base_url,
            "-o",
            f"s{index}.jsonl",
        )
        parts += [row["id"] for row in read_rows(tmp_path / f"s{index}.jsonl")]
    assert sorted(parts) == sorted(row["id"] for row in read_rows(tmp_path / "all.jsonl"))


def test_only_and_exclude_filter_on_metadata(judge, run_flowrate, tmp_path):
    records = [
        {**turn_record("hr", "q1", "a"), "metadata": {"topic": "HR"}},
        {**turn_record("it", "q2", "a"), "metadata": {"topic": "IT"}},
        {**turn_record("handoff", "q3", "a"), "metadata": {"topic": "IT", "immediate_handoff": True}},
    ]
    write_jsonl(tmp_path / "c.jsonl", records)
    result = run_flowrate(
        "eval",
        "c.jsonl",
        "--exclude",
        "topic=HR",
        "--exclude",
        "immediate_handoff=true",
        "--api-base",
        judge.base_url,
        "-o",
        "o.jsonl",
    )
    assert [row["id"] for row in read_rows(tmp_path / "o.jsonl")] == ["it"] and result.returncode == 0
    assert "--exclude 2" in result.stderr
    only = run_flowrate("eval", "c.jsonl", "--only", "topic=HR", "--api-base", judge.base_url, "-o", "p.jsonl")
    assert [row["id"] for row in read_rows(tmp_path / "p.jsonl")] == ["hr"] and only.returncode == 0
    bad = run_flowrate("eval", "c.jsonl", "--only", "topic")
    assert bad.returncode == 2 and "'topic' must be FIELD=VALUE" in bad.stderr


def test_resume_judges_a_suite_again_only_for_its_missing_rows(judge, run_flowrate, tmp_path):
    judge.script(SUITE_MARK, {"content": suite_reply()})
    write_jsonl(tmp_path / "c.jsonl", distinct(2))
    base = (
        "eval",
        "c.jsonl",
        "--metric",
        "virtual_agent",
        "--api-base",
        judge.base_url,
        "-o",
        "out.jsonl",
        "--no-cache",
    )
    run_flowrate(*base)
    output = tmp_path / "out.jsonl"
    lines = output.read_text().splitlines()
    kept = [
        line
        for line in lines
        if not (json.loads(line)["id"] == "c1" and json.loads(line)["metric"] in ("coherence", "user_satisfaction"))
    ]
    output.write_text("\n".join(kept) + "\n")
    calls = judge.requests
    result = run_flowrate(*base, "--resume")
    rows = read_rows(output)
    assert judge.requests == calls + 1 and len(rows) == 18
    assert len({(row["id"], row["metric"]) for row in rows}) == 18 and result.returncode == 1


def test_dry_run_counts_one_call_per_judged_metric(judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", distinct(3))
    result = run_flowrate(
        "eval",
        "c.jsonl",
        "--metric",
        "virtual_agent",
        "--metric",
        "conversational_flow_rate",
        "--metric",
        "repetition_check",
        "--api-base",
        judge.base_url,
        "--dry-run",
    )
    assert result.returncode == 0 and "3 conversation(s), 0 cached, 6 call(s)" in result.stderr and judge.requests == 0


def test_agreement_on_a_criterion_of_the_suite(judge, run_flowrate, tmp_path):
    records = []
    for n, rating in enumerate([1, 2, 3, 4, 5, 5, 4, 2]):
        judge.script(f"MARK-AG-{n}", {"content": suite_reply({"coherence": rating})})
        records.append({**turn_record(f"d{n}", f"MARK-AG-{n}", "x"), "labels": {"Coherent": min(rating // 2, 2)}})
    write_jsonl(tmp_path / "l.jsonl", records)
    result = run_flowrate(
        "agreement", "l.jsonl", "--label", "Coherent", "--metric", "coherence", "--api-base", judge.base_url, "--json"
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["metric"] == "coherence" and report["n"] == 8 and judge.requests == 8
    assert report["confusion"]["verdicts"] == ["1/5", "2/5", "3/5", "4/5", "5/5"]
    again = run_flowrate(
        "agreement",
        "l.jsonl",
        "--label",
        "Coherent",
        "--metric",
        "coherence",
        "--results",
        "flowrate-agreement.jsonl",
        "--json",
    )
    assert again.returncode == 0 and json.loads(again.stdout) == report


def test_metrics_lists_every_metric_with_its_scales_weights_and_calls(run_flowrate):
    result = run_flowrate("metrics", "--weight", "request_completion=2", "--json")
    assert result.returncode == 0
    listed = {item["name"]: item for item in json.loads(result.stdout)}
    assert list(listed) == [
        "conversational_flow_rate",
        "virtual_agent",
        "repetitive_pattern_detection",
        "repetition_check",
    ]
    assert (
        listed["virtual_agent"]["calls_per_conversation"] == 1
        and listed["repetition_check"]["calls_per_conversation"] == 0
    )
    assert listed["virtual_agent"]["weights"]["request_completion"] == 2.0
    assert "virtual_agent: Virtual-agent quality; 1 judge call(s) per conversation" in result.stderr
    assert "  slot_filling: 1..3 (score = rating / 3), weight 1" in result.stderr
    assert "  repetitive_pattern_detection: none 1, minor 0.9, partial 0.7, mostly 0.3, fully 0" in result.stderr
