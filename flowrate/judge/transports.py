"""Which backend judges a model: a GGUF file in this process, the direct transport for the
OpenAI protocol, LiteLLM for every other provider, or the user's own client."""

from __future__ import annotations

from typing import Any

from flowrate.errors import ConfigError
from flowrate.judge.address import JudgeAddress
from flowrate.judge.backend import CustomClientBackend, JudgeBackend
from flowrate.judge.direct import DirectBackend
from flowrate.judge.litellm_backend import LiteLLMBackend

TRANSPORTS = ("auto", "direct", "litellm")


def make_backend(model: str | Any, api_base: str | None = None, transport: str = "auto") -> JudgeBackend:
    """The backend for `model`: `gguf:PATH` a model file run in this process; a model that speaks
    OpenAI's chat-completions protocol (OpenAI, Azure, any `api_base`) the direct transport unless
    `transport` is "litellm"; any other name LiteLLM's; an object with `chat_complete` the user's
    own client; a `JudgeBackend` itself. `transport` "direct" for a model of another provider is a
    `ConfigError`."""
    if isinstance(model, JudgeBackend):
        return model
    if not isinstance(model, str):
        if hasattr(model, "chat_complete") and hasattr(model, "get_model_name"):
            return CustomClientBackend(model)
        raise TypeError("model must be a model name or an object with chat_complete() and get_model_name()")
    address = JudgeAddress.parse(model, api_base)
    if address.gguf_path is not None:
        from flowrate.judge.local_model import LocalModel

        return LocalModel(address)
    if transport not in TRANSPORTS:
        raise ConfigError(f"option transport: {transport!r} is not one of {', '.join(TRANSPORTS)}")
    if transport != "litellm" and address.direct:
        return DirectBackend(address)
    if transport == "direct":
        raise ConfigError(
            f"option transport: direct speaks OpenAI's chat-completions protocol, and model {model!r} is"
            " served by another provider: use --transport auto or litellm"
        )
    return LiteLLMBackend(address)
