"""What a judge backend is: one model call, its reply texts, tokens and cost. LiteLLM's backend and a user's own client both implement it."""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from flowrate.judge.errors import TimedOut, Unreachable
from flowrate.judge.logprobs import LogprobsLearned
from flowrate.settings.groups import HOSTED_TIMEOUT_S
from flowrate.settings.groups import SELF_HOSTED_TIMEOUT_S as SELF_HOSTED_TIMEOUT_S  # for the engines

T = TypeVar("T")


class PerLoop(Generic[T]):
    """A value made afresh for each event loop that asks for it: asyncio's locks and semaphores
    belong to the loop that first waits on them, and the Python API may run one backend under
    several loops, one after another."""

    def __init__(self, make: Callable[[], T]):
        """`make` builds the value for a loop, called inside it."""
        self._make = make
        self._loop_id: int | None = None
        self._value: T | None = None

    def get(self) -> T:
        """The value for the running loop."""
        loop = id(asyncio.get_running_loop())
        if self._loop_id != loop or self._value is None:
            self._loop_id, self._value = loop, self._make()
        return self._value


class Usage(BaseModel):
    """Tokens one or more calls spent. Sums go through `+` field by field, so a count added
    here (cached input, reasoning) is carried by every total without another edit.

    As OpenAI counts them: `prompt_tokens` is all the input, of which `cached_tokens` were read
    from the provider's prompt cache and `cache_write_tokens` written to it (Anthropic's
    `cache_creation_input_tokens`); `completion_tokens` all the output, of which
    `reasoning_tokens` were the model's hidden reasoning (billed as output). In process (`gguf:`),
    `cached_tokens` are the prompt's first tokens the model held from its call before."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(**{name: getattr(self, name) + getattr(other, name) for name in Usage.model_fields})


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

# HOSTED_TIMEOUT_S and SELF_HOSTED_TIMEOUT_S: the seconds of an attempt without --timeout, by
# the option's declaration (flowrate.settings.groups.RetryOptions).

# How the rubric's reply schema is sent to a server at --api-base, tried in this order until one is
# taken; the first a server takes is kept for the run. OpenAI's `json_schema` (vLLM, llama.cpp's
# llama-server, LM Studio, gateways), then `{"type": "json_object", "schema": ...}`
# (llama-cpp-python's server, whose request model allows the types "text" and "json_object"
# only), then no schema at all (a server that takes neither).
# Alternatives asked at each token of a reply: at the verdict's token the five levels held
# 0.93-1.0 of the top-10 mass on the 1.5B judge (../shared/local-judge.md); OpenAI allows 20.
TOP_LOGPROBS = 10

SCHEMA_FORMS: tuple[str | None, ...] = ("json_schema", "json_object_schema", None)
OLLAMA_FORM = "ollama_format"  # LiteLLM's ollama_chat provider sends json_schema as Ollama's `format`


LOGPROBS_KEYS = ("logprobs", "top_logprobs")  # the keys `chat_body` asks for log-probabilities by


def chat_body(
    model: str,
    messages: list[dict[str, str]],
    n: int,
    response_format: dict[str, Any] | None,
    temperature: float,
    max_tokens: int | None,
    top_logprobs: int = 0,
) -> dict[str, Any]:
    """The body of one OpenAI chat-completions request, as every path sends it: the direct
    transport, a provider batch's line and an engine's request (`metrics.step`). `response_format`
    is already in the form the server takes; `n` and `max_tokens` are left out when 1 or None;
    with `top_logprobs`, each reply token's log-probability and that many alternatives are asked."""
    body: dict[str, Any] = {"model": model, "messages": messages, "temperature": temperature}
    if n > 1:
        body["n"] = n
    if response_format:
        body["response_format"] = response_format
    if max_tokens:
        body["max_tokens"] = max_tokens
    if top_logprobs:
        body["logprobs"] = True
        body["top_logprobs"] = top_logprobs
    return body


