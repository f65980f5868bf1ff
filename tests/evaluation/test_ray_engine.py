"""`flowrate eval --engine ray`: the requests go through a `ray.data.llm` HTTP processor on a local
Ray cluster of 2 CPUs (started once for the module), against the scripted judge, and the rows are
the ones `flowrate eval` writes on the same input, field by field, timing aside."""

import json
import os
import signal
import subprocess
import time

import pytest

from flowrate import ConversationalEvalTestCase, EvalTestCase
from tests.helpers import FLOWRATE, distinct, lines_in, read_rows, turn_record, write_jsonl
from tests.judge_server import checklist_step

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data.llm")

TIMING = {"evaluated_at", "latency_s", "wait_s"}
# Under xdist (`--dist loadgroup`) the tests on the module's cluster are one group, so one worker
# and one cluster: two groups with a cluster each took no less wall time (246 s against 242 s with
# -n 2), since a cluster's first run costs 10.8 s of CPU (its workers start and import Ray Data)
# on a machine the suite keeps busy. Those that join no cluster of the module's (or start their
# own) are a group of their own, beside it.
ON_CLUSTER = pytest.mark.xdist_group("ray")
OWN_PROCESSES = pytest.mark.xdist_group("ray-processes")


@pytest.fixture(scope="module")
def ray_address():
    """One local Ray cluster for the module's tests on this worker (2 CPUs, as the machine has):
    every in-process run joins it, a real `flowrate` process by its address."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


# The module's runs send 4 calls at a time, not eval's 16, unless a test says otherwise: a Ray run
# cuts its rows into a block per call in flight, each block a task of Ray's at every stage, and
# with the scripted judge answering at once 16 blocks only cost CPU (200 conversations: 6.3 s of
# the machine's CPU a run at -j 16, 3.8 s at -j 4)
CONCURRENCY = 4


@pytest.fixture
def cli_env(cli_env):
    """The suite's environment for a `flowrate` run, with this module's concurrency."""
    return dict(cli_env, FLOWRATE_CONCURRENCY=str(CONCURRENCY))


@pytest.fixture
def ray_judge(judge_server, ray_address):
    """The scripted judge, reset; once per test, not per transport (Ray's processor sends the requests)."""
    judge_server.reset()
    judge_server.latency_s = 0.0
    judge_server.fault_rates = {}
    yield judge_server
    judge_server.reset()


def _records(count):
    records = []
    for n in range(count):
        mark = f" MARK-REASK-{n}." if n % 40 == 3 else " MARK-MINOR" if n % 25 == 7 else ""
        record = turn_record(f"c{n}", f"question {n}{mark}", f"answer {n}", "and then?", f"then {n}")
        record["metadata"] = {"channel": "web" if n % 2 else "app", "chat_date": f"2026-03-{1 + n % 28:02d}"}
        records.append(record)
    return records


def _parquet(path, records):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(records), path)
    return path


def _script(judge, count=200):
    for n in range(3, count, 40):  # each conversation's own rule: a reply with no JSON, then a verdict
        judge.script(
            f"MARK-REASK-{n}.", {"content": "The flow is fine, I think."}, {"verdict": "mostly", "reason": "ok"}
        )
    judge.script("MARK-MINOR", {"verdict": "minor", "reason": "loops", "key_issues": ["turn 2: asks again"]})


def _eval(run_flowrate, judge, path, output, *extra):
    return run_flowrate("eval", path, "--api-base", judge.base_url, "--model", "gpt-4o", "-o", output, *extra)


def _by_id(rows):
    found = {}
    for row in rows:
        assert (row["id"], row["metric"]) not in found, f"{row['id']} twice"
        found[(row["id"], row["metric"])] = {key: value for key, value in row.items() if key not in TIMING}
    return found


@ON_CLUSTER
def test_ray_gives_the_rows_flowrate_eval_gives_on_200_parquet_conversations(ray_judge, run_flowrate, tmp_path):
    logs = _parquet(tmp_path / "logs.parquet", _records(200))
    _script(ray_judge)
    local = _eval(run_flowrate, ray_judge, logs, "local.jsonl", "--no-cache")
    sent_locally = ray_judge.requests
    ray_judge.reset()
    _script(ray_judge)
    on_ray = _eval(run_flowrate, ray_judge, logs, "ray.jsonl", "--no-cache", "--engine", "ray")
    assert on_ray.returncode == local.returncode == 1, on_ray.stderr
    assert ray_judge.requests == sent_locally == 205  # 200 conversations and 5 re-asks
    local_rows, ray_rows = _by_id(read_rows(tmp_path / "local.jsonl")), _by_id(read_rows(tmp_path / "ray.jsonl"))
    assert len(ray_rows) == 200 and ray_rows.keys() == local_rows.keys()
    for key, row in local_rows.items():
        assert ray_rows[key] == row, key
    reasked = ray_rows[("c3", "conversational_flow_rate")]
    assert reasked["verdict"] == "mostly" and reasked["reasked"] and reasked["attempts"] == 2
    assert ray_rows[("c7", "conversational_flow_rate")]["verdict"] == "minor"
    assert "judging on Ray" in on_ray.stderr


