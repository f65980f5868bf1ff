"""The reply's schema in the form the server takes (OpenAI's json_schema, llama-cpp-python's
json_object with a schema, Ollama's format), learned once per run and kept in the cache key."""

import asyncio

from flowrate import ConversationalEvalTestCase, ConversationalFlowRateMetric, EvalTestCase, evaluate_conversations
from flowrate.judge.schema_forms import CHARS_PER_TOKEN_FLOOR, KEY_ISSUES_MAX, bounded_schema
from flowrate.rubric.model import load_rubric
from flowrate.scores.schema import reply_schema
from tests.helpers import (
    NO_WAIT,
    chat_bodies,
    distinct,
    local_eval,
    long_conversation,
    read_rows,
    transport,
    turn_record,
    write_jsonl,
)
from tests.judge_server import Profile

FLOW = load_rubric()


def test_a_server_refusing_json_schema_gets_the_schema_as_json_object_learned_once_per_run(
    judge, run_flowrate, tmp_path
):
    judge.behave_as("llama-cpp-python")
    path = write_jsonl(tmp_path / "c.jsonl", distinct(4))
    result = run_flowrate(*local_eval(judge, path, "-j", "4"))
    assert result.returncode == 0, result.stderr
    assert len(chat_bodies(judge, "json_schema")) == 1  # one call found the form; the others waited for it
    taken = chat_bodies(judge, "json_object")
    bounded = [bounded_schema(reply_schema(FLOW), body["max_tokens"]) for body in taken]
    assert len(taken) == 4 and all(body["response_format"]["schema"] == b for body, b in zip(taken, bounded))
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


def test_the_flow_metric_as_a_python_api_judge_uses_the_learned_form_too(judge, monkeypatch):
    judge.behave_as("llama-cpp-python")
    metric = ConversationalFlowRateMetric(model="smol", api_base=judge.base_url, retry=NO_WAIT, transport=transport())
    cases = [
        ConversationalEvalTestCase(id=f"c{n}", turns=[EvalTestCase(input=f"q{n}", actual_output="a")]) for n in range(3)
    ]
    results = asyncio.run(evaluate_conversations(cases, [metric]))
    assert all(result.metrics_data[0].score == 1.0 for result in results)
    assert len(chat_bodies(judge, "json_schema")) == 1 and len(chat_bodies(judge, "json_object")) == 3


def _bounds(part):
    issues = part["properties"]["key_issues"]
    return part["properties"]["reason"]["maxLength"] + issues["maxItems"] * issues["items"]["maxLength"]


def test_a_grammar_server_gets_reply_lengths_that_fit_the_replys_token_limit():
    suite = load_rubric("virtual_agent")
    for rubric, max_tokens in ((FLOW, 512), (suite, 936)):
        schema = bounded_schema(reply_schema(rubric), max_tokens)
        parts = list(schema["properties"]["criteria"]["properties"].values()) if rubric.is_suite else [schema]
        assert len(parts) == len(rubric.criteria)
        assert all(part["properties"]["key_issues"]["maxItems"] == KEY_ISSUES_MAX for part in parts)
        assert sum(_bounds(part) for part in parts) <= max_tokens * CHARS_PER_TOKEN_FLOOR
        assert bounded_schema(reply_schema(rubric), None) == reply_schema(rubric)  # no limit sent, no bounds
