"""A scripted judge: a real HTTP server on 127.0.0.1 speaking OpenAI chat completions.

Tests and benchmarks reach it through LiteLLM's real code path (``--api-base``).
Behaviour is scripted by rules that match a marker string anywhere in the request's
messages; each matching request takes the rule's next step (the last step repeats).
A step is one of:

- ``{"verdict": "partial", "reason": "...", "key_issues": [...]}``: a well-formed verdict
  (``"verdicts": [...]`` instead gives each of ``n`` choices its own, cycling)
- ``{"content": "any text"}``: a raw reply (malformed on purpose)
- ``{"tool_calls": [{"name": "lookup", "arguments": "{...}"}]}``: a reply that calls tools
  (no text, ``finish_reason: "tool_calls"``), as a chatbot under test does
- ``{"status": 429, "retry_after": 1}`` / ``{"status": 500}`` / ``{"status": 401}``
  (``"echo_auth": true`` quotes the Authorization header back in the error message)
- ``{"raw_body": "<html>..."}``: answers that text, not JSON (with ``"status"``, 200 by default)
- ``{"hang": true}``: never answers (until the client gives up)
- ``{"copy_example": 0}``: replies with the request's own first few-shot reply (the rubric's
  example, as a small model sometimes does)
- ``{"runaway": true}``: a verdict whose key issues never end, as a small model's do: cut at
  the request's ``max_tokens`` (``finish_reason: "length"``), else at the context window
- any step may add ``"delay": seconds``, and ``"look": {step}``: the step a verdict-first look
  (a request whose schema holds no reason, ``--score combined``) takes instead
- ``{"answers": {"1": "yes", ...}, "logprobs": {"1": {"yes": -0.1, "no": -2.4}}}``: a checklist
  reply (its keys the questions' numbers; ``checklist_step`` writes one from the questions' ids),
  each answer's token with the alternatives given; a step's ``"checklist": {step}`` is the
  step a checklist request (a schema of "yes"/"no" answers, ``--score checklist``) takes, and
  without one such a request is answered "no" to every question, with certainty; a step's
  ``"turns": {step}`` likewise answers each turn's look (``--turn-look``, a schema of one
  "follows_on" answer), or with ``"turns": {"by_input": {message: {step}}}`` the look at the
  turn of each user message named (a turn not named is answered "yes", the reply follows on)
- a verdict step may add ``"logprobs": {"fully": -0.2, "mostly": -1.9, ...}``, the alternatives at
  the token where the verdict begins (default: the verdict alone, logprob 0), ``"split": {"minor":
  ["m", "inor"]}`` to spell a verdict in several tokens, and ``"next_logprobs"`` for the
  alternatives at its second token. A request with ``logprobs`` gets every reply's tokens in
  OpenAI's ``logprobs.content`` shape (words, spaces and punctuation as tokens); ``"partial_utf8":
  true`` spells each character outside ASCII in a token per UTF-8 byte, each written ``"�"`` as
  vLLM writes a token that ends inside a character (standardcompletions/rfcs issue 2), so the
  tokens no longer spell the reply

Random faults for benchmarks come from ``fault_rates`` with a fixed seed.

``behave_as(profile)`` makes it misbehave as a real OpenAI-compatible server does
(see ``PROFILES``): refusing OpenAI's ``json_schema`` response format with llama-cpp-python's
HTTP 500, ignoring ``n``, a context window with each server's own "too long" error, the
endpoints that tell the window (vLLM's ``/v1/models``, llama.cpp's ``/props``, Ollama's
``/api/show``), Ollama's own ``/api/chat``, a cold first call, and one slot that keeps working
on a request its client gave up on. Token counts are characters / 4, as in ``usage``.

The hosted providers' own protocols (OpenAI's API itself with ``behave_as("openai-api")``, Azure
deployments in ``deployments``, Anthropic Messages, Gemini, Bedrock Converse, Groq's refusals with
``behave_as("groq")``) are answered from the same script by ``tests/provider_stand_ins.py``,
mounted on the same server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

from aiohttp import web

from flowrate.rubric.checklist import TURN_KEY, checklist_keys
from flowrate.rubric.model import Rubric, load_rubric
from tests import provider_stand_ins


def checklist_step(
    answers: dict[str, str], logprobs: dict[str, dict[str, float]] | None = None, rubric: Rubric | None = None
) -> dict[str, Any]:
    """A checklist reply's step written by the questions' ids of `rubric` (the flow rubric by
    default): the judge answers under each question's number, as the request's schema asks."""
    numbers = dict(
        zip((item.id for item in (rubric or load_rubric()).checklist), checklist_keys(rubric or load_rubric()))
    )
    step: dict[str, Any] = {"answers": {numbers[key]: answer for key, answer in answers.items()}}
    if logprobs:
        step["logprobs"] = {numbers[key]: given for key, given in logprobs.items()}
    return step


@dataclass
class Rule:
    match: str
    steps: list[dict[str, Any]]
    calls: int = 0


@dataclass
class Profile:
    """How a real server behaves, as far as a judge client can tell."""

    name: str = "openai"
    response_formats: tuple[str, ...] = ("json_schema", "json_object")  # types it takes
    takes_schema_in_json_object: bool = False  # llama-cpp-python: {"type": "json_object", "schema": ...}
    honours_n: bool = True
    refuses_n: bool = False  # llama-server: n != 1 is a 500 "Only one completion choice is allowed"
    context_error: str = "openai"  # the wording of its "prompt too long" 400
    models_max_len: bool = False  # vLLM: /v1/models data[0].max_model_len
    props: bool = False  # llama.cpp's llama-server: /props
    ollama: bool = False  # /api/chat and /api/show
    keeps_abandoned_work: bool = False  # a request whose client left still runs to its end
    tokenize: str | None = None  # its /tokenize: "vllm" ({"prompt"} -> count) or "llama-server" ({"content"} -> tokens)
    #: "yes": gives `logprobs`; "refuses": llama-cpp-python's server started with --logits_all false
    #: (a 500 saying so; 0.3.36's default is true); "ignores": answers without them; "together":
    #: Together's own shape (provider_stand_ins.together_logprobs)
    logprobs: str = "yes"


PROFILES = {
    "openai": Profile(),
    # llama-cpp-python 0.3's server: its request model allows response_format types "text" and
    # "json_object" only, and any exception in a route becomes a 500 carrying pydantic's message;
    # it answers one request at a time, returns one choice whatever `n` is, has no /props, and a
    # prompt past n_ctx gives the OpenAI-style 400 its error formatter writes.
    "llama-cpp-python": Profile(
        name="llama-cpp-python",
        response_formats=("text", "json_object"),
        takes_schema_in_json_object=True,
        honours_n=False,
        context_error="llama-cpp-python",
        keeps_abandoned_work=True,
    ),
    "vllm": Profile(name="vllm", models_max_len=True, context_error="vllm", tokenize="vllm"),
    # llama.cpp's llama-server: takes json_schema, tells n_ctx and its slots at /props, refuses n != 1
    "llama-server": Profile(
        name="llama-server", props=True, context_error="llama-server", refuses_n=True, tokenize="llama-server"
    ),
    "ollama": Profile(name="ollama", ollama=True, context_error="none", logprobs="ignores"),
    # api.openai.com itself: its reasoning models' refusals and its automatic prefix caching
    # (tests/provider_stand_ins.py, where each rule names its page)
    "openai-api": Profile(name="openai-api"),
    # Groq's OpenAI-compatible API: no logprobs, n only 1 (provider_stand_ins.groq_refusal)
    "groq": Profile(name="groq"),
    # DeepSeek's API: its own cache fields in `usage` (provider_stand_ins.deepseek_usage)
    "deepseek": Profile(name="deepseek"),
    # Mistral's API: its closed request model's 422s, its cache (provider_stand_ins.mistral_refusal)
    "mistral": Profile(name="mistral"),
    # Together's API: `logprobs` an integer, given in its own shape (provider_stand_ins.together_refusal)
    "together": Profile(name="together", logprobs="together"),
}


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
        self.statuses: list[int] = []  # the status of each chat request answered, in order
        self.deployments: dict[str, str] = {}  # an Azure deployment's name -> the model it serves
        self.prompt_cache: set[tuple[str, str]] = set()  # (provider, prefix digest) a provider has cached
        self.behave_as("openai")
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

    def behave_as(
        self,
        profile: str,
        *,
        n_ctx: int | None = None,
        total_slots: int = 1,
        cold_start_s: float = 0.0,
        slots: int | None = None,
        logits_all: bool = True,
    ) -> JudgeServer:
        """Answer as the named server in `PROFILES` does, with a context window of `n_ctx`
        tokens (None: no limit), `total_slots` reported by /props, a first call that takes
        `cold_start_s` longer, and at most `slots` requests worked on at once (None: any number;
        the others wait in the server's queue, their clients' clocks running); `logits_all` False: as
        llama-cpp-python's server started with `--logits_all false`, refusing log-probabilities."""
        self.profile = PROFILES[profile]
        if not logits_all and profile == "llama-cpp-python":
            self.profile = replace(self.profile, logprobs="refuses")
        self.n_ctx = n_ctx
        self.total_slots = total_slots
        self.cold_start_s = cold_start_s
        self.slots = slots
        self._slot_gate = None
        self.working = 0  # requests the server is working on, abandoned ones included
        self.max_working = 0
        self.probes: list[str] = []  # the paths of GET /v1/models, /props and POST /api/show
        self._served = 0
        return self

    def reset(self) -> None:
        with self._lock:
            self.rules.clear()
            self.requests = 0
            self.max_in_flight = 0
            self.bodies.clear()
            self.arrivals.clear()
            self.statuses.clear()
            self.deployments.clear()
            self.prompt_cache.clear()
        self.behave_as("openai")

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
            app.router.add_get("/v1/models", self._models)
            app.router.add_get("/props", self._props)
            app.router.add_post("/tokenize", self._tokenize)
            app.router.add_post("/api/show", self._show)
            app.router.add_post("/api/chat", self._ollama_chat)
            provider_stand_ins.mount(app, self)
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
        if self.profile.name == "openai-api":
            return await self.serve_openai(request, body, str(body.get("model")))
        return await self._serve(request, body, _completion)

    async def serve_openai(self, request: web.Request, body: dict[str, Any], model: str) -> web.StreamResponse:
        """A chat completion as OpenAI's API (or an Azure deployment of `model`) answers it: a
        reasoning model's refusals, and the usage with the cached prefix and the reasoning."""
        refused = provider_stand_ins.openai_refusal(body, model)
        if refused is not None:
            self.record(body)
            return refused

        def reply(body: dict[str, Any], step: dict[str, Any], prompt: str, n_ctx: int | None = None) -> dict[str, Any]:
            answer = _completion(body, step, prompt, n_ctx)
            if "usage" in answer:
                provider_stand_ins.openai_usage(self, body, answer, model)
            return answer

        return await self._serve(request, body, reply)

    async def serve_routed(
        self, request: web.Request, body: dict[str, Any], sent: dict[str, Any], reply
    ) -> web.StreamResponse:
        """A chat completion a router (OpenRouter) passes on as `sent`, keeping the client's `body`."""
        return await self._serve(request, sent, reply, kept=body)

    def record(self, body: dict[str, Any]) -> None:
        """Count a request the provider routes answer themselves, keeping its body."""
        with self._lock:
            self.requests += 1
            if self.keep_bodies:
                self.bodies.append(body)

    def reply_text(self, body: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """The scripted step an OpenAI-shaped `body` takes, and its first reply's text (for the
        provider routes, which wrap it in their own shape)."""
        prompt = "\n".join(_text(message.get("content")) for message in body.get("messages") or [])
        step = looked_at(body, self._next_step(prompt))
        if step.get("status", 200) != 200:
            return step, ""
        [(text, _)] = _contents({**body, "n": 1}, step, prompt, self.n_ctx)[:1]
        return step, text

    async def _serve(
        self, request: web.Request, body: dict[str, Any], reply, kept: dict[str, Any] | None = None
    ) -> web.StreamResponse:
        prompt = "\n".join(_text(message.get("content")) for message in body.get("messages") or [])
        with self._lock:
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.arrivals.append((time.monotonic(), self.in_flight))
            if self.keep_bodies:
                self.bodies.append(body if kept is None else kept)
        try:
            refused = self._refusal(body) or self._refuses_n(body) or self._refuses_logprobs(body)
            if refused is None and self.profile.name == "groq":
                refused = provider_stand_ins.groq_refusal(body)
            if refused is None and self.profile.name in ("mistral", "together"):
                refused = provider_stand_ins.bearer_refusal(request)
            if refused is None and self.profile.name == "mistral":
                refused = provider_stand_ins.mistral_refusal(body)
            if refused is None and self.profile.name == "together":
                refused = provider_stand_ins.together_refusal(body)
            if refused is not None:
                return refused
            work = self._work(request, body, prompt, reply)
            if self.profile.keeps_abandoned_work:  # the client's leaving does not stop the work
                return await asyncio.shield(asyncio.ensure_future(work))
            return await work
        finally:
            with self._lock:
                self.in_flight -= 1

    async def _work(self, request: web.Request, body: dict[str, Any], prompt: str, reply) -> web.StreamResponse:
        if self.slots is not None and self._slot_gate is None:
            self._slot_gate = asyncio.Semaphore(self.slots)
        gate = self._slot_gate or contextlib.nullcontext()
        async with gate:
            with self._lock:
                self.working += 1
                self.max_working = max(self.max_working, self.working)
                self._served += 1
                first = self._served == 1
            try:
                answer = await self._answer(request, body, prompt, reply, first)
                with self._lock:
                    self.statuses.append(answer.status)
                return answer
            finally:
                with self._lock:
                    self.working -= 1

    async def _answer(
        self, request: web.Request, body: dict[str, Any], prompt: str, reply, first: bool
    ) -> web.StreamResponse:
        too_long = self._context_error(body, prompt)
        if too_long is not None:
            return too_long
        step = looked_at(body, self._next_step(prompt))
        delay = step.get("delay", self.latency_s) + (self.cold_start_s if first else 0.0)
        if delay:
            await asyncio.sleep(delay)
        if step.get("hang"):
            await asyncio.sleep(3600)
        status = step.get("status", 200)
        if "raw_body" in step:  # an answer that is not JSON, as a broken proxy sends
            return web.Response(text=step["raw_body"], status=status, content_type="text/html")
        if status != 200:
            headers = {}
            if "retry_after" in step:
                headers["Retry-After"] = str(step["retry_after"])
            message = step.get("message", f"scripted {status}")
            if step.get("echo_auth"):  # a provider that quotes the credentials back
                message += f" for {request.headers.get('Authorization', '')}"
            error = {"error": {"message": message, "type": "scripted", "code": status}}
            return web.json_response(error, status=status, headers=headers)
        if not self.profile.honours_n:
            body = {**body, "n": 1}
        answer = reply(body, step, prompt, self.n_ctx)
        if self.profile.name == "groq":  # console.groq.com/docs/api-reference#chat-create: the answer's extras
            answer.update(service_tier="on_demand", x_groq={"id": "req_scripted"})
        if self.profile.name == "deepseek" and "usage" in answer:
            provider_stand_ins.deepseek_usage(self, body, answer)
        if self.profile.name == "mistral" and "usage" in answer:
            provider_stand_ins.mistral_usage(self, body, answer)
        if self.profile.logprobs == "together":
            provider_stand_ins.together_logprobs(answer, body, step)
        elif self.profile.logprobs == "yes":
            with_logprobs(answer, body, step)
        return web.json_response(answer)

    # -- what real servers refuse ------------------------------------------------
    def _refusal(self, body: dict[str, Any]) -> web.Response | None:
        """llama-cpp-python's answer to a response_format type it does not know: pydantic's
        validation error, turned into a 500 by its route error handler."""
        wanted = (body.get("response_format") or {}).get("type")
        if wanted is None or wanted in self.profile.response_formats:
            return None
        allowed = " or ".join(f"'{kind}'" for kind in self.profile.response_formats)
        problem = {
            "type": "literal_error",
            "loc": ("body", "response_format", "type"),
            "msg": f"Input should be {allowed}",
            "input": wanted,
            "ctx": {"expected": allowed},
        }
        detail = f"1 validation error:\n  {problem}\n"  # as llama-cpp-python 0.3.36 words it
        error = {"message": detail, "type": "internal_server_error", "param": None, "code": None}
        return web.json_response({"error": error}, status=500)

    def _refuses_logprobs(self, body: dict[str, Any]) -> web.Response | None:
        """llama-cpp-python's server started with --logits_all false: its ValueError, as its 500."""
        if self.profile.logprobs != "refuses" or not body.get("logprobs"):
            return None
        message = "logprobs is not supported for models created with logits_all=False"
        error = {"message": message, "type": "internal_server_error", "param": None, "code": None}
        return web.json_response({"error": error}, status=500)

    def _refuses_n(self, body: dict[str, Any]) -> web.Response | None:
        if not self.profile.refuses_n or int(body.get("n") or 1) == 1:
            return None
        error = {"code": 500, "message": "Only one completion choice is allowed", "type": "server_error"}
        return web.json_response({"error": error}, status=500)

    def _context_error(self, body: dict[str, Any], prompt: str) -> web.Response | None:
        if self.n_ctx is None:
            return None
        prompt_tokens = len(prompt) // 4
        asked = int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)
        style = self.profile.context_error
        # vLLM and OpenAI refuse a prompt whose reply could not fit; llama.cpp's servers only a
        # prompt that does not fit, and shorten the reply's limit to what is left
        needed = prompt_tokens + asked if style in ("vllm", "openai") else prompt_tokens + 1
        if needed <= self.n_ctx:
            return None
        if style == "llama-server":
            error = {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": prompt_tokens,
                "n_ctx": self.n_ctx,
            }
        elif style == "llama-cpp-python":
            error = {
                "message": f"This model's maximum context length is {self.n_ctx} tokens. However, you requested"
                f" {prompt_tokens + asked} tokens ({prompt_tokens} in the messages, {asked or None} in the"
                " completion). Please reduce the length of the messages or completion.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        else:  # vLLM and OpenAI
            error = {
                "message": f"This model's maximum context length is {self.n_ctx} tokens. However, you requested"
                f" {prompt_tokens + asked} tokens ({prompt_tokens} in the messages, {asked} in the completion)."
                " Please reduce the length of the messages or completion.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        return web.json_response({"error": error}, status=400)

    # -- what real servers tell about themselves ----------------------------------
    async def _models(self, request: web.Request) -> web.Response:
        self.probes.append("/v1/models")
        model = {"id": "scripted", "object": "model", "owned_by": self.profile.name}
        if self.profile.models_max_len:
            model.update(owned_by="vllm", root="scripted", max_model_len=self.n_ctx)
        return web.json_response({"object": "list", "data": [model]})

    async def _props(self, request: web.Request) -> web.Response:
        self.probes.append("/props")
        if not self.profile.props:
            return web.json_response({"detail": "Not Found"}, status=404)
        return web.json_response(
            {"default_generation_settings": {"n_ctx": self.n_ctx, "temperature": 0.8}, "total_slots": self.total_slots}
        )

    async def _tokenize(self, request: web.Request) -> web.Response:
        """Its tokenizer: a token per 4 characters, as its chat route counts a prompt."""
        self.probes.append("/tokenize")
        body = await request.json()
        if self.profile.tokenize == "vllm":
            count = len(body["prompt"]) // 4
            return web.json_response({"count": count, "max_model_len": self.n_ctx, "tokens": list(range(count))})
        if self.profile.tokenize == "llama-server":
            return web.json_response({"tokens": list(range(len(body["content"]) // 4))})
        return web.json_response({"detail": "Not Found"}, status=404)

    async def _show(self, request: web.Request) -> web.Response:
        self.probes.append("/api/show")
        if not self.profile.ollama:
            return web.json_response({"detail": "Not Found"}, status=404)
        body = await request.json()
        return web.json_response(
            {
                "modelfile": "...",
                "parameters": f"num_ctx {self.n_ctx}\nstop <|im_end|>" if self.n_ctx else "stop <|im_end|>",
                "details": {"family": "llama"},
                "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
                "model": body.get("model") or body.get("name"),
            }
        )

    async def _ollama_chat(self, request: web.Request) -> web.StreamResponse:
        """Ollama's own chat endpoint, as LiteLLM's `ollama_chat` provider calls it: the schema
        comes in `format`, the reply bound in `options.num_predict`."""
        body = await request.json()
        options = body.get("options") or {}
        openai_like = {**body, "max_tokens": options.get("num_predict")}
        return await self._serve(request, openai_like, _ollama_reply)


FAULTS: dict[str, dict[str, Any]] = {
    "rate_limit": {"status": 429, "retry_after": 1},
    "server_error": {"status": 500},
    "malformed": {"content": "I think the conversation went fine overall."},
    "hang": {"hang": True},
}


_text = provider_stand_ins._text  # a message's text, read one way by every stand-in


def _contents(body: dict[str, Any], step: dict[str, Any], prompt: str, n_ctx: int | None) -> list[tuple[str, str]]:
    """Each choice's text and finish reason: cut at `max_tokens` (or what is left of the window)."""
    count = int(body.get("n") or 1)
    if "content" in step:
        texts = [step["content"]] * count
    elif "answers" in step:  # a checklist's
        texts = [json.dumps(step["answers"])] * count
    elif "copy_example" in step:  # the request's own few-shot reply, as if it judged this conversation
        examples = [m for m in body.get("messages") or [] if m.get("role") == "assistant"]
        texts = [_text(examples[step["copy_example"]]["content"])] * count
    elif step.get("runaway"):
        issues = [f"turn {n}: the assistant could have been more specific" for n in range(1, 5000)]
        texts = [json.dumps({"reason": "The flow is fine.", "key_issues": issues, "verdict": "mostly"})] * count
    else:
        verdicts = step.get("verdicts") or [step["verdict"]]  # "verdicts": one per choice, cycling
        texts = [
            json.dumps(
                {
                    "reason": step.get("reason", "scripted"),
                    "key_issues": step.get("key_issues", []),
                    "verdict": verdicts[i % len(verdicts)],
                }
            )
            for i in range(count)
        ]
    limit = body.get("max_tokens") or body.get("max_completion_tokens")
    if limit is None and n_ctx is not None:
        limit = max(n_ctx - len(prompt) // 4, 1)
    if limit is None:
        return [(text, "stop") for text in texts]
    return [(text[: int(limit) * 4], "length") if len(text) > int(limit) * 4 else (text, "stop") for text in texts]


_PIECES = re.compile(r'\s?"|\w+|\s+|[^\w\s]')
_VERDICT_AT = re.compile(r'"(?:verdict|rating)": "?')


def _tokens(text: str, step: dict[str, Any]) -> list[dict[str, Any]]:
    """`text` as tokens with log-probabilities, in OpenAI's `logprobs.content` shape: the step's
    `logprobs` are the alternatives where the verdict begins (its `split` spells it in several
    tokens, `next_logprobs` the alternatives at the second), every other token certain."""
    if "answers" in step:
        return _answer_tokens(step)
    found = _VERDICT_AT.search(text)
    start = found.end() if found else len(text)
    value = re.match(r'[^",}]*', text[start:]).group(0)
    pieces = _PIECES.findall(text[:start])
    split = (step.get("split") or {}).get(value, [value]) if value else []
    tokens = [{"token": piece, "logprob": 0.0, "top_logprobs": [{"token": piece, "logprob": 0.0}]} for piece in pieces]
    for index, piece in enumerate(split):
        given = step.get("logprobs" if index == 0 else "next_logprobs") or {piece: 0.0}
        top = [{"token": token, "logprob": logprob} for token, logprob in given.items()]
        tokens.append({"token": piece, "logprob": given.get(piece, -30.0), "top_logprobs": top})
    rest = _PIECES.findall(text[start + len(value) :])
    tokens += [{"token": piece, "logprob": 0.0, "top_logprobs": [{"token": piece, "logprob": 0.0}]} for piece in rest]
    return _partial_utf8(tokens) if step.get("partial_utf8") else tokens


def _partial_utf8(tokens: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`tokens` with every character outside ASCII spelled a token per UTF-8 byte, each written
    "\ufffd" with the bytes of "\ufffd" (239, 191, 189) whatever the byte, as vLLM gives them."""
    out: list[dict[str, Any]] = []
    for token in tokens:
        if token["token"].isascii():
            out.append(token)
            continue
        for part in re.findall(r"[\x00-\x7f]+|[^\x00-\x7f]", token["token"]):
            if part.isascii():
                out.append({"token": part, "logprob": 0.0, "top_logprobs": [{"token": part, "logprob": 0.0}]})
                continue
            for _ in part.encode():
                piece = {"token": "\ufffd", "logprob": 0.0, "bytes": [239, 191, 189]}
                out.append({**piece, "top_logprobs": [dict(piece)]})
    return out


def looked_at(body: dict[str, Any], step: dict[str, Any]) -> dict[str, Any]:
    """The step a request takes: a step's ``"look"`` where the request is a verdict-first look
    (its schema holds no reason), so a conversation's reasoned call and its look, sent at once,
    each get their own reply whatever their order."""
    look = step.get("look")
    form = body.get("response_format")
    questions = _checklist_questions(form)
    if questions is not None and "status" not in step:
        if questions == [TURN_KEY]:
            return _turn_step(body, step.get("turns"))
        return step.get("checklist") or {"answers": dict.fromkeys(questions, "no")}
    return look if look is not None and form and "reason" not in json.dumps(form) else step


def _turn_step(body: dict[str, Any], turns: dict[str, Any] | None) -> dict[str, Any]:
    """The step one turn's look takes: the step `turns["by_input"]` gives the user's message of the
    turn the look shows (the "User: " line before "Chatbot reply: "), else `turns` itself for every
    turn, else "yes" (the reply follows on), with certainty."""
    follows = {"answers": {TURN_KEY: "yes"}}
    if not turns:
        return follows
    if "by_input" not in turns:
        return turns
    shown = re.search(r"User: ([^\n]*)\nChatbot reply: ", _text(body["messages"][-1].get("content")))
    return turns["by_input"].get(shown.group(1), follows) if shown else follows


def _checklist_questions(form: Any) -> list[str] | None:
    """The question ids of a checklist request's schema (`properties` each answered "yes" or "no"), or None."""
    if isinstance(form, dict):
        properties = form.get("properties")
        if (
            isinstance(properties, dict)
            and properties
            and all(isinstance(value, dict) and value.get("enum") == ["yes", "no"] for value in properties.values())
        ):
            return list(properties)
        for value in form.values():
            found = _checklist_questions(value)
            if found is not None:
                return found
    return None


def _answer_tokens(step: dict[str, Any]) -> list[dict[str, Any]]:
    """A checklist reply's tokens (`json.dumps(step["answers"])`): each answer's value one token
    with the step's alternatives for its question, every other token certain."""
    tokens: list[dict[str, Any]] = []

    def certain(text: str) -> None:
        tokens.extend(
            {"token": piece, "logprob": 0.0, "top_logprobs": [{"token": piece, "logprob": 0.0}]}
            for piece in _PIECES.findall(text)
        )

    certain("{")
    for number, (question, answer) in enumerate(step["answers"].items()):
        certain(("" if number == 0 else ", ") + json.dumps(question) + ': "')
        given = (step.get("logprobs") or {}).get(question) or {answer: 0.0}
        top = [{"token": token, "logprob": logprob} for token, logprob in given.items()]
        tokens.append({"token": answer, "logprob": given.get(answer, -30.0), "top_logprobs": top})
        certain('"')
    certain("}")
    return tokens


def with_logprobs(answer: dict[str, Any], body: dict[str, Any], step: dict[str, Any]) -> dict[str, Any]:
    """`answer` with each choice's tokens and their log-probabilities (`_tokens`), as OpenAI gives
    them online and in a batch's output, when the request `body` asked for them."""
    if body.get("logprobs") and "choices" in answer:
        for choice in answer["choices"]:
            choice["logprobs"] = {"content": _tokens(choice["message"].get("content") or "", step), "refusal": None}
    return answer


def _completion(body: dict[str, Any], step: dict[str, Any], prompt: str, n_ctx: int | None = None) -> dict[str, Any]:
    if "tool_calls" in step:
        calls = [
            {"id": f"call_{n}", "type": "function", "function": {"name": call["name"], "arguments": call["arguments"]}}
            for n, call in enumerate(step["tool_calls"])
        ]
        contents = [("", "tool_calls")]
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": calls}
        choices = [{"index": 0, "message": message, "finish_reason": "tool_calls"}]
    else:
        contents = _contents(body, step, prompt, n_ctx)
        choices = [
            {"index": i, "message": {"role": "assistant", "content": content}, "finish_reason": finish}
            for i, (content, finish) in enumerate(contents)
        ]
    prompt_tokens = sum(len(_text(m.get("content"))) for m in body.get("messages", [])) // 4
    completion_tokens = sum(max(1, len(content) // 4) for content, _ in contents)
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


def _ollama_reply(body: dict[str, Any], step: dict[str, Any], prompt: str, n_ctx: int | None = None) -> dict[str, Any]:
    """One reply in Ollama's /api/chat shape (Ollama has no `n`)."""
    [(content, finish)] = _contents({**body, "n": 1}, step, prompt, n_ctx)
    return {
        "model": body.get("model", "scripted"),
        "created_at": "2025-01-01T00:00:00Z",
        "message": {"role": "assistant", "content": content},
        "done": True,
        "done_reason": finish,
        "prompt_eval_count": len(prompt) // 4,
        "eval_count": max(1, len(content) // 4),
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
