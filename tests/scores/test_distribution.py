"""The judge's distribution over the scale (`--logprobs`): read from the token log-probabilities
the judge returns in OpenAI's shape, mapped to the scale's levels, renormalised with the mass
outside, and the expected score; from the samples' frequencies; null, said once, where the judge
gives none."""

import math

import pytest

from flowrate.rubric.model import load_rubric
from flowrate.scores.distribution import distributions, value_starts
from tests.helpers import chat_bodies, local_eval, read_rows, turn_record, write_jsonl

FLOW_SCORES = {"fully": 1.0, "mostly": 0.9, "partial": 0.7, "minor": 0.3, "none": 0.0}


def eval_with_logprobs(run_flowrate, judge, tmp_path, *extra, records=None):
    path = write_jsonl(tmp_path / "c.jsonl", records or [turn_record("c1", "MARK-LP", "an answer")])
    result = run_flowrate(
        "eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--logprobs", "--threshold", "0", *extra
    )
    return result, read_rows(tmp_path / "out.jsonl")


def test_the_alternatives_at_the_verdicts_token_become_level_probs_and_the_expected_score(
    judge, run_flowrate, tmp_path
):
    top = {"fully": math.log(0.6), "mostly": math.log(0.25), "partial": math.log(0.1), "great": math.log(0.05)}
    judge.script("MARK-LP", {"verdict": "fully", "reason": "fine", "key_issues": [], "logprobs": top})
    result, [row] = eval_with_logprobs(run_flowrate, judge, tmp_path)
    assert result.returncode == 0, result.stderr
    assert all(body["logprobs"] is True and body["top_logprobs"] == 10 for body in chat_bodies(judge))
    assert row["verdict"] == "fully" and row["level_probs_from"] == "logprobs"
    inside = 0.6 + 0.25 + 0.1
    assert row["level_probs"] == pytest.approx(
        {"fully": 0.6 / inside, "mostly": 0.25 / inside, "partial": 0.1 / inside, "minor": 0.0, "none": 0.0}, abs=1e-6
    )
    assert row["outside_prob"] == pytest.approx(0.05, abs=1e-6)  # "great" is no level
    expected = (0.6 * 1.0 + 0.25 * 0.9 + 0.1 * 0.7) / inside
    assert row["expected_score"] == pytest.approx(expected, abs=1e-6) and row["score"] == 1.0


def test_a_level_spelled_in_two_tokens_takes_the_product_where_its_first_token_is_shared(judge, run_flowrate, tmp_path):
    judge.script(
        "MARK-LP",
        {
            "verdict": "minor",
            "split": {"minor": ["m", "inor"]},
            # "m" begins both "minor" and "mostly": the second token decides; "no" begins only "none"
            "logprobs": {"m": math.log(0.8), "no": math.log(0.2)},
            "next_logprobs": {"inor": math.log(0.75), "ostly": math.log(0.25)},
        },
    )
    result, [row] = eval_with_logprobs(run_flowrate, judge, tmp_path)
    assert result.returncode == 0, result.stderr
    assert row["level_probs"] == pytest.approx(
        {"minor": 0.6, "mostly": 0.2, "none": 0.2, "fully": 0.0, "partial": 0.0}, abs=1e-6
    )
    assert row["expected_score"] == pytest.approx(0.6 * 0.3 + 0.2 * 0.9, abs=1e-6)


def test_a_reply_whose_value_is_off_the_scale_is_re_asked_and_the_rows_distribution_is_the_re_asks(
    judge, run_flowrate, tmp_path
):
    judge.script(
        "MARK-LP",
        {"verdict": "excellent", "logprobs": {"excellent": math.log(0.9), "fully": math.log(0.1)}},
        {"verdict": "partial", "logprobs": {"partial": math.log(0.5), "minor": math.log(0.5)}},
    )
    result, [row] = eval_with_logprobs(run_flowrate, judge, tmp_path)
    assert result.returncode == 0, result.stderr
    assert row["verdict"] == "partial" and row["reasked"]
    assert row["level_probs"]["partial"] == pytest.approx(0.5) and row["level_probs"]["minor"] == pytest.approx(0.5)
    assert row["expected_score"] == pytest.approx(0.5)


def test_a_server_refusing_log_probabilities_is_asked_again_without_them_and_the_run_says_so_once(
    judge, run_flowrate, tmp_path
):
    judge.behave_as("llama-cpp-python", logits_all=False)
    records = [turn_record(f"c{n}", f"question {n}", "an answer") for n in range(3)]
    path = write_jsonl(tmp_path / "c.jsonl", records)
    result = run_flowrate(*local_eval(judge, path, "--logprobs", "-j", "1"))
    assert result.returncode == 0, result.stderr
    rows = read_rows(tmp_path / "out.jsonl")
    assert len(rows) == 3 and all(row["verdict"] == "fully" for row in rows)
    assert all(row["level_probs"] is None and row["expected_score"] is None for row in rows)
    asked = [body for body in chat_bodies(judge, "json_object") if body.get("logprobs")]
    assert len(asked) == 1  # refused once, then never asked again
    assert result.stderr.count("refused token log-probabilities") == 1
    assert "unless started with --logits_all false" in result.stderr


def test_llama_cpp_pythons_server_gives_them_by_default(judge, run_flowrate, tmp_path):
    judge.behave_as("llama-cpp-python")
    judge.script("MARK-LP", {"verdict": "mostly", "logprobs": {"mostly": math.log(0.7), "fully": math.log(0.3)}})
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("c1", "MARK-LP", "an answer")])
    result = run_flowrate(*local_eval(judge, path, "--logprobs"))
    assert result.returncode == 0, result.stderr
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["level_probs"]["mostly"] == pytest.approx(0.7) and "log-probabilities" not in result.stderr


