"""The scripted judge speaking each provider's own protocol, with the rules and refusals of its
published API reference (the page is named beside each rule), mounted on `JudgeServer`'s app
(`mount`) so that a test reaches it as LiteLLM or flowrate's own client reaches the provider:

- OpenAI Chat Completions as api.openai.com answers (`JudgeServer.behave_as("openai-api")`, at
  `/v1/chat/completions`): the reasoning models' refusals and automatic prefix caching;
- Azure OpenAI's deployment URLs (`/openai/deployments/NAME/chat/completions?api-version=...`,
  the `api-key` header), each deployment serving the model `JudgeServer.deployments` names;
- Anthropic Messages (`/v1/messages`), Gemini `generateContent` (`/v1beta/models/M:generateContent`)
  and Bedrock Converse (`/model/ID/converse`);
- the OpenAI-compatible hosts where they differ: Groq's and DeepSeek's (`behave_as("groq")`,
  `"deepseek"`), Mistral's (`behave_as("mistral")`: its closed request model, its 64-token cache
  blocks), Together's (`behave_as("together")`: `logprobs` an integer, its own logprobs shape) at
  `/v1/chat/completions`, and OpenRouter's (`/api/v1/chat/completions`, whatever the profile: its
  error shape, its `provider` routing object, parameters a routed model does not take ignored,
  Claude cached only up to a `cache_control` mark).

Replies come from the same scripted steps as the OpenAI route (`JudgeServer.script`). Tokens are
characters / 4, as on every route. Every provider that caches answers a prefix it has seen before
(by its own rule of what a prefix is) as read from the cache.

Reasoning is charged by effort, as a documented, plausible stand-in (no provider publishes a
rate): OpenAI's `reasoning_effort` costs `REASONING_TOKENS[effort]` reasoning tokens (billed as
output, counted in `completion_tokens`), "medium" when none is sent (OpenAI's default), each step
up four times the one below; Claude's `thinking` and Gemini's `thinkingBudget` use half their
budget (Gemini's dynamic budget, -1, as 2,048).
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import partial
from typing import TYPE_CHECKING, Any

from aiohttp import web

if TYPE_CHECKING:
    from tests.judge_server import JudgeServer

# platform.openai.com/docs/guides/reasoning: o-series and gpt-5 models
OPENAI_REASONING = re.compile(r"^(o\d|gpt-5)")
REASONING_TOKENS = {"minimal": 0, "low": 192, "medium": 768, "high": 3072}
DEFAULT_EFFORT = "medium"  # OpenAI's default reasoning_effort
# platform.openai.com/docs/guides/prompt-caching: prefixes of 1,024 tokens or more, hits in 128-token steps
OPENAI_CACHE_MIN, OPENAI_CACHE_STEP = 1024, 128
# docs.anthropic.com/en/docs/about-claude/models/overview: the most output tokens of each model
ANTHROPIC_OUTPUT_LIMITS = {
    "claude-opus-4-1": (32_000, "claude-opus-4-1-20250805"),
    "claude-opus-4-1-20250805": (32_000, "claude-opus-4-1-20250805"),
    "claude-sonnet-4-5": (64_000, "claude-sonnet-4-5-20250929"),
    "claude-sonnet-4-5-20250929": (64_000, "claude-sonnet-4-5-20250929"),
}
# docs.anthropic.com/en/docs/build-with-claude/prompt-caching: the shortest cacheable prompt (Opus, Sonnet)
ANTHROPIC_CACHE_MIN = 1024
# ai.google.dev/gemini-api/docs/caching: implicit caching's shortest prefix on Gemini 2.5 Flash
GEMINI_CACHE_MIN = 2048
GEMINI_DYNAMIC_BUDGET = 2048


def tokens(text: str) -> int:
    return len(text) // 4


def mount(app: web.Application, server: JudgeServer) -> None:
    """Add every provider's route to `app`, answering from `server`'s script."""
    app.router.add_post("/openai/deployments/{deployment}/chat/completions", partial(_azure, server=server))
    app.router.add_post("/v1/messages", partial(_anthropic, server=server))
    app.router.add_post("/v1beta/models/{call}", partial(_gemini, server=server))
    app.router.add_post("/model/{model_id}/converse", partial(_bedrock, server=server))
    app.router.add_post("/api/v1/chat/completions", partial(_openrouter, server=server))


def _seen(server: JudgeServer, kind: str, prefix: str) -> bool:
    """Whether `prefix` was sent before to `kind`'s cache (and remember it now)."""
    key = (kind, hashlib.sha256(prefix.encode()).hexdigest())
    with server._lock:
        seen = key in server.prompt_cache
        server.prompt_cache.add(key)
    return seen


