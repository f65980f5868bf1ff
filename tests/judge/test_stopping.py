"""The judge's stop switch: a judge that cannot be reached, a wrong path, and a server refusing every
call the same way stop the run, with every conversation accounted for."""

import socket
import time

from flowrate import ConversationalEvalTestCase, ConversationalFlowRateMetric, EvalTestCase, evaluate_conversations
from flowrate.judge.limits import REFUSED_AFTER
from tests.helpers import NO_WAIT, PYDANTIC_500, distinct, read_rows, turn_record, write_jsonl


def closed_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_closed_port_stops_the_run_quickly_and_lists_every_conversation(run_flowrate, tmp_path, cli_env):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(300))
    base = f"http://127.0.0.1:{closed_port()}/v1"
    env = dict(cli_env, FLOWRATE_BACKOFF="1", FLOWRATE_BACKOFF_MAX="60")  # the real waits, cut by the stop
    started = time.monotonic()
    result = run_flowrate("eval", path, "--api-base", base, "-o", "out.jsonl", env=env)
    assert time.monotonic() - started < 30
    assert result.returncode == 3
    rows = read_rows(tmp_path / "out.jsonl")
    skipped = int(result.stderr.split("unreachable: ")[1].split()[0])
    assert len(rows) + skipped == 300 and len({row["id"] for row in rows}) == len(rows)
    assert all("\n" not in row["error"]["message"] for row in rows)
    assert f"the judge at {base} could not be reached" in result.stderr
    assert "--retry-errors" in result.stderr and "Traceback" not in result.stderr


async def test_the_api_returns_a_not_judged_error_for_each_conversation_an_unreachable_judge_left(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdef")
    base = f"http://127.0.0.1:{closed_port()}/v1"
    metric = ConversationalFlowRateMetric(model="gpt-4o", api_base=base, retry=NO_WAIT)
    cases = [
        ConversationalEvalTestCase(id=f"c{n}", turns=[EvalTestCase(input=f"q{n}", actual_output="a")])
        for n in range(40)
    ]
    results = await evaluate_conversations(cases, [metric], concurrency=4)
    assert [len(result.metrics_data) for result in results] == [1] * 40
    kinds = {result.metrics_data[0].error.type for result in results}
    assert "NotJudged" in kinds and all(result.metrics_data[0].score is None for result in results)


def test_a_wrong_path_on_a_live_server_stops_at_once_with_one_line(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(5))
    result = run_flowrate("eval", path, "-m", "ollama:llama3", "--api-base", judge.base_url)
    assert result.returncode == 2
    [line] = [line for line in result.stderr.splitlines() if line.startswith("flowrate: error:")]
    assert "does not know model 'ollama:llama3' (404): check the model name and the path in --api-base" in line
    assert "Traceback" not in result.stderr


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
