"""The LiteLLM backend: any model LiteLLM reaches, with LiteLLM's own retries off (tenacity owns them), structured output in the form the server takes, learned once per run."""

from __future__ import annotations

import asyncio
import os
from functools import cached_property
from typing import Any

from flowrate.judge.access import AccessChecks
from flowrate.judge.backend import (
    KEY_VARIABLES,
    NO_KEY_PLACEHOLDER,
    Completion,
    PerLoop,
    Usage,
    litellm_model_name,
    provider_of,
)
from flowrate.judge.errors import (
    ContextWindowExceeded,
    TimedOut,
    Unreachable,
    error_of,
    retry_after_seconds,
    window_named,
)
from flowrate.judge.lazy_litellm import litellm as _litellm
from flowrate.judge.model_map import model_facts
from flowrate.judge.schema_forms import SchemaForms
from flowrate.judge.self_hosting import SelfHosting


class LiteLLMBackend(AccessChecks, SchemaForms, SelfHosting):
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
        # the lock held by the call that finds the schema form, and a self-hosted server's slots
        self._loop_locks = PerLoop(lambda: (asyncio.Lock(), asyncio.Semaphore(self._server_slots() or 1)))

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

    def _estimated_tokens(self, text: str) -> int:
        """LiteLLM's count: the model's tokenizer where LiteLLM has it, else its default."""
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
        """USD at the model's batch price where LiteLLM's map knows one; None otherwise, never a guess."""
        facts = model_facts(self.litellm_model) or {}
        prompt, completion = facts.get("input_cost_per_token_batches"), facts.get("output_cost_per_token_batches")
        if prompt is None or completion is None:
            return None
        return float(prompt * prompt_tokens + completion * completion_tokens)

    @property
    def batch_model(self) -> str:
        """The model's name in a batch request body: without LiteLLM's provider prefix."""
        return self.litellm_model.split("/", 1)[1] if "/" in self.litellm_model else self.litellm_model

    def cache_identity(self) -> str:
        """The model and where it is served: the same name at two endpoints is two judges."""
        return f"{self.litellm_model}@{self.api_base.rstrip('/')}" if self.api_base else self.litellm_model

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
        async with self._loop_locks.get()[0]:
            if not self._form_settled:
                return await self._probe_form(send)
        return await send()

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
        form, sent_format = self.request_format(response_format, max_tokens)
        if sent_format is not None:
            options["response_format"] = sent_format
        try:
            response = await litellm.acompletion(model=self.litellm_model, messages=messages, **options)
        except Exception as error:
            raise judge_error_of(error) from error
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


def judge_error_of(error: Exception) -> Exception:
    """LiteLLM's exception as one of flowrate's judge errors (`error` itself when it is none of
    LiteLLM's: a bug is not a judge's answer)."""
    import openai

    litellm = _litellm()
    message = str(error)
    status = getattr(error, "status_code", None)
    status = status if isinstance(status, int) else None
    if isinstance(error, litellm.Timeout):  # LiteLLM's for a 408 too
        return TimedOut(message, status=status)
    if isinstance(error, openai.APIConnectionError) or _connection_lost(error):
        return Unreachable(message)
    if not isinstance(error, openai.APIError) or status is None:
        return error
    headers = getattr(error, "litellm_response_headers", None) or getattr(
        getattr(error, "response", None), "headers", None
    )
    told_s = retry_after_seconds(headers)
    if isinstance(error, litellm.ContextWindowExceededError):
        return ContextWindowExceeded(message, window_tokens=window_named(message), status=status, retry_after_s=told_s)
    return error_of(status, message, retry_after_s=told_s)


def _connection_lost(error: BaseException) -> bool:
    """Whether a connection failure lies in `error`'s causes: LiteLLM reports some as a 500
    ("InternalServerError: OpenAIException - Connection error.") with the transport's error beneath."""
    import aiohttp
    import httpx
    import openai

    lost = (ConnectionError, httpx.ConnectError, aiohttp.ClientConnectionError, openai.APIConnectionError)
    current = error.__cause__ or error.__context__
    for _ in range(8):
        if current is None:
            return False
        if isinstance(current, lost) and not isinstance(current, TimeoutError | openai.APITimeoutError):
            return True
        current = current.__cause__ or current.__context__
    return False