# -- what a backend returns ------------------------------------------------------
@dataclass
class Completion:
    """The replies to one request. `finish_reasons` match `texts` ("length": cut at max_tokens);
    `response_format` is the form the schema went in (see `SCHEMA_FORMS`); `requests` counts
    the HTTP requests it took (more than one when the server refused a schema form first);
    `logprobs` matches `texts` with each reply's tokens and their log-probabilities (OpenAI's
    `logprobs.content`: token, logprob, top_logprobs), None for a reply that came without."""

    texts: list[str]
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    finish_reasons: list[str | None] = field(default_factory=list)
    response_format: str | None = None
    requests: int = 1
    logprobs: list[list[dict[str, Any]] | None] = field(default_factory=list)

    def tokens(self, index: int) -> list[dict[str, Any]] | None:
        """Reply `index`'s tokens with their log-probabilities; None when it came without."""
        return self.logprobs[index] if index < len(self.logprobs) else None

    def cut(self, index: int) -> bool:
        """Whether reply `index` stopped at its token limit."""
        return index < len(self.finish_reasons) and self.finish_reasons[index] == "length"


def usage_of(usage: Any) -> Usage:
    """The tokens of an OpenAI `usage` object, as OpenAI, Azure and LiteLLM (its `model_dump`)
    write it: the cached input in `prompt_tokens_details.cached_tokens` (OpenAI's automatic
    caching), `cache_read_input_tokens` (LiteLLM's for Anthropic and Bedrock) or
    `prompt_cache_hit_tokens` (DeepSeek's), the input written
    to the cache in `cache_creation_input_tokens`, the reasoning in
    `completion_tokens_details.reasoning_tokens`."""
    usage = usage if isinstance(usage, dict) else {}
    prompt_details = usage.get("prompt_tokens_details") or {}
    completion_details = usage.get("completion_tokens_details") or {}
    return Usage(
        prompt_tokens=usage.get("prompt_tokens") or 0,
        completion_tokens=usage.get("completion_tokens") or 0,
        cached_tokens=prompt_details.get("cached_tokens")
        or usage.get("cache_read_input_tokens")
        or usage.get("prompt_cache_hit_tokens")  # DeepSeek's
        or 0,
        cache_write_tokens=usage.get("cache_creation_input_tokens") or 0,
        reasoning_tokens=completion_details.get("reasoning_tokens") or 0,
    )


def tokens_of(logprobs: Any) -> list[dict[str, Any]] | None:
    """A choice's tokens with their log-probabilities (`logprobs.content`), alternatives kept as
    token and logprob only; None when the choice has none. Together's shape (`tokens`,
    `token_logprobs`, `top_logprobs` as one {token: logprob} per token; togethercomputer/openapi's
    LogprobsPart) is read as the same tokens."""
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not content and isinstance(logprobs, dict) and isinstance(logprobs.get("tokens"), list):
        content = _together_tokens(logprobs)
    if not isinstance(content, list) or not content:
        return None
    return [
        {
            "token": item.get("token"),
            "logprob": item.get("logprob"),
            "top_logprobs": [
                {"token": top.get("token"), "logprob": top.get("logprob")} for top in item.get("top_logprobs") or []
            ],
        }
        for item in content
        if isinstance(item, dict)
    ]


def _together_tokens(logprobs: dict[str, Any]) -> list[dict[str, Any]]:
    """Together's `tokens`, `token_logprobs` and `top_logprobs` as OpenAI's `content` items."""
    values = logprobs.get("token_logprobs") or []
    tops = logprobs.get("top_logprobs") or []
    items = []
    for index, token in enumerate(logprobs["tokens"]):
        top = tops[index] if index < len(tops) and isinstance(tops[index], dict) else {}
        logprob = values[index] if index < len(values) else None
        alternatives = [{"token": name, "logprob": value} for name, value in top.items()]
        items.append({"token": token, "logprob": logprob, "top_logprobs": alternatives})
    return items