# -- OpenAI Chat Completions, as api.openai.com answers -----------------------------------------
def openai_refusal(body: dict[str, Any], model: str) -> web.Response | None:
    """OpenAI's 400 for what a reasoning model refuses (platform.openai.com/docs/guides/reasoning,
    "Unsupported parameter" and "Unsupported value" errors with the field in `param`)."""
    if not OPENAI_REASONING.match(model):
        return None
    if "max_tokens" in body:
        message = (
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
        )
        return _openai_error(message, "max_tokens", "unsupported_parameter")
    if body.get("temperature") not in (None, 1, 1.0):
        message = (
            f"Unsupported value: 'temperature' does not support {body['temperature']} with this model. Only the"
            " default (1) value is supported."
        )
        return _openai_error(message, "temperature", "unsupported_value")
    if body.get("logprobs") or "top_logprobs" in body:
        param = "logprobs" if body.get("logprobs") else "top_logprobs"
        return _openai_error(
            f"Unsupported parameter: '{param}' is not supported with this model.", param, "unsupported_parameter"
        )
    effort = body.get("reasoning_effort")
    if effort == "minimal" and model.startswith("o"):  # the o-series have low, medium, high
        message = "Unsupported value: 'reasoning_effort' does not support 'minimal' with this model. Supported values are: 'low', 'medium', and 'high'."
        return _openai_error(message, "reasoning_effort", "unsupported_value")
    return None


def _openai_error(message: str, param: str, code: str) -> web.Response:
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
    return web.json_response({"error": error}, status=400)


def openai_usage(server: JudgeServer, body: dict[str, Any], answer: dict[str, Any], model: str) -> None:
    """`answer`'s usage as OpenAI reports it: the prefix it read from its cache
    (`prompt_tokens_details.cached_tokens`: every message but the last, once sent before, if 1,024
    tokens or more, in 128-token steps) and the reasoning (`completion_tokens_details.reasoning_tokens`)."""
    messages = body.get("messages") or []
    prefix = json.dumps(messages[:-1], sort_keys=True)
    prefix_tokens = sum(tokens(_text(m.get("content"))) for m in messages[:-1])
    cached = 0
    if prefix_tokens >= OPENAI_CACHE_MIN and _seen(server, "openai", prefix):
        cached = prefix_tokens // OPENAI_CACHE_STEP * OPENAI_CACHE_STEP
    reasoning = REASONING_TOKENS[body.get("reasoning_effort") or DEFAULT_EFFORT] if OPENAI_REASONING.match(model) else 0
    usage = answer["usage"]
    usage["completion_tokens"] += reasoning
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    usage["prompt_tokens_details"] = {"cached_tokens": cached, "audio_tokens": 0}
    usage["completion_tokens_details"] = {"reasoning_tokens": reasoning, "audio_tokens": 0}


# -- the OpenAI-compatible hosts, where they differ ----------------------------------------------
def groq_refusal(body: dict[str, Any]) -> web.Response | None:
    """console.groq.com/docs/openai: `logprobs`, `top_logprobs` and `logit_bias` are not supported,
    and `n` must be 1 ("Other values will result in a 400 response"); the words are the API's
    (groq/groq-python issue 25: "`logprobs` is not supported with this model")."""
    if body.get("logprobs") or "top_logprobs" in body:
        return _openai_error("`logprobs` is not supported with this model", "logprobs", "invalid_request_error")
    if int(body.get("n") or 1) > 1:
        return _openai_error("'n' : number must be at most 1", "n", "invalid_request_error")
    return None


def deepseek_usage(server: JudgeServer, body: dict[str, Any], answer: dict[str, Any]) -> None:
    """api-docs.deepseek.com/guides/kv_cache: caching is on for every request; a prefix sent before
    is read from the cache, reported in `usage.prompt_cache_hit_tokens` and the rest in
    `prompt_cache_miss_tokens` (DeepSeek's own fields, not OpenAI's `prompt_tokens_details`)."""
    messages = body.get("messages") or []
    prefix = json.dumps(messages[:-1], sort_keys=True)
    prefix_tokens = sum(tokens(_text(m.get("content"))) for m in messages[:-1])
    hit = prefix_tokens if messages[:-1] and _seen(server, "deepseek", prefix) else 0
    usage = answer["usage"]
    usage["prompt_cache_hit_tokens"] = hit
    usage["prompt_cache_miss_tokens"] = usage["prompt_tokens"] - hit


