"""The LiteLLM backend: any model LiteLLM reaches, with LiteLLM's own retries off (tenacity owns them), structured output in the form the server takes, learned once per run."""

from __future__ import annotations

import os
from functools import cached_property
from typing import Any

from flowrate.judge.access import check_keys, check_litellm_keys, check_litellm_serves
from flowrate.judge.address import JudgeAddress
from flowrate.judge.backend import NO_KEY_PLACEHOLDER, Completion, tokens_of, usage_of
from flowrate.judge.errors import (
    ContextWindowExceeded,
    TimedOut,
    Unreachable,
    error_of,
    retry_after_seconds,
    window_named,
)
from flowrate.judge.lazy_litellm import litellm as _litellm
from flowrate.judge.served import ChatRequest, ServedJudge
from flowrate.judge.served_model import ServedModel

REQUEST_ONLY = ("model", "messages")  # of a `ChatRequest`'s body, what `acompletion` takes by itself


class LiteLLMModel(ServedModel):
    """A model as LiteLLM knows it: its model info, the OpenAI parameters it passes to the
    provider, its tokenizer and prices (each asked once; LiteLLM's answer never changes in a run)."""

    @cached_property
    def _supported_params(self) -> list[str]:
        """The OpenAI parameters LiteLLM passes to this model's provider (it refuses the others)."""
        try:
            return list(_litellm().get_supported_openai_params(model=self.address.litellm_model) or [])
        except Exception:
            return []

    @property
    def takes_n(self) -> bool:
        return "n" in self._supported_params

    @property
    def supported_params(self) -> frozenset[str] | None:
        return frozenset(self._supported_params) or None

    @cached_property
    def info(self) -> dict[str, Any] | None:
        try:
            return _litellm().get_model_info(model=self.address.litellm_model)
        except Exception:  # a model LiteLLM has no facts about
            return None

    @cached_property
    def takes_schema(self) -> bool:
        try:
            return bool(_litellm().supports_response_schema(model=self.address.litellm_model))
        except Exception:
            return False

    @property
    def takes_logprobs(self) -> bool:
        return "logprobs" in self._supported_params

    @property
    def reasons(self) -> bool:
        try:
            return bool(_litellm().supports_reasoning(model=self.address.litellm_model))
        except Exception:
            return False

    def estimated_tokens(self, text: str) -> int:
        """LiteLLM's count: the model's tokenizer where LiteLLM has it, else its default."""
        return _litellm().token_counter(model=self.address.litellm_model, text=text)


class LiteLLMBackend(ServedJudge):
    """Any model LiteLLM reaches. LiteLLM's own retries are off: tenacity owns them all."""

    def __init__(self, address: JudgeAddress):
        """`address`: the model and where it is served (`JudgeAddress.parse`)."""
        super().__init__(LiteLLMModel(address))

    def check_access(self) -> None:
        """Fail before spending anything: a missing key, or a model no provider serves."""
        check_keys(self.model)
        self.check_model()
        check_litellm_keys(self.model)

    def check_model(self) -> None:
        """Raise `JudgeAccessError` unless LiteLLM knows which provider serves the model."""
        check_litellm_serves(self.model)

    async def _send(self, request: ChatRequest, timeout: float) -> Completion:
        litellm = _litellm()
        options: dict[str, Any] = {"num_retries": 0, "max_retries": 0, "timeout": timeout}
        options.update((key, value) for key, value in request.body.items() if key not in REQUEST_ONLY)
        if self.api_base:
            options["api_base"] = self.api_base
            if self.provider == "openai" and not os.environ.get("OPENAI_API_KEY"):
                options["api_key"] = NO_KEY_PLACEHOLDER
        try:
            response = await litellm.acompletion(model=self.litellm_model, messages=request.body["messages"], **options)
        except Exception as error:
            raise judge_error_of(error) from error
        texts = [choice.message.content or "" for choice in response.choices]
        usage: Any = getattr(response, "usage", None)
        usage = usage.model_dump() if hasattr(usage, "model_dump") else usage
        tokens = usage_of(usage)
        # priced by flowrate from LiteLLM's model info, as the direct transport prices (LiteLLM's own
        # response_cost is 0 for a model its map lists at 0, and knows no config's price), unless the
        # provider said what it charged (OpenRouter's usage.cost)
        charged = self.rules.charged_usd(usage) if isinstance(usage, dict) else None
        return Completion(
            texts=texts,
            usage=tokens,
            cost_usd=self.price(tokens) if charged is None else charged,
            finish_reasons=[getattr(choice, "finish_reason", None) for choice in response.choices],
            response_format=request.form,
            logprobs=[tokens_of(_plain(getattr(choice, "logprobs", None))) for choice in response.choices],
        )


def _plain(logprobs: Any) -> Any:
    """LiteLLM's `ChoiceLogprobs` (a pydantic model) as the dict OpenAI's JSON holds."""
    return logprobs.model_dump() if hasattr(logprobs, "model_dump") else logprobs


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
