"""Metrics: rubric data plus one judging engine.

`RubricMetric` is the engine: for one conversation it plans the prompt (fitting long
conversations), looks the reply up in the response cache, makes one judge call (or K for
`samples` where the provider cannot return several), re-asks once after an unusable reply,
counts the spend, and turns the judgement into one row per criterion of the rubric (plus
`user_satisfaction` for a suite). The named metrics are this engine with a packaged rubric.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from flowrate.errors import JudgeAccessError
from flowrate.inputs.conversation import ConversationalEvalTestCase, Source
from flowrate.judge.cache import ResponseCache
from flowrate.judge.limits import CallGate, RunStopped
from flowrate.judge.retry import RetryPolicy, told_window
from flowrate.judge.transports import make_backend
from flowrate.metrics.asking import Asking, Spend
from flowrate.metrics.planning import SAMPLING_TEMPERATURE, TEMPERATURE, JudgePlan, Planning
from flowrate.metrics.rows import RowMaking
from flowrate.metrics.step import cached_judgements, settle_rows
from flowrate.results.rows import EvaluationRow
from flowrate.rubric.model import Rubric, load_rubric
from flowrate.scores.reading import Judgement
from flowrate.settings.groups import DEFAULT_MODEL, DEFAULT_THRESHOLD


class RubricMetric(RowMaking, Planning, Asking):
    """One judge call per conversation that rates every criterion of `rubric`.

    `rubric` is a `Rubric`, a rubric file's path or a packaged metric's name. `model` is a
    model string (`gpt-4o`, `anthropic:claude-3-5-sonnet-latest`, `ollama:llama3`, any LiteLLM
    `provider/model`) or a `CustomLLMClient`. A row passes when its score is at least its
    threshold: `thresholds[name]`, else `threshold`. `weights` (criterion name to weight, 1 when
    not named) make a suite's `user_satisfaction`. `date_field` names the metadata field with the
    chat's date (default: `chat_date`, `started_at` or `timestamp`). `samples` asks for K judgements and keeps the
    majority; `max_input_tokens` caps the prompt; `cache` is the run's response cache. `cut_logs`
    says every log was cut after its last message, so a final user message nobody answered is
    left out rather than judged as a user left hanging (a record's `log_cut` says so for itself).
    `transport` is how a model speaking OpenAI's protocol is called: "auto" and "direct" over
    flowrate's own HTTP client, "litellm" through LiteLLM (other providers always are).
    """

    def __init__(
        self,
        rubric: Rubric | str | Path | None,
        model: str | Any = DEFAULT_MODEL,
        threshold: float = DEFAULT_THRESHOLD,
        verbose: bool = False,
        *,
        api_base: str | None = None,
        language: str = "English",
        retry: RetryPolicy | None = None,
        samples: int = 1,
        max_input_tokens: int | None = None,
        cache: ResponseCache | None = None,
        thresholds: dict[str, float] | None = None,
        weights: dict[str, float] | None = None,
        date_field: str | None = None,
        cut_logs: bool = False,
        transport: str = "auto",
    ):
        if not 0.0 <= threshold <= 1.0:
            raise ValueError("threshold must be between 0 and 1")
        if samples < 1:
            raise ValueError("samples must be at least 1")
        self.rubric = rubric if isinstance(rubric, Rubric) else load_rubric(rubric)
        self.name = self.rubric.name
        self.row_names = self.rubric.row_names
        self.backend = make_backend(model, api_base, transport)
        self.model = self.backend.model_name
        self.threshold = threshold
        self.thresholds = {name: (thresholds or {}).get(name, threshold) for name in self.row_names}
        self.weights = {c.name: float((weights or {}).get(c.name, 1.0)) for c in self.rubric.criteria}
        self.language = language
        self.retry = retry or RetryPolicy()
        self.samples = samples
        self.temperature = SAMPLING_TEMPERATURE if samples > 1 else TEMPERATURE
        self.cache = cache
        self.date_field = date_field
        self.cut_logs = cut_logs
        self._max_input_tokens = max_input_tokens
        self._rng = random.Random()

    @property
    def calls_per_conversation(self) -> int:
        return 1 if self.samples == 1 or self.backend.supports_n() else self.samples

    @property
    def judge_identity(self) -> dict[str, str]:
        """What makes rows comparable: a results file never mixes two judges."""
        return {"model": self.model, "rubric version": self.rubric.version}

    def check_keys(self) -> None:
        """Raise `JudgeAccessError` now when the provider's key is missing (no LiteLLM import)."""
        self.backend.check_keys()

    def check_access(self) -> None:
        """Raise `JudgeAccessError` now if no call can succeed (a missing API key, a model no provider serves)."""
        self.backend.check_access()

    def price_known(self) -> bool:
        return self.backend.price(1000, 100) is not None

    def warm_up(self) -> None:
        """Import and look up now what every call needs (the model's window, its response format),
        and check that the context budget holds the rubric and a conversation."""
        _ = self._window
        _ = self._response_format
        self.check_budget()

    async def evaluate(
        self,
        case: ConversationalEvalTestCase,
        source: Source | None = None,
        *,
        plan: JudgePlan | None = None,
        gate: CallGate | None = None,
    ) -> list[EvaluationRow]:
        """Judge one conversation: one row per name in `row_names`. Judge failures become error
        rows; a rejected key raises `JudgeAccessError`, a stopping run `RunStopped`.

        The call's tokens, cost, attempts and timings are on the first row; the suite's other
        rows carry none of them (cost 0, or null when the price is unknown), so totals add up."""
        plan = plan or self.plan(case)
        if plan.cached_texts is None and plan.window != self._window:  # planned before the server named its window
            plan = self.plan(case)
        truncated = plan.truncated
        spent = Spend()
        cached = plan.cached_texts is not None
        outcome: list[Judgement] | Exception
        try:
            if cached:
                outcome = cached_judgements(self, plan.cached_texts)  # type: ignore[arg-type]
                spent.response_format = plan.cached_form
            else:
                try:
                    outcome = await self._judge(plan, spent, gate)
                except Exception as error:
                    told = told_window(error)
                    if told is None:
                        raise
                    self.learn_window(told)
                    refitted = self.plan(case, lookup=False)
                    if refitted.messages == plan.messages:
                        raise
                    plan = refitted  # once: planned for the window the server named
                    truncated = plan.truncated
                    outcome = await self._judge(plan, spent, gate)
                if not any(judgement.cut for judgement in outcome):  # a cut judgement may be missing issues
                    self._remember(plan, [judgement.text for judgement in outcome], spent.response_format)
        except (JudgeAccessError, RunStopped):
            raise
        except Exception as error:
            outcome = error
        return settle_rows(
            self,
            self._new_rows(case, source, truncated),
            outcome,
            cached=cached,
            response_format=spent.response_format,
            usage=spent.usage,
            cost_usd=spent.cost_usd if spent.calls or cached else None,
            attempts=spent.stats.attempts,
            latency_s=spent.stats.latency_s,
            wait_s=spent.stats.wait_s,
        )


class ConversationalFlowRateMetric(RubricMetric):
    """Conversational Flow Rate: the whole conversation on five levels (fully 1.0, mostly 0.9,
    partial 0.7, minor 0.3, none 0.0), in one holistic call. `rubric` swaps in a rubric file of
    your own; the other arguments are `RubricMetric`'s."""

    def __init__(
        self,
        model: str | Any = DEFAULT_MODEL,
        threshold: float = DEFAULT_THRESHOLD,
        verbose: bool = False,
        **options: Any,
    ):
        super().__init__(options.pop("rubric", None), model, threshold, verbose, **options)


class RepetitivePatternDetectionMetric(RubricMetric):
    """Repetitive Pattern Detection, as eval_lib names it: how much the assistant repeats itself,
    on an inverted scale (none 1.0, minor 0.9, partial 0.7, mostly 0.3, fully 0.0), in one call.
    The other arguments are `RubricMetric`'s."""

    def __init__(
        self,
        model: str | Any = DEFAULT_MODEL,
        threshold: float = DEFAULT_THRESHOLD,
        verbose: bool = False,
        **options: Any,
    ):
        super().__init__("repetitive_pattern_detection", model, threshold, verbose, **options)


class VirtualAgentSuite(RubricMetric):
    """The virtual-agent suite: eight criteria rated in one call per conversation, and
    `user_satisfaction`, their weighted mean under `weights`. `thresholds` sets a threshold per
    criterion; the other arguments are `RubricMetric`'s."""

    def __init__(
        self,
        model: str | Any = DEFAULT_MODEL,
        threshold: float = DEFAULT_THRESHOLD,
        verbose: bool = False,
        **options: Any,
    ):
        super().__init__("virtual_agent", model, threshold, verbose, **options)
