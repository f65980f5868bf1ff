"""The rubric metric's call: one judge request (or K, where the server cannot return several),
each unusable reply re-asked once for just what was wrong, a prompt refitted once to a window the
server named in its refusal, and the spend counted."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from flowrate.errors import JudgeAccessError
from flowrate.inputs.conversation import ConversationalEvalTestCase
from flowrate.judge.backend import Completion, Usage
from flowrate.judge.errors import ChoicesRefused
from flowrate.judge.limits import CallGate, RunStopped
from flowrate.judge.retry import CallStats, RetryPolicy, complete_with_retries, told_window
from flowrate.metrics.planning import JudgePlan, Planner
from flowrate.metrics.replies import Tokens, cached_judgements, first_look, second_look
from flowrate.scores.reading import Judgement, UnparsableReply
from flowrate.scores.schema import corrective_messages

Call = Callable[[list[dict[str, str]], int], Awaitable[Completion]]
Reply = tuple[str, bool, Tokens]  # a reply's text, whether it was cut, its tokens' log-probabilities


class Spend:
    """Tokens, cost and attempts of all calls made for one conversation, planned as `plan`."""

    def __init__(self, plan: JudgePlan) -> None:
        self.plan = plan  # the plan last sent: refitted once when a server names its window
        self.usage = Usage()
        self.cost_usd: float | None = 0.0
        self.stats = CallStats()
        self.calls = 0
        self.response_format: str | None = None  # the form of the last reply's schema

    def add(self, completion: Completion) -> None:
        """Count one call's `completion`: its tokens, its cost (None from the first unpriced one) and its form."""
        self.calls += 1
        self.response_format = completion.response_format
        self.usage = self.usage + completion.usage
        if self.cost_usd is not None:
            self.cost_usd = None if completion.cost_usd is None else self.cost_usd + completion.cost_usd


@dataclass(eq=False)
class Sampler:
    """The `samples` replies to one plan's messages, each call retried by `retry` (its waits
    drawn from `rng`), held by the run's gate and counted in the conversation's `Spend`.
    `planner` gives the backend, the reply schema, the reply limit, the samples and the
    temperature."""

    planner: Planner
    retry: RetryPolicy
    rng: random.Random

    def caller(self, plan: JudgePlan, spent: Spend, gate: CallGate | None) -> Call:
        """One call with `plan`'s settings, retried by the policy, counted in `spent`."""
        planner = self.planner
        tokens = plan.estimated_prompt_tokens + planner.expected_completion_tokens

        async def call(messages: list[dict[str, str]], n: int) -> Completion:
            completion = await complete_with_retries(
                planner.backend,
                messages,
                n=n,
                policy=self.retry,
                rng=self.rng,
                gate=gate,
                estimated_tokens=tokens,
                stats=spent.stats,
                response_format=planner.response_format,
                temperature=planner.temperature,
                max_tokens=planner.budget.reply_limit,
            )
            spent.add(completion)
            if not completion.texts:
                raise UnparsableReply("the judge returned no reply")
            return completion

        return call

    async def replies(self, plan: JudgePlan, call: Call) -> list[Reply]:
        """(text, cut at the token limit, tokens) of `samples` replies through `call`: one request with
        n=K where the provider takes it, else K requests; a server that answers n=K with fewer
        choices (llama-cpp-python), or refuses n (llama-server), is asked for the rest one at a
        time, and from then on."""
        backend, samples = self.planner.backend, self.planner.samples
        replies: list[Reply] = []
        if samples > 1 and backend.supports_n():
            try:
                completion = await call(plan.messages, samples)
            except ChoicesRefused:
                backend.ignores_n()  # llama-server: "Only one completion choice is allowed"
            else:
                replies = [reply_of(completion, i) for i in range(min(len(completion.texts), samples))]
                if len(replies) < samples:
                    backend.ignores_n()
        while len(replies) < samples:
            replies.append(reply_of(await call(plan.messages, 1), 0))
        return replies


