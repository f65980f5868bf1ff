"""Calling the judge: model backends, retries and reading its verdict.

LiteLLM is imported here only, and only when a LiteLLM judge is first used:
its import costs seconds and `--help` or `validate` never need it.
"""

from __future__ import annotations

import asyncio
import email.utils
import os
import re
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any, Protocol

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

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
    texts: list[str]
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None


class JudgeBackend(Protocol):
    model_name: str

    async def complete(
        self, messages: list[dict[str, str]], *, n: int, timeout: float, response_format: dict | None = None
    ) -> Completion:
        """`n` replies to one prompt; `n` > 1 only where `supports_n`."""

    def check_access(self) -> None: ...

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

    def structured_output(self, name: str, schema: dict[str, Any]) -> dict[str, Any] | None:
        return None

    async def complete(
        self, messages: list[dict[str, str]], *, n: int, timeout: float, response_format: dict | None = None
    ) -> Completion:
        result = await asyncio.wait_for(self.client.chat_complete(messages, 0.0), timeout)
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
        return self._supports_n

    @cached_property
    def _supports_n(self) -> bool:
        try:
            return "n" in (_litellm().get_supported_openai_params(model=self.litellm_model) or [])
        except Exception:
            return False

    def context_window(self) -> int | None:
        litellm = _litellm()
        try:
            return litellm.get_model_info(model=self.litellm_model).get("max_input_tokens")
        except Exception:  # a model LiteLLM has no facts about
            return None

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

    def response_format_id(self) -> str | None:
        return "json_schema" if self._structured else None

    @cached_property
    def _structured(self) -> bool:
        try:
            return bool(_litellm().supports_response_schema(model=self.litellm_model))
        except Exception:
            return False

    def structured_output(self, name: str, schema: dict[str, Any]) -> dict[str, Any] | None:
        """The `response_format` asking for `schema`, where the model supports structured output."""
        if not self._structured:
            return None
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}

    async def complete(
        self,
        messages: list[dict[str, str]],
        *,
        n: int,
        timeout: float,
        response_format: dict[str, Any] | None = None,
    ) -> Completion:
        litellm = _litellm()
        options: dict[str, Any] = {"num_retries": 0, "max_retries": 0, "timeout": timeout, "temperature": 0}
        if n > 1:
            options["n"] = n
        if self.api_base:
            options["api_base"] = self.api_base
            if self.provider == "openai" and not os.environ.get("OPENAI_API_KEY"):
                options["api_key"] = NO_KEY_PLACEHOLDER
        if response_format:
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
        return Completion(texts=texts, usage=tokens, cost_usd=None if cost is None else float(cost))


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
    """

    max_retries: int = 5
    timeout: float = 60.0
    backoff: float = 1.0
    backoff_max: float = 60.0

    def wait_seconds(self, attempt: int, error: BaseException | None, jitter: float) -> float:
        exponential = self.backoff * (2 ** (attempt - 1)) * (0.5 + jitter)
        return min(self.backoff_max, max(exponential, retry_after_seconds(error) or 0.0))


RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 529}


def _status(error: BaseException) -> int | None:
    status = getattr(error, "status_code", None)
    return status if isinstance(status, int) else None


def is_retryable(error: BaseException) -> bool:
    if isinstance(error, (asyncio.TimeoutError, TimeoutError, ConnectionError)):
        return True
    status = _status(error)
    return status is not None and (status in RETRYABLE_STATUS or status >= 500)


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
) -> Completion:
    """One judged request, retried on rate limits, 5xx, timeouts and dropped connections.

    Every attempt passes the `gate` (rate ceilings, adaptive concurrency) when there is one;
    its control ends backoff and rate waits at once when the run stops. Stopped by Ctrl-C,
    the request raises `RunStopped`; stopped because the judge is unreachable, it raises the
    last connection error. `stats` collects attempts and timings, retries included.
    """
    stats = stats if stats is not None else CallStats()
    control = gate.control if gate is not None else None
    retrying = AsyncRetrying(
        stop=stop_after_attempt(policy.max_retries + 1),
        retry=retry_if_exception(is_retryable),
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
                        messages, n=n, timeout=policy.timeout, response_format=response_format
                    )
                    completion = await _attempt(call, gate, estimated_tokens, stats)
                except RunStopped:
                    stats.attempts -= 1  # the wait was cut: no request went out
                    raise
                except Exception as error:
                    last_error = error
                    if control is not None and is_connection_failure(error):
                        control.connection_failed(endpoint_of(backend))
                    raise
                if control is not None:
                    control.connection_ok()
    except RunStopped:
        if control is not None and not control.interrupted and last_error is not None:
            _raise_attempt_error(last_error, backend, stats)
        raise
    except Exception as error:
        _raise_attempt_error(error, backend, stats)
    return completion


async def _attempt(call, gate: CallGate | None, estimated_tokens: int, stats: CallStats) -> Completion:
    """One attempt through the gate; its time in the call and its wait on the gate go to `stats`."""
    if gate is None:
        return await _timed(call, stats)
    async with gate.attempt(estimated_tokens) as waited_s:
        stats.wait_s += waited_s
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
