"""Fixtures: the scripted judge and the batch fake on 127.0.0.1, `flowrate` in process and as a real
process, and the inputs several stages' tests share. Plain helpers are in `tests/helpers.py`."""

import asyncio
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import CHROMIUM, CHROMIUM_ARGS, FLOWRATE, TEST_KEY, judge_mixed, mixed, write_jsonl
from tests.judge_server import JudgeServer

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# pytest's own `pytester`, for the pytest plugin's tests (tests/ci); pytest takes this from the
# top-level conftest only
pytest_plugins = ["pytester"]


@pytest.fixture(scope="session")
def judge_server():
    server = JudgeServer().start()
    yield server
    server.stop()


@pytest.fixture
def transport(monkeypatch):
    """The transport a scripted-judge test goes through: "auto" (flowrate's own HTTP client for
    the OpenAI protocol). The tests about the judge's transport (`tests/judge/conftest.py`) run
    through both. The CLI reads FLOWRATE_TRANSPORT; the Python API tests pass `helpers.transport()`."""
    monkeypatch.setenv("FLOWRATE_TRANSPORT", "auto")
    return "auto"


@pytest.fixture
def judge(judge_server, transport):
    """The scripted judge, reset for each test."""
    judge_server.reset()
    judge_server.latency_s = 0.0
    judge_server.fault_rates = {}
    yield judge_server
    judge_server.reset()


@pytest.fixture(scope="session")
def batch_server_session(judge_server):
    from tests.batch_server import BatchServer

    return BatchServer(judge_server).start()


@pytest.fixture
def batch_server(batch_server_session, judge):
    """The fake Files and Batches endpoints, answering as the scripted judge does; reset per test."""
    batch_server_session.reset()
    yield batch_server_session
    batch_server_session.reset()


@pytest.fixture
def cli_env(tmp_path):
    """The environment for a real `flowrate` process: a test key, no retry waits, a cache of
    this test's own, no stray FLOWRATE_*."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("FLOWRATE_", "OPENAI_"))}
    env["PATH"] = f"{Path(FLOWRATE).parent}{os.pathsep}{env.get('PATH', '')}"  # as after activating the venv
    env.update(
        OPENAI_API_KEY=TEST_KEY,
        FLOWRATE_BACKOFF="0",
        FLOWRATE_BACKOFF_MAX="0",
        FLOWRATE_CACHE_DIR=str(tmp_path / "cache"),
        FLOWRATE_TRANSPORT=os.environ.get("FLOWRATE_TRANSPORT", "auto"),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
    )
    return env


@dataclass
class Outcome:
    """What a run of `flowrate` gave: exit status, stdout and stderr, as text."""

    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def run_flowrate(tmp_path, cli_env, monkeypatch):
    """Run `flowrate` in this process through Typer's test runner, in a scratch directory,
    with the test environment. Unexpected exceptions propagate and fail the test."""
    from typer.testing import CliRunner

    from flowrate.cli import app

    monkeypatch.chdir(tmp_path)

    def run(*args, input=None, env=None):
        wanted = env or cli_env
        overlay = {key: None for key in os.environ if key not in wanted}
        overlay.update(wanted)
        result = beside_playwright(
            lambda: CliRunner().invoke(
                app, [str(arg) for arg in args], input=input, env=overlay, catch_exceptions=False
            )
        )
        return Outcome(result.exit_code, result.stdout, result.stderr)

    return run


def beside_playwright(call):
    """`call()`, in a thread of its own while this thread's asyncio loop is marked running, as
    playwright's sync API leaves it between its calls (`chromium`): `asyncio.run` refuses to
    start there. Exceptions come back as they were raised."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return call()
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(call).result()


@pytest.fixture(scope="module")
def chromium():
    """Headless Chromium (Debian's, through playwright's driver), launched once for the module's
    tests; each test opens its pages in a browser context of its own (its own cookies and
    storage). A launch cost 2.5 s of wall time a test, of which a page is 0.6 s. Skipped where
    Chromium or the driver is not installed (.ci/run installs Debian's chromium)."""
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (.ci/run installs Debian's chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright driver is not installed")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def run_process(tmp_path, cli_env):
    """Run the installed `flowrate` command as a real process: for stdin, pipes and the entry point."""

    def run(*args, input=None, env=None, timeout=120):
        return subprocess.run(
            [FLOWRATE, *map(str, args)],
            input=input,
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env or cli_env,
            timeout=timeout,
        )

    return run


@pytest.fixture
def start_process(tmp_path, cli_env):
    """Start the installed `flowrate` as a real process in the scratch directory (signals, pipes)."""

    def start(*args, text=True):
        return subprocess.Popen(
            [FLOWRATE, *map(str, args)],
            cwd=tmp_path,
            env=cli_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=text,
        )

    return start


@pytest.fixture
def api_key(monkeypatch):
    """The test key in OPENAI_API_KEY, for the Python API's calls to the scripted judge."""
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)


@pytest.fixture
def conversations(tmp_path):
    """Write the records given to a JSONL file in the scratch directory (c.jsonl unless `name`)
    and return its path."""

    def make(*records, name="c.jsonl"):
        return write_jsonl(tmp_path / name, records)

    return make


@pytest.fixture
def report_page(judge, run_flowrate, tmp_path):
    """The HTML report of a run over the mixed conversations (see `tests.helpers.mixed`)."""
    path = mixed(tmp_path, judge)
    result = judge_mixed(run_flowrate, judge, path, "--html", "report.html")
    assert "HTML report: report.html" in result.stderr, result.stderr
    return tmp_path / "report.html"
