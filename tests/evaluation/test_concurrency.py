"""Many conversations judged at once: at most `-j` in flight, and LiteLLM's connection pool."""

from flowrate import evaluate_conversations
from tests.helpers import conversation, distinct, http_metric, turn_record, write_jsonl


async def test_one_call_per_conversation_and_at_most_j_in_flight(judge, api_key):
    judge.latency_s = 0.05
    cases = [conversation("hi", f"hello {n}", id=f"c{n}") for n in range(24)]
    results = await evaluate_conversations(cases, [http_metric(judge)], concurrency=4)
    assert judge.requests == 24
    assert judge.max_in_flight == 4
    assert [r.test_case.id for r in results] == [f"c{n}" for n in range(24)]
    body = judge.bodies[0]
    assert body["temperature"] == 0 and body["response_format"]["type"] == "json_schema"
    assert "n" not in body


def test_concurrency_is_bounded_at_the_server(judge, run_flowrate, conversations):
    judge.latency_s = 0.1
    path = conversations(*[turn_record(f"c{n}", "hi", f"hello {n}") for n in range(30)])
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-j", "5")
    assert result.returncode == 0
    assert judge.requests == 30 and judge.max_in_flight == 5


def test_above_the_connection_pool_a_one_line_notice(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(2))
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-j", "2000")
    assert result.returncode == 0
    notices = [line for line in result.stderr.splitlines() if "connections per host" in line]
    assert notices == ["flowrate: --concurrency 2000 is above LiteLLM's pool of 500 connections per host; using 500"]
