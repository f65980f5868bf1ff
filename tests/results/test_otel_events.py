"""`--otel-file` and `--otel-endpoint`: one `gen_ai.evaluation.result` event per row, as the OTLP
JSON encoding has it: each line of the file (and each body a receiver gets) is parsed by
opentelemetry-proto's own `ExportLogsServiceRequest` through protobuf's `json_format.Parse`, which
refuses a field the message does not have or a value of the wrong type; hostile text (quotes, a
newline, a NUL, a lone surrogate's neighbours, an emoji) comes back as it was written."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from google.protobuf.json_format import MessageToDict, Parse
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from tests.helpers import local_eval, read_rows, turn_record, write_jsonl

HOSTILE = 'He said "stop"\nthen left\x00 </script> ☃ 🙂 \\u0000'
VERDICT = {"verdict": "minor", "reason": HOSTILE, "key_issues": ["turn 2: asks twice", 'quote " and \\ back']}


def records(judge, tmp_path):
    judge.script("MARK-MINOR", VERDICT)
    judge.script("MARK-500", {"status": 500})
    return write_jsonl(
        tmp_path / "c.jsonl",
        [
            turn_record("ok", "hi", "hello"),
            turn_record("bad ::error::", "MARK-MINOR", "x", "y", "z"),
            turn_record("err", "MARK-500", "x"),
        ],
    )


def events_of(document):
    """The log records of an `ExportLogsServiceRequest` document, parsed by the proto's own
    message, each as (event name, attributes as plain values, severity)."""
    request = Parse(json.dumps(document), ExportLogsServiceRequest())
    found = []
    for resource in request.resource_logs:
        assert [(a.key, a.value.string_value) for a in resource.resource.attributes] == [("service.name", "flowrate")]
        for scope in resource.scope_logs:
            assert scope.scope.name == "flowrate" and scope.scope.version
            assert scope.schema_url == "https://opentelemetry.io/schemas/1.41.0"
            for record in scope.log_records:
                attributes = {}
                for pair in record.attributes:
                    value = MessageToDict(pair.value)
                    attributes[pair.key] = next(iter(value.values())) if value else None
                found.append((record.event_name, attributes, record.severity_text, record.time_unix_nano))
    return found


def by_conversation(events):
    return {
        attributes["gen_ai.conversation.id"]: (name, attributes, severity) for name, attributes, severity, _ in events
    }


def check_events(events, rows):
    """One event per row, its attributes the row's."""
    assert len(events) == len(rows) == 3
    assert all(time_ns > 0 for *_, time_ns in events)
    shown = by_conversation(events)
    assert set(shown) == {row["id"] for row in rows}
    for row in rows:
        name, attributes, severity = shown[row["id"]]
        assert name == "gen_ai.evaluation.result"
        assert attributes["gen_ai.evaluation.name"] == row["metric"]
        assert attributes["flowrate.judge.model"] == "smol"
        assert attributes["flowrate.rubric.version"] == row["rubric_version"]
        if row["error"] is None:
            assert attributes["gen_ai.evaluation.score.value"] == row["score"]
            assert attributes["gen_ai.evaluation.score.label"] == ("pass" if row["success"] else "fail")
            assert attributes["gen_ai.evaluation.explanation"] == row["reason"]
            assert severity == "INFO"
        else:
            assert "gen_ai.evaluation.score.value" not in attributes
            assert attributes["error.type"] == row["error"]["type"]
            assert severity == "WARN"
    _, bad, _ = shown["bad ::error::"]
    assert bad["gen_ai.evaluation.explanation"] == HOSTILE
    assert bad["flowrate.key_issues"] == {"values": [{"stringValue": text} for text in VERDICT["key_issues"]]}
    assert bad["flowrate.verdict"] == "minor"


def test_otel_file_holds_one_evaluation_event_per_row_in_the_otlp_json_encoding(judge, run_flowrate, tmp_path):
    path = records(judge, tmp_path)
    outcome = run_flowrate(*local_eval(judge, path, "--otel-file", "events.jsonl"))
    assert outcome.returncode == 3, outcome.stderr  # the error row makes the run incomplete
    lines = (tmp_path / "events.jsonl").read_text(encoding="utf-8").splitlines()
    events = [event for line in lines for event in events_of(json.loads(line))]
    check_events(events, read_rows(tmp_path / "out.jsonl"))
    assert "--otel-file: 3 evaluation event(s) in events.jsonl" in outcome.stderr


def test_otel_file_may_not_be_an_input(judge, run_flowrate, tmp_path):
    path = records(judge, tmp_path)
    before = path.read_bytes()
    outcome = run_flowrate(*local_eval(judge, path, "--otel-file", path))
    assert outcome.returncode == 2
    assert "is both an input and the --otel-file file" in outcome.stderr and "Traceback" not in outcome.stderr
    assert path.read_bytes() == before


class Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP logs receiver: keeps each body posted to /v1/logs, answers `status`."""

    bodies: list = []
    paths: list = []
    headers_seen: list = []
    status = 200

    def do_POST(self):  # noqa: N802  (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).paths.append(self.path)
        type(self).headers_seen.append({name.lower(): value for name, value in self.headers.items()})
        type(self).bodies.append(json.loads(body))
        self.send_response(type(self).status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    Receiver.bodies, Receiver.paths, Receiver.headers_seen, Receiver.status = [], [], [], 200
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_otel_endpoint_gets_one_evaluation_event_per_row_with_the_exporters_headers(
    judge, run_flowrate, receiver, cli_env, tmp_path
):
    path = records(judge, tmp_path)
    endpoint = f"http://127.0.0.1:{receiver.server_address[1]}"
    env = {**cli_env, "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20otel-token-1,x-tenant=acme"}
    outcome = run_flowrate(*local_eval(judge, path, "--otel-endpoint", endpoint), env=env)
    assert outcome.returncode == 3, outcome.stderr
    assert Receiver.paths == ["/v1/logs"]
    assert Receiver.headers_seen[0]["authorization"] == "Bearer otel-token-1"
    assert Receiver.headers_seen[0]["content-type"] == "application/json"
    events = [event for body in Receiver.bodies for event in events_of(body)]
    check_events(events, read_rows(tmp_path / "out.jsonl"))
    assert "3 evaluation event(s) delivered" in outcome.stderr
    assert "otel-token-1" not in outcome.stderr + outcome.stdout + (tmp_path / "out.jsonl").read_text()


def test_a_refusing_otel_receiver_costs_no_row_and_is_named(judge, run_flowrate, receiver, tmp_path):
    Receiver.status = 503
    path = records(judge, tmp_path)
    endpoint = f"http://127.0.0.1:{receiver.server_address[1]}/v1/logs"
    outcome = run_flowrate(*local_eval(judge, path, "--otel-endpoint", endpoint))
    assert outcome.returncode == 3, outcome.stderr  # the run's own exit: the error row, not the receiver
    assert len(read_rows(tmp_path / "out.jsonl")) == 3
    assert "3 evaluation event(s) not delivered (HTTP 503" in outcome.stderr
    assert "Traceback" not in outcome.stderr
