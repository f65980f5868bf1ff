"""What a real local model exposed (issue 14, items 13 and 22-31), against the scripted judge
made to misbehave as real OpenAI-compatible servers do (see `tests.judge_server.PROFILES`):
llama-cpp-python refusing OpenAI's json_schema and ignoring `n`, llama-server refusing `n`,
vLLM and llama-server telling their context window, Ollama's own API, a slow cold first call,
a server that keeps working on an abandoned request, and replies that are nearly JSON, cut,
copied from the rubric's examples, or off their scale."""

import asyncio
import json
import time

import pytest

from flowrate import ConversationalEvalTestCase, ConversationalFlowRateMetric, EvalTestCase, evaluate_conversations
from flowrate.judge.backend import HOSTED_TIMEOUT_S, SELF_HOSTED_TIMEOUT_S
from flowrate.judge.limits import REFUSED_AFTER
from flowrate.judge.litellm_backend import LiteLLMBackend
from flowrate.judge.retry import RetryPolicy
from flowrate.metrics.planning import SAMPLING_TEMPERATURE
from flowrate.metrics.rubric_metric import RubricMetric
from flowrate.rubric.model import load_rubric
from flowrate.scores.reading import copied_example, parse_reply
from flowrate.scores.schema import reply_schema
from flowrate.settings.options import EvalSettings
from tests.conftest import read_rows, turn_record, write_jsonl
from tests.judge_server import Profile
from tests.test_judge_quality import long_conversation
from tests.test_metrics import RATINGS, SUITE_MARK, distinct, suite_reply

FLOW = load_rubric()
SUITE = load_rubric("virtual_agent")
NO_WAIT = RetryPolicy(max_retries=3, timeout=5, backoff=0, backoff_max=0)


def local_eval(judge, path, *extra, model="smol"):
    """`flowrate eval` against the scripted judge as a self-hosted model LiteLLM does not know."""
    return ("eval", path, "--api-base", judge.base_url, "--model", model, "-o", "out.jsonl", *extra)


def chat_bodies(judge, kind=None):
    """The chat requests the judge saw, those sending the schema as `kind` when given."""
    bodies = [body for body in judge.bodies if "messages" in body]
    if kind is None:
        return bodies
    return [body for body in bodies if (body.get("response_format") or {}).get("type") == kind]


def reask_text(body):
    return body["messages"][-1]["content"]


# -- 22: the schema in the form the server takes ---------------------------------------------------
def test_a_server_refusing_json_schema_gets_the_schema_as_json_object_learned_once_per_run(
    judge, run_flowrate, tmp_path
):
    judge.behave_as("llama-cpp-python")
    path = write_jsonl(tmp_path / "c.jsonl", distinct(4))
    result = run_flowrate(*local_eval(judge, path, "-j", "4"))
    assert result.returncode == 0, result.stderr
    assert len(chat_bodies(judge, "json_schema")) == 1  # one call found the form; the others waited for it
    taken = chat_bodies(judge, "json_object")
    assert len(taken) == 4 and all(body["response_format"]["schema"] == reply_schema(FLOW) for body in taken)
    rows = read_rows(tmp_path / "out.jsonl")
    assert len(rows) == 4 and all(row["error"] is None for row in rows)
    assert {row["response_format"] for row in rows} == {"json_object_schema"}
    assert sum(row["attempts"] for row in rows) == 5  # the refused request is counted where it was made


def test_a_server_taking_json_schema_keeps_it(judge, run_flowrate, tmp_path):
    judge.behave_as("vllm", n_ctx=100_000)
    path = write_jsonl(tmp_path / "c.jsonl", distinct(3))
    assert run_flowrate(*local_eval(judge, path)).returncode == 0
    assert len(chat_bodies(judge, "json_schema")) == 3 and len(chat_bodies(judge)) == 3
    assert chat_bodies(judge)[0]["response_format"]["json_schema"]["schema"] == reply_schema(FLOW)
    assert {row["response_format"] for row in read_rows(tmp_path / "out.jsonl")} == {"json_schema"}


