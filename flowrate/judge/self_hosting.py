"""What changes when the judge is a self-hosted server (vLLM, llama.cpp, Ollama, LM Studio, or any
model LiteLLM does not know at `--api-base`): the context window and slots the server tells, a
timeout that lets a cold CPU-served model finish, no retry piled on a busy one-slot server.

`SelfHosting` is a part a `ServedJudge` holds; it reads the model's address and facts
(`ServedModel`)."""

from __future__ import annotations

import asyncio
import contextlib
from functools import cached_property
from typing import Any

from flowrate.judge.backend import (
    HOSTED_TIMEOUT_S,
    OLLAMA_DEFAULT_BASE,
    SELF_HOSTED_PROVIDERS,
    SELF_HOSTED_TIMEOUT_S,
    PerLoop,
)
from flowrate.judge.served_model import ServedModel
from flowrate.judge.server import ServerFacts, probe_server


class SelfHosting:
    """A served `model`'s self-hosted defaults; see the module."""

    def __init__(self, model: ServedModel):
        """`model`: the model and what its transport knows of it."""
        self.model = model
        #: at most as many requests at the server as it works on at once, per event loop
        self._slots = PerLoop(lambda: asyncio.Semaphore(self.server_slots() or 1))

    @cached_property
    def self_hosted(self) -> bool:
        """A model served by a server of the user's own: an Ollama, vLLM, LM Studio or llamafile
        provider, or a model LiteLLM has no facts about at --api-base (a gateway serving a model
        LiteLLM knows, say gpt-4o, is taken as that model's API)."""
        if self.model.address.provider in SELF_HOSTED_PROVIDERS:
            return True
        return bool(self.model.address.api_base) and self.model.info is None

    @cached_property
    def server(self) -> ServerFacts:
        """What a self-hosted server says about itself (its context window, its slots), asked
        once with a short timeout; nothing for a hosted API."""
        if not self.self_hosted:
            return ServerFacts()
        address = self.model.address
        ollama = address.provider.startswith("ollama")
        base = address.api_base or (OLLAMA_DEFAULT_BASE if ollama else None)
        if base is None:
            return ServerFacts()
        return probe_server(base, address.name, ollama=ollama)

    def count_tokens(self, text: str) -> int:
        """Exact, through the server's /tokenize where it has one (vLLM, llama-server); the
        transport's count otherwise. Only a conversation that may not fit is counted (see `Planning.plan`)."""
        exact = self.server.count_tokens(text, self.model.address.name) if self.server.tokenize_url else None
        return exact if exact is not None else self.model.estimated_tokens(text)

    def context_window(self) -> int | None:
        """Input tokens the model takes: the transport's facts, else what its server says (see `server`)."""
        known = (self.model.info or {}).get("max_input_tokens")
        return known or self.server.input_budget

    def default_timeout_s(self) -> float:
        """Seconds an attempt may take without --timeout: long enough for a self-hosted model's cold first call."""
        return SELF_HOSTED_TIMEOUT_S if self.self_hosted else HOSTED_TIMEOUT_S

    def retries_timeouts(self) -> bool:
        """Whether a timed-out attempt is tried again. Not on a self-hosted server that works on one
        request at a time: it keeps working on the abandoned attempt, and the retry would queue
        behind it (issue 14: 119.8 s for one row). vLLM and llama.cpp with several slots serve the
        retry beside it."""
        slots = self.server_slots()
        return not self.self_hosted or slots is None or slots > 1

    def server_slots(self) -> int | None:
        """Requests the server works on at once: None for no known bound (a hosted API, vLLM)."""
        if not self.self_hosted or self.server.kind == "vllm":
            return None
        return self.server.slots or 1  # a server that says nothing (llama-cpp-python) serves one at a time

    def server_slot(self) -> Any:
        """Held while a request is at the server: at most as many at once as a self-hosted server
        works on, so no request waits in the server's queue with its timeout running."""
        if self.server_slots() is None:
            return contextlib.nullcontext()
        return self._slots.get()