@ON_CLUSTER
def test_429s_and_500s_are_retried_and_a_judge_that_keeps_failing_gets_flowrate_evals_error_row(
    ray_judge, run_flowrate, tmp_path
):
    records = [turn_record(f"f{n}", f"question {n}", "answer") for n in range(12)]
    records[2] = turn_record("busy", "MARK-429 please", "answer")
    records[5] = turn_record("flaky", "MARK-500 please", "answer")
    records[8] = turn_record("down", "MARK-DEAD please", "answer")
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))

    def script():
        ray_judge.script("MARK-429", {"status": 429}, {"status": 429}, {"verdict": "partial", "reason": "slow"})
        ray_judge.script("MARK-500", {"status": 500}, {"verdict": "mostly", "reason": "ok"})
        ray_judge.script("MARK-DEAD", {"status": 500, "message": "the judge is down"})

    script()
    _eval(run_flowrate, ray_judge, path, "local.jsonl", "--no-cache", "--max-retries", "2")
    ray_judge.reset()
    script()
    result = _eval(run_flowrate, ray_judge, path, "ray.jsonl", "--no-cache", "--max-retries", "2", "--engine", "ray")
    assert result.returncode == 3, result.stderr  # the judge that stays down leaves an error row
    assert ray_judge.statuses.count(429) == 2 and ray_judge.statuses.count(500) == 1 + 3
    rows = _by_id(read_rows(tmp_path / "ray.jsonl"))
    local = _by_id(read_rows(tmp_path / "local.jsonl"))
    assert len(rows) == 12
    assert rows[("busy", "conversational_flow_rate")]["verdict"] == "partial"
    assert rows[("flaky", "conversational_flow_rate")]["verdict"] == "mostly"
    down = rows[("down", "conversational_flow_rate")]
    assert down["error"] == local[("down", "conversational_flow_rate")]["error"]
    assert down["error"]["type"] == "InternalServerError" and "the judge is down" in down["error"]["message"]
    for key, row in local.items():  # the HTTP stage does not tell its own retries: attempts aside
        assert {k: v for k, v in rows[key].items() if k != "attempts"} == {
            k: v for k, v in row.items() if k != "attempts"
        }


def _script_faults(judge, count):
    """Each conversation's own rule: a judge that answers 500s and replies with no JSON, on the
    first call and on the re-ask (n % 4 == 1: garbage, then a 500 on the re-ask, then a verdict;
    2: garbage, then 500s for good; 3: a 500, then a verdict)."""
    for n in range(count):
        if n % 4 == 1:
            judge.script(f"MARK-F{n}.", {"content": "fine, I guess"}, {"status": 500}, {"verdict": "mostly"})
        elif n % 4 == 2:
            judge.script(f"MARK-F{n}.", {"content": "fine, I guess"}, {"status": 500, "message": "the judge is down"})
        elif n % 4 == 3:
            judge.script(f"MARK-F{n}.", {"status": 500}, {"verdict": "partial", "reason": "slow"})


@ON_CLUSTER
def test_a_judge_answering_500s_and_garbage_in_first_calls_and_re_asks_gives_flowrate_evals_rows_and_resumes(
    ray_judge, run_flowrate, tmp_path
):
    # two blocks a round (-j 2): an error answer shares its block with completions, as on a real run
    count = 24
    records = [turn_record(f"g{n}", f"question {n} MARK-F{n}.", "answer") for n in range(count)]
    path = write_jsonl(tmp_path / "c.jsonl", records)
    common = ("--no-cache", "--max-retries", "1", "-j", "2")
    _script_faults(ray_judge, count)
    local = _eval(run_flowrate, ray_judge, path, "local.jsonl", *common)
    ray_judge.reset()
    _script_faults(ray_judge, count)
    on_ray = _eval(run_flowrate, ray_judge, path, "ray.jsonl", *common, "--engine", "ray")
    assert on_ray.returncode == local.returncode == 3, on_ray.stderr  # the judge that stays down: error rows
    assert "Traceback" not in on_ray.stderr
    local_rows, ray_rows = _by_id(read_rows(tmp_path / "local.jsonl")), _by_id(read_rows(tmp_path / "ray.jsonl"))
    assert len(ray_rows) == count and ray_rows.keys() == local_rows.keys()
    for key, row in local_rows.items():  # the HTTP stage does not tell its own retries: attempts aside
        assert {k: v for k, v in ray_rows[key].items() if k != "attempts"} == {
            k: v for k, v in row.items() if k != "attempts"
        }, key
    assert ray_rows[("g1", "conversational_flow_rate")]["verdict"] == "mostly"
    assert "the judge is down" in ray_rows[("g2", "conversational_flow_rate")]["error"]["message"]
    # resumed after losing the rows of the conversations re-asked: judged again, each once
    kept = [row for row in read_rows(tmp_path / "ray.jsonl") if int(row["id"][1:]) % 4 not in (1, 2)]
    write_jsonl(tmp_path / "ray.jsonl", kept)
    ray_judge.reset()
    _script_faults(ray_judge, count)
    resumed = _eval(run_flowrate, ray_judge, path, "ray.jsonl", *common, "--engine", "ray", "--resume")
    assert resumed.returncode == 3 and "Traceback" not in resumed.stderr, resumed.stderr
    assert _by_id(read_rows(tmp_path / "ray.jsonl")).keys() == local_rows.keys()


