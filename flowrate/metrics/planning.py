"""The rubric metric's planning, before any call: the prompt for a conversation with its middle
left out where it would not fit the judge's context (its budget in `context_budget`), the
response cache asked (in one query for many plans), cost estimates, and a batch request.

`Planning` is a part of `RubricMetric`; it reads the metric's rubric, backend, samples and cache."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import orjson

from flowrate.inputs.conversation import ConversationalEvalTestCase
from flowrate.judge.cache import cache_key, messages_digest
from flowrate.metrics.context_budget import ContextBudget
from flowrate.rubric.fitting import PER_MESSAGE_OVERHEAD, fit_turns
from flowrate.scores.schema import reply_schema

ERROR_MESSAGE_LIMIT = 500
BYTES_PER_TOKEN_ESTIMATE = 4  # for rate ceilings and budgets; exact counts only where they matter
TEMPERATURE = 0.0  # one sample: the judge's most likely verdict
# K samples at temperature 0 are K copies of one verdict: their agreement would say nothing. 0.7 is
# the usual sampling temperature of self-consistency voting (Wang et al. 2022 used 0.5-0.7).
SAMPLING_TEMPERATURE = 0.7


@dataclass
class JudgePlan:
    """What judging one conversation will send, worked out before any call."""

    case: ConversationalEvalTestCase
    messages: list[dict[str, str]]
    truncated: bool
    keys: list[tuple[str, str | None]]  # (cache key, response form), each form a reply may be cached under
    cached_texts: list[str] | None  # replies already in the cache
    estimated_prompt_tokens: int
    cached_form: str | None = None  # the response form of the cached replies
    window: int | None = None  # the context window it was fitted to (tokens; None: none known)


@dataclass
class CallEstimate:
    """What one conversation's judging would send and cost, before any call."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0  # None when the model has no known price


class Planning(ContextBudget):
    """Planning a conversation's judge call; see the module."""

    # -- before the call -----------------------------------------------------------
    @cached_property
    def _response_format(self) -> dict[str, Any] | None:
        return self.backend.structured_output(self.name, reply_schema(self.rubric))

    @cached_property
    def _prefix_bytes(self) -> int:
        return sum(len(m["content"].encode()) + PER_MESSAGE_OVERHEAD for m in self.rubric.prefix_messages)

    @cached_property
    def expected_completion_tokens(self) -> int:
        """Tokens a reply takes, estimated from the rubric's own example replies, times the samples."""
        replies = [orjson.dumps(example.reply) for example in self.rubric.examples] or [b"{}" * 100]
        size = sum(len(reply) for reply in replies) / len(replies)
        return self.samples * round(size / BYTES_PER_TOKEN_ESTIMATE)

    def plan(self, case: ConversationalEvalTestCase, lookup: bool = True) -> JudgePlan:
        """The messages for a conversation (its middle left out if too long) and any cached reply;
        with `lookup` False the cache is left for `fill_from_cache` to ask in one go.

        Bytes bound tokens from above, so the tokenizer runs only for a conversation that may
        not fit; nearly every conversation is settled by a byte count.
        """
        case = case.judged_turns(self.cut_logs)
        messages = self.rubric.build_messages(case, self.language)
        size = self._prefix_bytes + len(messages[-1]["content"].encode()) + PER_MESSAGE_OVERHEAD
        fitted = case
        if self._window is not None and size > self._window - self._reply_reserve:
            fitted, elided = fit_turns(case, self.input_budget or 0, self.backend.count_tokens)
            if fitted is not case:
                messages = self.rubric.build_messages(fitted, self.language, elided)
        keys = []
        if self.cache is not None:
            digest = messages_digest(messages)
            keys = [(self._cache_key(digest, form), form) for form in self.backend.response_format_ids()]
        estimated = size // BYTES_PER_TOKEN_ESTIMATE
        plan = JudgePlan(fitted, messages, fitted is not case, keys, None, estimated, window=self._window)
        if lookup and self.cache is not None:
            self._take_cached(plan, {key: texts for key, _ in keys if (texts := self.cache.get(key)) is not None})
        return plan

    def _cache_key(self, messages: list[dict[str, str]] | str, form: str | None) -> str:
        """What makes a reply: the judge, the rubric, the messages, the temperature, the samples
        and the form the reply schema was sent in."""
        return cache_key(
            self.backend.cache_identity(), self.rubric.version, messages, self.temperature, self.samples, form
        )

    def fill_from_cache(self, plans: list[JudgePlan]) -> None:
        """Look up many plans' replies with one query."""
        if self.cache is None or not plans:
            return
        found = self.cache.get_many([key for plan in plans for key, _ in plan.keys])
        for plan in plans:
            self._take_cached(plan, found)

    @staticmethod
    def _take_cached(plan: JudgePlan, found: dict[str, list[str]]) -> None:
        """The plan's cached replies, under the first of its forms that has them."""
        plan.cached_texts = None
        for key, form in plan.keys:
            if key in found:
                plan.cached_texts, plan.cached_form = found[key], form
                return

    def estimate(self, plan: JudgePlan, exact: bool = False) -> CallEstimate:
        """What the plan would send and cost by the price list: the one estimator that both the
        budget (bytes, cheap) and `--dry-run` (`exact`: counted with the model's tokenizer) use.
        Nothing for a cached plan; `cost_usd` None when the price is unknown."""
        if plan.cached_texts is not None:
            return CallEstimate()
        calls = self.calls_per_conversation
        prompt = plan.estimated_prompt_tokens
        if exact:
            prompt = (
                self._prefix_tokens + self.backend.count_tokens(plan.messages[-1]["content"]) + PER_MESSAGE_OVERHEAD
            )
        prompt *= calls
        completion = self.expected_completion_tokens
        return CallEstimate(calls, prompt, completion, self.backend.price(prompt, completion))

    def batch_request(self, cid: str, plan: JudgePlan) -> bytes:
        """The plan as one line of an OpenAI batch input file."""
        from flowrate.judge.batch_api import request_line

        n = self.samples if self.samples > 1 and self.backend.supports_n() else 1
        model = getattr(self.backend, "batch_model", self.model)
        return request_line(cid, model, plan.messages, n, self._response_format, self.temperature, self._reply_limit)
