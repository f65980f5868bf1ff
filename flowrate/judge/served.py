"""What the LiteLLM backend and the direct transport share: a judge whose model is served at an
address (`ServedModel`: the address and what the transport knows of the model), made of parts that
each read the model: its key checked without importing LiteLLM (`access`), the schema form learned
from the server once per run (`SchemaForms`), a self-hosted server's window, slots and timeouts
(`SelfHosting`), the log-probabilities it refused (`LogprobsLearned`), and the request sent
(`chat_request`, read by both transports)."""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import Any

from flowrate.judge.access import check_keys
from flowrate.judge.backend import TOP_LOGPROBS, Completion, JudgeBackend, Usage, chat_body
from flowrate.judge.errors import ChoicesRefused, ContextWindowExceeded, FormRefused, LogprobsRefused, RequestRefused
from flowrate.judge.logprobs import LogprobsLearned
from flowrate.judge.provider_rules import ProviderRules
from flowrate.judge.schema_forms import SchemaForms
from flowrate.judge.self_hosting import SelfHosting
from flowrate.judge.served_model import ServedModel

MAX_LEARNED = 4  # parameters one call may learn refused (temperature, max_tokens, reasoning_effort, one more)


@dataclass(frozen=True)
class ChatRequest:
    """One request as a served judge sends it: the body of an OpenAI chat completion
    (`chat_body`, the model named as its provider names it) and the form its schema went in."""

    body: dict[str, Any]
    form: str | None


class ServedJudge(JudgeBackend):
    """A judge backend for a `model` served at an address, made of parts (see the module); a
    transport writes `_send`, sending a `ChatRequest`."""

    logprobs: LogprobsLearned  #: a served judge always learns its server's log-probabilities

    def __init__(self, model: ServedModel):
        """`model`: the model, where it is served, and what the transport knows of it."""
        self.model = model
        self.address = model.address
        self.model_name = model.address.model
        # the address's parts as the engines and messages read them off a backend (the provider's
        # batches, a missing key's message)
        self.api_base, self.provider = model.address.api_base, model.address.provider
        self.litellm_model, self.key_variable = model.address.litellm_model, model.key_variable
        self.forms = SchemaForms(model)
        self.hosting = SelfHosting(model)
        self.logprobs = LogprobsLearned()
        self.rules = ProviderRules(model)
        self._n_ignored = False  #: the server answered a request for n choices with fewer

    @abstractmethod
    async def _send(self, request: ChatRequest, timeout: float) -> Completion:
        """`request` sent, each attempt at most `timeout` seconds; raises `judge.errors.JudgeError`."""

    def chat_request(
        self,
        messages: list[dict[str, str]],
        n: int,
        response_format: dict[str, Any] | None,
        temperature: float,
        max_tokens: int | None,
    ) -> ChatRequest:
        """The request `complete` sends now: the schema in the form the server takes, and the
        log-probabilities where they are asked and not refused."""
        form, sent_format = self.forms.request_format(response_format, max_tokens)
        body = chat_body(self.address.name, messages, n, sent_format, temperature, max_tokens, self.top_logprobs())
        return ChatRequest(self.provider_body(body), form)

    def provider_body(self, body: dict[str, Any]) -> dict[str, Any]:
        """An OpenAI chat-completions `body` as this judge's provider takes it (`ProviderRules.apply`):
        what every request of this judge sends, online, in a provider batch's line and in an engine's."""
        return self.rules.apply(body, self.reasoning_effort, self.prompt_cache_key)

    def notes(self) -> list[str]:
        return self.rules.notes()

    def cached_prefix_tokens(self, prefix_tokens: int) -> int:
        return self.rules.cached_prefix_tokens(prefix_tokens)

    # -- the model's facts, as `JudgeBackend` asks them ------------------------------------------
    def check_keys(self) -> None:
        check_keys(self.model)

    def supports_n(self) -> bool:
        return self.model.takes_n and not self._n_ignored

    def ignores_n(self) -> None:
        """The server answered `n` choices with fewer (llama-cpp-python returns one): ask one at a time."""
        self._n_ignored = True

    def bounds_replies(self) -> bool:
        """Whether to send max_tokens: not to a reasoning model, whose hidden reasoning counts against it."""
        return not self.model.reasons

    def price(self, usage: Usage) -> float | None:
        return self.model.price(usage, self.prices)

    def batch_price(self, usage: Usage) -> float | None:
        return self.model.batch_price(usage)

    @property
    def batch_model(self) -> str:
        """The model's name in a request body: without LiteLLM's provider prefix."""
        return self.address.name

    def cache_identity(self) -> str:
        """The model and where it is served: the same name at two endpoints is two judges."""
        return self.address.endpoint_id

    # -- log-probabilities (`LogprobsLearned`) ---------------------------------------------------
    def top_logprobs(self) -> int:
        """`TOP_LOGPROBS` where the run asks for log-probabilities, the model may give them and its
        server has not refused them. A model the provider rules know to refuse them (OpenAI's
        reasoning models) counts as having refused them, so the run's end says so as for any."""
        if self.asks_logprobs and self.logprobs.refused is None and self.rules.refuses_logprobs:
            self.logprobs.refused = self.rules.refuses_logprobs
        wanted = self.asks_logprobs and self.model.takes_logprobs and self.logprobs.refused is None
        return TOP_LOGPROBS if wanted else 0

    def refuses_logprobs(self, said: str) -> None:
        self.logprobs.refused = said

    # -- the schema's form (`SchemaForms`) -------------------------------------------------------
    @property
    def form_settled(self) -> bool:
        """Whether the form the schema goes in is known (`SchemaForms.settled`)."""
        return self.forms.settled

    def response_format_id(self) -> str | None:
        return self.forms.form

    def response_format_ids(self) -> list[str | None]:
        return self.forms.candidates()

    def structured_output(self, name: str, schema: dict[str, Any]) -> dict[str, Any] | None:
        return self.forms.structured_output(name, schema)

    def request_format(
        self, response_format: dict[str, Any] | None, max_tokens: int | None
    ) -> tuple[str | None, dict[str, Any] | None]:
        """The form the schema goes in now and `response_format` in it (`SchemaForms.request_format`)."""
        return self.forms.request_format(response_format, max_tokens)

    # -- a self-hosted server (`SelfHosting`) ----------------------------------------------------
    def count_tokens(self, text: str) -> int:
        return self.hosting.count_tokens(text)

    def context_window(self) -> int | None:
        return self.hosting.context_window()

    def default_timeout_s(self) -> float:
        return self.hosting.default_timeout_s()

    def retries_timeouts(self) -> bool:
        return self.hosting.retries_timeouts()

    def server_slot(self) -> Any:
        return self.hosting.server_slot()

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

        async def send() -> Completion:
            """The request sent; a parameter the server refused by name is learned (`ProviderRules.learn`)
            and the request sent again without it, as many times as it names another."""
            for sent in range(1, MAX_LEARNED + 2):
                request = self.chat_request(messages, n, response_format, temperature, max_tokens)
                try:
                    completion = await self._send(request, timeout)
                except RequestRefused as error:
                    handled = LogprobsRefused | FormRefused | ChoicesRefused | ContextWindowExceeded  # each elsewhere
                    learned = not isinstance(error, handled) and sent <= MAX_LEARNED
                    if not learned or not self.rules.learn(error, request.body):
                        raise
                    continue
                completion.requests += sent - 1
                return completion
            raise AssertionError("unreachable: the last attempt returns or raises")

        return await self.logprobs.complete(self.top_logprobs(), lambda: self.forms.send_in_form(send, response_format))
