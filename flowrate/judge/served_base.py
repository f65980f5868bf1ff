"""What every part of a served judge reads (`ServedJudge`, and its `SchemaForms`,
`SelfHosting` and `AccessChecks`): the judge's address, set by `ServedJudge.__init__`, and the
facts its transport tells."""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from typing import Any

from flowrate.judge.address import JudgeAddress
from flowrate.judge.backend import JudgeBackend, PerLoop


class ServedFacts(JudgeBackend):
    """A model served at an address, as its parts see it; see the module."""

    # -- set by `ServedJudge.__init__` from the address ---------------------------------------
    address: JudgeAddress
    api_base: str | None
    litellm_model: str
    provider: str
    key_variable: str
    # -- learned from the server during the run, shared by every call of it -------------------
    _form_index: int  #: into SCHEMA_FORMS: the form to send next
    _form_taken: bool  #: the server took a schema form: no more probing
    _n_ignored: bool  #: the server answered a request for n choices with fewer
    #: the lock held by the call that finds the schema form, and a self-hosted server's slots
    _loop_locks: PerLoop[tuple[asyncio.Lock, asyncio.Semaphore]]

    # -- what a transport tells -------------------------------------------------------------
    @property
    @abstractmethod
    def _model_info(self) -> dict[str, Any] | None:
        """The model's facts (window, prices, features); None: unknown."""

    @property
    @abstractmethod
    def _supports_n(self) -> bool:
        """The model takes `n`."""

    @property
    @abstractmethod
    def _structured(self) -> bool:
        """The model takes OpenAI's `json_schema`."""

    @property
    @abstractmethod
    def _takes_logprobs(self) -> bool:
        """The model may give token log-probabilities (`logprobs`, `top_logprobs`)."""

    @abstractmethod
    def _estimated_tokens(self, text: str) -> int:
        """Tokens in `text` by the transport's own count (no server asked)."""