def test_the_learned_form_is_in_the_cache_key_and_found_by_the_next_run(judge, run_flowrate, tmp_path):
    judge.behave_as("llama-cpp-python")
    path = write_jsonl(tmp_path / "c.jsonl", distinct(3))
    assert run_flowrate(*local_eval(judge, path)).returncode == 0
    calls = judge.requests
    again = run_flowrate(*local_eval(judge, path))
    assert again.returncode == 0 and judge.requests == calls  # every reply from the cache, no probe
    rows = read_rows(tmp_path / "out.jsonl")
    assert all(row["cached"] and row["response_format"] == "json_object_schema" for row in rows)


def test_a_reply_got_without_a_schema_is_not_served_to_a_run_that_sends_one(judge, run_flowrate, tmp_path):
    judge.profile = Profile(name="text-only", response_formats=("text",))
    path = write_jsonl(tmp_path / "c.jsonl", distinct(2))
    assert run_flowrate(*local_eval(judge, path, "-j", "1")).returncode == 0
    kinds = [(body.get("response_format") or {}).get("type") for body in chat_bodies(judge)]
    assert kinds == ["json_schema", "json_object", None, None]  # down the forms once, then none
    assert {row["response_format"] for row in read_rows(tmp_path / "out.jsonl")} == {None}
    judge.reset()
    judge.behave_as("vllm", n_ctx=100_000)  # the same endpoint, now taking a schema
    assert run_flowrate(*local_eval(judge, path)).returncode == 0
    assert len(chat_bodies(judge, "json_schema")) == 2  # judged again, with the schema
    assert {row["response_format"] for row in read_rows(tmp_path / "out.jsonl")} == {"json_schema"}


def test_an_ollama_model_gets_the_schema_as_ollamas_format_and_its_window_from_api_show(judge, run_flowrate, tmp_path):
    judge.behave_as("ollama", n_ctx=9000)
    path = write_jsonl(tmp_path / "c.jsonl", [long_conversation(), turn_record("short", "hi", "hello")])
    root = f"http://127.0.0.1:{judge.port}"
    result = run_flowrate("eval", path, "--model", "ollama:smol", "--api-base", root, "-o", "out.jsonl")
    assert result.returncode == 0, result.stderr
    bodies = chat_bodies(judge)
    assert len(bodies) == 2 and all(body["format"] == reply_schema(FLOW) for body in bodies)
    assert all(body["options"]["num_predict"] > 0 for body in bodies)
    assert all(len("".join(m["content"] for m in body["messages"])) // 4 <= 9000 for body in bodies)
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    assert rows["long"]["truncated"] is True and rows["short"]["truncated"] is False
    assert {row["response_format"] for row in rows.values()} == {"ollama_format"}
    assert "/api/show" in judge.probes


# -- 23: a request the server refuses is not retried, and a run refused every time stops ------------------
PYDANTIC_500 = {
    "status": 500,
    "message": "1 validation error:\n  {'type': 'missing', 'loc': ('body', 'messages', 1, 'content'),"
    " 'msg': 'Field required', 'input': {'role': 'user'}}\n",
}


@pytest.mark.parametrize(
    "refusal",
    [PYDANTIC_500, {"status": 400, "message": "invalid request: temperature must be at most 2"}, {"status": 422}],
)
def test_a_request_the_server_calls_invalid_is_not_retried_whatever_its_status(judge, run_flowrate, tmp_path, refusal):
    judge.script("MARK-REFUSED", refusal)
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("bad", "MARK-REFUSED", "x"), turn_record("ok", "a", "b")])
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "--max-retries", "5", "-o", "out.jsonl")
    assert result.returncode == 3, result.stderr
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    assert judge.calls_for("MARK-REFUSED") == 1 and rows["bad"]["attempts"] == 1
    assert rows["bad"]["error"] is not None and rows["ok"]["error"] is None


def test_a_plain_server_error_is_still_retried(judge, run_flowrate, tmp_path):
    judge.script("MARK-FLAKY", {"status": 500, "message": "CUDA out of memory"}, {"verdict": "mostly"})
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("flaky", "MARK-FLAKY", "x")])
    assert run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl").returncode == 0
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["verdict"] == "mostly" and row["attempts"] == 2


def test_a_run_whose_every_call_is_refused_the_same_way_stops_early(judge, run_flowrate, tmp_path):
    judge.script("question", PYDANTIC_500)
    path = write_jsonl(tmp_path / "c.jsonl", distinct(40))
    started = time.monotonic()
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-j", "2", "-o", "out.jsonl")
    assert result.returncode != 0
    assert judge.requests <= REFUSED_AFTER + 2  # the calls in flight when it stopped, no more
    assert len(read_rows(tmp_path / "out.jsonl")) < 40 and time.monotonic() - started < 30


