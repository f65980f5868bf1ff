"""Record what the Langfuse and LangSmith SDKs send when they write a score or feedback, to a
recording server on 127.0.0.1, into tests/results/fixtures/sdk_writes/ (their servers cannot run
here; flowrate's requests are tested against these recordings, tests/results/test_sdk_writes.py).

Run with the SDKs in an environment of their own (their versions are kept in each recording):

    python3 -m venv .venv-recorders && .venv-recorders/bin/pip install langfuse==5.0.4 langsmith==0.14.17
    .venv-recorders/bin/python tests/results/record_sdk_writes.py
"""

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import version
from pathlib import Path

OUT = Path(__file__).parent / "fixtures" / "sdk_writes"
SEEN = []
SECRETS = ("pk-lf-recording", "sk-lf-recording", "lsv2-recording")


class Recorder(BaseHTTPRequestHandler):
    def handle_any(self):
        size = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(size).decode() if size else ""
        SEEN.append({"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"id": "recorded"}')

    do_GET = do_POST = do_PATCH = handle_any

    def log_message(self, *args):
        pass


def kept(request, sdk):
    """A request as recorded: the auth header's scheme only (its secret replaced), the body as JSON."""
    headers = {}
    for name, value in request["headers"].items():
        if name.lower() in ("authorization", "x-api-key", "content-type"):
            for secret in SECRETS:
                value = value.replace(secret, "SECRET")
            if name.lower() == "authorization":
                value = value.split(" ")[0] + " SECRET"
            headers[name.lower()] = value
    return {
        "recorded_with": f"{sdk} {version(sdk)}",
        "method": request["method"],
        "path": request["path"],
        "headers": headers,
        "body": json.loads(request["body"]),
    }


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"

    os.environ.update(LANGFUSE_PUBLIC_KEY=SECRETS[0], LANGFUSE_SECRET_KEY=SECRETS[1], LANGFUSE_HOST=url)
    from langfuse import Langfuse

    langfuse = Langfuse()
    langfuse.create_score(
        name="conversational_flow_rate",
        value=0.9,
        session_id="sess-42",
        score_id="0f6f7d8e-1b2c-5d3e-8f4a-5b6c7d8e9f00",
        data_type="NUMERIC",
        comment="The card is ordered; the address question is answered late.",
        metadata={"verdict": "mostly", "passed": True},
    )
    langfuse.flush()
    langfuse.shutdown()
    [score] = [request for request in SEEN if request["path"].startswith("/api/public/scores")]
    (OUT / "langfuse_create_score.json").write_text(json.dumps(kept(score, "langfuse"), indent=2) + "\n")

    from langsmith import Client

    client = Client(api_url=url, api_key=SECRETS[2])
    feedback = "1a2b3c4d-5e6f-5a7b-8c9d-0e1f2a3b4c5d"
    client.create_feedback(
        run_id="9c1f0e2d-3b4a-4c5d-8e6f-7a8b9c0d1e2f",
        trace_id="9c1f0e2d-3b4a-4c5d-8e6f-7a8b9c0d1e2f",
        session_id="5e4d3c2b-1a09-4f8e-9d7c-6b5a49382716",  # the tracing project: required by LangSmith's SmithDB
        key="conversational_flow_rate",
        score=0.9,
        value="mostly",
        comment="The card is ordered; the address question is answered late.",
        feedback_id=feedback,
        feedback_source_type="model",
        source_info={"judge_model": "gpt-4o-mini"},
    )
    client.update_feedback(feedback, score=0.7, value="partial", comment="Asked again.")
    writes = [request for request in SEEN if request["path"].startswith("/feedback")]
    create, update = writes[0], writes[1]
    (OUT / "langsmith_create_feedback.json").write_text(json.dumps(kept(create, "langsmith"), indent=2) + "\n")
    (OUT / "langsmith_update_feedback.json").write_text(json.dumps(kept(update, "langsmith"), indent=2) + "\n")
    server.shutdown()


if __name__ == "__main__":
    main()
