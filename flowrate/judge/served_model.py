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
from flowrate.judge.backend import KEY_VARIABLES
from flowrate.judge.model_map import model_facts


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

    @abstractmethod
    def price(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """USD at the model's price; None for a model without one, never a guess."""

    def batch_price(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """USD at the model's batch price where LiteLLM's map knows one; None otherwise, never a guess."""
        facts = model_facts(self.address.litellm_model) or {}
        prompt, completion = facts.get("input_cost_per_token_batches"), facts.get("output_cost_per_token_batches")
        if prompt is None or completion is None:
            return None
        return float(prompt * prompt_tokens + completion * completion_tokens)
