"""The facts about a model served at an address: who serves it (its `JudgeAddress`) and what its
transport knows of it (LiteLLM's functions, or LiteLLM's model map read as data): its window, its
prices, and which request parameters it takes. Every part of a served judge reads them here: the
request it sends (`ServedJudge.chat_request`), the form its schema goes in (`SchemaForms`), its
self-hosted defaults (`SelfHosting`) and its key checks (`access`); a rule that depends on the
model or its provider reads them here too."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from flowrate.judge.address import JudgeAddress
from flowrate.judge.backend import KEY_VARIABLES, SELF_HOSTED_PROVIDERS, Usage
from flowrate.judge.model_map import model_facts, price_usd
from flowrate.settings.groups import ModelPrice


class ServedModel(ABC):
    """A model at `address`, as its transport knows it; see the module. A transport writes the
    abstract facts; `address` and the key variable are the same for every transport."""

    def __init__(self, address: JudgeAddress):
        """`address`: the model and where it is served (`JudgeAddress.parse`)."""
        self.address = address
        #: the variable the provider's key is read from (LiteLLM's name for it)
        self.key_variable = KEY_VARIABLES.get(address.provider, f"{address.provider.upper()}_API_KEY")

    @property
    @abstractmethod
    def info(self) -> dict[str, Any] | None:
        """The model's facts (window, prices, features); None: unknown."""

    @property
    @abstractmethod
    def takes_n(self) -> bool:
        """The model takes `n` (several replies to one request)."""

    @property
    @abstractmethod
    def takes_schema(self) -> bool:
        """The model takes OpenAI's `json_schema`."""

    @property
    @abstractmethod
    def takes_logprobs(self) -> bool:
        """The model may give token log-probabilities (`logprobs`, `top_logprobs`)."""

    @property
    @abstractmethod
    def reasons(self) -> bool:
        """A reasoning model: its hidden reasoning counts against `max_tokens`."""

    @abstractmethod
    def estimated_tokens(self, text: str) -> int:
        """Tokens in `text` by the transport's own count (no server asked)."""

    @property
    @abstractmethod
    def supported_params(self) -> frozenset[str] | None:
        """The OpenAI parameters the transport passes to the model's provider (None: it speaks
        OpenAI's protocol itself, and sends any)."""

    def price(self, usage: Usage, prices: dict[str, ModelPrice] | None = None) -> float | None:
        """USD for `usage` at the model's price (`model_map.price_usd`): the config's `prices` for
        the model as the user named it or as LiteLLM does, else the facts'; None for a model
        without one, never a guess."""
        configured = (prices or {}).get(self.address.model) or (prices or {}).get(self.address.litellm_model)
        paid = self.address.provider not in SELF_HOSTED_PROVIDERS
        return price_usd(self.info, usage, paid=paid, configured=configured)

    def batch_price(self, usage: Usage) -> float | None:
        """USD at the model's batch price where LiteLLM's map knows one; None otherwise, never a guess."""
        facts = model_facts(self.address.litellm_model) or {}
        prompt, completion = facts.get("input_cost_per_token_batches"), facts.get("output_cost_per_token_batches")
        if prompt is None or completion is None:
            return None
        return float(prompt * usage.prompt_tokens + completion * usage.completion_tokens)