@ON_CLUSTER
def test_a_killed_ray_run_resumed_from_its_output_judges_only_what_is_missing(
    ray_judge, ray_address, run_flowrate, cli_env, tmp_path
):
    # the second half is answered only after 30 s: the run is killed once the first half's rows are in
    records = [turn_record(f"k{n}", f"question {n}" + (" MARK-SLOW." if n >= 60 else ""), "answer") for n in range(120)]
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    ray_judge.script("MARK-SLOW.", {"verdict": "fully", "reason": "in the end", "delay": 30})
    args = ["eval", "c.jsonl", "--api-base", ray_judge.base_url, "--model", "gpt-4o", "-o", "out.jsonl", "--no-cache"]
    process = subprocess.Popen(
        [FLOWRATE, *args, "--engine", "ray", "--ray-address", ray_address],
        cwd=tmp_path,
        env=dict(cli_env, RAY_AUTH_MODE=os.environ.get("RAY_AUTH_MODE", "token")),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip  (a client of the cluster ray.init started sends its token: Ray's auth mode as the fixture's)
    output = tmp_path / "out.jsonl"
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and process.poll() is None and lines_in(output) < 10:
            time.sleep(0.05)
    finally:  # killed whatever happens: a run left behind holds the cluster's CPUs, and the next Ray test waits for good
        process.send_signal(signal.SIGKILL)
        process.wait(30)
    settled = time.monotonic() + 30
    while ray_judge.in_flight and time.monotonic() < settled:  # the killed job's actors go with its driver
        time.sleep(0.1)
    assert ray_judge.in_flight == 0
    judged_before = {row["id"] for row in read_rows(output) if row.get("error") is None}
    assert 10 <= len(judged_before) < 120, process.stderr.read().decode()[-2000:]
    ray_judge.reset()
    result = run_flowrate(*args, "--engine", "ray", "--resume")
    assert result.returncode == 0, result.stderr
    rows = read_rows(output)
    assert sorted(row["id"] for row in rows) == sorted(record["id"] for record in records)  # each id once
    prompts = ["\n".join(m["content"] for m in body["messages"]) for body in ray_judge.bodies]
    assert ray_judge.requests == 120 - len(judged_before)
    assert not [conversation for conversation in judged_before if any(f'"{conversation}"' in p for p in prompts)]


@ON_CLUSTER
def test_the_cache_is_asked_before_anything_is_sent_and_max_cost_holds(ray_judge, run_flowrate, tmp_path):
    records = [turn_record(f"m{n}", f"question {n}", "answer " * 50) for n in range(30)]
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    first = _eval(run_flowrate, ray_judge, path, "first.jsonl", "--engine", "ray", "--limit", "10")
    assert first.returncode == 0 and ray_judge.requests == 10, first.stderr
    ray_judge.reset()
    again = _eval(run_flowrate, ray_judge, path, "again.jsonl", "--engine", "ray", "--limit", "10")
    assert again.returncode == 0 and ray_judge.requests == 0, again.stderr  # every reply from the cache
    assert all(row["cached"] for row in read_rows(tmp_path / "again.jsonl"))
    budget = _eval(run_flowrate, ray_judge, path, "budget.jsonl", "--engine", "ray", "--no-cache", "--max-cost", "0.01")
    rows = read_rows(tmp_path / "budget.jsonl")
    assert budget.returncode == 3 and 0 < len(rows) < 30 and ray_judge.requests == len(rows), budget.stderr
    assert sum(row["cost_usd"] for row in rows) <= 0.01


@ON_CLUSTER
def test_a_ray_dataset_is_judged_from_python_as_its_file_is(ray_judge, api_key, tmp_path, monkeypatch):
    from flowrate import EvalSettings, evaluate_dataset, evaluate_files

    monkeypatch.chdir(tmp_path)
    records = _records(20)
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    _script(ray_judge)
    common = dict(
        model="gpt-4o", api_base=ray_judge.base_url, no_cache=True, backoff=0, backoff_max=0, concurrency=CONCURRENCY
    )
    files = evaluate_files([str(path)], EvalSettings(output="file.jsonl", **common))
    ray_judge.reset()
    _script(ray_judge)
    dataset = evaluate_dataset(ray.data.from_items(records), EvalSettings(output="dataset.jsonl", **common))
    assert dataset.exit_code == files.exit_code and dataset.summary.judged == files.summary.judged == 20
    drop = TIMING | {"source"}
    from_file = {row["id"]: {k: v for k, v in row.items() if k not in drop} for row in read_rows("file.jsonl")}
    from_dataset = {row["id"]: {k: v for k, v in row.items() if k not in drop} for row in read_rows("dataset.jsonl")}
    assert from_dataset == from_file
    sources = {row["source"]["path"] for row in read_rows("dataset.jsonl")}
    assert sources == {"<dataset>"}  # read from the dataset's rows, with no file staged


@OWN_PROCESSES
def test_a_judge_ray_cannot_send_to_and_ray_with_batch_are_plain_errors(run_flowrate, tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps(turn_record("a", "q", "a")) + "\n")
    claude = run_flowrate("eval", path, "--model", "anthropic:claude-3-5-sonnet-latest", "--engine", "ray")
    assert claude.returncode == 2 and "--engine ray sends OpenAI chat-completions requests" in claude.stderr
    assert "Traceback" not in claude.stderr
    both = run_flowrate("eval", path, "--engine", "ray", "--batch")
    assert both.returncode == 2 and "choose one" in both.stderr


@ON_CLUSTER
def test_a_judge_that_cannot_be_reached_leaves_every_conversation_for_resume_with_exit_3(
    ray_address, run_flowrate, tmp_path
):
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(turn_record(f"u{n}", f"q {n}", "a")) + "\n" for n in range(6)))
    result = run_flowrate(
        "eval", path, "--api-base", f"http://127.0.0.1:{closed}/v1", "--model", "gpt-4o", "-o", "out.jsonl",
        "--engine", "ray", "--no-cache", "--max-retries", "1",
    )  # fmt: skip
    assert result.returncode == 3 and "Traceback" not in result.stderr
    assert "Ray Data stopped: its HTTP stage gave up on a request after 1 retries" in result.stderr
    assert "6 conversation(s) not judged, the judge could not be reached" in result.stderr
    assert not (tmp_path / "out.jsonl").exists()  # a run that writes no row leaves no output


