"""`flowrate eval URL --write-back` against a real Phoenix and a real MLflow server on 127.0.0.1
(tests/platforms/servers.py), filled by the platforms' own instrumentation around the `openai`
client talking to the scripted judge: every session judged once, each verdict on its session as the
platform's own client shows it, with the judge's identity; a rerun with the history writes nothing;
a grown session is judged again and its verdict replaced; a platform killed in the middle of the
write-back costs no verdict, and `--resume` completes it; the platform's token is written nowhere."""

import json
import time
import urllib.request

import pytest

from tests.helpers import local_eval
from tests.platforms import servers

pytestmark = [
    pytest.mark.xdist_group("platforms"),  # one Phoenix and one MLflow server for the module, on one worker
    pytest.mark.skipif(not servers.installed(), reason=servers.MISSING),
]

SYSTEM = "You are Harbor Bank's assistant."
FIRST = {
    "s-1": ["Hi there", "What is my checking balance?", "Thanks, bye"],
    "s-2": ["Hello", "Can I order a new card?"],
}
ANSWERS = ["Hello! How can I help?", "Your checking balance is $120.", "Goodbye!", "Hi!", "Yes: it ships today."]
GROWN = {"s-2": [["Hello", "Hi!"], ["Can I order a new card?", "Yes: it ships today."], "And to my new address?"]}
GROWN_VERDICT = {
    "verdict": "mostly",
    "reason": "The card is ordered; the address question is answered late.",
    "key_issues": ["turn 3: the new address is not confirmed"],
}


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    platform = servers.Platform("phoenix", tmp_path_factory.mktemp("phoenix")).start()
    yield platform
    platform.kill()


@pytest.fixture(scope="module")
def mlflow(tmp_path_factory):
    platform = servers.Platform("mlflow", tmp_path_factory.mktemp("mlflow")).start()
    yield platform
    platform.kill()


def chat(platform, place, judge, sessions, answers):
    """The sessions chatted into the platform, the application's replies scripted; the place's id."""
    judge.script(SYSTEM, *({"content": answer} for answer in answers))
    try:
        made = platform.fill(place, judge.base_url, sessions)
    finally:
        judge.reset()
    return made.strip() or place


def verdict_bodies(judge):
    """The judge's verdict requests (the application's own calls were answered before a reset)."""
    return [body for body in judge.bodies if "messages" in body]


def prompt_of(body):
    return "\n".join(str(message.get("content")) for message in body["messages"])


