"""What the LiteLLM backend and the direct transport share: a judge named by a `JudgeAddress`,
its key checked without importing LiteLLM, the schema form and `n` learned from the server once
per run (`SchemaForms`), a self-hosted server's window, slots and timeouts (`SelfHosting`)."""

from __future__ import annotations

import asyncio
import os
from abc import abstractmethod
from typing import Any

from flowrate.errors import JudgeAccessError
from flowrate.judge.address import JudgeAddress
from flowrate.judge.backend import ALSO_READ, KEY_VARIABLES, KEYLESS_PROVIDERS, TOP_LOGPROBS, Completion, PerLoop
from flowrate.judge.logprobs import LogprobsLearned
from flowrate.judge.model_map import model_facts
from flowrate.judge.schema_forms import SchemaForms
from flowrate.judge.self_hosting import SelfHosting
from flowrate.judge.served_base import ServedFacts


class ServedJudge(SchemaForms, SelfHosting, ServedFacts):
    """A model served at an address; a transport writes `_send` and the facts `ServedFacts`
    declares (`_model_info`, `_supports_n`, `_structured`, `_estimated_tokens`)."""

    logprobs: LogprobsLearned  #: a served judge always learns its server's log-probabilities

    def __init__(self, address: JudgeAddress):
        """`address`: the model and where it is served (`JudgeAddress.parse`)."""
        self.address = address
        self.model_name = address.model
        self.api_base = address.api_base
        self.litellm_model = address.litellm_model
        self.provider = address.provider
        self.key_variable = KEY_VARIABLES.get(self.provider, f"{self.provider.upper()}_API_KEY")
        # learned from the server during the run (see `ServedFacts`)
        self._form_index = 0
        self._form_taken = False
        self._n_ignored = False
        self.logprobs = LogprobsLearned()
        self._loop_locks = PerLoop(lambda: (asyncio.Lock(), asyncio.Semaphore(self._server_slots() or 1)))

    # -- what a transport tells besides `ServedFacts`' ---------------------------------------
    @abstractmethod
    async def _send(
        self,
        messages: list[dict[str, str]],
        n: int,
        timeout: float,
        response_format: dict[str, Any] | None,
        temperature: float,
        max_tokens: int | None,
    ) -> Completion:
        """One request, as `complete` describes it; raises `judge.errors.JudgeError`."""

    # -- shared ---------------------------------------------------------------------------------
    def check_keys(self) -> None:
        """A known provider's key, checked without importing LiteLLM (its import takes seconds),
        so that a missing key is reported at once."""
        if self.api_base or self.provider in KEYLESS_PROVIDERS or self.provider not in KEY_VARIABLES:
            return
        names = [self.key_variable, ALSO_READ.get(self.provider)]
        if not any(os.environ.get(name, "").strip() for name in names if name):
            other = f" (LiteLLM also reads {ALSO_READ[self.provider]})" if self.provider in ALSO_READ else ""
            raise JudgeAccessError(f"no API key for model {self.model_name!r}: set {self.key_variable}{other}")

    def supports_n(self) -> bool:
        return self._supports_n and not self._n_ignored

    def top_logprobs(self) -> int:
        """`TOP_LOGPROBS` where the run asks for log-probabilities, the model may give them and its
        server has not refused them."""
        wanted = self.asks_logprobs and self._takes_logprobs and self.logprobs.refused is None
        return TOP_LOGPROBS if wanted else 0

    def refuses_logprobs(self, said: str) -> None:
        self.logprobs.refused = said

    def ignores_n(self) -> None:
        """The server answered `n` choices with fewer (llama-cpp-python returns one): ask one at a time."""
        self._n_ignored = True

    def batch_price(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """USD at the model's batch price where LiteLLM's map knows one; None otherwise, never a guess."""
        facts = model_facts(self.litellm_model) or {}
        prompt, completion = facts.get("input_cost_per_token_batches"), facts.get("output_cost_per_token_batches")
        if prompt is None or completion is None:
            return None
        return float(prompt * prompt_tokens + completion * completion_tokens)

    @property
    def batch_model(self) -> str:
        """The model's name in a request body: without LiteLLM's provider prefix."""
        return self.address.name

    def cache_identity(self) -> str:
        """The model and where it is served: the same name at two endpoints is two judges."""
        return self.address.endpoint_id

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
        finds which (the others wait for its answer instead of all probing). A server that refuses
        log-probabilities is asked again without them, and from then on."""
        send = lambda: self._send(messages, n, timeout, response_format, temperature, max_tokens)  # noqa: E731
        return await self.logprobs.complete(self.top_logprobs(), lambda: self.send_in_form(send, response_format))