def bearer_refusal(request: web.Request) -> web.Response | None:
    """Mistral's and Together's APIs take the key as `Authorization: Bearer` (docs.mistral.ai/api,
    the together-python client's headers); without it a 401 (the wording is the stand-in's)."""
    if request.headers.get("Authorization", "").startswith("Bearer ") and len(request.headers["Authorization"]) > 7:
        return None
    return web.json_response({"message": "Unauthorized"}, status=401)


# Mistral's chat completions request, as its published client models it (mistralai/client-python,
# src/mistralai/models/chatcompletionrequest.py, generated from Mistral's OpenAPI document): no
# `logprobs`, `top_logprobs`, `seed` (it is `random_seed`) or `max_completion_tokens`;
# `prompt_cache_key` from docs.mistral.ai/studio-api/conversations/advanced/prompt-caching, and
# `reasoning_effort` for its reasoning models (LiteLLM's MistralConfig sends it).
MISTRAL_FIELDS = frozenset(
    {
        "model", "messages", "temperature", "top_p", "max_tokens", "stream", "stop", "random_seed",
        "response_format", "tools", "tool_choice", "presence_penalty", "frequency_penalty", "n",
        "prediction", "parallel_tool_calls", "safe_prompt", "prompt_mode", "prompt_cache_key",
        "reasoning_effort",
    }
)  # fmt: skip
# mistralai/client-python responseformats.py: "text", "json_object", "json_schema" (with
# `json_schema`: name and schema required, jsonschema.py)
MISTRAL_RESPONSE_FORMATS = ("text", "json_object", "json_schema")
# docs.mistral.ai/studio-api/conversations/advanced/prompt-caching: cache blocks of 64 tokens,
# reported in usage.prompt_tokens_details.cached_tokens
MISTRAL_CACHE_BLOCK = 64


def mistral_refusal(body: dict[str, Any]) -> web.Response | None:
    """Mistral's 422 for a field its request model does not have or a response format it does not
    know: pydantic's errors under `message.detail`, as its API answers them (the body quoted in
    mistralai/platform-docs-public issue 7, crewAIInc/crewAI issue 60 for `n` before Mistral took it,
    editor-code-assistant/eca issue 231 for `max_completion_tokens`)."""
    detail = [
        {"type": "extra_forbidden", "loc": ["body", key], "msg": "Extra inputs are not permitted", "input": value}
        for key, value in body.items()
        if key not in MISTRAL_FIELDS
    ]
    form = body.get("response_format")
    if isinstance(form, dict) and form.get("type") not in MISTRAL_RESPONSE_FORMATS:
        expected = "'text', 'json_object' or 'json_schema'"
        detail.append(
            {
                "type": "literal_error",
                "loc": ["body", "response_format", "type"],
                "msg": f"Input should be {expected}",
                "input": form.get("type"),
            }
        )
    elif isinstance(form, dict) and form.get("type") == "json_schema":
        schema = form.get("json_schema") or {}
        for key in ("name", "schema"):
            if key not in schema:
                loc = ["body", "response_format", "json_schema", key]
                detail.append({"type": "missing", "loc": loc, "msg": "Field required", "input": schema})
    if not detail:
        return None
    error = {"object": "error", "message": {"detail": detail}, "type": "invalid_request_error", "param": None}
    return web.json_response({**error, "code": None}, status=422)