def test_refusals_after_a_success_do_not_stop_the_run(judge, run_flowrate, tmp_path):
    judge.script("MARK-REFUSED", PYDANTIC_500)
    records = [turn_record("first", "a", "b")] + [turn_record(f"r{n}", f"MARK-REFUSED {n}", "x") for n in range(8)]
    path = write_jsonl(tmp_path / "c.jsonl", records)
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-j", "1", "-o", "out.jsonl")
    assert result.returncode == 3
    rows = read_rows(tmp_path / "out.jsonl")
    assert len(rows) == 9 and sum(row["error"] is not None for row in rows) == 8  # every conversation judged


# -- 24: samples when the server ignores or refuses n --------------------------------------------------------
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


# -- 25: a self-hosted server's slow calls ----------------------------------------------------------------
def test_a_self_hosted_model_gets_a_long_default_timeout_and_a_hosted_one_the_usual(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert EvalSettings().timeout is None  # no --timeout: the judge decides
    assert LiteLLMBackend("smol", "http://127.0.0.1:1/v1").default_timeout_s() == SELF_HOSTED_TIMEOUT_S == 600
    assert LiteLLMBackend("ollama:llama3").default_timeout_s() == SELF_HOSTED_TIMEOUT_S
    assert LiteLLMBackend("gpt-4o").default_timeout_s() == HOSTED_TIMEOUT_S == 60


def test_a_timed_out_call_on_a_one_slot_server_is_not_sent_again_behind_itself(judge, run_flowrate, tmp_path):
    judge.behave_as("llama-cpp-python", cold_start_s=2.0, slots=1)
    path = write_jsonl(tmp_path / "c.jsonl", distinct(1))
    result = run_flowrate(*local_eval(judge, path, "--timeout", "0.5", "--max-retries", "3"))
    assert result.returncode == 3
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["error"]["type"] == "Timeout"
    assert len(chat_bodies(judge, "json_object")) == 1  # no retry queued behind the abandoned attempt
    assert judge.max_working == 1


def test_a_server_serving_several_at_once_gets_timed_out_calls_again(judge, run_flowrate, tmp_path):
    judge.behave_as("vllm", n_ctx=100_000)
    judge.script("question", {"hang": True}, {"verdict": "minor"})
    path = write_jsonl(tmp_path / "c.jsonl", distinct(1))
    assert run_flowrate(*local_eval(judge, path, "--timeout", "0.5")).returncode == 1
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["verdict"] == "minor" and row["attempts"] == 2


@pytest.mark.parametrize(
    "profile, slots, most",
    [("llama-cpp-python", 1, 1), ("llama-server", 2, 2), ("llama-server", 1, 1), ("vllm", 1, 4)],
)
def test_a_self_hosted_server_gets_no_more_calls_at_once_than_it_works_on(
    judge, run_flowrate, tmp_path, profile, slots, most
):
    judge.behave_as(profile, n_ctx=100_000, total_slots=slots)
    judge.latency_s = 0.2
    path = write_jsonl(tmp_path / "c.jsonl", distinct(5))  # the first finds the schema form alone
    assert run_flowrate(*local_eval(judge, path, "-j", "4")).returncode == 0
    assert judge.max_in_flight == most
    rows = read_rows(tmp_path / "out.jsonl")
    assert all(row["error"] is None for row in rows)
    if most == 1:
        assert sum(row["wait_s"] for row in rows) > 0.3  # the wait for the server's slot is a wait, not latency


# -- 26: the context window, from the server --------------------------------------------------------------
@pytest.mark.parametrize("profile, endpoint", [("vllm", "/v1/models"), ("llama-server", "/props")])
def test_the_window_a_server_tells_is_learned_once_and_long_conversations_fit_it(
    judge, run_flowrate, tmp_path, profile, endpoint
):
    judge.behave_as(profile, n_ctx=6000)
    records = [long_conversation(), *distinct(3)]
    path = write_jsonl(tmp_path / "c.jsonl", records)
    result = run_flowrate(*local_eval(judge, path))
    assert result.returncode == 0, result.stderr
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    assert rows["long"]["truncated"] is True and all(row["error"] is None for row in rows.values())
    assert judge.probes.count(endpoint) == 1


def test_a_window_the_server_does_not_tell_is_named_with_the_option_that_fits_it(judge, run_flowrate, tmp_path):
    judge.behave_as("llama-cpp-python", n_ctx=6000)
    path = write_jsonl(tmp_path / "c.jsonl", [long_conversation(), *distinct(2)])
    result = run_flowrate(*local_eval(judge, path, "-j", "1", "--max-retries", "5"))
    assert result.returncode == 3
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    error = rows["long"]["error"]
    assert error["type"] == "ContextWindowExceededError"
    assert "context window (6000 tokens): pass --max-input-tokens 3900" in error["message"]
    assert rows["long"]["attempts"] <= 2  # the form's probe at most, and no retry
    assert rows["c0"]["error"] is None
    fitted = run_flowrate(*local_eval(judge, path, "--max-input-tokens", "3900"))
    assert fitted.returncode == 0, fitted.stderr


# -- 27: nearly valid JSON, and re-asks that say what was wrong ---------------------------------------------
UNESCAPED = '{"reason": "The bot says "we will call you" and never does.", "key_issues": [], "verdict": "minor"}'


def test_json_with_unescaped_quotes_is_repaired_without_a_reask_and_counted(judge, run_flowrate, tmp_path):
    judge.script("MARK-QUOTES", {"content": UNESCAPED})
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("q", "MARK-QUOTES", "x"), turn_record("ok", "a", "b")])
    run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl")
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    assert judge.calls_for("MARK-QUOTES") == 1
    assert rows["q"]["verdict"] == "minor" and rows["q"]["reason"] == 'The bot says "we will call you" and never does.'
    assert rows["q"]["repaired"] is True and rows["q"]["reasked"] is None and rows["ok"]["repaired"] is False