@OWN_PROCESSES
def test_the_vllm_processor_sends_flowrates_request_and_reads_vllms_output_into_its_rows(api_key, tmp_path):
    """What can be run without a GPU: the pre- and postprocess around `vLLMEngineProcessorConfig`
    (vLLM itself is not installed here, so the processor is not run)."""
    from flowrate.evaluation.ray_engine import RayJudgings, dataset_row, from_vllm, to_vllm
    from flowrate.metrics.catalog import build_metrics
    from flowrate.metrics.step import Judging
    from flowrate.settings.options import EvalSettings

    judge = EvalSettings(model="Qwen/Qwen2.5-7B-Instruct", api_base="http://127.0.0.1:9/v1").judge_settings
    [metric] = build_metrics(judge, None)
    case = ConversationalEvalTestCase(id="v1", turns=[EvalTestCase(input="hi", actual_output="hello")])
    judging = Judging(metric, case)
    [expected] = judging.requests()
    sent = to_vllm(dataset_row((1, metric.name), expected, 1, 1))
    assert sent["messages"] == expected.messages
    assert sent["sampling_params"]["structured_outputs"] == {
        "json": expected.body["response_format"]["json_schema"]["schema"]
    }
    assert (
        sent["sampling_params"]["temperature"] == 0.0
        and sent["sampling_params"]["max_tokens"] == expected.body["max_tokens"]
    )
    text = json.dumps({"reason": "fine", "key_issues": [], "verdict": "mostly"})
    out = from_vllm({**sent, "generated_text": text, "num_input_tokens": 900, "num_generated_tokens": 20})
    answers = RayJudgings(_NoTally(), {1: (case, None)})
    answers.sent[1] = ((1, metric.name), expected)
    answers.judgings[(1, metric.name)] = judging
    assert answers.take(out, retry=True) == []
    [made] = answers.tally.rows
    assert (
        made.verdict == "mostly"
        and made.score == 0.9
        and made.usage.model_dump()
        == {
            "prompt_tokens": 900,
            "completion_tokens": 20,
            "cached_tokens": 0,
            "cache_write_tokens": 0,
            "reasoning_tokens": 0,
        }
    )


