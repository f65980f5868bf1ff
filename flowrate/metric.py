"""Conversational Flow Rate: one holistic judge call per conversation."""

from __future__ import annotations

import random
import sys
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from flowrate.cache import ResponseCache, cache_key
from flowrate.context_window import PER_MESSAGE_OVERHEAD, fit_turns
from flowrate.exit_codes import ConfigError, JudgeAccessError
from flowrate.judge import (
    CallStats,
    Completion,
    JudgeReply,
    RetryPolicy,
    UnparsableReply,
    complete_with_retries,
    corrective_messages,
    make_backend,
    one_line,
    parse_reply,
    redact_secrets,
)
from flowrate.limits import CallGate, RunStopped
from flowrate.models import ConversationalEvalTestCase, ErrorInfo, EvalTestCase, EvaluationRow, Source, Usage
from flowrate.rubric import Rubric, grading_request, load_rubric

ERROR_MESSAGE_LIMIT = 500
REPLY_RESERVE_TOKENS = 1024
BYTES_PER_TOKEN_ESTIMATE = 4  # for rate ceilings and budgets; exact counts only where they matter
MIN_TRANSCRIPT_TOKENS = 64  # a budget must hold at least a short turn besides the rubric
TEMPERATURE = 0.0


@dataclass
class JudgePlan:
    """What judging one conversation will send, worked out before any call."""

    case: ConversationalEvalTestCase
    messages: list[dict[str, str]]
    truncated: bool
    key: str | None  # the cache key; None when the cache is off
    cached_texts: list[str] | None  # replies already in the cache
    estimated_prompt_tokens: int


