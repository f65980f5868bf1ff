"""Fixtures for the real-model stage (`bash .ci/real_model`): a real model served by
llama-cpp-python on 127.0.0.1, reached by the real `flowrate` process through a counting proxy.

The server is named by FLOWRATE_REAL_JUDGE_URL (its OpenAI base, `http://127.0.0.1:P/v1`),
FLOWRATE_REAL_JUDGE_MODEL (its model alias) and FLOWRATE_REAL_JUDGE_CTX (its n_ctx). Without
FLOWRATE_REAL_JUDGE_URL every test here is skipped, so the README's plain `pytest` passes
without a model.

llama-cpp-python's server counts no requests, so the proxy does: it records every request
flowrate sends (its JSON body) and every answer (status and JSON body), and tells when the
first chat completion arrives (for Ctrl-C mid-run).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FLOWRATE
from tests.proxy import CountingProxy, Exchange  # noqa: F401 (the real-model tests take them from here)

PROCESS_LIMIT_S = 900  # one flowrate run: 12 suite calls measured 6.7 min on 2 busy cores


@dataclass(frozen=True)
class RealJudge:
    """The real server: its OpenAI base URL, model alias and context window (tokens)."""

    url: str
    model: str
    n_ctx: int

    @property
    def root(self) -> str:
        return self.url.rstrip("/").removesuffix("/v1")


@pytest.fixture(scope="session")
def real_judge() -> RealJudge:
    url = os.environ.get("FLOWRATE_REAL_JUDGE_URL")
    if not url:
        pytest.skip("no real model: FLOWRATE_REAL_JUDGE_URL is unset (bash .ci/real_model starts one and sets it)")
    return RealJudge(
        url=url,
        model=os.environ.get("FLOWRATE_REAL_JUDGE_MODEL", "smol"),
        n_ctx=int(os.environ.get("FLOWRATE_REAL_JUDGE_CTX", "0") or 0),
    )


@pytest.fixture
def proxy(real_judge):
    """A fresh counting proxy in front of the real server, for one test."""
    started = CountingProxy(real_judge.root).start()
    yield started
    started.stop()


def flowrate_env(cache_dir: Path) -> dict[str, str]:
    """A real user's environment for a self-hosted judge: no OpenAI key, no stray FLOWRATE_*,
    no retry waits, a response cache of the caller's own."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("FLOWRATE_", "OPENAI_"))}
    env["PATH"] = f"{Path(FLOWRATE).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(
        FLOWRATE_BACKOFF="0",
        FLOWRATE_BACKOFF_MAX="0",
        FLOWRATE_CACHE_DIR=str(cache_dir),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
    )
    return env


@dataclass
class Run:
    """A finished `flowrate` process: exit status, stderr, the output file's rows, and the
    chat-completion requests the proxy saw during it."""

    returncode: int
    stderr: str
    rows: list[dict[str, Any]]
    completions: list[Exchange]


def start_flowrate(workdir: Path, cache_dir: Path, *args: Any) -> subprocess.Popen:
    """Start the installed `flowrate` as a real process in `workdir`."""
    return subprocess.Popen(
        [FLOWRATE, *map(str, args)],
        cwd=workdir,
        env=flowrate_env(cache_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_flowrate(proxy: CountingProxy, workdir: Path, cache_dir: Path, *args: Any, output: str = "out.jsonl") -> Run:
    """Run `flowrate ARGS -o OUTPUT` to its end and collect what it gave and sent."""
    seen = len(proxy.completions())
    process = start_flowrate(workdir, cache_dir, *args, "-o", output)
    _, stderr = process.communicate(timeout=PROCESS_LIMIT_S)
    return Run(process.returncode, stderr, read_rows(workdir / output), proxy.completions()[seen:])


def read_rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def wait_until(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
