"""`--write-back` of a Langfuse or LangSmith export's verdicts: their servers cannot run here, so
flowrate's requests, sent to a recording server on 127.0.0.1, are checked against what their own
SDKs send for the same write (tests/results/fixtures/sdk_writes/, recorded by
record_sdk_writes.py from langfuse 5.0.4's `create_score` and langsmith 0.14.17's
`create_feedback` and `update_feedback`): the same method and path, the same authentication
scheme, the same fields of the same types; the ids the same on every run (a rerun replaces)."""

import json
import shutil
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.helpers import local_eval, read_rows
from tests.inputs.sources.sdk_logs import langsmith_runs, write_jsonl

RECORDED = Path(__file__).parent / "fixtures" / "sdk_writes"
LANGFUSE_SESSION = Path(__file__).parents[1] / "inputs" / "sources" / "fixtures" / "langfuse" / "session.jsonl"
SECRET = "sk-lf-7d1c0e9b"


def recorded(name):
    return json.loads((RECORDED / f"{name}.json").read_text())


class Recorder(BaseHTTPRequestHandler):
    """Keeps each request; answers `statuses` in turn (200 once they are used up)."""

    seen: list = []
    statuses: list = []

    def handle_any(self):
        size = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(size)) if size else None
        headers = {name.lower(): value for name, value in self.headers.items()}
        type(self).seen.append({"method": self.command, "path": self.path, "headers": headers, "body": body})
        status = type(self).statuses.pop(0) if type(self).statuses else 200
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"id": "x"}')

    do_GET = do_POST = do_PATCH = handle_any

    def log_message(self, *args):
        pass


@pytest.fixture
def recorder():
    Recorder.seen, Recorder.statuses = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def shape(value):
    """The fields of a JSON value and their types, nested: what a server's schema checks."""
    if isinstance(value, dict):
        return {key: shape(entry) for key, entry in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return "number" if isinstance(value, int | float) and not isinstance(value, bool) else type(value).__name__


def same_request(sent, sdk, metadata_of=None):
    """`sent` is the SDK's request: method, path, auth scheme, content type, fields and types
    (metadata, which is the writer's own, compared apart)."""
    assert (sent["method"], sent["path"]) == (sdk["method"], sdk["path"])
    for name, value in sdk["headers"].items():
        assert name in sent["headers"]
        assert sent["headers"][name].split(" ")[0] == value.split(" ")[0] or value == "SECRET"
    theirs, ours = shape(sdk["body"]), shape(sent["body"])
    if metadata_of is not None:
        metadata_of(theirs).pop("metadata"), metadata_of(ours).pop("metadata")
    assert ours == theirs


def test_langfuse_session_scores_are_sent_as_the_sdk_sends_them_with_the_same_id_on_a_rerun(
    judge, run_flowrate, recorder, cli_env, tmp_path
):
    path = shutil.copy(LANGFUSE_SESSION, tmp_path / "session.jsonl")
    env = {**cli_env, "LANGFUSE_HOST": recorder, "LANGFUSE_PUBLIC_KEY": "pk-lf-1", "LANGFUSE_SECRET_KEY": SECRET}
    first = run_flowrate(*local_eval(judge, path, "--write-back"), env=env)
    assert first.returncode == 0, first.stderr
    [sent] = Recorder.seen
    same_request(sent, recorded("langfuse_create_score"), metadata_of=lambda body: body[0])
    [score] = sent["body"]
    [row] = read_rows(tmp_path / "out.jsonl")
    assert (score["sessionId"], score["name"], score["value"]) == ("sess-42", row["metric"], row["score"])
    assert score["comment"] == row["reason"] and score["dataType"] == "NUMERIC"
    assert score["metadata"]["judge_model"] == "smol"
    assert score["metadata"]["rubric_version"] == row["rubric_version"]
    assert score["metadata"]["flowrate_version"]
    uuid.UUID(score["id"])

    again = run_flowrate(*local_eval(judge, path, "--write-back"), env=env)
    assert again.returncode == 0, again.stderr
    assert Recorder.seen[1]["body"][0]["id"] == score["id"]  # the same score: Langfuse replaces it
    for written in tmp_path.rglob("*"):
        if written.is_file():
            assert SECRET.encode() not in written.read_bytes(), written
    assert SECRET not in first.stderr + again.stderr


PROJECT = "5e4d3c2b-1a09-4f8e-9d7c-6b5a49382716"


def langsmith_export(tmp_path):
    """LangChain's tracer's runs of one thread; each run's `session_id` (its tracing project, which
    LangSmith sets on the runs it stores and exports, and an offline tracer does not know) set."""
    runs = [{**run, "session_id": PROJECT} for run in langsmith_runs(metadata={"thread_id": "thread-7"})]
    roots = [run for run in runs if run["parent_run_id"] is None]
    last = max(roots, key=lambda run: run["start_time"])
    return write_jsonl(tmp_path / "runs.jsonl", runs), last["id"]


def test_langsmith_feedback_goes_on_the_threads_last_run_as_the_sdk_sends_it(
    judge, run_flowrate, recorder, cli_env, tmp_path
):
    path, last_run = langsmith_export(tmp_path)
    env = {**cli_env, "LANGSMITH_ENDPOINT": recorder, "LANGSMITH_API_KEY": "lsv2-test-1"}
    outcome = run_flowrate(*local_eval(judge, path, "--write-back"), env=env)
    assert outcome.returncode == 0, outcome.stderr
    [sent] = Recorder.seen
    same_request(sent, recorded("langsmith_create_feedback"), metadata_of=lambda body: body["feedback_source"])
    feedback = sent["body"]
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["id"] == "thread-7"
    assert (feedback["run_id"], feedback["key"], feedback["score"]) == (last_run, row["metric"], row["score"])
    assert (feedback["trace_id"], feedback["session_id"]) == (last_run, PROJECT)
    assert (feedback["value"], feedback["comment"]) == ("fully", row["reason"])
    assert feedback["feedback_source"]["type"] == "model"
    assert feedback["feedback_source"]["metadata"]["judge_model"] == "smol"
    assert sent["headers"]["x-api-key"] == "lsv2-test-1"


def test_langsmith_feedback_that_exists_is_updated_as_the_sdk_updates_it(
    judge, run_flowrate, recorder, cli_env, tmp_path
):
    path, _ = langsmith_export(tmp_path)
    env = {**cli_env, "LANGSMITH_ENDPOINT": recorder, "LANGSMITH_API_KEY": "lsv2-test-1"}
    Recorder.statuses = [409]  # LangSmith has this feedback id already: a rerun
    outcome = run_flowrate(*local_eval(judge, path, "--write-back"), env=env)
    assert outcome.returncode == 0, outcome.stderr
    create, update = Recorder.seen
    same_request(update, {**recorded("langsmith_update_feedback"), "path": f"/feedback/{create['body']['id']}"})
    assert update["body"]["score"] == create["body"]["score"]


def test_write_back_to_langfuse_without_its_keys_is_a_usage_error(judge, run_flowrate, cli_env, tmp_path):
    path = shutil.copy(LANGFUSE_SESSION, tmp_path / "session.jsonl")
    outcome = run_flowrate(*local_eval(judge, path, "--write-back"))
    assert outcome.returncode == 2
    assert "LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY" in outcome.stderr and "Traceback" not in outcome.stderr
    assert not (tmp_path / "out.jsonl").exists()
