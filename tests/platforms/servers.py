"""Phoenix and MLflow as the tests run them: their own servers from the `platforms` extra (an
environment of its own, `.venv-platforms`, or FLOWRATE_PLATFORMS_VENV: arize-phoenix 20.26
requires anthropic<2 and mlflow 3.17 pyarrow<26, below what the project's environment holds), on
127.0.0.1 at a free port, their SQLite in a temporary folder; filled by `fill.py` and read back
with the platform's own client by `read.py`, both run with that environment's Python."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
VENV = Path(os.environ.get("FLOWRATE_PLATFORMS_VENV") or ROOT / ".venv-platforms")
MISSING = (
    f"the platforms extra is not installed in {VENV} (python3 -m venv .venv-platforms &&"
    " .venv-platforms/bin/pip install -e '.[platforms]', or FLOWRATE_PLATFORMS_VENV)"
)
STARTUP_S = 240  # Phoenix runs its migrations and builds its app in ~45 s on 2 busy cores


def installed() -> bool:
    return (VENV / "bin" / "phoenix").exists() and (VENV / "bin" / "mlflow").exists()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Platform:
    """A platform's server: `start` (waits until it answers `probe`), `kill`, `restart`."""

    def __init__(self, name: str, folder: Path):
        self.name = name
        self.folder = folder
        self.port = free_port()
        self.grpc_port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> tuple[list[str], dict[str, str]]:
        env = {**os.environ, "PHOENIX_TELEMETRY_ENABLED": "false", "MLFLOW_ENABLE_TELEMETRY": "false"}
        if self.name == "phoenix":
            env.update(
                PHOENIX_WORKING_DIR=str(self.folder),
                PHOENIX_HOST="127.0.0.1",
                PHOENIX_PORT=str(self.port),
                PHOENIX_GRPC_PORT=str(self.grpc_port),
            )
            return [str(VENV / "bin" / "phoenix"), "serve"], env
        store = f"sqlite:///{self.folder / 'mlflow.sqlite'}"
        return [
            str(VENV / "bin" / "mlflow"), "server", "--backend-store-uri", store,
            "--artifacts-destination", str(self.folder / "artifacts"),
            "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1",
        ], env  # fmt: skip

    def probe(self) -> str:
        return f"{self.url}/v1/projects" if self.name == "phoenix" else f"{self.url}/health"

    def start(self) -> Platform:
        command, env = self.command()
        log = (self.folder / f"{self.name}.log").open("ab")
        self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {(self.folder / f'{self.name}.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(self.probe(), timeout=2):
                    return self
            except OSError:
                time.sleep(0.5)
        self.kill()
        raise RuntimeError(f"{self.name} did not answer within {STARTUP_S} s")

    def kill(self) -> None:
        """SIGKILL to the server and its workers (its own process group), as a crash would."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, 9)
            self.process.wait()
        self.process = None

    def run(self, script: str, *args: str) -> str:
        """`script` (fill.py, read.py) run with the platform's environment; its standard output."""
        done = subprocess.run(
            [str(VENV / "bin" / "python"), str(HERE / script), self.name, self.url, *args],
            capture_output=True,
            text=True,
            timeout=300,
            env={key: value for key, value in os.environ.items() if not key.startswith("PYTHONPATH")},
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    def fill(self, place: str, judge_url: str, sessions: dict) -> str:
        """Each session's user turns chatted through the instrumented `openai` client; what `fill.py` printed."""
        given = self.folder / f"sessions-{time.monotonic_ns()}.json"  # a file: 1,000 sessions are past argv's limit
        given.write_text(json.dumps(sessions))
        return self.run("fill.py", place, judge_url, str(given))

    def verdicts(self, place: str, sessions: list[str]) -> dict[str, list[dict]]:
        """Each session's flowrate verdicts as the platform's own client shows them."""
        return json.loads(self.run("read.py", place, json.dumps(sessions)))