def test_the_reask_after_invalid_json_names_where_it_breaks(judge, run_flowrate, tmp_path):
    judge.script("MARK-BROKEN", {"content": "Here: {verdict = minor}"}, {"verdict": "partial"})
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("b", "MARK-BROKEN", "x")])
    run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl")
    reask = reask_text(judge.bodies[1])
    assert "the reply is not valid JSON: Expecting property name enclosed in double quotes" in reask
    assert "at line 1, column 8 (character 7)" in reask and "holds no JSON object" not in reask
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["verdict"] == "partial" and row["reasked"].startswith("the reply is not valid JSON")


def test_a_missing_field_is_named_and_the_unusable_replies_are_kept_on_the_error_row(judge, run_flowrate, tmp_path):
    judge.script("MARK-FIELD", {"content": '{"reason": "fine", "key_issues": []}'}, {"content": "Sorry, I cannot."})
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("f", "MARK-FIELD", "x")])
    run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl")
    assert 'the reply has no "verdict" field' in reask_text(judge.bodies[1])
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["error"]["type"] == "UnparsableReply" and "holds no JSON object" in row["error"]["message"]
    assert '{"reason": "fine", "key_issues": []}' in row["raw_reply"] and "Sorry, I cannot." in row["raw_reply"]


# -- 28: the rubric's own example is not a judgement --------------------------------------------------------
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


# -- 29: a re-ask keeps what was valid -----------------------------------------------------------------------
def test_a_suite_reask_asks_only_for_the_criterion_off_its_scale_and_keeps_the_others(judge, run_flowrate, tmp_path):
    first = suite_reply({"slot_filling": 5})  # slot_filling is rated on 3 points
    different = suite_reply({name: 1 for name in RATINGS} | {"slot_filling": 2})
    judge.script(SUITE_MARK, {"content": first}, {"content": different})
    path = write_jsonl(tmp_path / "c.jsonl", distinct(1))
    run_flowrate("eval", path, "--metric", "virtual_agent", "--api-base", judge.base_url, "-o", "out.jsonl")
    reask = reask_text(judge.bodies[1])
    assert "rating 5 for slot_filling is not on its scale 1..3" in reask
    assert '"slot_filling": {"reason": "...", "key_issues": ["..."], "rating": 1-3}' in reask
    assert "request_completion" not in reask.split("criteria:", 1)[1]
    rows = {row["metric"]: row for row in read_rows(tmp_path / "out.jsonl")}
    ratings = {name: rows[name]["rating"] for name in RATINGS}
    assert ratings == RATINGS | {"slot_filling": 2}  # every other criterion as first judged
    assert all(row["reasked"] == "rating 5 for slot_filling is not on its scale 1..3" for row in rows.values())
    assert rows["user_satisfaction"]["error"] is None