def reply_of(completion: Completion, index: int) -> Reply:
    """Reply `index` of `completion`: its text, whether it was cut, and its tokens' log-probabilities."""
    return completion.texts[index], completion.cut(index), completion.tokens(index)


@dataclass(eq=False)
class Asker:
    """The judgements for one conversation's plan: read from the cache, or asked (`sampler`), a
    prompt refitted once to a window the server named, each unusable reply re-asked once.
    `planner` gives the rubric, the budget, the plans and the cached replies; `retry` is the
    policy for failed calls (its waits drawn from `rng`)."""

    planner: Planner
    retry: RetryPolicy
    rng: random.Random = field(default_factory=random.Random)
    sampler: Sampler = field(init=False)

    def __post_init__(self) -> None:
        self.sampler = Sampler(self.planner, self.retry, self.rng)

    async def outcome(
        self, case: ConversationalEvalTestCase, plan: JudgePlan, gate: CallGate | None
    ) -> tuple[list[Judgement] | Exception, Spend]:
        """What judging `case` by `plan` came to, its calls held by `gate`: the judgements (read
        from the cache when `plan` found them there, else asked and then cached unless one was
        cut), or the error that stopped it, and what was spent. A rejected key raises
        `JudgeAccessError`, a stopping run `RunStopped`."""
        spent = Spend(plan)
        try:
            if plan.cached_texts is not None:
                spent.response_format = plan.cached_form
                return cached_judgements(self.planner.rubric, plan.cached_texts, plan.cached_logprobs), spent
            judgements = await self.ask(case, spent, gate)
            if not any(judgement.cut for judgement in judgements):  # a cut judgement may be missing issues
                texts, tokens = [j.text for j in judgements], [j.tokens for j in judgements]
                self.planner.replies.remember(spent.plan, texts, spent.response_format, tokens)
        except (JudgeAccessError, RunStopped):
            raise
        except Exception as error:
            return error, spent
        return judgements, spent

    async def ask(self, case: ConversationalEvalTestCase, spent: Spend, gate: CallGate | None) -> list[Judgement]:
        """The judgements for `spent.plan` of `case`, its calls counted in `spent` and held by
        `gate`. A server that refuses the prompt as too long and names its window is asked once
        more with the conversation refitted to that window (then `spent.plan` is the new plan)."""
        plan = spent.plan
        try:
            return await self.judge(plan, spent, gate)
        except Exception as error:
            told = told_window(error)
            if told is None:
                raise
            self.planner.budget.learn_window(told)
            refitted = self.planner.plan(case, lookup=False)
            if refitted.messages == plan.messages:
                raise
            spent.plan = refitted
            return await self.judge(refitted, spent, gate)

    async def judge(self, plan: JudgePlan, spent: Spend, gate: CallGate | None) -> list[Judgement]:
        """`samples` judgements for `plan` (`Sampler.replies`), its calls counted in `spent` and
        held by `gate`; each unusable reply gets one re-ask saying what was wrong (see `usable`)."""
        call = self.sampler.caller(plan, spent, gate)
        return [await self.usable(plan, reply, call) for reply in await self.sampler.replies(plan, call)]

    async def usable(self, plan: JudgePlan, reply: Reply, call: Call) -> Judgement:
        """The judgement in one `reply` (its text, cut at its token limit, its tokens), re-asking once
        through `call` when it is unusable, by the step API's rules (`step.first_look`,
        `step.second_look`): the re-ask says what was wrong; when only some criteria of a suite
        were, it asks for those alone and keeps the rest."""
        rubric, limit = self.planner.rubric, self.planner.budget.reply_limit
        text, cut, tokens = reply
        look = first_look(rubric, limit, text, cut, tokens)
        if look.judgement is not None:
            return look.judgement
        messages = corrective_messages(plan.messages, text, look.why, rubric, look.only, self.planner.reply_order)
        retry = await call(messages, 1)
        return second_look(rubric, limit, text, cut, look, retry.texts[0], retry.cut(0), retry.tokens(0))