class _NoTally:
    """A tally that keeps the rows it is told (the vLLM test has no run)."""

    done: dict = {}

    def emit(self, row, order):
        self.rows.append(row)

    def __init__(self):
        self.rows = []


@ON_CLUSTER
def test_a_server_that_refuses_openais_schema_form_is_judged_on_ray_in_the_form_it_takes(
    ray_judge, run_flowrate, tmp_path
):
    # llama-cpp-python's server answers OpenAI's json_schema with a 500; the first conversation is
    # judged on the driver, as eval judges it, which finds the form; the workers then send that one
    ray_judge.behave_as("llama-cpp-python")
    logs = write_jsonl(tmp_path / "logs.jsonl", _records(12))
    result = run_flowrate(
        "eval",
        logs,
        "--api-base",
        ray_judge.base_url,
        "--model",
        "openai/local-model",
        "-o",
        "ray.jsonl",
        "--no-cache",
        "--engine",
        "ray",
    )  # fmt: skip  (a model LiteLLM does not know, as a self-hosted one is named)
    assert result.returncode == 0, result.stderr
    rows = _by_id(read_rows(tmp_path / "ray.jsonl"))
    assert len(rows) == 12 and all(row["error"] is None for row in rows.values())
    assert {row["response_format"] for row in rows.values()} == {"json_object_schema"}
    sent = [body.get("response_format", {}).get("type") for body in ray_judge.bodies]
    assert sent == ["json_schema"] + ["json_object"] * 12  # one refusal in the whole run


# the judge says "fully" (1.0) and is torn: 0.6 on it, 0.4 on "none" (0.0)
TORN = {"verdict": "fully", "reason": "torn", "key_issues": [], "logprobs": {"fully": -0.5108, "none": -0.9163}}


@ON_CLUSTER
def test_ray_gives_the_distributions_flowrate_eval_gives_and_keeps_them_in_the_cache(ray_judge, run_flowrate, tmp_path):
    logs = write_jsonl(tmp_path / "logs.jsonl", _records(12))
    score = ["--score", "expected", "--uncertain-below", "0.7"]

    def script():
        ray_judge.script("question 5", TORN)
        _script(ray_judge, 12)  # c3 re-asked: its distribution is the re-ask reply's

    script()
    local = _eval(run_flowrate, ray_judge, logs, "local.jsonl", "--no-cache", *score)
    ray_judge.reset()
    script()
    cache = ["--cache-dir", str(tmp_path / "cache")]
    on_ray = _eval(run_flowrate, ray_judge, logs, "ray.jsonl", *cache, *score, "--engine", "ray")
    assert on_ray.returncode == local.returncode, on_ray.stderr
    assert all(body.get("logprobs") is True for body in ray_judge.bodies)
    local_rows, ray_rows = _by_id(read_rows(tmp_path / "local.jsonl")), _by_id(read_rows(tmp_path / "ray.jsonl"))
    for key, row in local_rows.items():
        assert {**ray_rows[key], "cached": False} == row, key
    torn = ray_rows[("c5", "conversational_flow_rate")]
    assert torn["expected_score"] == pytest.approx(0.6, abs=1e-3) and torn["score_from"] == "expected"
    assert torn["uncertain"] is True and ray_rows[("c3", "conversational_flow_rate")]["level_probs"] is not None
    sent = ray_judge.requests
    again = _eval(run_flowrate, ray_judge, logs, "again.jsonl", *cache, *score, "--engine", "ray")
    assert again.returncode == on_ray.returncode and ray_judge.requests == sent  # all from the cache
    for row in read_rows(tmp_path / "again.jsonl"):
        first = ray_rows[(row["id"], row["metric"])]
        assert row["cached"] and (row["level_probs"], row["expected_score"]) == (
            first["level_probs"],
            first["expected_score"],
        )