# -- 31: a bounded reply, and a cut one -----------------------------------------------------------------------
def test_each_reply_is_bounded_by_what_the_rubrics_schema_needs(judge, run_flowrate, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    judge.script(SUITE_MARK, {"content": suite_reply()})
    path = write_jsonl(tmp_path / "c.jsonl", distinct(1))
    run_flowrate("eval", path, "--api-base", judge.base_url)
    run_flowrate("eval", path, "--api-base", judge.base_url, "--metric", "virtual_agent")
    flow, suite = (
        RubricMetric(name, model="gpt-4o").reply_token_limit for name in ("conversational_flow_rate", "virtual_agent")
    )
    assert [body["max_tokens"] for body in judge.bodies] == [flow, suite]
    assert flow == 512 and 512 < suite < 1352  # the runaway reply issue 14 measured


def test_a_runaway_reply_is_cut_at_its_limit_reasked_then_an_error_counted_as_cut(judge, run_flowrate, tmp_path):
    judge.script("MARK-RUNAWAY", {"runaway": True})
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("r", "MARK-RUNAWAY", "x")])
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl")
    assert result.returncode == 3
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["error"]["type"] == "ReplyCut" and judge.calls_for("MARK-RUNAWAY") == 2
    assert "stopped at its limit of 512 tokens" in reask_text(judge.bodies[1])
    assert row["usage"]["completion_tokens"] <= 2 * 512 + 2


def test_a_cut_reply_that_reads_after_repair_is_flagged_and_not_cached(judge, run_flowrate, tmp_path):
    issues = ", ".join(f'"turn {n}: the reply could be shorter"' for n in range(400))
    judge.script("MARK-CUT", {"content": '{"verdict": "partial", "reason": "Long.", "key_issues": [' + issues + "]}"})
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("c", "MARK-CUT", "x")])
    for _ in range(2):
        run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl")
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["verdict"] == "partial" and row["cut"] is True and row["repaired"] is True
    assert row["key_issues"][0] == "turn 0: the reply could be shorter"
    assert judge.calls_for("MARK-CUT") == 2 and not row["cached"]  # a cut judgement is judged again next run


# -- 13: exact scores ---------------------------------------------------------------------------------------
async def test_scores_are_stored_exact_and_the_weighted_mean_is_built_from_exact_parts(judge, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    judge.script(SUITE_MARK, {"content": suite_reply({"slot_filling": 2, "truthfulness": 2, "conciseness": 2})})
    metric = RubricMetric("virtual_agent", model="gpt-4o", api_base=judge.base_url, retry=NO_WAIT)
    case = ConversationalEvalTestCase(turns=[EvalTestCase(input="a", actual_output="b")])
    [result] = await evaluate_conversations([case], [metric])
    scores = {data.name: data.score for data in result.metrics_data}
    assert scores["slot_filling"] == 2 / 3 and scores["slot_filling"] != 0.6667
    parts = [RATINGS[name] / c.scale.points for name, c in zip(RATINGS, SUITE.criteria)]
    parts[2] = parts[5] = parts[6] = 2 / 3
    assert scores["user_satisfaction"] == sum(parts) / len(parts)


def test_the_flow_metric_as_a_python_api_judge_uses_the_learned_form_too(judge, monkeypatch):
    judge.behave_as("llama-cpp-python")
    metric = ConversationalFlowRateMetric(model="smol", api_base=judge.base_url, retry=NO_WAIT)
    cases = [
        ConversationalEvalTestCase(id=f"c{n}", turns=[EvalTestCase(input=f"q{n}", actual_output="a")]) for n in range(3)
    ]
    results = asyncio.run(evaluate_conversations(cases, [metric]))
    assert all(result.metrics_data[0].score == 1.0 for result in results)
    assert len(chat_bodies(judge, "json_schema")) == 1 and len(chat_bodies(judge, "json_object")) == 3
