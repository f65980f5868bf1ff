"""The LiteLLM backend: any model LiteLLM reaches, with LiteLLM's own retries off (tenacity owns them), structured output in the form the server takes, learned once per run."""

from __future__ import annotations

import asyncio
import contextlib
import os
from functools import cache, cached_property
from typing import Any

from flowrate.errors import JudgeAccessError
from flowrate.judge.backend import (
    ALSO_READ,
    HOSTED_TIMEOUT_S,
    KEY_VARIABLES,
    KEYLESS_PROVIDERS,
    NO_KEY_PLACEHOLDER,
    OLLAMA_DEFAULT_BASE,
    OLLAMA_FORM,
    SCHEMA_FORMS,
    SELF_HOSTED_PROVIDERS,
    SELF_HOSTED_TIMEOUT_S,
    Completion,
    CustomClientBackend,
    JudgeBackend,
    Usage,
    litellm_model_name,
    provider_of,
)
from flowrate.judge.retry import is_format_refusal
from flowrate.judge.server import ServerFacts, probe_server


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
