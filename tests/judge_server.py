"""A scripted judge: a real HTTP server on 127.0.0.1 speaking OpenAI chat completions.

Tests and benchmarks reach it through LiteLLM's real code path (``--api-base``).
Behaviour is scripted by rules that match a marker string anywhere in the request's
messages; each matching request takes the rule's next step (the last step repeats).
A step is one of:

- ``{"verdict": "partial", "reason": "...", "key_issues": [...]}``: a well-formed verdict
  (``"verdicts": [...]`` instead gives each of ``n`` choices its own, cycling)
- ``{"content": "any text"}``: a raw reply (malformed on purpose)
- ``{"status": 429, "retry_after": 1}`` / ``{"status": 500}`` / ``{"status": 401}``
  (``"echo_auth": true`` quotes the Authorization header back in the error message)
- ``{"hang": true}``: never answers (until the client gives up)
- any step may add ``"delay": seconds``

Random faults for benchmarks come from ``fault_rates`` with a fixed seed.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Rule:
    match: str
    steps: list[dict[str, Any]]
    calls: int = 0


@dataclass
class JudgeServer:
    latency_s: float = 0.0
    default_step: dict[str, Any] = field(
        default_factory=lambda: {"verdict": "fully", "reason": "Every turn addresses the user.", "key_issues": []}
    )
    fault_rates: dict[str, float] = field(default_factory=dict)
    fault_seed: int = 7
    keep_bodies: bool = True

    def __post_init__(self) -> None:
        self.rules: list[Rule] = []
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.bodies: list[dict[str, Any]] = []
        self.arrivals: list[tuple[float, int]] = []  # (time, calls in flight including this one)
        self._random = random.Random(self.fault_seed)
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # -- scripting -------------------------------------------------------------
    def script(self, match: str, *steps: dict[str, Any]) -> None:
        self.rules.append(Rule(match=match, steps=list(steps)))

    def calls_for(self, match: str) -> int:
        return sum(rule.calls for rule in self.rules if rule.match == match)

    def reset(self) -> None:
        with self._lock:
            self.rules.clear()
            self.requests = 0
            self.max_in_flight = 0
            self.bodies.clear()
            self.arrivals.clear()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> JudgeServer:
        ready = threading.Event()

        def serve() -> None:
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            app = web.Application(client_max_size=64 * 1024 * 1024)
            app.router.add_post("/v1/chat/completions", self._handle)
            app.router.add_post("/chat/completions", self._handle)
            self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1, handler_cancellation=True)
            self._loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=4096)
            self._loop.run_until_complete(site.start())
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=serve, daemon=True, name="judge-server")
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is None:
            return

        async def shutdown() -> None:
            hung = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in hung:
                task.cancel()
            await asyncio.gather(*hung, return_exceptions=True)
            await self._runner.cleanup()  # type: ignore[union-attr]

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(5)
        except Exception:
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread:
            self._thread.join(5)

    # -- behaviour -------------------------------------------------------------
    def _next_step(self, prompt: str) -> dict[str, Any]:
        with self._lock:
            for rule in self.rules:
                if rule.match in prompt:
                    step = rule.steps[min(rule.calls, len(rule.steps) - 1)]
                    rule.calls += 1
                    return step
            if self.fault_rates:
                roll = self._random.random()
                for kind, rate in self.fault_rates.items():
                    if roll < rate:
                        return FAULTS[kind]
                    roll -= rate
            return self.default_step

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        prompt = "\n".join(_text(message.get("content")) for message in body.get("messages") or [])
        with self._lock:
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.arrivals.append((time.monotonic(), self.in_flight))
            if self.keep_bodies:
                self.bodies.append(body)
        try:
            step = self._next_step(prompt)
            delay = step.get("delay", self.latency_s)
            if delay:
                await asyncio.sleep(delay)
            if step.get("hang"):
                await asyncio.sleep(3600)
            status = step.get("status", 200)
            if status != 200:
                headers = {}
                if "retry_after" in step:
                    headers["Retry-After"] = str(step["retry_after"])
                message = f"scripted {status}"
                if step.get("echo_auth"):  # a provider that quotes the credentials back
                    message += f" for {request.headers.get('Authorization', '')}"
                error = {"error": {"message": message, "type": "scripted", "code": status}}
                return web.json_response(error, status=status, headers=headers)
            return web.json_response(_completion(body, step, prompt))
        finally:
            with self._lock:
                self.in_flight -= 1


FAULTS: dict[str, dict[str, Any]] = {
    "rate_limit": {"status": 429, "retry_after": 1},
    "server_error": {"status": 500},
    "malformed": {"content": "I think the conversation went fine overall."},
    "hang": {"hang": True},
}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _completion(body: dict[str, Any], step: dict[str, Any], prompt: str) -> dict[str, Any]:
    count = int(body.get("n") or 1)
    if "content" in step:
        contents = [step["content"]] * count
    else:
        verdicts = step.get("verdicts") or [step["verdict"]]  # "verdicts": one per choice, cycling
        contents = [
            json.dumps(
                {
                    "reason": step.get("reason", "scripted"),
                    "key_issues": step.get("key_issues", []),
                    "verdict": verdicts[i % len(verdicts)],
                }
            )
            for i in range(count)
        ]
    choices = [
        {"index": i, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        for i, content in enumerate(contents)
    ]
    prompt_tokens = sum(len(_text(m.get("content"))) for m in body.get("messages", [])) // 4
    completion_tokens = sum(max(1, len(content) // 4) for content in contents)
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "scripted"),
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def main() -> None:
    """Serve from a process of its own (benchmarks): prints the port, runs until killed."""
    import argparse

    parser = argparse.ArgumentParser(description="A scripted OpenAI-compatible judge on 127.0.0.1.")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--faults", default="", help="e.g. rate_limit=0.1,server_error=0.05,malformed=0.05,hang=0.003")
    parser.add_argument("--seed", type=int, default=7)
    options = parser.parse_args()
    rates = {name: float(rate) for name, rate in (item.split("=") for item in options.faults.split(",") if item)}
    server = JudgeServer(
        latency_s=options.latency, fault_rates=rates, fault_seed=options.seed, keep_bodies=False
    ).start()
    print(server.port, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
