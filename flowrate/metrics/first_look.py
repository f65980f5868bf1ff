"""The judge's first look at a conversation, for `--score combined`: the reasoned call's messages
again, with a schema that holds only the verdict, so the reply is a few tokens and its distribution
is read before any reasoning. The probe on the 1.5B judge (issue 28) found the reasoned verdict's
distribution collapsed (median top probability 0.99) and the verdict-first one spread (0.54); the
prompt is the reasoned call's, so a server that keeps the previous prompt's cache (llama-cpp-python)
computes none of it again."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from flowrate.judge.errors import JudgeError
from flowrate.judge.limits import CallGate
from flowrate.judge.retry import RetryPolicy, complete_with_retries
from flowrate.metrics.asking import Spend
from flowrate.metrics.planning import TEMPERATURE, CachedReplies, JudgePlan, Planner
from flowrate.scores.distribution import LevelProbs, distributions
from flowrate.scores.schema import reply_schema


@dataclass(eq=False)
class VerdictFirstLook:
    """Each criterion's distribution at the judge's first look (see the module), asked through
    `planner`'s backend at temperature 0 by `retry` (its waits drawn from `rng`), kept in
    `planner`'s cache under its own keys. A look that fails leaves the rows to their verdicts."""

    planner: Planner
    retry: RetryPolicy
    rng: random.Random = field(default_factory=random.Random)
    replies: CachedReplies = field(init=False)

    def __post_init__(self) -> None:
        planner = self.planner
        self.replies = CachedReplies(planner.cache, planner.backend, planner.rubric, TEMPERATURE, 1, "verdict-only")

    @cached_property
    def response_format(self) -> dict[str, Any] | None:
        return self.planner.backend.structured_output(
            self.planner.rubric.name, reply_schema(self.planner.rubric, "verdict-only")
        )

    @property
    def max_tokens(self) -> int:
        return self.planner.look_max_tokens

    async def levels(self, plan: JudgePlan, spent: Spend, gate: CallGate | None) -> dict[str, LevelProbs]:
        """Each criterion's distribution at the first look at `plan`'s messages (from the cache
        when it holds one), its call counted in `spent` and held by `gate`; empty when the judge
        gave none or the call failed. A stopping run raises `RunStopped`."""
        rubric = self.planner.rubric
        cached = self.replies.found_for(plan.messages)
        if cached is not None and cached.logprobs:
            return distributions(cached.texts[0], cached.logprobs[0], rubric)
        try:
            completion = await complete_with_retries(
                self.planner.backend, plan.messages, n=1, policy=self.retry, rng=self.rng, gate=gate,
                estimated_tokens=plan.estimated_prompt_tokens + self.max_tokens, stats=spent.stats,
                response_format=self.response_format, temperature=TEMPERATURE, max_tokens=self.max_tokens,
            )  # fmt: skip
        except JudgeError:  # a failed look is an addition missing: the verdict stands without it
            return {}
        spent.add(completion)
        text, tokens = (completion.texts or [""])[0], completion.tokens(0)
        levels = distributions(text, tokens, rubric)
        if levels:
            self.replies.keep(plan.messages, [text], completion.response_format, [tokens], plan.case.id)
        return levels