def test_a_judge_answering_without_log_probabilities_leaves_the_fields_null_and_says_how_many(
    judge, run_flowrate, tmp_path
):
    judge.behave_as("ollama")  # answers, but never with log-probabilities
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("c1", "a", "b"), turn_record("c2", "c", "d")])
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--logprobs")
    assert result.returncode == 0, result.stderr
    rows = read_rows(tmp_path / "out.jsonl")
    assert [row["level_probs"] for row in rows] == [None, None]
    assert "2 judge reply(ies) came without the token log-probabilities" in result.stderr


def test_without_logprobs_nothing_is_asked_and_one_sample_has_no_distribution(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("c1", "a", "b")])
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl")
    assert result.returncode == 0, result.stderr
    assert not any("logprobs" in body for body in chat_bodies(judge))
    [row] = read_rows(tmp_path / "out.jsonl")
    assert (row["level_probs"], row["expected_score"], row["level_probs_from"]) == (None, None, None)


def test_samples_without_log_probabilities_give_their_frequencies(judge, run_flowrate, tmp_path):
    judge.script("MARK-SPLIT", {"verdicts": ["mostly", "minor", "mostly", "none"]})
    path = write_jsonl(tmp_path / "s.jsonl", [turn_record("split", "MARK-SPLIT", "x")])
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "--samples", "4", "-o", "out.jsonl")
    assert result.returncode == 0, result.stderr
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["level_probs_from"] == "samples"
    assert row["level_probs"] == {"none": 0.25, "minor": 0.25, "partial": 0.0, "mostly": 0.5, "fully": 0.0}
    assert row["expected_score"] == pytest.approx(0.25 * 0.3 + 0.5 * 0.9)


def test_samples_with_log_probabilities_give_the_mean_of_their_distributions(judge, run_flowrate, tmp_path):
    judge.behave_as("llama-cpp-python")  # one choice a request: one step a sample
    judge.script(
        "MARK-LP",
        {"verdict": "fully", "logprobs": {"fully": math.log(0.8), "mostly": math.log(0.2)}},
        {"verdict": "mostly", "logprobs": {"mostly": math.log(0.6), "fully": math.log(0.4)}},
    )
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("c1", "MARK-LP", "an answer")])
    result = run_flowrate(*local_eval(judge, path, "--logprobs", "--samples", "2", "--threshold", "0"))
    assert result.returncode == 0, result.stderr
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["level_probs_from"] == "logprobs" and row["sample_verdicts"] == ["fully", "mostly"]
    assert row["level_probs"]["fully"] == pytest.approx(0.6) and row["level_probs"]["mostly"] == pytest.approx(0.4)


def test_a_rerun_from_the_cache_gives_the_same_distribution(judge, run_flowrate, tmp_path):
    top = {"partial": math.log(0.55), "minor": math.log(0.3), "mostly": math.log(0.15)}
    judge.script("MARK-LP", {"verdict": "partial", "logprobs": top})
    cache = ["--cache-dir", str(tmp_path / "cache")]
    _, [first] = eval_with_logprobs(run_flowrate, judge, tmp_path, *cache)
    judge.reset()
    judge.script("MARK-LP", {"verdict": "none"})  # would differ, were it asked
    result, [again] = eval_with_logprobs(run_flowrate, judge, tmp_path, *cache)
    assert result.returncode == 0, result.stderr
    assert judge.requests == 0 and again["cached"] is True
    assert (again["level_probs"], again["expected_score"]) == (first["level_probs"], first["expected_score"])


def test_a_reply_cached_without_log_probabilities_is_asked_again_when_they_are_wanted(judge, run_flowrate, tmp_path):
    cache = ["--cache-dir", str(tmp_path / "cache")]
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("c1", "MARK-LP", "an answer")])
    assert run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "first.jsonl", *cache).returncode == 0
    judge.script("MARK-LP", {"verdict": "fully", "logprobs": {"fully": math.log(0.9), "mostly": math.log(0.1)}})
    result, [row] = eval_with_logprobs(run_flowrate, judge, tmp_path, *cache)
    assert result.returncode == 0, result.stderr
    assert row["cached"] is False and row["level_probs"]["fully"] == pytest.approx(0.9)


# -- the mapping, on replies as judges write them -------------------------------------------------
def certain(text):
    return [{"token": char, "logprob": 0.0, "top_logprobs": []} for char in text]


def test_the_value_of_each_criterion_is_found_by_its_place_in_the_json_not_by_its_words():
    rubric = load_rubric("virtual_agent")
    names = [criterion.name for criterion in rubric.criteria]
    parts = {
        name: {"reason": 'says "rating": 1 in its reason', "key_issues": ['"rating": 2'], "rating": 4} for name in names
    }
    import json

    text = json.dumps({"criteria": parts})
    starts = value_starts(text, rubric)
    assert set(starts) == set(names) and all(text[starts[name]] == "4" for name in names)


def test_tokens_that_do_not_spell_the_reply_give_no_distribution():
    rubric = load_rubric("conversational_flow_rate")
    text = '{"reason": "ok", "key_issues": [], "verdict": "fully"}'
    assert distributions(text, certain(text), rubric)["conversational_flow_rate"].probs["fully"] == 1.0
    assert distributions(text, certain(text[:-1]), rubric) == {}
    assert distributions(text, None, rubric) == {}
