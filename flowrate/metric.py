"""Conversational Flow Rate: one holistic judge call per conversation."""

from __future__ import annotations

import random
import sys
import time
from collections import Counter
from functools import cached_property
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from flowrate.judge import (
    Completion,
    JudgeReply,
    RetryPolicy,
    UnparsableReply,
    complete_with_retries,
    corrective_messages,
    make_backend,
    parse_reply,
    redact_secrets,
)
from flowrate.exit_codes import JudgeAccessError
from flowrate.budget import PER_MESSAGE_OVERHEAD, fit_turns, fits_for_sure
from flowrate.models import ConversationalEvalTestCase, ErrorInfo, EvalTestCase, EvaluationRow, Source, Usage
from flowrate.rubric import Rubric, grading_request, load_rubric, turn_line

ERROR_MESSAGE_LIMIT = 500
REPLY_RESERVE_TOKENS = 1024


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
        self._max_input_tokens = max_input_tokens
        self._rng = random.Random()

    @cached_property
    def input_budget(self) -> int | None:
        """Tokens the conversation may take: `max_input_tokens`, or the model's known window,
        less the rubric, its examples and room for the reply. None when neither is known."""
        window = self._max_input_tokens or self.backend.context_window()
        if not window:
            return None
        fixed = sum(self.backend.count_tokens(m["content"]) + PER_MESSAGE_OVERHEAD for m in self.rubric.prefix_messages)
        wrapper = self.backend.count_tokens(grading_request(ConversationalEvalTestCase(turns=[EvalTestCase(input="", actual_output="")]), self.language))
        return max(window - fixed - wrapper - REPLY_RESERVE_TOKENS * self.samples, 0)

    def prepare(self, case: ConversationalEvalTestCase) -> tuple[list[dict[str, str]], bool]:
        """The judge's messages for a conversation, and whether its middle had to be left out."""
        budget = self.input_budget
        elided = None
        if budget is not None and not fits_for_sure([turn_line(1, turn) for turn in case.turns], budget):
            case, elided = fit_turns(case, budget, self.backend.count_tokens)
        return self.rubric.build_messages(case, self.language, elided), elided is not None

    def check_access(self) -> None:
        """Raise `JudgeAccessError` now if no call can succeed (a missing API key)."""
        self.backend.check_access()

    async def evaluate(self, case: ConversationalEvalTestCase, source: Source | None = None) -> EvaluationRow:
        """Judge one conversation. Judge failures become an error row; a rejected key raises."""
        messages, truncated = self.prepare(case)
        row = EvaluationRow(
            id=case.id or "",
            source=source,
            metric=self.name,
            threshold=self.threshold,
            model=self.model,
            rubric_version=self.rubric.version,
            evaluated_at=datetime.now(timezone.utc),
            number_of_turns=len(case.turns),
            truncated=truncated,
            samples=self.samples,
        )
        started = time.monotonic()
        spent = _Spend()
        try:
            replies = await self._judge(messages, spent)
        except JudgeAccessError:
            raise
        except Exception as error:
            row.error = ErrorInfo(
                type=type(error).__name__, message=redact_secrets(str(error))[:ERROR_MESSAGE_LIMIT]
            )
            row.attempts = spent.attempts + getattr(error, "flowrate_attempts", 0)
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
            row.attempts = spent.attempts
        row.usage = spent.usage
        row.cost_usd = spent.cost_usd if spent.calls else None
        row.latency_s = round(time.monotonic() - started, 3)
        if self.verbose:
            print(describe_row(row), file=sys.stderr)
        return row

    async def _judge(self, messages: list[dict[str, str]], spent: "_Spend") -> list[JudgeReply]:
        """`samples` verdicts: one request with n=K where the provider takes it, else K requests.
        Each unusable reply gets one corrective re-ask."""
        if self.samples > 1 and self.backend.supports_n():
            texts = (await self._call(messages, spent, self.samples)).texts
        else:
            texts = [(await self._call(messages, spent, 1)).texts[0] for _ in range(self.samples)]
        replies = []
        for text in texts:
            try:
                replies.append(parse_reply(text))
            except UnparsableReply as problem:
                retry = await self._call(corrective_messages(messages, text, str(problem)), spent, 1)
                replies.append(parse_reply(retry.texts[0]))
        return replies

    async def _call(self, messages: list[dict[str, str]], spent: "_Spend", n: int) -> Completion:
        completion, attempts = await complete_with_retries(
            self.backend, messages, n=n, policy=self.retry, rng=self._rng
        )
        spent.add(completion, attempts)
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
        self.attempts = 0
        self.calls = 0

    def add(self, completion: Completion, attempts: int) -> None:
        self.calls += 1
        self.attempts += attempts
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
    return f"[{row.id}] {row.verdict.value} {row.score:.1f} {mark}{agreement}: {row.reason} ({issues})"