def mistral_usage(server: JudgeServer, body: dict[str, Any], answer: dict[str, Any]) -> None:
    """`answer`'s usage as Mistral reports it: the prefix (every message but the last) read from its
    cache once sent before, in whole 64-token blocks, in `prompt_tokens_details.cached_tokens`."""
    messages = body.get("messages") or []
    prefix = json.dumps(messages[:-1], sort_keys=True)
    prefix_tokens = sum(tokens(_text(m.get("content"))) for m in messages[:-1])
    cached = 0
    if messages[:-1] and _seen(server, "mistral", prefix):
        cached = prefix_tokens // MISTRAL_CACHE_BLOCK * MISTRAL_CACHE_BLOCK
    answer["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}


# togethercomputer/openapi, openapi.yaml, ChatCompletionRequest: `logprobs` is "an integer between 0
# and 20 of the top k tokens to return log probabilities for" (no `top_logprobs`), `n` 1 to 128
TOGETHER_LOGPROBS_MAX, TOGETHER_N_MAX = 20, 128


def _together_error(message: str, param: str) -> web.Response:
    """Together's ErrorData (openapi.yaml): `error` with message, type, param and code."""
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": None}
    return web.json_response({"error": error}, status=400)


def together_refusal(body: dict[str, Any]) -> web.Response | None:
    """Together's 400 for a request outside its published schema (togethercomputer/openapi,
    openapi.yaml). Its validator words a refusal as python-jsonschema does, the field after a dash
    ("5 is greater than the maximum of 1 - 'logprobs'", quoted in stanford-crfm/helm PR 2325 and
    lmg-anon/mikupad issue 55); OpenAI's boolean `logprobs: true` is no integer (UKGovernmentBEIS/
    inspect_ai PR 1613 sends 1 instead for that "protocol change")."""
    logprobs = body.get("logprobs")
    if logprobs is not None and (isinstance(logprobs, bool) or not isinstance(logprobs, int)):
        return _together_error(f"{json.dumps(logprobs).capitalize()} is not of type 'integer' - 'logprobs'", "logprobs")
    if isinstance(logprobs, int) and logprobs > TOGETHER_LOGPROBS_MAX:
        return _together_error(
            f"{logprobs} is greater than the maximum of {TOGETHER_LOGPROBS_MAX} - 'logprobs'", "logprobs"
        )
    if int(body.get("n") or 1) > TOGETHER_N_MAX:
        return _together_error(f"{body['n']} is greater than the maximum of {TOGETHER_N_MAX} - 'n'", "n")
    form = body.get("response_format")
    if isinstance(form, dict) and form.get("type") == "json_schema" and "name" not in (form.get("json_schema") or {}):
        return _together_error("'name' is a required property - 'response_format.json_schema'", "response_format")
    return None


def together_logprobs(answer: dict[str, Any], body: dict[str, Any], step: dict[str, Any]) -> None:
    """Each choice's tokens in Together's LogprobsPart (openapi.yaml; read so by inspect_ai's
    Together provider): `tokens`, `token_logprobs` and, per token, its `top_logprobs` as
    {token: logprob}, the top `logprobs` of them; none when `logprobs` is 0 or absent."""
    wanted = body.get("logprobs")
    if not isinstance(wanted, int) or isinstance(wanted, bool) or wanted < 1:
        return
    from tests.judge_server import _tokens  # the scripted tokens every route gives

    for choice in answer.get("choices") or []:
        spelled = _tokens(choice["message"].get("content") or "", step)
        choice["logprobs"] = {
            "tokens": [token["token"] for token in spelled],
            "token_logprobs": [token["logprob"] for token in spelled],
            "top_logprobs": [
                {top["token"]: top["logprob"] for top in token["top_logprobs"][:wanted]} for token in spelled
            ],
        }


# -- OpenRouter --------------------------------------------------------------------------------
# openrouter.ai/docs/features/provider-routing: the `provider` object's fields
OPENROUTER_PROVIDER_FIELDS = frozenset(
    {
        "order", "allow_fallbacks", "require_parameters", "data_collection", "zdr", "only", "ignore",
        "quantizations", "sort", "max_price", "enforce_distillable_text",
    }
)  # fmt: skip
# The parameters each routed family's providers take (openrouter.ai/docs/api-reference/parameters:
# a parameter the chosen provider does not take is ignored, unless `provider.require_parameters`);
# Anthropic's Messages API has no logprobs and one reply a call (docs.anthropic.com/en/api/messages)
OPENROUTER_NOT_TAKEN = {"anthropic/": ("logprobs", "top_logprobs", "n")}


def _openrouter_error(status: int, message: str, **metadata: Any) -> web.Response:
    """OpenRouter's error (openrouter.ai/docs/api-reference/errors): `error` with `code` (the HTTP
    status), `message` and optional `metadata`, no `param`."""
    error: dict[str, Any] = {"code": status, "message": message}
    if metadata:
        error["metadata"] = metadata
    return web.json_response({"error": error}, status=status)


async def _openrouter(request: web.Request, server: JudgeServer) -> web.StreamResponse:
    """openrouter.ai/docs/api-reference/overview: POST /api/v1/chat/completions, `Authorization:
    Bearer`, the model as `vendor/model`; `provider` routes it; `usage` always carries the cost and
    `prompt_tokens_details.cached_tokens` (openrouter.ai/docs/use-cases/usage-accounting). OpenAI's
    models cache a prefix by themselves; Anthropic's only up to a `cache_control` mark
    (openrouter.ai/docs/features/prompt-caching)."""
    if not request.headers.get("Authorization", "").startswith("Bearer "):
        return _openrouter_error(401, "No auth credentials found")
    body = await request.json()
    model = str(body.get("model") or "")
    if "/" not in model:
        server.record(body)
        return _openrouter_error(400, f"{model} is not a valid model ID")
    routing = body.get("provider") or {}
    unknown = sorted(set(routing) - OPENROUTER_PROVIDER_FIELDS)
    if unknown:
        server.record(body)
        return _openrouter_error(400, f"Invalid provider preferences: unrecognized key(s) {unknown}")
    not_taken = [
        key for prefix, keys in OPENROUTER_NOT_TAKEN.items() if model.startswith(prefix) for key in keys if key in body
    ]
    if not_taken and routing.get("require_parameters"):
        server.record(body)
        return _openrouter_error(404, "No endpoints found that can handle the requested parameters.")
    sent = {key: value for key, value in body.items() if key not in not_taken}  # ignored, as the router does

    def reply(sent: dict[str, Any], step: dict[str, Any], prompt: str, n_ctx: int | None = None) -> dict[str, Any]:
        from tests.judge_server import _completion

        answer = _completion(sent, step, prompt, n_ctx)
        openrouter_usage(server, sent, answer, model)
        return answer

    return await server.serve_routed(request, body, sent, reply)


# what the stand-in charges a routed call (no provider's price: a figure to see the cost come back)
OPENROUTER_USD_PER_TOKEN = 1e-7  # (tests/judge/test_providers_on_the_wire.py prices by it)


def openrouter_usage(server: JudgeServer, body: dict[str, Any], answer: dict[str, Any], model: str) -> None:
    """`answer`'s usage as OpenRouter reports it: `cost`, and `prompt_tokens_details` with the
    `cached_tokens` read and `cache_write_tokens` written (openrouter.ai/docs/use-cases/usage-accounting):
    Anthropic's models by their `cache_control` marks (as on Anthropic's own API), the others as
    OpenAI caches (a prefix of 1,024 tokens or more, once seen)."""
    usage = answer["usage"]
    if model.startswith("anthropic/"):
        blocks: list[tuple[str, bool]] = []
        for message in body.get("messages") or []:
            content = message.get("content")
            for block in [{"text": content}] if isinstance(content, str) else content or []:
                blocks.append((block.get("text") or "", "cache_control" in block))
        _, written, read = anthropic_cache(server, f"openrouter:{model}", blocks)
    else:
        messages = body.get("messages") or []
        prefix_tokens = sum(tokens(_text(m.get("content"))) for m in messages[:-1])
        seen = prefix_tokens >= OPENAI_CACHE_MIN and _seen(
            server, f"openrouter:{model}", json.dumps(messages[:-1], sort_keys=True)
        )
        written, read = 0, prefix_tokens // OPENAI_CACHE_STEP * OPENAI_CACHE_STEP if seen else 0
    # openrouter.ai/docs/use-cases/reasoning-tokens: an effort (`reasoning_effort`, or `reasoning.effort`)
    # makes a reasoning model think, its tokens billed as output; charged at the OpenAI stand-in's rates
    effort = body.get("reasoning_effort") or (body.get("reasoning") or {}).get("effort")
    reasoning = (
        REASONING_TOKENS.get(str(effort), 0) if model.startswith(("anthropic/", "openai/o", "openai/gpt-5")) else 0
    )
    usage["completion_tokens"] += reasoning
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    usage["prompt_tokens_details"] = {"cached_tokens": read, "cache_write_tokens": written, "audio_tokens": 0}
    usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    usage["cost"] = round(
        (usage["prompt_tokens"] - read * 0.9 + usage["completion_tokens"]) * OPENROUTER_USD_PER_TOKEN, 9
    )
    usage["is_byok"] = False


# -- Azure OpenAI ------------------------------------------------------------------------------
async def _azure(request: web.Request, server: JudgeServer) -> web.StreamResponse:
    """learn.microsoft.com/azure/ai-services/openai/reference: POST
    {endpoint}/openai/deployments/{deployment-id}/chat/completions?api-version=..., the key in `api-key`."""
    if not request.query.get("api-version"):
        return web.json_response({"error": {"code": "404", "message": "Resource not found"}}, status=404)
    if not request.headers.get("api-key"):
        message = "Access denied due to missing subscription key."
        return web.json_response({"error": {"code": "401", "message": message}}, status=401)
    deployment = request.match_info["deployment"]
    model = server.deployments.get(deployment)
    if model is None:
        message = "The API deployment for this resource does not exist."
        return web.json_response({"error": {"code": "DeploymentNotFound", "message": message}}, status=404)
    body = await request.json()
    return await server.serve_openai(request, {**body, "model": model}, model)


# -- Anthropic Messages ------------------------------------------------------------------------
def _anthropic_error(message: str, status: int = 400, kind: str = "invalid_request_error") -> web.Response:
    return web.json_response({"type": "error", "error": {"type": kind, "message": message}}, status=status)


def anthropic_refusal(body: dict[str, Any]) -> web.Response | None:
    """docs.anthropic.com/en/api/messages: `max_tokens` required, at most the model's output
    limit; docs.anthropic.com/en/docs/build-with-claude/extended-thinking: `budget_tokens` at
    least 1,024 and below `max_tokens`, temperature only 1 with thinking, and no forced tool use."""
    model = str(body.get("model"))
    if "max_tokens" not in body:
        return _anthropic_error("max_tokens: Field required")
    limit, full_name = ANTHROPIC_OUTPUT_LIMITS.get(model, (None, model))
    if limit is not None and body["max_tokens"] > limit:
        return _anthropic_error(
            f"max_tokens: {body['max_tokens']} > {limit}, which is the maximum allowed number of output tokens"
            f" for {full_name}"
        )
    thinking = body.get("thinking") or {}
    if thinking.get("type") == "enabled":
        budget = int(thinking.get("budget_tokens") or 0)
        if budget < 1024:
            return _anthropic_error("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
        if budget >= body["max_tokens"]:
            return _anthropic_error("`max_tokens` must be greater than `thinking.budget_tokens`.")
        if body.get("temperature") not in (None, 1, 1.0):
            return _anthropic_error(
                "`temperature` may only be set to 1 when thinking is enabled. Please consult our documentation at"
                " https://docs.claude.com/en/docs/build-with-claude/extended-thinking#important-considerations-when-using-extended-thinking"
            )
        if (body.get("tool_choice") or {}).get("type") in ("tool", "any"):
            return _anthropic_error("Thinking may not be enabled when tool_choice forces tool use.")
    return None


def anthropic_cache(server: JudgeServer, kind: str, blocks: list[tuple[str, bool]]) -> tuple[int, int, int]:
    """The input tokens of a prompt whose blocks (text, marked for caching) are `blocks`, in order:
    (uncached, written to the cache, read from it). The cache holds everything up to the last
    marked block, when that prefix is `ANTHROPIC_CACHE_MIN` tokens or more
    (docs.anthropic.com/en/docs/build-with-claude/prompt-caching)."""
    total = sum(tokens(text) for text, _ in blocks)
    marked = [index for index, (_, mark) in enumerate(blocks) if mark]
    if not marked:
        return total, 0, 0
    prefix = "".join(text for text, _ in blocks[: marked[-1] + 1])
    prefix_tokens = sum(tokens(text) for text, _ in blocks[: marked[-1] + 1])
    if prefix_tokens < ANTHROPIC_CACHE_MIN:
        return total, 0, 0
    if _seen(server, kind, prefix):
        return total - prefix_tokens, 0, prefix_tokens
    return total - prefix_tokens, prefix_tokens, 0


async def _anthropic(request: web.Request, server: JudgeServer) -> web.StreamResponse:
    if not request.headers.get("x-api-key"):
        return _anthropic_error("x-api-key header is required", 401, "authentication_error")
    if not request.headers.get("anthropic-version"):
        return _anthropic_error("anthropic-version: header is required")
    body = await request.json()
    refused = anthropic_refusal(body)
    betas = request.headers.get("anthropic-beta", "")
    if refused is None and "output_format" in body and "structured-outputs-2025-11-13" not in betas:
        # platform.claude.com/docs/en/build-with-claude/structured-outputs: `output_format` is the
        # beta's (its header required); the GA form is `output_config.format`
        refused = _anthropic_error("output_format: Extra inputs are not permitted")
    blocks = _anthropic_blocks(body)
    openai_like = _openai_like([text for text, _ in blocks], body.get("max_tokens"), body)
    server.record(body)
    if refused is not None:
        return refused
    step, text = server.reply_text(openai_like)
    if step.get("status", 200) != 200:
        return _anthropic_error(step.get("message", "scripted"), step["status"], "api_error")
    uncached, written, read = anthropic_cache(server, "anthropic", blocks)
    thinking = body.get("thinking") or {}
    thought = int(thinking.get("budget_tokens", 0)) // 2 if thinking.get("type") == "enabled" else 0
    forced = (body.get("tool_choice") or {}).get("type") == "tool"
    content: list[dict[str, Any]] = [{"type": "thinking", "thinking": "…", "signature": "sig"}] if thought else []
    if forced:
        name = body["tool_choice"]["name"]
        content.append({"type": "tool_use", "id": "toolu_01", "name": name, "input": json.loads(text)})
    else:
        content.append({"type": "text", "text": text})
    return web.json_response(
        {
            "id": "msg_scripted",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": "tool_use" if forced else "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": uncached,
                "cache_creation_input_tokens": written,
                "cache_read_input_tokens": read,
                "output_tokens": max(1, tokens(text)) + thought,
            },
        }
    )


def _anthropic_blocks(body: dict[str, Any]) -> list[tuple[str, bool]]:
    """The prompt's text blocks in Anthropic's order (tools, system, messages), each with whether
    it carries `cache_control`."""
    blocks: list[tuple[str, bool]] = []
    for tool in body.get("tools") or []:
        blocks.append((json.dumps(tool, sort_keys=True), "cache_control" in tool))
    system = body.get("system")
    for block in [{"text": system}] if isinstance(system, str) else system or []:
        blocks.append((block.get("text", ""), "cache_control" in block))
    for message in body.get("messages") or []:
        content = message.get("content")
        for block in [{"text": content}] if isinstance(content, str) else content or []:
            text = block.get("text") or json.dumps(block.get("input") or block.get("content") or "")
            blocks.append((text, "cache_control" in block))
    return blocks


# -- Gemini generateContent --------------------------------------------------------------------
async def _gemini(request: web.Request, server: JudgeServer) -> web.StreamResponse:
    """ai.google.dev/api/generate-content: POST /v1beta/models/{model}:generateContent, the key in
    `x-goog-api-key`; `generationConfig.responseSchema` (OpenAPI's subset) or `responseJsonSchema`
    (JSON Schema), not both, each with `responseMimeType` application/json; the reply's usage in
    `usageMetadata` (`cachedContentTokenCount`, `thoughtsTokenCount`)."""
    model, _, method = request.match_info["call"].partition(":")
    if method != "generateContent":
        return _gemini_error(404, f"Method {method} not found", "NOT_FOUND")
    if not (request.headers.get("x-goog-api-key") or request.query.get("key")):
        return _gemini_error(403, "Method doesn't allow unregistered callers.", "PERMISSION_DENIED")
    body = await request.json()
    server.record(body)
    config = body.get("generationConfig") or body.get("generation_config") or {}
    config = {_camel(key): value for key, value in config.items()}
    if "responseSchema" in config and "responseJsonSchema" in config:
        return _gemini_error(400, "responseSchema and responseJsonSchema cannot both be set.", "INVALID_ARGUMENT")
    if ("responseSchema" in config or "responseJsonSchema" in config) and config.get(
        "responseMimeType"
    ) != "application/json":
        return _gemini_error(
            400, "response_mime_type must be application/json with a response schema.", "INVALID_ARGUMENT"
        )
    system = body.get("systemInstruction") or body.get("system_instruction") or {}
    texts = [part.get("text", "") for part in system.get("parts") or []]
    for content in body.get("contents") or []:
        texts += [part.get("text", "") for part in content.get("parts") or []]
    step, text = server.reply_text(_openai_like(texts, config.get("maxOutputTokens"), body))
    if step.get("status", 200) != 200:
        return _gemini_error(step["status"], step.get("message", "scripted"), "UNAVAILABLE")
    prompt_tokens = sum(tokens(part) for part in texts)
    prefix = "".join(texts[:-1])
    prefix_tokens = sum(tokens(part) for part in texts[:-1])
    cached = prefix_tokens if prefix_tokens >= GEMINI_CACHE_MIN and _seen(server, f"gemini:{model}", prefix) else 0
    thinking = {_camel(key): value for key, value in (config.get("thinkingConfig") or {}).items()}
    budget = thinking.get("thinkingBudget", -1)
    thoughts = (GEMINI_DYNAMIC_BUDGET if budget == -1 else int(budget)) // 2
    usage = {"promptTokenCount": prompt_tokens, "candidatesTokenCount": max(1, tokens(text))}
    usage["totalTokenCount"] = usage["promptTokenCount"] + usage["candidatesTokenCount"] + thoughts
    if cached:
        usage["cachedContentTokenCount"] = cached
    if thoughts:
        usage["thoughtsTokenCount"] = thoughts
    candidate = {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}
    return web.json_response({"candidates": [candidate], "usageMetadata": usage, "modelVersion": model})


def _gemini_error(status: int, message: str, reason: str) -> web.Response:
    return web.json_response({"error": {"code": status, "message": message, "status": reason}}, status=status)


def _camel(key: str) -> str:
    """Gemini takes the proto's JSON names in either case (response_json_schema, responseJsonSchema)."""
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


# -- Bedrock Converse --------------------------------------------------------------------------
async def _bedrock(request: web.Request, server: JudgeServer) -> web.StreamResponse:
    """docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html: POST
    /model/{modelId}/converse, signed with SigV4 (checked here only for being there); `cachePoint`
    blocks mark a cached prefix (docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html),
    reported in `usage.cacheReadInputTokens` and `cacheWriteInputTokens`."""
    if not request.headers.get("Authorization", "").startswith("AWS4-HMAC-SHA256 "):
        message = "Missing Authentication Token"
        return web.json_response(
            {"message": message}, status=403, headers={"x-amzn-ErrorType": "MissingAuthenticationTokenException"}
        )
    body = await request.json()
    server.record(body)
    blocks: list[tuple[str, bool]] = []
    for block in body.get("system") or []:
        if "cachePoint" in block and blocks:
            blocks[-1] = (blocks[-1][0], True)
        elif "text" in block:
            blocks.append((block["text"], False))
    for message in body.get("messages") or []:
        for block in message.get("content") or []:
            if "cachePoint" in block and blocks:
                blocks[-1] = (blocks[-1][0], True)
            elif "text" in block:
                blocks.append((block["text"], False))
    limit = (body.get("inferenceConfig") or {}).get("maxTokens")
    step, text = server.reply_text(_openai_like([text for text, _ in blocks], limit, body))
    if step.get("status", 200) != 200:
        return web.json_response({"message": step.get("message", "scripted")}, status=step["status"])
    uncached, written, read = anthropic_cache(server, "bedrock", blocks)
    tool_config = body.get("toolConfig") or {}
    if tool_config.get("toolChoice", {}).get("tool"):
        name = tool_config["toolChoice"]["tool"]["name"]
        content = [{"toolUse": {"toolUseId": "tooluse_01", "name": name, "input": json.loads(text)}}]
        stop = "tool_use"
    else:
        content, stop = [{"text": text}], "end_turn"
    output = max(1, tokens(text))
    usage = {
        "inputTokens": uncached,
        "outputTokens": output,
        "totalTokens": uncached + written + read + output,
        "cacheReadInputTokens": read,
        "cacheWriteInputTokens": written,
    }
    answer = {"output": {"message": {"role": "assistant", "content": content}}, "stopReason": stop}
    return web.json_response({**answer, "usage": usage, "metrics": {"latencyMs": 1}})


# -- shared ------------------------------------------------------------------------------------
def _openai_like(texts: list[str], max_tokens: Any, body: dict[str, Any]) -> dict[str, Any]:
    """A provider's request as the scripted steps read it: its texts as messages, its reply limit,
    and whether it asks a schema (so a verdict-first look is told apart as on the OpenAI route)."""
    schema = json.dumps(body.get("tools") or body.get("generationConfig") or body.get("outputConfig") or {})
    return {
        "messages": [{"role": "user", "content": text} for text in texts],
        "max_tokens": max_tokens,
        "response_format": {"schema": schema} if schema != "{}" else None,
    }


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""
