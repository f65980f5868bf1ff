"""Token log-probabilities as judges' servers give them, broken ones included, through both
transports: NaN read as no distribution (the reply kept, not retried), tokens that do not spell
the reply, each case said once at the run's end, however many replies it hit."""

import math

from tests.helpers import chat_bodies, read_rows, turn_record, write_jsonl

FULLY = '{"reason": "Every turn answers the user.", "key_issues": [], "verdict": "fully"}'


def eval_with_logprobs(judge, run_flowrate, tmp_path, step, count=2, *extra):
    judge.script("MARK-LP", step)
    records = [turn_record(f"c{n}", f"MARK-LP question {n}", "an answer") for n in range(count)]
    path = write_jsonl(tmp_path / "c.jsonl", records)
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--logprobs", *extra)
    return result, read_rows(tmp_path / "out.jsonl")


def test_nan_log_probabilities_are_read_as_no_distribution_and_the_reply_is_not_retried(judge, run_flowrate, tmp_path):
    # the server writes NaN where a number should be (json.dumps does, unless told not to)
    step = {"verdict": "fully", "logprobs": {"fully": math.nan, "mostly": math.log(0.2)}}
    result, rows = eval_with_logprobs(judge, run_flowrate, tmp_path, step, 2, "--score", "expected")
    assert result.returncode == 0, result.stderr
    assert len(chat_bodies(judge)) == 2  # one call each: the reply is kept, not retried
    assert [row["verdict"] for row in rows] == ["fully", "fully"]
    assert all(row["error"] is None and row["attempts"] == 1 for row in rows)
    assert all(row["level_probs"] is None and row["expected_score"] is None for row in rows)
    assert all(row["score"] == 1.0 and row["score_from"] == "verdict" for row in rows)
    said = "2 judge reply(ies) came with log-probabilities that are not numbers (NaN)"
    assert result.stderr.count(said) == 1, result.stderr


def test_a_reply_cached_with_nan_log_probabilities_is_not_paid_for_again_and_is_said(judge, run_flowrate, tmp_path):
    # its server gave NaN when asked with log-probabilities: asked again, it would answer the same,
    # so a rerun takes the cached reply (no distribution), as it takes every other answered call
    step = {"verdict": "fully", "logprobs": {"fully": math.nan}}
    cache = ["--cache-dir", str(tmp_path / "cache")]
    first, _ = eval_with_logprobs(judge, run_flowrate, tmp_path, step, 1, *cache)
    assert first.returncode == 0, first.stderr
    judge.reset()
    given = {"verdict": "fully", "logprobs": {"fully": math.log(0.9), "mostly": math.log(0.1)}}
    again, [row] = eval_with_logprobs(judge, run_flowrate, tmp_path, given, 1, *cache)
    assert again.returncode == 0, again.stderr
    assert chat_bodies(judge) == []
    assert row["cached"] is True and row["level_probs"] is None
    assert again.stderr.count("1 judge reply(ies) came with log-probabilities that are not numbers") == 1


def test_a_reply_cached_without_log_probabilities_is_asked_again_with_them(judge, run_flowrate, tmp_path):
    judge.script("MARK-LP", {"verdict": "fully"})
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("c0", "MARK-LP question 0", "an answer")])
    cache = ["--cache-dir", str(tmp_path / "cache")]
    first = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "first.jsonl", *cache)
    assert first.returncode == 0, first.stderr
    judge.reset()
    given = {"verdict": "fully", "logprobs": {"fully": math.log(0.9), "mostly": math.log(0.1)}}
    again, [row] = eval_with_logprobs(judge, run_flowrate, tmp_path, given, 1, *cache)
    assert again.returncode == 0, again.stderr
    assert len(chat_bodies(judge)) == 1
    assert row["cached"] is False and abs(row["level_probs"]["fully"] - 0.9) < 1e-6


def test_tokens_that_do_not_spell_the_reply_leave_no_distribution_and_the_run_says_so_once(
    judge, run_flowrate, tmp_path
):
    # a reason in French: each letter outside ASCII comes as vLLM's "\ufffd" tokens
    text = '{"reason": "Chaque réponse répond à l\'utilisateur.", "key_issues": [], "verdict": "fully"}'
    step = {"content": text, "partial_utf8": True, "logprobs": {"fully": math.log(0.7), "mostly": math.log(0.3)}}
    result, rows = eval_with_logprobs(judge, run_flowrate, tmp_path, step, 3)
    assert result.returncode == 0, result.stderr
    assert [row["verdict"] for row in rows] == ["fully"] * 3
    assert all(row["level_probs"] is None for row in rows)
    said = "3 judge reply(ies) came with token log-probabilities that do not spell the reply"
    assert result.stderr.count(said) == 1, result.stderr


def test_tokens_that_spell_the_reply_give_its_distribution_and_no_notice(judge, run_flowrate, tmp_path):
    step = {"content": FULLY, "logprobs": {"fully": math.log(0.7), "mostly": math.log(0.3)}}
    result, rows = eval_with_logprobs(judge, run_flowrate, tmp_path, step, 1)
    assert result.returncode == 0, result.stderr
    assert abs(rows[0]["level_probs"]["fully"] - 0.7) < 1e-6
    assert "log-probabilities" not in result.stderr


def test_a_cached_reply_with_a_token_of_probability_zero_gives_the_same_distribution_again(
    judge, run_flowrate, tmp_path
):
    # a level the grammar masked comes as -Infinity (the in-process judge writes it so): JSON has no
    # -Infinity, and a null read back as a NaN would leave the rerun no distribution at all
    step = {"verdict": "fully", "logprobs": {"fully": math.log(0.8), "mostly": math.log(0.2), "none": -math.inf}}
    cache = ["--cache-dir", str(tmp_path / "cache")]
    first, [fresh] = eval_with_logprobs(judge, run_flowrate, tmp_path, step, 1, *cache)
    assert first.returncode == 0, first.stderr
    assert fresh["level_probs"] is not None and fresh["level_probs"]["none"] == 0
    judge.reset()
    again, [row] = eval_with_logprobs(judge, run_flowrate, tmp_path, step, 1, *cache)
    assert again.returncode == 0, again.stderr
    assert chat_bodies(judge) == [] and row["cached"] is True
    assert row["level_probs"] == fresh["level_probs"]
