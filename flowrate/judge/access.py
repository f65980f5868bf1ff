"""Checks that fail before anything is spent: a missing key (told before LiteLLM is imported, since its
import takes seconds), a key LiteLLM finds missing, a model no provider serves.

`AccessChecks` is a part of `LiteLLMBackend`; it reads the judge's address (declared by `ServedFacts`)."""

from __future__ import annotations

from flowrate.errors import JudgeAccessError
from flowrate.judge.backend import KEY_VARIABLES, KEYLESS_PROVIDERS
from flowrate.judge.lazy_litellm import litellm as _litellm
from flowrate.judge.served_base import ServedFacts


class AccessChecks(ServedFacts):
    """A LiteLLM backend's checks before any call; see the module."""

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
