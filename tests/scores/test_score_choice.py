"""`--score verdict|expected|combined`: the value a row is scored by, which every consumer then
reads (the pass, the gates, the summary, JUnit, the history and trends, compare, calibration and
top-issues all read `score`); `--reply-order`; `--uncertain-below`."""

import json
import math
import xml.etree.ElementTree as ElementTree
from datetime import date

import duckdb
import pytest

from tests.helpers import chat_bodies, local_eval, read_rows, turn_record, write_jsonl

# the judge says "fully" (1.0) but is torn: half its mass on "none" (0.0)
TORN = {"verdict": "fully", "reason": "torn", "key_issues": ["turn 1: forgets the order"],
        "logprobs": {"fully": math.log(0.5), "none": math.log(0.5)}}  # fmt: skip


def judge_torn(judge, run_flowrate, tmp_path, *extra, output="out.jsonl"):
    judge.script("MARK-TORN", TORN)
    records = [turn_record("torn", "MARK-TORN", "an answer"), turn_record("sure", "plain", "an answer")]
    path = write_jsonl(tmp_path / "c.jsonl", records)
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", output, *extra)
    return result, {row["id"]: row for row in read_rows(tmp_path / output)}


def test_the_verdict_stays_the_default_score_and_the_expected_score_rides_along(judge, run_flowrate, tmp_path):
    result, rows = judge_torn(judge, run_flowrate, tmp_path, "--logprobs")
    assert result.returncode == 0, result.stderr
    torn = rows["torn"]
    assert (torn["score"], torn["verdict_score"], torn["score_from"]) == (1.0, 1.0, "verdict")
    assert torn["expected_score"] == pytest.approx(0.5) and torn["success"] is True


def test_score_expected_is_what_the_pass_the_gate_the_summary_and_junit_use(judge, run_flowrate, tmp_path):
    result, rows = judge_torn(judge, run_flowrate, tmp_path, "--score", "expected", "--junit", "j.xml")
    assert result.returncode == 1, result.stderr  # the default gate: no failure allowed
    torn, sure = rows["torn"], rows["sure"]
    assert (torn["score"], torn["score_from"], torn["success"]) == (pytest.approx(0.5), "expected", False)
    assert torn["verdict"] == "fully" and torn["verdict_score"] == 1.0
    assert (sure["score"], sure["score_from"], sure["success"]) == (1.0, "expected", True)
    assert "mean 0.750" in result.stderr and "torn: fully" in result.stderr
    suite = ElementTree.parse(tmp_path / "j.xml").getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")


def test_the_history_trends_and_compare_read_the_score_expected_named(judge, run_flowrate, tmp_path):
    history = str(tmp_path / "h.duckdb")
    verdict_run, _ = judge_torn(judge, run_flowrate, tmp_path, "--logprobs", output="v.jsonl")
    expected_run, _ = judge_torn(
        judge, run_flowrate, tmp_path, "--score", "expected", "--history", history, output="e.jsonl"
    )
    assert verdict_run.returncode == 0 and expected_run.returncode == 1, expected_run.stderr
    with duckdb.connect(history, read_only=True) as connection:
        [(score,)] = connection.execute("SELECT score FROM rows WHERE conversation_id = 'torn'").fetchall()
    assert score == pytest.approx(0.5)
    [point] = json.loads(run_flowrate("trends", "--history", history, "--json").stdout)
    assert (point["conversations"], point["mean_score"], point["pass_rate"]) == (2, 0.75, 0.5)
    compared = run_flowrate("compare", "v.jsonl", "e.jsonl", "--json")
    assert compared.returncode == 0, compared.stderr
    [metric] = json.loads(compared.stdout)["metrics"]
    assert metric["mean_delta"] == pytest.approx(-0.25)


def test_top_issues_weigh_a_mode_by_the_score_expected_named(judge, run_flowrate, tmp_path):
    for name, extra in (("v.jsonl", ["--logprobs"]), ("e.jsonl", ["--score", "expected", "--no-cache"])):
        judge_torn(judge, run_flowrate, tmp_path, *extra, output=name)
    by_verdict = json.loads(run_flowrate("top-issues", "v.jsonl", "--json").stdout)
    by_expected = json.loads(run_flowrate("top-issues", "e.jsonl", "--json").stdout)
    assert by_verdict["modes"] == [] or by_verdict["modes"][0]["severity"] == 0.0
    assert by_expected["modes"][0]["severity"] > 0  # a "fully" the judge was torn on costs half a point


