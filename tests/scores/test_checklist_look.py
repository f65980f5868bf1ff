"""`--score checklist` and `--score fitted` through `flowrate eval` against the scripted judge: the
rubric's yes/no questions asked in one more call after the grading call (its messages then the
questions, so a judge that keeps its prompt's cache evaluates only the questions), each answer
read as P(yes) at its token, the weighted score on the rows, kept in the cache, and a failed
checklist leaving the verdict standing (issue 46)."""

import math

import orjson
import pytest

from flowrate.rubric.model import load_rubric
from tests.helpers import read_rows, turn_record, write_jsonl
from tests.judge_server import checklist_step

FLOW = load_rubric()
# torn on one lapse (P(yes) 0.75 that it asked again for what was given), sure of the rest
CHECKLIST = checklist_step(
    {item.id: item.good for item in FLOW.checklist} | {"redundant_ask": "no"},
    {"redundant_ask": {"yes": math.log(0.75), "no": math.log(0.25)}},
)


def judged(judge, run_flowrate, tmp_path, *extra, output="out.jsonl", step=None):
    judge.script("MARK-CHECK", step or {"verdict": "mostly", "reason": "fine", "checklist": CHECKLIST})
    records = [turn_record("checked", "MARK-CHECK", "an answer")]
    path = write_jsonl(tmp_path / "c.jsonl", records)
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", output, *extra)
    return result, read_rows(tmp_path / output) if (tmp_path / output).exists() else []


def test_score_checklist_asks_the_questions_after_the_grading_messages_and_scores_by_their_weights(
    judge, run_flowrate, tmp_path
):
    result, [row] = judged(judge, run_flowrate, tmp_path, "--score", "checklist", "--no-cache")
    assert result.returncode == 0, result.stderr
    grading, checklist = judge.bodies
    assert checklist["messages"][:-1] == grading["messages"]  # the shared prefix: only the questions are new
    asked = checklist["messages"][-1]["content"]
    assert all(item.question in asked for item in FLOW.checklist)
    assert checklist["logprobs"] is True and checklist["temperature"] == 0
    assert row["checklist_p_yes"]["redundant_ask"] == pytest.approx(0.75)
    assert row["checklist_p_yes"]["answers_latest"] == 1.0 and row["checklist_p_yes"]["derails"] == 0.0
    weights = {item.id: item.weight for item in FLOW.checklist}
    expected = (sum(weights.values()) - 0.75 * weights["redundant_ask"]) / sum(weights.values())
    assert row["checklist_score"] == pytest.approx(expected)
    assert (row["score"], row["score_from"], row["verdict"]) == (pytest.approx(expected), "checklist", "mostly")
    assert row["success"] is (expected >= 0.7)
    assert row["usage"]["prompt_tokens"] > 0  # both calls' tokens on the row


def test_a_rerun_finds_the_checklist_in_the_cache_and_sends_nothing(judge, run_flowrate, tmp_path):
    cache = ["--score", "checklist", "--cache-dir", str(tmp_path / "cache")]
    _, [first] = judged(judge, run_flowrate, tmp_path, *cache)
    assert judge.requests == 2
    judge.reset()
    again, [row] = judged(judge, run_flowrate, tmp_path, *cache, output="again.jsonl")
    assert judge.requests == 0, again.stderr
    assert row["cached"] and row["checklist_p_yes"] == first["checklist_p_yes"] and row["score"] == first["score"]


def test_a_checklist_the_judge_fails_leaves_the_verdict_standing_and_says_so(judge, run_flowrate, tmp_path):
    step = {"verdict": "fully", "reason": "fine", "checklist": {"content": "I cannot answer these."}}
    result, [row] = judged(judge, run_flowrate, tmp_path, "--score", "checklist", "--no-cache", step=step)
    assert result.returncode == 0, result.stderr
    assert row["error"] is None and row["checklist_score"] is None
    assert (row["score"], row["score_from"]) == (1.0, "verdict")


def test_score_fitted_combines_the_looks_with_the_weights_beside_the_rubric(judge, run_flowrate, tmp_path):
    rubric = tmp_path / "flow.yaml"
    rubric.write_bytes(_packaged("conversational_flow.yaml"))
    looks = ["verdict", "verdict_first", "checklist"]
    weights = {
        "looks": looks, "weights": {"verdict": 0.2, "verdict_first": 0.3, "checklist": 0.5},
        "means": dict.fromkeys(looks, 0.5), "sds": {"verdict": 0.4, "verdict_first": 0.2, "checklist": 0.1},
        "fit_on": ["ieval", "uss"], "sizes": {"ieval": 60, "uss": 60},
    }  # fmt: skip
    (tmp_path / "flow.combination.json").write_bytes(orjson.dumps(weights))
    torn = {"verdict": "fully", "logprobs": {"fully": math.log(0.5), "none": math.log(0.5)}}
    step = {"verdict": "mostly", "reason": "fine", "look": torn, "checklist": CHECKLIST}
    fitted = ["--score", "fitted", "--rubric", str(rubric), "--no-cache"]
    result, [row] = judged(judge, run_flowrate, tmp_path, *fitted, step=step)
    assert judge.requests == 3  # the reasoned call, the look, the checklist
    shares = {look: weights["weights"][look] / weights["sds"][look] for look in looks}
    values = {"verdict": row["verdict_score"], "verdict_first": 0.5, "checklist": row["checklist_score"]}
    expected = sum(shares[look] * values[look] for look in looks) / sum(shares.values())
    assert row["fitted_score"] == pytest.approx(expected) and row["verdict_first_score"] == pytest.approx(0.5)
    assert (row["score"], row["score_from"]) == (pytest.approx(expected), "fitted"), result.stderr


@pytest.mark.parametrize(
    ("score", "said"),
    [("checklist", "declares no checklist"), ("fitted", "ships no weights")],
)
def test_a_score_the_rubric_cannot_give_is_a_plain_error_before_any_call(score, said, judge, run_flowrate, tmp_path):
    rubric = tmp_path / "bare.yaml"
    text = _packaged("conversational_flow.yaml").decode()
    rubric.write_text(text[: text.index("\nchecklist:")] + "\n" if score == "checklist" else text)
    result, _ = judged(judge, run_flowrate, tmp_path, "--score", score, "--rubric", str(rubric), output="x.jsonl")
    assert result.returncode == 2 and said in result.stderr and "Traceback" not in result.stderr
    assert judge.requests == 0


def _packaged(name: str) -> bytes:
    from importlib import resources

    return resources.files("flowrate.rubrics").joinpath(name).read_bytes()


def test_a_dry_run_over_cached_verdicts_counts_the_checklists_still_to_ask(judge, run_flowrate, tmp_path):
    cache = ["--cache-dir", str(tmp_path / "cache")]
    judged(judge, run_flowrate, tmp_path, *cache, "--logprobs")  # the verdict alone, now in the cache
    judge.reset()
    dry, _ = judged(judge, run_flowrate, tmp_path, *cache, "--score", "checklist", "--dry-run", output="dry.jsonl")
    assert dry.returncode == 0 and judge.requests == 0, dry.stderr
    assert "1 call" in dry.stderr, dry.stderr  # the checklist, not the cached verdict
    _, [row] = judged(judge, run_flowrate, tmp_path, *cache, "--score", "checklist", output="checked.jsonl")
    assert judge.requests == 1 and row["cached"] and row["checklist_score"] is not None
    judge.reset()
    again, _ = judged(judge, run_flowrate, tmp_path, *cache, "--score", "checklist", "--dry-run", output="dry2.jsonl")
    assert "0 call" in again.stderr, again.stderr