@ON_CLUSTER
def test_ray_sends_the_verdict_first_look_beside_each_request_and_gives_flowrate_evals_combined_rows(
    ray_judge, run_flowrate, tmp_path
):
    logs = write_jsonl(tmp_path / "logs.jsonl", _records(12))
    sure = {"fully": 0.0}

    def script():
        ray_judge.script("question 5", {"verdict": "fully", "logprobs": sure, "look": TORN})
        ray_judge.script("question 8", {"verdict": "mostly", "look": {"status": 500}})  # a look that fails
        _script(ray_judge, 12)  # c3 re-asked, c7 "minor": each with its own look

    score = ["--score", "combined", "--max-retries", "1"]
    script()
    local = _eval(run_flowrate, ray_judge, logs, "local.jsonl", "--no-cache", *score)
    sent_locally = ray_judge.requests
    ray_judge.reset()
    script()
    cache = ["--cache-dir", str(tmp_path / "cache")]
    on_ray = _eval(run_flowrate, ray_judge, logs, "ray.jsonl", *cache, *score, "--engine", "ray")
    assert on_ray.returncode == local.returncode, on_ray.stderr
    assert ray_judge.requests == sent_locally == 12 + 1 + 12 + 1  # a call and a look each, c3's re-ask, c8's look again
    schemas = [body["response_format"]["json_schema"]["schema"]["properties"] for body in ray_judge.bodies]
    assert sorted(len(properties) for properties in schemas) == [1] * 13 + [3] * 13  # each look's schema as built
    local_rows, ray_rows = _by_id(read_rows(tmp_path / "local.jsonl")), _by_id(read_rows(tmp_path / "ray.jsonl"))
    for key, row in local_rows.items():
        assert ray_rows[key] == row, key
    torn = ray_rows[("c5", "conversational_flow_rate")]
    assert torn["verdict_first_score"] == pytest.approx(0.6, abs=1e-3)
    assert torn["score"] == torn["combined_score"] == pytest.approx(0.8, abs=1e-3) and torn["score_from"] == "combined"
    failed_look = ray_rows[("c8", "conversational_flow_rate")]
    assert failed_look["verdict_first_score"] is None and failed_look["score"] == 0.9 and failed_look["attempts"] == 3
    sent = ray_judge.requests
    again = _eval(run_flowrate, ray_judge, logs, "again.jsonl", *cache, *score, "--engine", "ray")
    assert again.returncode == on_ray.returncode
    assert ray_judge.requests == sent + 2  # from the cache, but c8's look, which failed: asked again, twice
    for row in read_rows(tmp_path / "again.jsonl"):
        if row["id"] != "c8":
            assert row["cached"] and row["combined_score"] == ray_rows[(row["id"], row["metric"])]["combined_score"]


@ON_CLUSTER
def test_a_server_that_refuses_log_probabilities_is_asked_again_without_them_on_ray(ray_judge, run_flowrate, tmp_path):
    ray_judge.behave_as("llama-cpp-python", logits_all=False)
    logs = write_jsonl(tmp_path / "logs.jsonl", _records(12))
    result = run_flowrate(
        "eval", logs, "--api-base", ray_judge.base_url, "--model", "openai/local-model", "-o", "ray.jsonl",
        "--no-cache", "--score", "expected", "--engine", "ray",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = _by_id(read_rows(tmp_path / "ray.jsonl"))
    assert len(rows) == 12 and all(row["error"] is None for row in rows.values())
    assert all(row["expected_score"] is None and row["score_from"] == "verdict" for row in rows.values())
    assert result.stderr.count("refused token log-probabilities") == 1
    answered = [body for body in ray_judge.bodies if not body.get("logprobs")]
    assert len(answered) >= 12  # each conversation answered once without them; a refusal costs no try


def _closed_port():
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@OWN_PROCESSES
def test_a_ray_address_that_does_not_answer_is_a_usage_error_within_the_join_bound(run_process, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("a", "q", "a")])
    started = time.monotonic()
    result = run_process(
        "eval",
        path,
        "--api-base",
        "http://127.0.0.1:9/v1",
        "--engine",
        "ray",
        "--ray-address",
        f"127.0.0.1:{_closed_port()}",
        "--ray-join-timeout",
        "2",
        timeout=90,
    )  # fmt: skip  (Ray alone retries that GCS for good)
    assert result.returncode == 2, result.stderr
    assert "cannot join the Ray cluster (no answer within 2 s)" in result.stderr
    assert "Traceback" not in result.stderr and time.monotonic() - started < 2 + 30