class JudgeBackend(ABC):
    """A judge: one model call, its replies, tokens and cost. A backend writes `complete` and only what
    differs from these defaults (as inspect_ai's `ModelAPI`): a hosted judge that needs no key check, gives
    one reply per call, tells no context window or price, and counts about three bytes a token."""

    model_name: str  #: the model as the user named it: rows and messages show it
    asks_logprobs: bool = False  #: the run asks for token log-probabilities (`--logprobs`)
    reasoning_effort: str | None = None  #: `--reasoning-effort`, for a judge that reasons (None: the provider's)
    prompt_cache_key: str | None = None  #: the rubric's name and version, for OpenAI's `prompt_cache_key`
    prices: dict[str, Any] | None = None  #: the config's `prices`: per model, USD per million tokens
    logprobs: LogprobsLearned | None = None  #: what a served judge's server gave of them this run (None: not served)

    @abstractmethod
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
        """`n` replies to `messages` (`n` > 1 only where `supports_n`), each attempt at most
        `timeout` seconds, the schema in `response_format` (from `structured_output`), at
        `temperature`, each reply at most `max_tokens` (None: unbounded). Raises flowrate's
        `judge.errors.JudgeError` for a failed call."""

    def check_access(self) -> None:
        """Fail (`JudgeAccessError`) before anything is spent: by default, the key and the model."""
        self.check_keys()
        self.check_model()

    def check_keys(self) -> None:
        """Fail (`JudgeAccessError`) on a missing key, quickly (no heavy import): by default, no key is needed."""
        return None

    def check_model(self) -> None:
        """Fail (`JudgeAccessError`) on a model no one serves: by default, any model is served."""
        return None

    def supports_n(self) -> bool:
        """Whether one request may ask for several replies (`n`)."""
        return False

    def ignores_n(self) -> None:
        """The judge answered a request for `n` replies with fewer: ask one at a time from now on."""
        return None

    def default_timeout_s(self) -> float:
        """Seconds an attempt may take when the run's policy does not say."""
        return HOSTED_TIMEOUT_S

    def top_logprobs(self) -> int:
        """Alternatives asked at each reply token with its log-probability (0: none): by default none."""
        return 0

    def refuses_logprobs(self, said: str) -> None:
        """The server refused log-probabilities, saying `said`, to an engine sending for itself (Ray): ask none."""
        return None

    def retries_timeouts(self) -> bool:
        """Whether an attempt that timed out is tried again."""
        return True

    def server_slot(self) -> Any:
        """An async context held while a request is at the judge: by default, no bound."""
        return contextlib.nullcontext()

    def bounds_replies(self) -> bool:
        """Whether `complete` is given `max_tokens`."""
        return True

    def context_window(self) -> int | None:
        """Input tokens the model takes; None when unknown."""
        return None

    def count_tokens(self, text: str) -> int:
        """Tokens in `text` by the model's count: by default, about three bytes a token, rounded up."""
        return len(text.encode()) // 3 + 1

    def price(self, usage: Usage) -> float | None:
        """USD for the tokens of `usage` (cached input at its price); None when unknown, never a guess."""
        return None

    def provider_body(self, body: dict[str, Any]) -> dict[str, Any]:
        """An OpenAI chat-completions `body` as the judge's provider takes it: by default, as it is."""
        return body

    def cached_prefix_tokens(self, prefix_tokens: int) -> int:
        """Of a prompt whose shared prefix (the rubric) is `prefix_tokens` long, the tokens the
        provider will read from its prompt cache once a call has written them: by default none."""
        return 0

    def notes(self) -> list[str]:
        """What the judge learned of its provider this run (a parameter refused), each once, for the run's end."""
        return []

    def cache_identity(self) -> str:
        """The judge in the cache key: the same name served elsewhere is another judge."""
        return self.model_name

    def response_format_id(self) -> str | None:
        """The form the next request sends the schema in (part of the cache key); None: none."""
        return None

    def response_format_ids(self) -> list[str | None]:
        """Every form a cached reply of this judge may have been asked in."""
        return [self.response_format_id()]

    def structured_output(self, name: str, schema: dict[str, Any]) -> dict[str, Any] | None:
        """The `response_format` asking for `schema` under `name`; None where the judge takes no schema."""
        return None


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


class CustomClientBackend(JudgeBackend):
    """A `CustomLLMClient` as a backend: one reply per call, no token counts."""

    def __init__(self, client: Any):
        """`client`: an object with `chat_complete(messages, temperature)` and `get_model_name()`."""
        self.client = client
        self.model_name = client.get_model_name()

    def bounds_replies(self) -> bool:
        return False  # `chat_complete` takes no token limit

    def cache_identity(self) -> str:
        return f"custom:{self.model_name}"

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
        try:
            result = await asyncio.wait_for(self.client.chat_complete(messages, temperature), timeout)
        except TimeoutError:
            raise TimedOut(f"the client took longer than {timeout:g} seconds") from None
        except ConnectionError as error:
            raise Unreachable(str(error)) from error
        text, cost = (result, None) if isinstance(result, str) or result is None else result
        return Completion(texts=[text or ""], cost_usd=cost)