class ConversationalFlowRateMetric:
    """Grades a whole conversation on the five-level flow scale.

    `model` is a model string (`gpt-4o`, `anthropic:claude-3-5-sonnet-latest`,
    `ollama:llama3`, any LiteLLM `provider/model`) or a `CustomLLMClient`.
    A conversation passes when its score is at least `threshold`.
    """

    name = "conversational_flow_rate"

    def __init__(
        self,
        model: str | Any = "gpt-4o",
        threshold: float = 0.7,
        verbose: bool = False,
        *,
        api_base: str | None = None,
        rubric: Rubric | str | Path | None = None,
        language: str = "English",
        retry: RetryPolicy | None = None,
        samples: int = 1,
        max_input_tokens: int | None = None,
        cache: ResponseCache | None = None,
    ):
        if not 0.0 <= threshold <= 1.0:
            raise ValueError("threshold must be between 0 and 1")
        if samples < 1:
            raise ValueError("samples must be at least 1")
        self.backend = make_backend(model, api_base)
        self.model = self.backend.model_name
        self.threshold = threshold
        self.verbose = verbose
        self.rubric = rubric if isinstance(rubric, Rubric) else load_rubric(rubric)
        self.language = language
        self.retry = retry or RetryPolicy()
        self.samples = samples
        self.cache = cache
        self._max_input_tokens = max_input_tokens
        self._rng = random.Random()

    def check_access(self) -> None:
        """Raise `JudgeAccessError` now if no call can succeed (a missing API key)."""
        self.backend.check_access()

    def warm_up(self) -> None:
        """Import and look up now what every call needs (the model's window, its response format),
        and check that the context budget holds the rubric and a conversation."""
        _ = self._window
        self.backend.response_format_id()
        self.check_budget()

    def check_budget(self) -> None:
        """Raise `ConfigError` when `max_input_tokens` cannot hold the rubric, its examples, room
        for the reply and a minimal transcript: the judge would be sent no conversation."""
        if self._max_input_tokens is None:
            return
        if self._max_input_tokens < self.minimum_input_tokens:
            raise ConfigError(
                f"option max_input_tokens: {self._max_input_tokens} cannot hold the rubric and a conversation;"
                f" the minimum for this rubric and model is {self.minimum_input_tokens}"
            )

    @cached_property
    def minimum_input_tokens(self) -> int:
        """The smallest context budget that holds the rubric, the reply and `MIN_TRANSCRIPT_TOKENS`."""
        return self._window_needs() + MIN_TRANSCRIPT_TOKENS

    def _window_needs(self) -> int:
        empty = ConversationalEvalTestCase(turns=[EvalTestCase(input="", actual_output="")])
        wrapper = self.backend.count_tokens(grading_request(empty, self.language))
        return self._prefix_tokens + wrapper + REPLY_RESERVE_TOKENS * self.samples

    # -- before the call -----------------------------------------------------------
    @cached_property
    def _window(self) -> int | None:
        return self._max_input_tokens or self.backend.context_window()

    @cached_property
    def _prefix_bytes(self) -> int:
        return sum(len(m["content"].encode()) + PER_MESSAGE_OVERHEAD for m in self.rubric.prefix_messages)

    @cached_property
    def _prefix_tokens(self) -> int:
        return sum(self.backend.count_tokens(m["content"]) + PER_MESSAGE_OVERHEAD for m in self.rubric.prefix_messages)

    @cached_property
    def input_budget(self) -> int | None:
        """Tokens the conversation may take: `max_input_tokens`, or the model's known window,
        less the rubric, its examples and room for the reply. None when neither is known."""
        if not self._window:
            return None
        return max(self._window - self._window_needs(), MIN_TRANSCRIPT_TOKENS)

    @cached_property
    def expected_completion_tokens(self) -> int:
        """Tokens a reply takes, estimated from the rubric's own example replies, times the samples."""
        replies = [example.reply.model_dump_json() for example in self.rubric.examples] or ["{}" * 100]
        size = sum(len(reply.encode()) for reply in replies) / len(replies)
        return self.samples * round(size / BYTES_PER_TOKEN_ESTIMATE)

    def plan(self, case: ConversationalEvalTestCase, lookup: bool = True) -> JudgePlan:
        """The messages for a conversation (its middle left out if too long) and any cached reply;
        with `lookup` False the cache is left for `fill_from_cache` to ask in one go.

        Bytes bound tokens from above, so the tokenizer runs only for a conversation that may
        not fit; nearly every conversation is settled by a byte count.
        """
        messages = self.rubric.build_messages(case, self.language)
        size = self._prefix_bytes + len(messages[-1]["content"].encode()) + PER_MESSAGE_OVERHEAD
        fitted = case
        if self._window is not None and size > self._window - REPLY_RESERVE_TOKENS * self.samples:
            fitted, elided = fit_turns(case, self.input_budget or 0, self.backend.count_tokens)
            if fitted is not case:
                messages = self.rubric.build_messages(fitted, self.language, elided)
        key = cached = None
        if self.cache is not None:
            key = cache_key(
                self.backend.cache_identity(),
                self.rubric.version,
                messages,
                TEMPERATURE,
                self.samples,
                self.backend.response_format_id(),
            )
            cached = self.cache.get(key) if lookup else None
        return JudgePlan(fitted, messages, fitted is not case, key, cached, size // BYTES_PER_TOKEN_ESTIMATE)

    def fill_from_cache(self, plans: list[JudgePlan]) -> None:
        """Look up many plans' replies with one query."""
        if self.cache is None or not plans:
            return
        found = self.cache.get_many([plan.key for plan in plans if plan.key is not None])
        for plan in plans:
            plan.cached_texts = found.get(plan.key) if plan.key is not None else None

    def count_prompt_tokens(self, plan: JudgePlan) -> int:
        """The plan's prompt, counted with the model's tokenizer."""
        return self._prefix_tokens + self.backend.count_tokens(plan.messages[-1]["content"]) + PER_MESSAGE_OVERHEAD

    def estimated_cost(self, plan: JudgePlan) -> float | None:
        """USD the plan would cost by the price list; 0 when cached, None when the price is unknown."""
        if plan.cached_texts is not None:
            return 0.0
        return self.backend.price(plan.estimated_prompt_tokens, self.expected_completion_tokens)

    def new_row(self, case: ConversationalEvalTestCase, source: Source | None = None) -> EvaluationRow:
        """A row for `case` by this metric, before any verdict or error is in it."""
        return EvaluationRow(
            id=case.id or "",
            source=source,
            metric=self.name,
            threshold=self.threshold,
            model=self.model,
            rubric_version=self.rubric.version,
            evaluated_at=datetime.now(UTC),
            number_of_turns=len(case.turns),
        )

    # -- the call ------------------------------------------------------------------
    async def evaluate(
        self,
        case: ConversationalEvalTestCase,
        source: Source | None = None,
        *,
        plan: JudgePlan | None = None,
        gate: CallGate | None = None,
    ) -> EvaluationRow:
        """Judge one conversation. Judge failures become an error row; a rejected key raises."""
        plan = plan or self.plan(case)
        row = self.new_row(case, source)
        row.truncated = plan.truncated
        row.samples = self.samples
        spent = _Spend()
        try:
            if plan.cached_texts is not None:
                replies = [parse_reply(text) for text in plan.cached_texts]
                row.cached = True
            else:
                replies = await self._judge(plan, spent, gate)
                if plan.key is not None:
                    self.cache.put(plan.key, self.model, self.rubric.version, [reply.text for reply in replies])  # type: ignore[union-attr]
        except (JudgeAccessError, RunStopped):
            raise
        except Exception as error:
            row.error = ErrorInfo(
                type=type(error).__name__, message=one_line(redact_secrets(str(error)), ERROR_MESSAGE_LIMIT)
            )
            row.attempts = spent.stats.attempts
        else:
            reply, agreement = majority(replies)
            if self.samples > 1:
                row.agreement = agreement
                row.sample_verdicts = [r.verdict for r in replies]
            row.verdict = reply.verdict
            row.score = reply.verdict.score
            row.success = row.score >= self.threshold
            row.reason = reply.reason
            row.key_issues = reply.key_issues
            row.attempts = spent.stats.attempts
        row.usage = spent.usage
        row.cost_usd = spent.cost_usd if spent.calls or row.cached else None
        row.latency_s = round(spent.stats.latency_s, 3)
        row.wait_s = round(spent.stats.wait_s, 3)
        row.evaluated_at = datetime.now(UTC)  # when the verdict (or the error) arrived
        if self.verbose:
            print(describe_row(row), file=sys.stderr)
        return row

    async def _judge(self, plan: JudgePlan, spent: _Spend, gate: CallGate | None) -> list[JudgeReply]:
        """`samples` verdicts: one request with n=K where the provider takes it, else K requests.
        Each unusable reply gets one corrective re-ask."""
        tokens = plan.estimated_prompt_tokens + self.expected_completion_tokens
        call = lambda messages, n: self._call(messages, spent, n, gate, tokens)  # noqa: E731
        if self.samples > 1 and self.backend.supports_n():
            texts = (await call(plan.messages, self.samples)).texts
        else:
            texts = [(await call(plan.messages, 1)).texts[0] for _ in range(self.samples)]
        replies = []
        for text in texts:
            try:
                replies.append(parse_reply(text))
            except UnparsableReply as problem:
                retry = await call(corrective_messages(plan.messages, text, str(problem)), 1)
                replies.append(parse_reply(retry.texts[0]))
        return replies

    async def _call(
        self, messages: list[dict[str, str]], spent: _Spend, n: int, gate: CallGate | None, tokens: int
    ) -> Completion:
        completion = await complete_with_retries(
            self.backend,
            messages,
            n=n,
            policy=self.retry,
            rng=self._rng,
            gate=gate,
            estimated_tokens=tokens,
            stats=spent.stats,
        )
        spent.add(completion)
        return completion


def majority(replies: list[JudgeReply]) -> tuple[JudgeReply, float]:
    """The most common verdict (a tie goes to the lower score, the cautious side for a gate),
    the first reply that gave it, and the share of replies that agree."""
    counts = Counter(reply.verdict for reply in replies)
    winner = max(counts, key=lambda verdict: (counts[verdict], -verdict.score))
    chosen = next(reply for reply in replies if reply.verdict is winner)
    return chosen, round(counts[winner] / len(replies), 4)


class _Spend:
    """Tokens, cost and attempts of all calls made for one conversation."""

    def __init__(self) -> None:
        self.usage = Usage()
        self.cost_usd: float | None = 0.0
        self.stats = CallStats()
        self.calls = 0

    def add(self, completion: Completion) -> None:
        self.calls += 1
        self.usage.prompt_tokens += completion.usage.prompt_tokens
        self.usage.completion_tokens += completion.usage.completion_tokens
        if self.cost_usd is not None:
            self.cost_usd = None if completion.cost_usd is None else self.cost_usd + completion.cost_usd


def describe_row(row: EvaluationRow) -> str:
    """One human line per row, for verbose output."""
    if row.error:
        return f"[{row.id}] error {row.error.type}: {row.error.message}"
    mark = "pass" if row.success else "FAIL"
    issues = "; ".join(row.key_issues) or "no key issues"
    agreement = f" agreement {row.agreement:.0%}" if row.agreement is not None else ""
    cached = " (cached)" if row.cached else ""
    return f"[{row.id}] {row.verdict.value} {row.score:.1f} {mark}{agreement}{cached}: {row.reason} ({issues})"
