"""Several samples of one judgement: asked with `n` or one call each, at the sampling temperature,
and their majority with its agreement."""

from flowrate import ConversationalEvalTestCase, ConversationalFlowRateMetric, EvalTestCase, evaluate_conversations
from flowrate.metrics.planning import SAMPLING_TEMPERATURE
from tests.helpers import (
    NO_WAIT,
    ScriptedClient,
    chat_bodies,
    distinct,
    local_eval,
    read_rows,
    turn_record,
    verdict,
    write_jsonl,
)


def test_samples_use_one_request_with_n_and_report_agreement(judge, run_flowrate, tmp_path):
    judge.script("MARK-SPLIT", {"verdicts": ["mostly", "minor", "mostly"]})
    path = write_jsonl(tmp_path / "s.jsonl", [turn_record("split", "MARK-SPLIT", "x"), turn_record("same", "a", "b")])
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "--samples", "3", "-o", "out.jsonl")
    assert result.returncode == 0, result.stderr
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    assert judge.requests == 2 and all(body["n"] == 3 for body in judge.bodies)
    assert (rows["split"]["verdict"], rows["split"]["agreement"]) == ("mostly", 0.6667)
    assert rows["split"]["sample_verdicts"] == ["mostly", "minor", "mostly"]
    assert rows["same"]["agreement"] == 1.0
    assert "split: mostly with 67% agreement (mostly, minor, mostly)" in result.stderr


async def test_samples_without_n_support_make_k_calls_and_ties_go_low():
    client = ScriptedClient(verdict("fully"), verdict("partial"))
    metric = ConversationalFlowRateMetric(model=client, samples=2, retry=NO_WAIT)
    [result] = await evaluate_conversations(
        [ConversationalEvalTestCase(turns=[EvalTestCase(input="a", actual_output="b")])], [metric]
    )
    assert len(client.calls) == 2
    assert result.metrics_data[0].evaluation_log["verdict"] == "partial"  # a 1-1 tie: the cautious side


def test_samples_from_a_server_that_ignores_n_are_made_up_with_more_calls(judge, run_flowrate, tmp_path):
    judge.behave_as("llama-cpp-python")
    judge.script("MARK-SPLIT", {"verdict": "mostly"}, {"verdict": "minor"}, {"verdict": "mostly"})
    records = [turn_record("split", "MARK-SPLIT", "x"), turn_record("same", "a", "b")]
    path = write_jsonl(tmp_path / "s.jsonl", records)
    result = run_flowrate(*local_eval(judge, path, "--samples", "3", "-j", "1"))
    assert result.returncode == 0, result.stderr
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    assert rows["split"]["samples"] == 3 and rows["split"]["sample_verdicts"] == ["mostly", "minor", "mostly"]
    assert (rows["split"]["verdict"], rows["split"]["agreement"]) == ("mostly", 0.6667)
    assert rows["same"]["samples"] == 3 and len(rows["same"]["sample_verdicts"]) == 3
    answered = chat_bodies(judge, "json_object")
    assert len(answered) == 6 and [body.get("n") for body in answered] == [3, None, None, None, None, None]
    assert all(body["temperature"] == SAMPLING_TEMPERATURE for body in chat_bodies(judge))


def test_samples_from_a_server_that_refuses_n_are_asked_one_at_a_time(judge, run_flowrate, tmp_path):
    judge.behave_as("llama-server", n_ctx=100_000)
    path = write_jsonl(tmp_path / "s.jsonl", distinct(2))
    result = run_flowrate(*local_eval(judge, path, "--samples", "3", "-j", "1"))
    assert result.returncode == 0, result.stderr
    assert [body.get("n") for body in chat_bodies(judge)] == [3, None, None, None, None, None, None]
    assert all(row["samples"] == 3 and len(row["sample_verdicts"]) == 3 for row in read_rows(tmp_path / "out.jsonl"))


def test_one_sample_is_asked_at_temperature_0_and_several_at_the_sampling_temperature(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", distinct(1))
    run_flowrate("eval", path, "--api-base", judge.base_url)
    run_flowrate("eval", path, "--api-base", judge.base_url, "--samples", "2")
    assert [body["temperature"] for body in judge.bodies] == [0, SAMPLING_TEMPERATURE]
