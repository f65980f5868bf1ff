"""Conversational Flow Rate: one holistic judge call per conversation."""

from __future__ import annotations

import random
import sys
import time
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
from flowrate.models import ConversationalEvalTestCase, ErrorInfo, EvaluationRow, Source, Usage
from flowrate.rubric import Rubric, load_rubric

ERROR_MESSAGE_LIMIT = 500


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
    ):
        if not 0.0 <= threshold <= 1.0:
            raise ValueError("threshold must be between 0 and 1")
        self.backend = make_backend(model, api_base)
        self.model = self.backend.model_name
        self.threshold = threshold
        self.verbose = verbose
        self.rubric = rubric if isinstance(rubric, Rubric) else load_rubric(rubric)
        self.language = language
        self.retry = retry or RetryPolicy()
        self._rng = random.Random()

    def check_access(self) -> None:
        """Raise `JudgeAccessError` now if no call can succeed (a missing API key)."""
        self.backend.check_access()

    async def evaluate(self, case: ConversationalEvalTestCase, source: Source | None = None) -> EvaluationRow:
        """Judge one conversation. Judge failures become an error row; a rejected key raises."""
        messages = self.rubric.build_messages(case, self.language)
        row = EvaluationRow(
            id=case.id or "",
            source=source,
            metric=self.name,
            threshold=self.threshold,
            model=self.model,
            rubric_version=self.rubric.version,
            evaluated_at=datetime.now(timezone.utc),
            number_of_turns=len(case.turns),
        )
        started = time.monotonic()
        spent = _Spend()
        try:
            reply = await self._judge(messages, spent)
        except JudgeAccessError:
            raise
        except Exception as error:
            row.error = ErrorInfo(
                type=type(error).__name__, message=redact_secrets(str(error))[:ERROR_MESSAGE_LIMIT]
            )
            row.attempts = spent.attempts + getattr(error, "flowrate_attempts", 0)
        else:
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

    async def _judge(self, messages: list[dict[str, str]], spent: "_Spend") -> JudgeReply:
        completion = await self._call(messages, spent)
        text = completion.texts[0]
        try:
            return parse_reply(text)
        except UnparsableReply as problem:
            retry = await self._call(corrective_messages(messages, text, str(problem)), spent)
            return parse_reply(retry.texts[0])

    async def _call(self, messages: list[dict[str, str]], spent: "_Spend") -> Completion:
        completion, attempts = await complete_with_retries(
            self.backend, messages, n=1, policy=self.retry, rng=self._rng
        )
        spent.add(completion, attempts)
        return completion


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
    return f"[{row.id}] {row.verdict.value} {row.score:.1f} {mark}: {row.reason} ({issues})"