def rows(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("name", ["phoenix", "mlflow"])
def test_write_back_puts_each_verdict_on_its_session_once_and_replaces_it_when_the_session_grows(
    name, request, judge, run_flowrate, tmp_path
):
    platform = request.getfixturevalue(name)
    named = f"bank-{tmp_path.name}"  # the project, or the experiment's name (its id is the URL's)
    place = chat(platform, named, judge, FIRST, ANSWERS)
    url = f"{name}+{platform.url}?{'project' if name == 'phoenix' else 'experiment'}={place}"
    command = (*local_eval(judge, url, "--write-back", "--history", "h.duckdb", "--since", "1h", "--allow-empty"),)

    first = run_flowrate(*command)
    assert first.returncode == 0, first.stderr
    written = rows(tmp_path / "out.jsonl")
    assert sorted(row["id"] for row in written) == ["s-1", "s-2"]
    bodies = verdict_bodies(judge)
    assert len(bodies) == 2  # each session judged once
    s1 = next(prompt_of(body) for body in bodies if "checking balance" in prompt_of(body))
    for text in [*FIRST["s-1"], *ANSWERS[:3]]:
        assert text in s1
    assert "--write-back: 2 verdict(s) written" in first.stderr

    shown = platform.verdicts(place, ["s-1", "s-2"])
    row = written[0]
    for session in ("s-1", "s-2"):
        [verdict] = shown[session]
        if name == "phoenix":
            assert (verdict["name"], verdict["label"], verdict["score"]) == (row["metric"], "fully", 1.0)
            assert verdict["annotator_kind"] == "LLM"
            assert verdict["explanation"] == "Every turn addresses the user."
            assert verdict["metadata"]["passed"] is True
        else:
            assert (verdict["name"], verdict["value"], verdict["last"]) == (row["metric"], 1.0, True)
            assert (verdict["source_type"], verdict["source_id"]) == ("LLM_JUDGE", "smol")
            assert verdict["rationale"] == "Every turn addresses the user."
            assert verdict["metadata"]["passed"] == "true"
        assert verdict["metadata"]["judge_model"] == "smol"
        assert verdict["metadata"]["rubric_version"] == row["rubric_version"]
        assert verdict["metadata"]["flowrate_version"]

    judge.reset()
    again = run_flowrate(*command)
    assert again.returncode == 0, again.stderr
    assert verdict_bodies(judge) == []  # the history holds both: nothing judged, nothing written
    assert platform.verdicts(place, ["s-1", "s-2"]) == shown

    chat(platform, named, judge, GROWN, ["Yes, to the address on file."])
    judge.script("And to my new address?", GROWN_VERDICT)
    grown = run_flowrate(*command)
    assert grown.returncode == 0, grown.stderr
    assert [("And to my new address?" in prompt_of(body)) for body in verdict_bodies(judge)] == [True]
    after = platform.verdicts(place, ["s-1", "s-2"])
    assert after["s-1"] == shown["s-1"]
    [replaced] = after["s-2"]  # replaced, not added beside the first
    if name == "phoenix":
        assert replaced["id"] == shown["s-2"][0]["id"]
        assert (replaced["label"], replaced["explanation"]) == ("mostly", GROWN_VERDICT["reason"])
        assert replaced["metadata"]["key_issues"] == GROWN_VERDICT["key_issues"]
    else:
        assert replaced["last"] and replaced["trace_id"] != shown["s-2"][0]["trace_id"]  # on the new last trace
        assert (replaced["value"], replaced["rationale"]) == (0.9, GROWN_VERDICT["reason"])
        assert json.loads(replaced["metadata"]["key_issues"]) == GROWN_VERDICT["key_issues"]


def assessed(mlflow, experiment):
    """How many assessments the experiment's traces hold (the REST search, cheaper to poll than
    starting the platform's client each time)."""
    search = {"locations": [{"type": "MLFLOW_EXPERIMENT", "mlflow_experiment": {"experiment_id": experiment}}]}
    request = urllib.request.Request(
        f"{mlflow.url}/api/3.0/mlflow/traces/search",
        data=json.dumps({**search, "max_results": 100}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        return sum(len(trace.get("assessments") or []) for trace in json.load(answer).get("traces") or [])


def test_a_platform_killed_during_the_write_back_costs_no_verdict_and_resume_sends_the_rest(
    mlflow, judge, start_process, run_flowrate, tmp_path
):
    sessions = {f"k-{number}": [f"Question {number}", "Thanks"] for number in range(8)}
    experiment = chat(mlflow, f"kill-{tmp_path.name}", judge, sessions, [f"Answer {n}" for n in range(16)])
    url = f"mlflow+{mlflow.url}?experiment={experiment}"
    judge.latency_s = 1.0  # a verdict a second: the server is killed between two writes
    process = start_process(*local_eval(judge, url, "--write-back", "--concurrency", "1"))
    deadline = time.monotonic() + 120
    while not assessed(mlflow, experiment):
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()
        time.sleep(0.1)
    mlflow.kill()
    _, stderr = process.communicate(timeout=180)
    assert process.returncode == 4, stderr  # the rows are written; some verdicts are not on the platform
    assert sorted(row["id"] for row in rows(tmp_path / "out.jsonl")) == sorted(sessions)
    pending = rows(tmp_path / "out.jsonl.write-back.jsonl")
    assert pending and "Traceback" not in stderr
    assert "--resume" in stderr and "out.jsonl.write-back.jsonl" in stderr

    mlflow.start()
    judge.reset()
    judge.latency_s = 0.0
    resumed = run_flowrate(*local_eval(judge, url, "--write-back", "--resume"))
    assert resumed.returncode == 0, resumed.stderr
    assert verdict_bodies(judge) == []  # only the writes were retried
    assert f"--write-back: {len(pending)} verdict(s) written ({len(pending)} pending" in resumed.stderr
    assert not (tmp_path / "out.jsonl.write-back.jsonl").exists()
    shown = mlflow.verdicts(experiment, list(sessions))
    assert {session: len(verdicts) for session, verdicts in shown.items()} == dict.fromkeys(sessions, 1)


def test_the_platforms_token_is_sent_but_never_written(phoenix, judge, run_flowrate, cli_env, tmp_path):
    token = "phx-token-5e5a1b0c9d"
    place = chat(phoenix, f"secret-{tmp_path.name}", judge, {"t-1": ["Hi", "Bye"]}, ["Hello", "Goodbye"])
    url = f"phoenix+{phoenix.url}?project={place}"
    env = {**cli_env, "PHOENIX_API_KEY": token, "OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer {token}"}
    outcome = run_flowrate(
        *local_eval(judge, url, "--write-back", "--history", "h.duckdb", "--otel-file", "events.jsonl", "-v"), env=env
    )
    assert outcome.returncode == 0, outcome.stderr
    assert token not in outcome.stdout + outcome.stderr
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert token.encode() not in path.read_bytes(), path


def test_a_trace_mlflow_cannot_give_is_named_and_the_other_sessions_are_judged(mlflow, judge, run_flowrate, tmp_path):
    experiment = chat(mlflow, f"gap-{tmp_path.name}", judge, {"g-1": ["Hi", "Bye"]}, ["Hello", "Goodbye"])
    # a trace whose spans MLflow does not hold (its info alone, as a client that died before
    # logging them leaves it): MLflow's batchGet refuses the whole page for it
    trace_id = "tr-" + "ab" * 16
    info = {
        "trace_id": trace_id,
        "trace_location": {"type": "MLFLOW_EXPERIMENT", "mlflow_experiment": {"experiment_id": experiment}},
        "request_time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "state": "OK",
        "trace_metadata": {"mlflow.trace.session": "g-2"},
    }
    request = urllib.request.Request(
        f"{mlflow.url}/api/3.0/mlflow/traces",
        data=json.dumps({"trace": {"trace_info": info}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(request, timeout=10).close()
    url = f"mlflow+{mlflow.url}?experiment={experiment}"

    refused = run_flowrate(*local_eval(judge, url))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert f"{url}: cannot read trace {trace_id}" in refused.stderr, refused.stderr

    judged = run_flowrate(*local_eval(judge, url, "--skip-invalid"))
    assert judged.returncode == 0, judged.stderr
    assert [row["id"] for row in rows(tmp_path / "out.jsonl")] == ["g-1"]
