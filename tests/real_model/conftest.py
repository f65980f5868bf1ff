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

import asyncio
import json
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FLOWRATE

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


@dataclass
class Exchange:
    """One request through the proxy and its answer (status None while it is still at the server)."""

    method: str
    path: str
    body: Any
    status: int | None = None
    answer: Any = None

    @property
    def is_completion(self) -> bool:
        return self.method == "POST" and self.path.endswith("/chat/completions")


@dataclass
class CountingProxy:
    """An HTTP proxy on 127.0.0.1 in front of the real server that records every exchange."""

    upstream: str  # the server's root, http://127.0.0.1:P
    exchanges: list[Exchange] = field(default_factory=list)
    first_completion: threading.Event = field(default_factory=threading.Event)
    port: int = 0

    @property
    def url(self) -> str:
        """The OpenAI base URL to give flowrate as --api-base."""
        return f"http://127.0.0.1:{self.port}/v1"

    def completions(self) -> list[Exchange]:
        """The chat-completion requests seen so far, in arrival order."""
        return [exchange for exchange in self.exchanges if exchange.is_completion]

    def start(self) -> CountingProxy:
        started = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, args=(started,), daemon=True)
        self._thread.start()
        if not started.wait(30):
            raise RuntimeError("the counting proxy did not start")
        return self

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)

    def _serve(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._open())
        started.set()
        self._loop.run_forever()
        self._loop.close()

    async def _open(self) -> None:
        import aiohttp
        from aiohttp import web

        self._client = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=PROCESS_LIMIT_S))
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _shutdown(self) -> None:
        await self._runner.cleanup()
        await self._client.close()

    async def _forward(self, request):
        from aiohttp import web

        data = await request.read()
        exchange = Exchange(request.method, request.path, _json_or_text(data))
        self.exchanges.append(exchange)
        if exchange.is_completion:
            self.first_completion.set()
        headers = {"Content-Type": request.headers.get("Content-Type", "application/json")}
        async with self._client.request(
            request.method, self.upstream + request.path_qs, data=data or None, headers=headers
        ) as answer:
            payload = await answer.read()
            exchange.status = answer.status
            exchange.answer = _json_or_text(payload)
            return web.Response(
                body=payload,
                status=answer.status,
                content_type=answer.content_type,
            )


def _json_or_text(data: bytes) -> Any:
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return data.decode("utf-8", "replace")


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
