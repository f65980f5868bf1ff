"""The rubric metric's call: one judge request (or K, where the server cannot return several),
each unusable reply re-asked once for just what was wrong, and the spend counted.

`Asking` is a part of `RubricMetric`; it reads the metric's rubric, backend, samples and retry policy."""

from __future__ import annotations

from flowrate.judge.backend import Completion, Usage
from flowrate.judge.errors import ChoicesRefused
from flowrate.judge.limits import CallGate
from flowrate.judge.retry import CallStats, complete_with_retries
from flowrate.metrics.planning import JudgePlan
from flowrate.metrics.step import first_look, second_look
from flowrate.scores.reading import Judgement, UnparsableReply
from flowrate.scores.schema import corrective_messages


class Asking:
    """Making a conversation's judge call, with its re-asks; see the module."""

    async def _judge(self, plan: JudgePlan, spent: Spend, gate: CallGate | None) -> list[Judgement]:
        """`samples` judgements: one request with n=K where the provider takes it, else K requests;
        a server that answers n=K with fewer choices (llama-cpp-python), or refuses n (llama-server),
        is asked for the rest one at a time, and from then on. Each unusable reply gets one re-ask saying what was wrong (see `_usable`)."""
        tokens = plan.estimated_prompt_tokens + self.expected_completion_tokens

        async def call(messages: list[dict[str, str]], n: int) -> Completion:
            completion = await complete_with_retries(
                self.backend,
                messages,
                n=n,
                policy=self.retry,
                rng=self._rng,
                gate=gate,
                estimated_tokens=tokens,
                stats=spent.stats,
                response_format=self._response_format,
                temperature=self.temperature,
                max_tokens=self._reply_limit,
            )
            spent.add(completion)
            if not completion.texts:
                raise UnparsableReply("the judge returned no reply")
            return completion

        replies: list[tuple[str, bool]] = []  # (text, cut at the token limit)
        if self.samples > 1 and self.backend.supports_n():
            try:
                completion = await call(plan.messages, self.samples)
            except ChoicesRefused:
                self.backend.ignores_n()  # llama-server: "Only one completion choice is allowed"
            else:
                replies = [(text, completion.cut(i)) for i, text in enumerate(completion.texts[: self.samples])]
                if len(replies) < self.samples:
                    self.backend.ignores_n()
        while len(replies) < self.samples:
            completion = await call(plan.messages, 1)
            replies.append((completion.texts[0], completion.cut(0)))
        return [await self._usable(plan, text, cut, call) for text, cut in replies]

    async def _usable(self, plan: JudgePlan, text: str, cut: bool, call) -> Judgement:
        """The judgement in one reply, re-asking once when it is unusable, by the step API's rules
        (`step.first_look`, `step.second_look`): the re-ask says what was wrong; when only some
        criteria of a suite were, it asks for those alone and keeps the rest."""
        look = first_look(self, text, cut)
        if look.judgement is not None:
            return look.judgement
        retry = await call(corrective_messages(plan.messages, text, look.why, self.rubric, look.only), 1)
        return second_look(self, text, cut, look, retry.texts[0], retry.cut(0))


class Spend:
    """Tokens, cost and attempts of all calls made for one conversation."""

    def __init__(self) -> None:
        self.usage = Usage()
        self.cost_usd: float | None = 0.0
        self.stats = CallStats()
        self.calls = 0
        self.response_format: str | None = None  # the form of the last reply's schema

    def add(self, completion: Completion) -> None:
        self.calls += 1
        self.response_format = completion.response_format
        self.usage.prompt_tokens += completion.usage.prompt_tokens
        self.usage.completion_tokens += completion.usage.completion_tokens
        if self.cost_usd is not None:
            self.cost_usd = None if completion.cost_usd is None else self.cost_usd + completion.cost_usd
