"""A judge's address: the model string and `--api-base`, parsed once into what every backend,
the batch client and the engines read (the provider, the model's name there, the transport)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from flowrate.judge.model_map import model_facts

GGUF_PREFIX = "gguf:"
DIRECT_PROVIDERS = ("openai", "azure")  # the providers that speak OpenAI's chat-completions protocol
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


@dataclass(frozen=True)
class JudgeAddress:
    """Where a judge is and how to reach it.

    `model` is the name as the user gave it (rows and messages show it); `litellm_model` the
    name as LiteLLM takes it (`anthropic/claude-x`, `ollama_chat/llama3`, `gpt-4o`); `provider`
    LiteLLM's provider (`openai` for a bare name); `name` the model's name at the provider, as a
    request body sends it; `api_base` the server's URL; `direct` whether the direct transport
    can speak to it (`judge.direct`); `gguf_path` the model file of a `gguf:PATH` judge."""

    model: str
    litellm_model: str
    provider: str
    name: str
    api_base: str | None = None
    direct: bool = False
    gguf_path: Path | None = None

    @classmethod
    def parse(cls, model: str, api_base: str | None = None) -> JudgeAddress:
        """`model` at `api_base`: `provider:model` (eval_lib's prefixes) or LiteLLM's `provider/model`;
        `ollama` always goes to the chat endpoint; with an `api_base` and no provider named, the
        server is taken to speak OpenAI's protocol; `gguf:PATH` a model file run in this process."""
        if model.startswith(GGUF_PREFIX):
            path = Path(model.removeprefix(GGUF_PREFIX)).expanduser()
            return cls(model, model, "gguf", path.name, gguf_path=path)
        litellm_model = model
        provider, sep, name = model.partition(":")
        if sep and "/" not in provider and provider.lower() in PROVIDER_ALIASES:
            litellm_model = f"{PROVIDER_ALIASES[provider.lower()]}/{name}"
        if litellm_model.startswith("ollama/"):
            litellm_model = "ollama_chat/" + litellm_model.removeprefix("ollama/")
        if api_base and "/" not in litellm_model:
            litellm_model = f"openai/{litellm_model}"
        provider, sep, name = litellm_model.partition("/")
        provider, name = (provider, name) if sep else ("openai", litellm_model)
        return cls(model, litellm_model, provider, name, api_base, _speaks_openai(litellm_model, provider, api_base))

    @property
    def endpoint_id(self) -> str:
        """The model and where it is served: the same name at two endpoints is two judges."""
        return f"{self.litellm_model}@{self.api_base.rstrip('/')}" if self.api_base else self.litellm_model


def _speaks_openai(litellm_model: str, provider: str, api_base: str | None) -> bool:
    """Any model at `--api-base` with no other provider named, a model the map gives to OpenAI or
    Azure, or one named `openai/` or `azure/` (Azure with a base URL known)."""
    if provider not in DIRECT_PROVIDERS:
        return False
    if provider == "azure" and not (api_base or os.environ.get("AZURE_API_BASE")):
        return False
    return bool(api_base) or "/" in litellm_model or model_facts(litellm_model) is not None