def test_score_combined_asks_a_verdict_first_look_and_scores_the_mean(judge, run_flowrate, tmp_path):
    judge.script(
        "MARK-TORN",
        {"verdict": "fully", "logprobs": {"fully": math.log(0.99), "mostly": math.log(0.01)}},  # reasoned: sure
        {"verdict": "partial", "logprobs": {"partial": math.log(0.6), "none": math.log(0.4)}},  # first look: torn
    )
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("torn", "MARK-TORN", "an answer")])
    args = ("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--score", "combined", "--threshold", "0")
    result = run_flowrate(*args, "--cache-dir", str(tmp_path / "cache"))
    assert result.returncode == 0, result.stderr
    [row] = read_rows(tmp_path / "out.jsonl")
    main, look = chat_bodies(judge)
    assert list(main["response_format"]["json_schema"]["schema"]["properties"]) == ["reason", "key_issues", "verdict"]
    assert list(look["response_format"]["json_schema"]["schema"]["properties"]) == ["verdict"]
    assert look["messages"] == main["messages"] and look["max_tokens"] < 50 and look["temperature"] == 0
    assert row["verdict_first_score"] == pytest.approx(0.6 * 0.7)
    assert row["combined_score"] == pytest.approx((1.0 + 0.42) / 2)
    assert (row["score"], row["score_from"]) == (pytest.approx(0.71), "combined")
    assert row["attempts"] == 2
    judge.reset()
    again = run_flowrate(*args, "--cache-dir", str(tmp_path / "cache"))
    assert again.returncode == 0 and judge.requests == 0
    [cached] = read_rows(tmp_path / "out.jsonl")
    assert cached["combined_score"] == row["combined_score"]


def test_verdict_first_replies_put_the_verdict_first_and_are_their_own_first_look(judge, run_flowrate, tmp_path):
    judge.script("MARK-TORN", {"verdict": "mostly", "logprobs": {"mostly": math.log(0.5), "minor": math.log(0.5)}})
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("torn", "MARK-TORN", "an answer")])
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--score", "combined",
                          "--reply-order", "verdict-first", "--threshold", "0")  # fmt: skip
    assert result.returncode == 0, result.stderr
    [body] = chat_bodies(judge)  # no second call
    assert list(body["response_format"]["json_schema"]["schema"]["properties"]) == ["verdict", "reason", "key_issues"]
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["verdict_first_score"] == pytest.approx(0.6) and row["combined_score"] == pytest.approx((0.9 + 0.6) / 2)


def test_a_row_without_a_distribution_keeps_its_verdicts_score_and_says_so(judge, run_flowrate, tmp_path):
    judge.behave_as("llama-cpp-python", logits_all=False)  # refuses log-probabilities
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("c1", "a", "b")])
    result = run_flowrate(*local_eval(judge, path, "--score", "expected"))
    assert result.returncode == 0, result.stderr
    [row] = read_rows(tmp_path / "out.jsonl")
    assert (row["score"], row["score_from"], row["expected_score"]) == (1.0, "verdict", None)
    assert "refused token log-probabilities" in result.stderr


def test_a_conversation_the_judge_is_unsure_of_is_marked_and_counted(judge, run_flowrate, tmp_path):
    result, rows = judge_torn(judge, run_flowrate, tmp_path, "--uncertain-below", "0.6")
    assert result.returncode == 0, result.stderr
    assert rows["torn"]["uncertain"] is True and rows["sure"]["uncertain"] is False
    assert "uncertain (judge unsure):" in result.stderr
    assert "torn: fully, the judge's most likely level" in result.stderr


def judge_unsure(judge, run_flowrate, tmp_path, step, *extra):
    judge.script("MARK-UNSURE", step)
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("unsure", "MARK-UNSURE", "an answer")])
    result = run_flowrate(*local_eval(judge, path, "--threshold", "0", *extra))
    [row] = read_rows(tmp_path / "out.jsonl")
    return result, row


def test_the_mass_outside_the_scale_counts_against_the_judges_certainty(judge, run_flowrate, tmp_path):
    # "none" at 0.2 and "minor" at 0.1: over the scale "none" holds 0.667, but the judge gave it 0.2
    # of its mass; "great" and "good", 0.7 together, are no level
    given = {"none": math.log(0.2), "minor": math.log(0.1), "great": math.log(0.4), "good": math.log(0.3)}
    step = {"verdict": "none", "reason": "lost", "key_issues": [], "logprobs": given}
    result, row = judge_unsure(judge, run_flowrate, tmp_path, step, "--uncertain-below", "0.6")
    assert result.returncode == 0, result.stderr
    assert row["level_probs"]["none"] == pytest.approx(2 / 3, abs=1e-6)
    assert row["outside_prob"] == pytest.approx(0.7, abs=1e-6)
    assert row["uncertain"] is True
    assert "unsure: none, the judge's most likely level none at 20% (67% over the scale, 70% outside it)" in (
        result.stderr
    )