@OWN_PROCESSES
@pytest.mark.parametrize("stop, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_and_sigterm_end_a_join_that_gets_no_answer(stop, status, start_process, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("a", "q", "a")])
    process = start_process(
        "eval", path, "--api-base", "http://127.0.0.1:9/v1", "--engine", "ray",
        "--ray-address", f"127.0.0.1:{_closed_port()}",
    )  # fmt: skip
    told = ""
    while "starting Ray" not in told:
        told += process.stderr.readline()
        assert process.poll() is None, told
    time.sleep(1)
    process.send_signal(stop)
    signalled = time.monotonic()
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == status, stderr
    assert time.monotonic() - signalled < 5 and "Traceback" not in stderr


def _start_on_ray(cli_env, tmp_path, *args):
    """A real `flowrate eval --engine ray` process in the scratch directory, stderr read as text."""
    env = {key: value for key, value in cli_env.items() if key != "RAY_ADDRESS"}
    env["RAY_AUTH_MODE"] = os.environ.get("RAY_AUTH_MODE", "token")  # as the module's cluster (see the kill test)
    return subprocess.Popen(
        [FLOWRATE, *map(str, args), "--engine", "ray"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(process, reached, what, timeout_s):
    """Until `reached()` while `process` runs; else it is killed and the test fails, saying `what`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        if reached():
            return
        time.sleep(0.05)
    process.kill()  # a run left behind holds the cluster's CPUs, and the next Ray test waits for good
    raise AssertionError(f"not {what} in {timeout_s} s: {process.poll()}")


@ON_CLUSTER
@pytest.mark.parametrize(
    "stop, status, again",
    [(signal.SIGINT, 130, True), (signal.SIGTERM, 143, False)],
    ids=["ctrl-c twice", "sigterm"],
)
def test_ctrl_c_and_sigterm_stop_a_ray_run_sending_nothing_more_with_the_summary_and_the_resume_command(
    stop, status, again, ray_judge, ray_address, cli_env, tmp_path
):
    ray_judge.latency_s = 0.5
    # 64 at -j 4: 4 blocks of 16, each out only when its 16 calls are answered (8 s): the stop comes
    # with 8 calls answered and none of their rows out, which the stop writes (no cache here)
    write_jsonl(tmp_path / "c.jsonl", distinct(64))
    args = ["eval", "c.jsonl", "--api-base", ray_judge.base_url, "--model", "gpt-4o", "-o", "out.jsonl", "-j", "4"]
    process = _start_on_ray(cli_env, tmp_path, *args, "--no-cache", "--ray-address", ray_address)
    _wait_for(process, lambda: ray_judge.requests - ray_judge.in_flight >= 8, "8 calls answered", 120)
    sent = ray_judge.requests
    process.send_signal(stop)
    if again:  # a second Ctrl-C, while Ray is left: no traceback of Ray's
        time.sleep(1)
        process.send_signal(stop)
    _, stderr = process.communicate(timeout=60)
    settled = time.monotonic() + 30
    while ray_judge.in_flight and time.monotonic() < settled:
        time.sleep(0.1)
    after = ray_judge.requests - sent
    # a second Ctrl-C that comes once the summary is out, as Python exits, ends it by SIGINT: 130 to a shell too
    assert process.returncode in ((status, -stop) if again else (status,)), stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    rows = read_rows(tmp_path / "out.jsonl")
    assert 8 <= len(rows) < 64 and len({row["id"] for row in rows}) == len(rows)
    assert "resume with: flowrate eval c.jsonl" in stderr and "--resume" in stderr
    # no call starts once the run's desk heard the stop: a few slots may start one as it comes (before
    # the desk, a stop's actors sent on for its 5 s: up to 40 calls)
    assert after <= 2 * CONCURRENCY, after


@ON_CLUSTER
@pytest.mark.parametrize(
    "score, calls",
    [((), 1), (("--score", "combined"), 2), (("--turn-look",), 2)],
    ids=["rows written", "replies held for their looks cached", "replies held for their per-turn looks cached"],
)
def test_ctrl_c_on_ray_keeps_every_answered_call_so_resume_pays_only_for_the_calls_not_answered(
    score, calls, ray_judge, ray_address, run_flowrate, cli_env, tmp_path
):
    ray_judge.latency_s = 3.5
    # 64 conversations at -j 4: 4 blocks of 16, each out only when its 16 calls are answered (56 s);
    # the stop comes once calls are answered in each block and the next ones are sent: those, 3.5 s
    # each, are kept only if the stop gives the calls in flight eval's 5 s (with none: 12 paid, 4
    # kept). With --score combined the verdict-first looks (with --turn-look the per-turn looks) are
    # sent once every conversation's call is answered: none is.
    write_jsonl(tmp_path / "c.jsonl", distinct(64))
    args = ["eval", "c.jsonl", "--api-base", ray_judge.base_url, "--model", "gpt-4o", "-o", "out.jsonl", "-j", "4"]
    args += score
    process = _start_on_ray(cli_env, tmp_path, *args, "--ray-address", ray_address)
    _wait_for(process, lambda: ray_judge.requests - ray_judge.in_flight >= 4, "4 calls answered", 120)
    _wait_for(process, lambda: ray_judge.requests >= 8, "4 more calls sent", 30)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    settled = time.monotonic() + 30
    while ray_judge.in_flight and time.monotonic() < settled:
        time.sleep(0.1)
    assert process.returncode == 130 and "Traceback" not in stderr, stderr
    paid_before = ray_judge.requests
    assert 8 <= paid_before < 64, paid_before
    ray_judge.reset()
    ray_judge.latency_s = 0.0
    resumed = run_flowrate(*args, "--engine", "ray", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert sorted(row["id"] for row in read_rows(tmp_path / "out.jsonl")) == sorted(f"c{n}" for n in range(64))
    # each call answered before the stop is in the output or the cache: the two runs pay for each once
    assert paid_before + ray_judge.requests == 64 * calls, (paid_before, ray_judge.requests)


def _processes():
    """Every live process: pid -> (parent pid, command line), from /proc."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = open(f"/proc/{entry}/stat").read()
            command = open(f"/proc/{entry}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        state, parent = stat.rsplit(")", 1)[1].split()[:2]
        if state != "Z":
            found[int(entry)] = (int(parent), command.strip())
    return found


def _descendants(pid):
    table, found, frontier = _processes(), {}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, command) in table.items():
            if ppid == parent and child not in found:
                found[child] = command
                frontier.append(child)
    return found


@OWN_PROCESSES
@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads the process table from /proc")
def test_a_ray_run_killed_with_kill_9_leaves_no_process_of_its_local_cluster(judge_server, cli_env, tmp_path):
    judge_server.reset()
    judge_server.latency_s = 0.5
    write_jsonl(tmp_path / "c.jsonl", distinct(100))
    args = ["eval", "c.jsonl", "--api-base", judge_server.base_url, "--model", "gpt-4o", "-o", "out.jsonl", "-j", "4"]
    process = _start_on_ray(cli_env, tmp_path, *args, "--no-cache")  # no --ray-address: a local cluster for the run
    try:  # killed while its actors send: no need to wait for a block's rows (12 s at 100 conversations)
        _wait_for(process, lambda: judge_server.requests >= 4, "4 requests", 240)
        time.sleep(1)
        run = _descendants(process.pid)
        commands = " | ".join(run.values())
        assert "raylet" in commands and "DashboardAgent" in commands and "RuntimeEnvAgent" in commands, commands
        process.kill()
        process.wait(30)
        deadline = time.monotonic() + 30
        while (left := set(run) & set(_processes())) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not left, [run[pid] for pid in left]
    finally:
        judge_server.reset()
        judge_server.latency_s = 0.0


OPTION_SETS = {
    "combined, a look beside each call": ["--score", "combined"],
    "a checklist beside each call": ["--score", "checklist"],
    "a per-turn look beside each call, conversations of two and three turns": ["--turn-look"],
    "three samples in one request": ["--samples", "3"],
    "verdict first, expected score": ["--reply-order", "verdict-first", "--score", "expected"],
    "log-probabilities kept": ["--logprobs", "--uncertain-below", "0.7"],
}


@ON_CLUSTER
@pytest.mark.parametrize("options", OPTION_SETS.values(), ids=OPTION_SETS.keys())
def test_ray_gives_the_rows_eval_gives_for_every_option_that_shapes_a_judgement(
    options, ray_judge, run_flowrate, tmp_path
):
    records = _records(8)
    for record in records[::3]:  # per-turn looks of two shapes: each schema goes to the server whole
        record["turns"].append({"input": "one more thing", "actual_output": "sure"})
    logs = write_jsonl(tmp_path / "logs.jsonl", records)

    def script():
        checklist = checklist_step({"ends_well": "yes"}, {"ends_well": {"yes": -0.3567, "no": -1.204}})
        torn = {"answers": {"follows_on": "no"}, "logprobs": {"follows_on": {"no": -0.2231, "yes": -1.6094}}}
        turns = {"by_input": {"and then?": torn}}  # turn 2 of c5; its other turns follow on
        ray_judge.script("question 5", {**TORN, "look": TORN, "checklist": checklist, "turns": turns})
        _script(ray_judge, 8)  # c3 re-asked (each of its samples), c7 "minor"

    script()
    local = _eval(run_flowrate, ray_judge, logs, "local.jsonl", "--no-cache", *options)
    sent_locally = ray_judge.requests
    ray_judge.reset()
    script()
    on_ray = _eval(run_flowrate, ray_judge, logs, "ray.jsonl", "--no-cache", *options, "--engine", "ray")
    # c7's "minor" fails the gate; scored by the checklist, the conversations fail it whose checklist
    # the scripted judge answers "no" to every question (8 of the flow checklist's 12 weight on a
    # good "no": 0.667, below the threshold of 0.7)
    assert on_ray.returncode == local.returncode == 1, on_ray.stderr
    assert ray_judge.requests == sent_locally
    local_rows, ray_rows = _by_id(read_rows(tmp_path / "local.jsonl")), _by_id(read_rows(tmp_path / "ray.jsonl"))
    assert ray_rows.keys() == local_rows.keys() and len(ray_rows) == 8
    for key, row in local_rows.items():
        assert {**ray_rows[key], "attempts": None} == {**row, "attempts": None}, key
    assert ray_rows[("c3", "conversational_flow_rate")]["reasked"]
