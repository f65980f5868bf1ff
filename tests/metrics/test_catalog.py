"""The metrics a run loads: one call each, unique names, `flowrate metrics`, and thresholds, gates
and weights that name what exists."""

import json

import pytest

from tests.helpers import ROOT, SUITE_MARK, distinct, read_rows, suite_reply, write_jsonl

RPD_MARK = "REPETITIVE PATTERNS"  # in Repetitive Pattern Detection's only


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


@pytest.mark.parametrize("key", ["thresholds", "gates"])
def test_an_unknown_name_under_thresholds_or_gates_in_the_config_is_refused(run_flowrate, tmp_path, judge, key):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(1))
    value = "{cohernce: 0.6}" if key == "thresholds" else "{cohernce: {min_pass_rate: 0.9}}"
    (tmp_path / "f.yaml").write_text(f"{key}: {value}\n")
    result = run_flowrate("eval", path, "--config", "f.yaml", "--api-base", judge.base_url)
    assert result.returncode == 2, result.stderr
    assert f"option {key}: unknown metric 'cohernce' (known: conversational_flow_rate" in result.stderr
    assert judge.requests == 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--weight", "bogus=2"], "option weights: unknown criterion 'bogus' (known: "),
        (["--weight", "request_completion=-1"], "the weight of request_completion must not be negative"),
    ],
)
def test_a_weight_on_no_criterion_or_below_zero_is_refused(run_flowrate, tmp_path, judge, args, message):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(1))
    result = run_flowrate("eval", path, "--metric", "virtual_agent", "--api-base", judge.base_url, *args)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert judge.requests == 0
    listed = run_flowrate("metrics", *args)
    assert listed.returncode == 2 and message in listed.stderr, listed.stderr


def test_weights_that_sum_to_zero_are_refused(run_flowrate, tmp_path, judge):
    from flowrate.rubric.model import load_rubric

    path = write_jsonl(tmp_path / "c.jsonl", distinct(1))
    zeros = [arg for c in load_rubric("virtual_agent").criteria for arg in ("--weight", f"{c.name}=0")]
    result = run_flowrate("eval", path, "--metric", "virtual_agent", "--api-base", judge.base_url, *zeros)
    assert result.returncode == 2 and "criteria sum to 0" in result.stderr, result.stderr
    assert judge.requests == 0


def test_a_run_naming_no_weight_threshold_or_gate_reads_only_the_rubric_it_judges_with():
    # every packaged rubric was read to check names nobody gave: start-up time on every run
    from flowrate.metrics.catalog import build_metrics
    from flowrate.rubric import model
    from flowrate.settings.options import EvalSettings

    model._packaged_rubric.cache_clear()
    settings = EvalSettings(api_base="http://127.0.0.1:9/v1")
    build_metrics(settings.judge_settings, None, settings.gate_settings)
    assert model._packaged_rubric.cache_info().misses == 1
    model._packaged_rubric.cache_clear()
    named = EvalSettings(api_base="http://127.0.0.1:9/v1", weights={"no_such_criterion": 2.0})
    with pytest.raises(Exception, match="unknown criterion 'no_such_criterion'"):
        build_metrics(named.judge_settings, None, named.gate_settings)