def test_a_verdict_given_most_of_the_judges_mass_is_not_uncertain(judge, run_flowrate, tmp_path):
    step = {"verdict": "none", "logprobs": {"none": math.log(0.65), "minor": math.log(0.3), "great": math.log(0.05)}}
    result, row = judge_unsure(judge, run_flowrate, tmp_path, step, "--uncertain-below", "0.6")
    assert result.returncode == 0, result.stderr
    assert row["uncertain"] is False and "uncertain (judge unsure)" not in result.stderr


def test_a_tie_at_the_top_marks_the_row_uncertain_and_names_the_tied_levels_in_the_scales_order(
    judge, run_flowrate, tmp_path
):
    # 0.45 each is above the bound of 0.3, but the judge did not choose between "fully" and "none"
    given = {"fully": math.log(0.45), "none": math.log(0.45), "mostly": math.log(0.1)}
    step = {"verdict": "fully", "reason": "torn", "key_issues": [], "logprobs": given}
    result, row = judge_unsure(judge, run_flowrate, tmp_path, step, "--uncertain-below", "0.3")
    assert result.returncode == 0, result.stderr
    assert row["level_probs"]["fully"] == row["level_probs"]["none"] and row["uncertain"] is True
    assert "unsure: fully, the judge's most likely levels tied: none and fully at 45% each" in result.stderr


def test_samples_whose_mass_falls_outside_the_scale_weigh_by_the_mass_they_gave_the_scale(
    judge, run_flowrate, tmp_path
):
    judge.behave_as("llama-cpp-python")  # one choice a request: one step a sample
    judge.script(
        "MARK-LP",
        {"verdict": "none", "logprobs": {"none": math.log(0.2), "great": math.log(0.8)}},
        {"verdict": "minor", "logprobs": {"minor": 0.0}},
    )
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("c1", "MARK-LP", "an answer")])
    result = run_flowrate(*local_eval(judge, path, "--logprobs", "--samples", "2", "--threshold", "0"))
    assert result.returncode == 0, result.stderr
    [row] = read_rows(tmp_path / "out.jsonl")
    # of the two samples' mass, "none" holds (0.2 + 0) / 2 and "minor" (0 + 1) / 2; 0.4 fell outside
    assert row["outside_prob"] == pytest.approx(0.4, abs=1e-6)
    assert row["level_probs"]["none"] == pytest.approx(0.1 / 0.6, abs=1e-6)
    assert row["level_probs"]["minor"] == pytest.approx(0.5 / 0.6, abs=1e-6)


def test_the_first_look_goes_in_the_form_llama_cpp_pythons_server_takes(judge, run_flowrate, tmp_path):
    judge.behave_as("llama-cpp-python")
    judge.script(
        "MARK-TORN",
        {"verdict": "fully", "logprobs": {"fully": 0.0}},
        {"verdict": "partial", "logprobs": {"partial": math.log(0.5), "fully": math.log(0.5)}},
    )
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("torn", "MARK-TORN", "an answer")])
    result = run_flowrate(*local_eval(judge, path, "--score", "combined", "--threshold", "0"))
    assert result.returncode == 0, result.stderr
    look = chat_bodies(judge, "json_object")[-1]
    assert list(look["response_format"]["schema"]["properties"]) == ["verdict"]
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["verdict_first_score"] == pytest.approx(0.85) and row["score_from"] == "combined"


def test_calibrate_reads_the_score_expected_named(judge, run_flowrate, tmp_path):
    judge_torn(judge, run_flowrate, tmp_path, "--score", "expected", output="e.jsonl")
    today = date.today().isoformat()
    labels = [{"conversation_id": name, "metric": "conversational_flow_rate", "score": 1.0, "labeled_at": today}
              for name in ("torn", "sure")]  # fmt: skip
    write_jsonl(tmp_path / "labels.jsonl", labels)
    result = run_flowrate("calibrate", "e.jsonl", "--labels", "labels.jsonl", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)["metrics"]["conversational_flow_rate"]
    assert report["labeled_conversations"] == 2
    assert report["mean_score"] == 0.75  # the expected scores 0.5 and 1.0, where the verdicts say 1.0 and 1.0
