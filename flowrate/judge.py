"""Calling the judge: model backends, retries and reading its verdict.

LiteLLM is imported here only, and only when a LiteLLM judge is first used:
its import costs seconds and `--help` or `validate` never need it.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import os
import re
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any, Protocol

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from flowrate.context_window import SERVER_WINDOW_SHARE, ServerFacts, probe_server
from flowrate.defaults import DEFAULTS
from flowrate.exit_codes import JudgeAccessError
from flowrate.limits import CallGate, RunStopped
from flowrate.models import Usage

# eval_lib's `provider:model` prefixes, mapped to LiteLLM's provider names.
PROVIDER_ALIASES = {
    "openai": "openai",
    "azure": "azure",
    "anthropic": "anthropic",
    "google": "gemini",
    "gemini": "gemini",
    "vertex": "vertex_ai",
    "ollama": "ollama_chat",
    "mistral": "mistral",
    "groq": "groq",
    "deepseek": "deepseek",
    "together": "together_ai",
    "openrouter": "openrouter",
    "bedrock": "bedrock",
}
KEY_VARIABLES = {
    "openai": "OPENAI_API_KEY",
    "azure": "AZURE_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GOOGLE_API_KEY",  # LiteLLM reads GOOGLE_API_KEY first, then GEMINI_API_KEY
    "mistral": "MISTRAL_API_KEY",
    "groq": "GROQ_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
}
ALSO_READ = {"gemini": "GEMINI_API_KEY"}  # a second variable LiteLLM accepts for the same key
KEYLESS_PROVIDERS = {"ollama", "ollama_chat", "vertex_ai", "bedrock", "sagemaker", "hosted_vllm", "lm_studio"}
NO_KEY_PLACEHOLDER = "no-key"  # OpenAI-compatible local servers need none, but the SDK insists on one
SELF_HOSTED_PROVIDERS = {"ollama", "ollama_chat", "hosted_vllm", "lm_studio", "llamafile"}
OLLAMA_DEFAULT_BASE = "http://localhost:11434"  # where LiteLLM's ollama_chat provider looks without --api-base

# Seconds one attempt may take when --timeout is not given. A hosted API answers a judge call in
# seconds; a self-hosted model on CPUs may not: a cold 2,700-token prompt on 2 CPU cores
# (Qwen2.5-Coder-1.5B, llama-cpp-python) took over 60 s before its first token (issue 14).
HOSTED_TIMEOUT_S = DEFAULTS["timeout"]
SELF_HOSTED_TIMEOUT_S = DEFAULTS["self_hosted_timeout"]

# How the rubric's reply schema is sent to a server at --api-base, tried in this order until one is
# taken; the first a server takes is kept for the run. OpenAI's `json_schema` (vLLM, llama.cpp's
# llama-server, LM Studio, gateways), then `{"type": "json_object", "schema": ...}`
# (llama-cpp-python's server, whose request model allows the types "text" and "json_object"
# only), then no schema at all (a server that takes neither).
SCHEMA_FORMS: tuple[str | None, ...] = ("json_schema", "json_object_schema", None)
OLLAMA_FORM = "ollama_format"  # LiteLLM's ollama_chat provider sends json_schema as Ollama's `format`


def litellm_model_name(model: str, api_base: str | None = None) -> str:
    """`anthropic:claude-x` -> `anthropic/claude-x`; `ollama` always goes to the chat endpoint.

    With an `api_base` and no provider named, the server is taken to speak OpenAI's protocol.
    """
    provider, sep, name = model.partition(":")
    if sep and "/" not in provider and provider.lower() in PROVIDER_ALIASES:
        model = f"{PROVIDER_ALIASES[provider.lower()]}/{name}"
    if model.startswith("ollama/"):
        model = "ollama_chat/" + model.removeprefix("ollama/")
    if api_base and "/" not in model:
        model = f"openai/{model}"
    return model


def provider_of(litellm_model: str) -> str:
    provider, sep, _ = litellm_model.partition("/")
    return provider if sep else "openai"


# -- what a backend returns ------------------------------------------------------
@dataclass
class Completion:
    """The replies to one request. `finish_reasons` match `texts` ("length": cut at max_tokens);
    `response_format` is the form the schema went in (see `SCHEMA_FORMS`); `requests` counts
    the HTTP requests it took (more than one when the server refused a schema form first)."""

    texts: list[str]
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    finish_reasons: list[str | None] = field(default_factory=list)
    response_format: str | None = None
    requests: int = 1

    def cut(self, index: int) -> bool:
        """Whether reply `index` stopped at its token limit."""
        return index < len(self.finish_reasons) and self.finish_reasons[index] == "length"


class JudgeBackend(Protocol):
    model_name: str

    async def complete(
        self,
        messages: list[dict[str, str]],
        *,
        n: int,
        timeout: float,
        response_format: dict | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> Completion:
        """`n` replies to one prompt; `n` > 1 only where `supports_n`."""

    def check_access(self) -> None: ...

    def ignores_n(self) -> None: ...

    def default_timeout_s(self) -> float: ...

    def retries_timeouts(self) -> bool: ...

    def server_slot(self) -> Any: ...

    def bounds_replies(self) -> bool: ...

    def response_format_ids(self) -> list[str | None]: ...

    def check_keys(self) -> None: ...

    def check_model(self) -> None: ...

    def supports_n(self) -> bool: ...

    def context_window(self) -> int | None: ...

    def count_tokens(self, text: str) -> int: ...

    def price(self, prompt_tokens: int, completion_tokens: int) -> float | None: ...

    def cache_identity(self) -> str: ...

    def response_format_id(self) -> str | None: ...

    def structured_output(self, name: str, schema: dict[str, Any]) -> dict[str, Any] | None: ...


class CustomLLMClient(ABC):
    """Bring your own judge, as in eval_lib.

    Subclass it (or pass any object with these two methods) as `model=`.
    `chat_complete(messages, temperature)` returns the reply text and its cost in USD
    (None when unknown), or the text alone (cost unknown).
    """

    @abstractmethod
    async def chat_complete(
        self, messages: list[dict[str, str]], temperature: float
    ) -> tuple[str, float | None] | str: ...

    @abstractmethod
    def get_model_name(self) -> str: ...


class CustomClientBackend:
    """A `CustomLLMClient` as a backend: one reply per call, no token counts."""

    def __init__(self, client: Any):
        self.client = client
        self.model_name = client.get_model_name()

    def check_access(self) -> None:
        return None

    def check_keys(self) -> None:
        return None

    def check_model(self) -> None:
        return None

    def supports_n(self) -> bool:
        return False

    def ignores_n(self) -> None:
        return None

    def default_timeout_s(self) -> float:
        return HOSTED_TIMEOUT_S

    def retries_timeouts(self) -> bool:
        return True

    def server_slot(self) -> Any:
        return contextlib.nullcontext()

    def bounds_replies(self) -> bool:
        return False  # `chat_complete` takes no token limit

    def context_window(self) -> int | None:
        return None

    def count_tokens(self, text: str) -> int:
        return len(text.encode()) // 3 + 1

    def price(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        return None

    def cache_identity(self) -> str:
        return f"custom:{self.model_name}"

    def response_format_id(self) -> str | None:
        return None

    def response_format_ids(self) -> list[str | None]:
        return [None]

    def structured_output(self, name: str, schema: dict[str, Any]) -> dict[str, Any] | None:
        return None

    async def complete(
        self,
        messages: list[dict[str, str]],
        *,
        n: int,
        timeout: float,
        response_format: dict | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> Completion:
        result = await asyncio.wait_for(self.client.chat_complete(messages, temperature), timeout)
        text, cost = (result, None) if isinstance(result, str) or result is None else result
        return Completion(texts=[text or ""], cost_usd=cost)


@cache
def _litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


class LiteLLMBackend:
    """Any model LiteLLM reaches. LiteLLM's own retries are off: tenacity owns them all."""

    def __init__(self, model: str, api_base: str | None = None):
        self.model_name = model
        self.api_base = api_base
        self.litellm_model = litellm_model_name(model, api_base)
        self.provider = provider_of(self.litellm_model)
        self.key_variable = KEY_VARIABLES.get(self.provider, f"{self.provider.upper()}_API_KEY")
        # learned from the server during the run, shared by every call of it
        self._form_index = 0  # into SCHEMA_FORMS: the form to send next
        self._form_taken = False  # the server took a schema form: no more probing
        self._n_ignored = False  # the server answered a request for n choices with fewer
        self._loop_id: int | None = None  # the event loop the two below belong to
        self._probe_lock: asyncio.Lock | None = None  # held by the call that finds the schema form
        self._slots: asyncio.Semaphore | None = None  # a self-hosted server's slots

    def check_access(self) -> None:
        """Fail before spending anything: a missing key, or a model no provider serves."""
        self.check_keys()
        self.check_model()
        if self.api_base or self.provider in KEYLESS_PROVIDERS or self.provider in KEY_VARIABLES:
            return
        try:
            missing = _litellm().validate_environment(model=self.litellm_model).get("missing_keys", [])
        except Exception:  # LiteLLM cannot tell: let the first call tell
            return
        if missing:
            raise JudgeAccessError(
                f"no API key for model {self.model_name!r}: set {' and '.join(dict.fromkeys(missing))}"
            )

    def check_keys(self) -> None:
        """A known provider's key, checked without importing LiteLLM (its import takes seconds),
        so that a missing key is reported at once."""
        if self.api_base or self.provider in KEYLESS_PROVIDERS:
            return
        if self.provider in KEY_VARIABLES:
            names = [self.key_variable, ALSO_READ.get(self.provider)]
            if not any(os.environ.get(name, "").strip() for name in names if name):
                other = f" (LiteLLM also reads {ALSO_READ[self.provider]})" if self.provider in ALSO_READ else ""
                raise JudgeAccessError(f"no API key for model {self.model_name!r}: set {self.key_variable}{other}")

    def check_model(self) -> None:
        """Raise `JudgeAccessError` unless LiteLLM knows which provider serves the model."""
        if self.api_base:
            return
        try:
            _litellm().get_llm_provider(self.litellm_model)
        except Exception:
            raise JudgeAccessError(
                f"no provider serves model {self.model_name!r}: name one (openai:gpt-4o, anthropic:claude-3-5-sonnet-latest,"
                " ollama:llama3, any LiteLLM provider/model) or give --api-base for an OpenAI-compatible server"
            ) from None

    def supports_n(self) -> bool:
        return self._supports_n and not self._n_ignored

    def ignores_n(self) -> None:
        """The server answered `n` choices with fewer (llama-cpp-python returns one): ask one at a time."""
        self._n_ignored = True

    @cached_property
    def _supports_n(self) -> bool:
        try:
            return "n" in (_litellm().get_supported_openai_params(model=self.litellm_model) or [])
        except Exception:
            return False

    @cached_property
    def _model_info(self) -> dict[str, Any] | None:
        try:
            return _litellm().get_model_info(model=self.litellm_model)
        except Exception:  # a model LiteLLM has no facts about
            return None

    @cached_property
    def self_hosted(self) -> bool:
        """A model served by a server of the user's own: an Ollama, vLLM, LM Studio or llamafile
        provider, or a model LiteLLM has no facts about at --api-base (a gateway serving a model
        LiteLLM knows, say gpt-4o, is taken as that model's API)."""
        if self.provider in SELF_HOSTED_PROVIDERS:
            return True
        return bool(self.api_base) and self._model_info is None

    @cached_property
    def server(self) -> ServerFacts:
        """What a self-hosted server says about itself (its context window, its slots), asked
        once with a short timeout; nothing for a hosted API."""
        if not self.self_hosted:
            return ServerFacts()
        base = self.api_base or (OLLAMA_DEFAULT_BASE if self.provider.startswith("ollama") else None)
        if base is None:
            return ServerFacts()
        name = self.litellm_model.split("/", 1)[1] if "/" in self.litellm_model else self.litellm_model
        return probe_server(base, name, ollama=self.provider.startswith("ollama"))

    def context_window(self) -> int | None:
        """Input tokens the model takes: LiteLLM's facts, else what its server says (see `server`)."""
        known = (self._model_info or {}).get("max_input_tokens")
        return known or self.server.input_budget

    def default_timeout_s(self) -> float:
        """Seconds an attempt may take without --timeout: long enough for a self-hosted model's cold first call."""
        return SELF_HOSTED_TIMEOUT_S if self.self_hosted else HOSTED_TIMEOUT_S

    def retries_timeouts(self) -> bool:
        """Whether a timed-out attempt is tried again. Not on a self-hosted server that works on one
        request at a time: it keeps working on the abandoned attempt, and the retry would queue
        behind it (issue 14: 119.8 s for one row). vLLM and llama.cpp with several slots serve the
        retry beside it."""
        return not self.self_hosted or self._server_slots() is None or self._server_slots() > 1

    def _server_slots(self) -> int | None:
        """Requests the server works on at once: None for no known bound (a hosted API, vLLM)."""
        if not self.self_hosted or self.server.kind == "vllm":
            return None
        return self.server.slots or 1  # a server that says nothing (llama-cpp-python) serves one at a time

    def server_slot(self) -> Any:
        """Held while a request is at the server: at most as many at once as a self-hosted server
        works on, so no request waits in the server's queue with its timeout running."""
        if self._server_slots() is None:
            return contextlib.nullcontext()
        return self._loop_locks()[1]

    def _loop_locks(self) -> tuple[asyncio.Lock, asyncio.Semaphore]:
        """The schema probe's lock and the server's slots, made for the running event loop
        (the Python API may run one metric under several)."""
        loop = id(asyncio.get_running_loop())
        if self._loop_id != loop or self._probe_lock is None or self._slots is None:
            self._loop_id = loop
            self._probe_lock = asyncio.Lock()
            self._slots = asyncio.Semaphore(self._server_slots() or 1)
        return self._probe_lock, self._slots

    def bounds_replies(self) -> bool:
        """Whether to send max_tokens: not to a reasoning model, whose hidden reasoning counts against it."""
        try:
            return not _litellm().supports_reasoning(model=self.litellm_model)
        except Exception:
            return True

    def count_tokens(self, text: str) -> int:
        return _litellm().token_counter(model=self.litellm_model, text=text)

    def price(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """USD by LiteLLM's price list; None for a model it has no price for."""
        try:
            prompt_cost, completion_cost = _litellm().cost_per_token(
                model=self.litellm_model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
            )
        except Exception:
            return None
        return float(prompt_cost + completion_cost)

    def batch_price(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """USD at the model's batch price where LiteLLM knows one; None otherwise, never a guess."""
        info = (
            _litellm().model_cost.get(self.litellm_model)
            or _litellm().model_cost.get(self.litellm_model.split("/")[-1])
            or {}
        )
        prompt, completion = info.get("input_cost_per_token_batches"), info.get("output_cost_per_token_batches")
        if prompt is None or completion is None:
            return None
        return prompt * prompt_tokens + completion * completion_tokens

    @property
    def batch_model(self) -> str:
        """The model's name in a batch request body: without LiteLLM's provider prefix."""
        return self.litellm_model.split("/", 1)[1] if "/" in self.litellm_model else self.litellm_model

    def cache_identity(self) -> str:
        """The model and where it is served: the same name at two endpoints is two judges."""
        return f"{self.litellm_model}@{self.api_base.rstrip('/')}" if self.api_base else self.litellm_model

    @property
    def _learns_form(self) -> bool:
        """A server at --api-base serving a model LiteLLM does not know to take OpenAI's schema
        may take any of `SCHEMA_FORMS`: its answer tells which."""
        return bool(self.api_base) and not self.provider.startswith("ollama") and not self._structured

    @property
    def _form_settled(self) -> bool:
        return self._form_taken or not self._learns_form

    @property
    def _form(self) -> str | None:
        """The form the schema goes in now."""
        if self.provider.startswith("ollama"):
            return OLLAMA_FORM
        if self._learns_form:
            return SCHEMA_FORMS[self._form_index]
        return "json_schema" if self._structured else None

    def response_format_id(self) -> str | None:
        """The form the next request sends the schema in: part of the cache key."""
        return self._form

    def response_format_ids(self) -> list[str | None]:
        """Every form a cached reply for this judge may have been asked in: the one in use once
        the server has taken one, before that each schema form (an earlier run learned it)."""
        if self._form_settled:
            return [self._form]
        return [form for form in SCHEMA_FORMS if form is not None]

    @cached_property
    def _structured(self) -> bool:
        try:
            return bool(_litellm().supports_response_schema(model=self.litellm_model))
        except Exception:
            return False

    def structured_output(self, name: str, schema: dict[str, Any]) -> dict[str, Any] | None:
        """The `response_format` asking for `schema` in OpenAI's form, where the model can take a
        schema in some form: LiteLLM says it supports structured output, it is an Ollama model
        (LiteLLM turns it into Ollama's `format`), or it is served at --api-base (the server's
        answer tells which form it takes; see `SCHEMA_FORMS`)."""
        if not (self._structured or self.api_base or self.provider.startswith("ollama")):
            return None
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}

    async def complete(
        self,
        messages: list[dict[str, str]],
        *,
        n: int,
        timeout: float,
        response_format: dict[str, Any] | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> Completion:
        """One request. Until a server at --api-base has taken a schema form, one call at a time
        finds which (the others wait for its answer instead of all probing)."""
        send = lambda: self._send(messages, n, timeout, response_format, temperature, max_tokens)  # noqa: E731
        if response_format is None or self._form_settled:
            return await send()
        async with self._loop_locks()[0]:
            if not self._form_settled:
                return await self._probe_form(send)
        return await send()

    async def _probe_form(self, send) -> Completion:
        """Send, stepping down `SCHEMA_FORMS` while the server refuses the form; the form the
        server takes is kept for the run."""
        refused = 0
        while True:
            try:
                completion = await send()
            except Exception as error:
                if is_format_refusal(error) and self._form_index + 1 < len(SCHEMA_FORMS):
                    self._form_index += 1
                    refused += 1
                    continue
                error.flowrate_requests = refused + 1  # type: ignore[attr-defined]
                raise
            self._form_taken = True
            completion.requests += refused
            return completion

    async def _send(
        self,
        messages: list[dict[str, str]],
        n: int,
        timeout: float,
        response_format: dict[str, Any] | None,
        temperature: float,
        max_tokens: int | None,
    ) -> Completion:
        litellm = _litellm()
        options: dict[str, Any] = {"num_retries": 0, "max_retries": 0, "timeout": timeout, "temperature": temperature}
        if n > 1:
            options["n"] = n
        if max_tokens:
            options["max_tokens"] = max_tokens
        if self.api_base:
            options["api_base"] = self.api_base
            if self.provider == "openai" and not os.environ.get("OPENAI_API_KEY"):
                options["api_key"] = NO_KEY_PLACEHOLDER
        form = self._form if response_format else None
        if form == "json_object_schema":
            options["response_format"] = {"type": "json_object", "schema": response_format["json_schema"]["schema"]}  # type: ignore[index]
        elif form is not None:
            options["response_format"] = response_format
        response = await litellm.acompletion(model=self.litellm_model, messages=messages, **options)
        texts = [choice.message.content or "" for choice in response.choices]
        usage = getattr(response, "usage", None)
        tokens = Usage(
            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
        )
        # LiteLLM prices every response it returns; None when it has no price: unknown, never 0.
        cost = (getattr(response, "_hidden_params", None) or {}).get("response_cost")
        return Completion(
            texts=texts,
            usage=tokens,
            cost_usd=None if cost is None else float(cost),
            finish_reasons=[getattr(choice, "finish_reason", None) for choice in response.choices],
            response_format=form,
        )


def make_backend(model: str | Any, api_base: str | None = None) -> JudgeBackend:
    if isinstance(model, str):
        return LiteLLMBackend(model, api_base)
    if hasattr(model, "chat_complete") and hasattr(model, "get_model_name"):
        return CustomClientBackend(model)
    raise TypeError("model must be a model name or an object with chat_complete() and get_model_name()")


# -- retries ---------------------------------------------------------------------
@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try one judge call.

    `backoff` is the first wait in seconds, doubled each retry with jitter; every wait,
    a Retry-After included, is capped at `backoff_max`. Zero both to never wait (tests).
    `timeout` is the seconds one attempt may take; None leaves it to the judge
    (`HOSTED_TIMEOUT_S`, or `SELF_HOSTED_TIMEOUT_S` for a self-hosted model).
    """

    max_retries: int = 5
    timeout: float | None = None
    backoff: float = 1.0
    backoff_max: float = 60.0

    def wait_seconds(self, attempt: int, error: BaseException | None, jitter: float) -> float:
        exponential = self.backoff * (2 ** (attempt - 1)) * (0.5 + jitter)
        return min(self.backoff_max, max(exponential, retry_after_seconds(error) or 0.0))


RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 529}


def _status(error: BaseException) -> int | None:
    status = getattr(error, "status_code", None)
    return status if isinstance(status, int) else None


INVALID_REQUEST_STATUS = {400, 413, 422}
INVALID_REQUEST_NAMES = {"BadRequestError", "ContextWindowExceededError", "UnprocessableEntityError"}
# What a server says when it refuses the request itself, whatever status it sends: llama-cpp-python
# turns pydantic's validation errors into 500s ("Input should be 'text' or 'json_object'").
INVALID_REQUEST_TEXT = re.compile(
    r"input should be|validation error|invalid request|invalid_request_error|extra inputs are not permitted"
    r"|field required|unsupported parameter|context length|context window|context size|maximum context"
    r"|only one completion choice",
    re.IGNORECASE,
)
# llama.cpp's llama-server refuses n != 1 with a 500 "Only one completion choice is allowed"
N_REFUSED = re.compile(
    r"only one completion choice|\bn\b\W{0,3}(must be 1|is not supported|unsupported)", re.IGNORECASE
)
FORM_NAMED = re.compile(r"response_format|json_schema|json_object", re.IGNORECASE)
FORM_REFUSED = re.compile(
    r"input should be|not supported|unsupported|invalid|unknown|not allowed|must be|extra inputs", re.IGNORECASE
)
CONTEXT_TEXT = re.compile(
    r"context length|context window|context size|maximum context|too many tokens|prompt is too long", re.IGNORECASE
)


def is_invalid_request(error: BaseException) -> bool:
    """The server refused the request as such: sent again, it fails again."""
    status = _status(error)
    if status in INVALID_REQUEST_STATUS or type(error).__name__ in INVALID_REQUEST_NAMES:
        return True
    return status is not None and status >= 500 and bool(INVALID_REQUEST_TEXT.search(str(error)))


def is_format_refusal(error: BaseException) -> bool:
    """The server refused the form the schema was sent in (llama-cpp-python: a 500 with pydantic's
    "Input should be 'text' or 'json_object'" at `response_format.type`)."""
    status = _status(error)
    text = str(error)
    return (
        status is not None
        and status >= 400
        and bool(FORM_NAMED.search(text) and FORM_REFUSED.search(text))
        and not is_context_overflow(error)
    )


def is_n_refusal(error: BaseException) -> bool:
    """The server refused to give several choices for one request (`n` > 1)."""
    status = _status(error)
    return status is not None and status >= 400 and bool(N_REFUSED.search(str(error)))


def is_context_overflow(error: BaseException) -> bool:
    """The prompt did not fit the model's context window."""
    if type(error).__name__ == "ContextWindowExceededError":
        return True
    status = _status(error)
    return status is not None and status >= 400 and bool(CONTEXT_TEXT.search(str(error)))


def is_timeout(error: BaseException) -> bool:
    return isinstance(error, (asyncio.TimeoutError, TimeoutError)) or type(error).__name__ == "Timeout"


def is_retryable(error: BaseException) -> bool:
    """Rate limits, 5xx, timeouts and dropped connections; never a request the server refused as invalid."""
    if is_invalid_request(error):
        return False
    if isinstance(error, (asyncio.TimeoutError, TimeoutError, ConnectionError)):
        return True
    status = _status(error)
    return status is not None and (status in RETRYABLE_STATUS or status >= 500)


CONTEXT_SIZE_IN_MESSAGE = re.compile(
    r"maximum context length is (\d+)|\"n_ctx\"\s*:\s*(\d+)|context window of (\d+)", re.IGNORECASE
)


def error_message(error: BaseException, limit: int = 500) -> str:
    """An error as its row shows it: one line, no secret. A prompt too long for the model's
    context says which option makes long conversations fit, with the window where the server
    said it."""
    message = one_line(redact_secrets(str(error)), limit)
    if not is_context_overflow(error):
        return message
    found = CONTEXT_SIZE_IN_MESSAGE.search(str(error))
    window = next((int(size) for size in found.groups() if size), None) if found else None
    if window:
        advice = (
            f"the conversation does not fit the judge's context window ({window} tokens): pass --max-input-tokens"
            f" {int(window * SERVER_WINDOW_SHARE)} (max_input_tokens in Python) so long conversations are shortened"
            " to fit"
        )
    else:
        advice = (
            "the conversation does not fit the judge's context window: pass --max-input-tokens (max_input_tokens"
            " in Python) with the model's window so long conversations are shortened to fit"
        )
    return one_line(f"{advice}; the judge said: {message}", limit)


def raise_if_fatal(error: BaseException, backend: JudgeBackend) -> None:
    """A rejected key or an unknown model fails every call: stop the run."""
    status = _status(error)
    variable = getattr(backend, "key_variable", "the provider's API key variable")
    if status in (401, 403):
        raise JudgeAccessError(
            f"the judge rejected the API key for model {backend.model_name!r} ({status}): check {variable}"
        ) from None
    if status == 404:
        api_base = getattr(backend, "api_base", None)
        check = "check the model name and the path in --api-base" if api_base else "check the model name"
        raise JudgeAccessError(
            f"the judge at {endpoint_of(backend)} does not know model {backend.model_name!r} (404): {check}"
        ) from None


def retry_after_seconds(error: BaseException | None) -> float | None:
    headers = getattr(error, "litellm_response_headers", None)
    if headers is None:
        headers = getattr(getattr(error, "response", None), "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after") or headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):  # neither seconds nor an HTTP date: no hint
        return None


@dataclass
class CallStats:
    """What one judged request took: attempts, seconds in judge calls, seconds waiting on local ceilings."""

    attempts: int = 0
    latency_s: float = 0.0
    wait_s: float = 0.0


async def complete_with_retries(
    backend: JudgeBackend,
    messages: list[dict[str, str]],
    *,
    n: int,
    policy: RetryPolicy,
    rng: Any,
    gate: CallGate | None = None,
    estimated_tokens: int = 0,
    stats: CallStats | None = None,
    response_format: dict[str, Any] | None = None,
    temperature: float = 0.0,
    max_tokens: int | None = None,
) -> Completion:
    """One judged request, retried on rate limits, 5xx, timeouts and dropped connections, never
    when the server refused the request as invalid (400, 422, or a 5xx saying so), nor after a
    timeout on a self-hosted server that works on one request at a time (see `retries_timeouts`).

    Every attempt passes the `gate` (rate ceilings, adaptive concurrency) when there is one, then
    takes one of a self-hosted server's slots; its control ends backoff and rate waits at once
    when the run stops. Stopped by Ctrl-C, the request raises `RunStopped`; stopped because the
    judge is unreachable or refuses every call the same way, it raises the last error. `stats`
    collects attempts and timings, retries included. `timeout` comes from `policy`, else from
    the backend; `max_tokens` bounds each reply (None: unbounded).
    """
    stats = stats if stats is not None else CallStats()
    control = gate.control if gate is not None else None
    timeout = policy.timeout if policy.timeout is not None else backend.default_timeout_s()
    retries_timeouts = backend.retries_timeouts()
    retrying = AsyncRetrying(
        stop=stop_after_attempt(policy.max_retries + 1),
        retry=retry_if_exception(lambda error: is_retryable(error) and (retries_timeouts or not is_timeout(error))),
        wait=lambda state: policy.wait_seconds(
            state.attempt_number, state.outcome.exception() if state.outcome else None, rng.random()
        ),
        sleep=control.sleep if control is not None else asyncio.sleep,
        reraise=True,
    )
    last_error: BaseException | None = None
    try:
        async for attempt in retrying:
            with attempt:
                stats.attempts += 1
                try:
                    call = lambda: backend.complete(  # noqa: E731
                        messages,
                        n=n,
                        timeout=timeout,
                        response_format=response_format,
                        temperature=temperature,
                        max_tokens=max_tokens,
                    )
                    completion = await _attempt(call, gate, estimated_tokens, stats, backend)
                except RunStopped:
                    stats.attempts -= 1  # the wait was cut: no request went out
                    raise
                except Exception as error:
                    last_error = error
                    stats.attempts += getattr(error, "flowrate_requests", 1) - 1
                    if control is not None and is_connection_failure(error):
                        control.connection_failed(endpoint_of(backend))
                    elif control is not None and is_invalid_request(error) and not is_n_refusal(error):
                        control.call_refused(refusal_of(error))
                    raise
                stats.attempts += completion.requests - 1
                if control is not None:
                    control.connection_ok()
    except RunStopped:
        if control is not None and not control.interrupted and last_error is not None:
            _raise_attempt_error(last_error, backend, stats)
        raise
    except Exception as error:
        _raise_attempt_error(error, backend, stats)
    return completion


async def _attempt(
    call, gate: CallGate | None, estimated_tokens: int, stats: CallStats, backend: JudgeBackend
) -> Completion:
    """One attempt through the gate and a server slot; its time in the call and its waits go to `stats`."""
    if gate is None:
        return await _in_slot(call, stats, backend)
    async with gate.attempt(estimated_tokens) as waited_s:
        stats.wait_s += waited_s
        return await _in_slot(call, stats, backend)


async def _in_slot(call, stats: CallStats, backend: JudgeBackend) -> Completion:
    started = time.monotonic()
    async with backend.server_slot():
        stats.wait_s += time.monotonic() - started
        return await _timed(call, stats)


async def _timed(call, stats: CallStats) -> Completion:
    started = time.monotonic()
    try:
        return await call()
    finally:
        stats.latency_s += time.monotonic() - started


def _raise_attempt_error(error: BaseException, backend: JudgeBackend, stats: CallStats):
    raise_if_fatal(error, backend)
    error.flowrate_attempts = stats.attempts  # type: ignore[attr-defined]
    raise error


CONNECTION_ERROR_NAMES = {"APIConnectionError", "ConnectError", "ClientConnectorError", "ClientConnectionError"}


def is_connection_failure(error: BaseException) -> bool:
    """The endpoint could not be reached (refused, no route, DNS), as opposed to a slow or failing reply.
    LiteLLM wraps such errors differently per provider, so the whole cause chain is looked at."""
    seen = 0
    current: BaseException | None = error
    while current is not None and seen < 8:
        if isinstance(current, ConnectionError) or type(current).__name__ in CONNECTION_ERROR_NAMES:
            return True
        if "Connection error" in str(current):
            return True
        current = current.__cause__ or current.__context__
        seen += 1
    return False


def refusal_of(error: BaseException) -> str:
    """An invalid-request error as one line, its numbers blanked: the same refusal of two
    conversations differs only in token counts and request ids."""
    return re.sub(r"\d+", "#", f"{type(error).__name__}: {one_line(redact_secrets(str(error)))}")


def endpoint_of(backend: JudgeBackend) -> str:
    return getattr(backend, "api_base", None) or f"the {getattr(backend, 'provider', 'judge')} API"


def one_line(message: str, limit: int = 500) -> str:
    """An error message as one line: no traceback, no line breaks, at most `limit` characters."""
    message = message.split("Traceback (most recent call last)")[0]
    message = " ".join(message.split())
    return message if len(message) <= limit else message[: limit - 1] + "…"


SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)$")


def redact_secrets(text: str) -> str:
    """Blank out every secret-looking environment value that a provider's message may echo."""
    for name, value in os.environ.items():
        if len(value) >= 8 and SECRET_NAME.search(name.upper()) and value in text:
            text = text.replace(value, "***")
    return text
