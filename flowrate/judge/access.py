"""Checks that fail before anything is spent: a missing key (told before LiteLLM is imported, since its
import takes seconds), a key LiteLLM finds missing, a model no provider serves. Each reads the
model's address (`ServedModel`)."""

from __future__ import annotations

import os

from flowrate.errors import JudgeAccessError
from flowrate.judge.backend import ALSO_READ, KEY_VARIABLES, KEYLESS_PROVIDERS
from flowrate.judge.lazy_litellm import litellm as _litellm
from flowrate.judge.served_model import ServedModel


def check_keys(model: ServedModel) -> None:
    """A known provider's key, checked without importing LiteLLM (its import takes seconds), so
    that a missing key is reported at once."""
    address = model.address
    if address.api_base or address.provider in KEYLESS_PROVIDERS or address.provider not in KEY_VARIABLES:
        return
    names = [model.key_variable, ALSO_READ.get(address.provider)]
    if not any(os.environ.get(name, "").strip() for name in names if name):
        other = f" (LiteLLM also reads {ALSO_READ[address.provider]})" if address.provider in ALSO_READ else ""
        raise JudgeAccessError(f"no API key for model {address.model!r}: set {model.key_variable}{other}")


def check_litellm_keys(model: ServedModel) -> None:
    """The keys LiteLLM finds missing for a provider flowrate does not know the key of."""
    address = model.address
    if address.api_base or address.provider in KEYLESS_PROVIDERS or address.provider in KEY_VARIABLES:
        return
    try:
        missing = _litellm().validate_environment(model=address.litellm_model).get("missing_keys", [])
    except Exception:  # LiteLLM cannot tell: let the first call tell
        return
    if missing:
        raise JudgeAccessError(f"no API key for model {address.model!r}: set {' and '.join(dict.fromkeys(missing))}")


def check_litellm_serves(model: ServedModel) -> None:
    """Raise `JudgeAccessError` unless LiteLLM knows which provider serves the model."""
    address = model.address
    if address.api_base:
        return
    try:
        _litellm().get_llm_provider(address.litellm_model)
    except Exception:
        raise JudgeAccessError(
            f"no provider serves model {address.model!r}: name one (openai:gpt-4o, anthropic:claude-3-5-sonnet-latest,"
            " ollama:llama3, any LiteLLM provider/model) or give --api-base for an OpenAI-compatible server"
        ) from None
