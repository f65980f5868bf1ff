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

from flowrate.errors import ConfigError
from flowrate.inputs.conversation import ConversationalEvalTestCase, Source
from flowrate.judge.cache import ResponseCache
from flowrate.judge.limits import CallGate
from flowrate.judge.retry import RetryPolicy
from flowrate.judge.transports import make_backend
from flowrate.metrics.budget import Budget
from flowrate.metrics.planning import SAMPLING_TEMPERATURE, TEMPERATURE, CallEstimate, JudgePlan, Planner
from flowrate.metrics.rows import RowMaker
from flowrate.results.rows import EvaluationRow
from flowrate.rubric.combination import SUFFIX
from flowrate.rubric.model import Rubric, load_rubric
from flowrate.settings.groups import DEFAULT_LANGUAGE, DEFAULT_MODEL, DEFAULT_THRESHOLD, ScoreChoice, check_threshold
from flowrate.settings.options import JudgeSettings


class RubricMetric:
    """One judge call per conversation that rates every criterion of `rubric` (a `Rubric`, a
    rubric file's path or a packaged metric's name), made of parts with declared inputs: `budget`
    (the context window), `planner` (a plan before any call) and `row_maker` (judgements to
    rows); the judging step (`step.Judging`) makes a
    conversation's requests and rows, whatever engine sends them.

    `model` is a model string (`gpt-4o`, `anthropic:claude-3-5-sonnet-latest`, `ollama:llama3`,
    any LiteLLM `provider/model`) or a `CustomLLMClient`, `api_base` the judge server's address;
    `transport` is how a model speaking OpenAI's protocol is called: "auto" and "direct" over
    flowrate's own HTTP client, "litellm" through LiteLLM (other providers always are). A row
    passes when its score is at least `thresholds[name]`, else `threshold`; `weights` (criterion
    name to weight, 1 when not named) make a suite's `user_satisfaction`. `date_field` names the
    metadata field with the chat's date (default: `chat_date`, `started_at` or `timestamp`).
    `samples` asks for K judgements and keeps the majority; `max_input_tokens` caps the prompt;
    `cache` is the run's response cache, `retry` the policy for failed calls, `language` the
    prompt's language. `cut_logs` says every log was cut after its last message, so a final user
    message nobody answered is left out rather than judged as a user left hanging (a record's
    `log_cut` says so for itself). `choice` (a `ScoreChoice`) names the value rows are scored by,
    the reply's field order, the `uncertain` mark, and whether the judge's log-probabilities are
    asked (rows' `level_probs`, `expected_score`), and how hard a judge that reasons thinks
    (`reasoning_effort`); the rubric's name and version are OpenAI's `prompt_cache_key`. A price
    of the config's (`prices`, in the judge group) is set on `backend.prices`. `verbose` is for eval_lib's signature only.
    """

    def __init__(
        self,
        rubric: Rubric | str | Path | None,
        model: str | Any = DEFAULT_MODEL,
        threshold: float = DEFAULT_THRESHOLD,
        verbose: bool = False,
        *,
        api_base: str | None = None,
        language: str = DEFAULT_LANGUAGE,
        retry: RetryPolicy | None = None,
        samples: int = 1,
        max_input_tokens: int | None = None,
        cache: ResponseCache | None = None,
        thresholds: dict[str, float] | None = None,
        weights: dict[str, float] | None = None,
        date_field: str | None = None,
        cut_logs: bool = False,
        transport: str = "auto",
        choice: ScoreChoice | None = None,
    ):
        choice = choice or ScoreChoice()
        given: dict[str, Any] = dict(
            model=model if isinstance(model, str) else DEFAULT_MODEL, threshold=threshold, api_base=api_base,
            language=language, samples=samples, max_input_tokens=max_input_tokens, thresholds=thresholds or {},
            weights=weights or {}, date_field=date_field, cut_logs=cut_logs, transport=transport,
            score=choice.score, reply_order=choice.reply_order, uncertain_below=choice.uncertain_below,
            logprobs=choice.logprobs, reasoning_effort=choice.reasoning_effort, turn_look=choice.turn_look,
        )  # fmt: skip
        judge = JudgeSettings.model_construct(**given)  # the arguments as the judge group: one way to build
        self._build(rubric, model, judge, cache, retry or RetryPolicy())

    @classmethod
    def of(cls, rubric: Rubric | str | Path | None, judge: JudgeSettings, cache: ResponseCache | None) -> RubricMetric:
        """The metric of `rubric` as a run's judge group `judge` (`settings.options.JudgeSettings`)
        sets it: what `flowrate eval` builds, each option read from the group where it is
        declared, with the run's response `cache`."""
        metric = cls.__new__(cls)
        metric._build(rubric, judge.model, judge, cache, RetryPolicy.of(judge))
        return metric

    def _build(
        self, rubric: Rubric | str | Path | None, model: str | Any, judge: JudgeSettings, cache: ResponseCache | None,
        retry: RetryPolicy,
    ) -> None:  # fmt: skip
        """The metric's parts, from its judge group `judge` (with `model`, a string or a client)."""
        check_threshold(judge.threshold)
        if judge.samples < 1:
            raise ValueError("samples must be at least 1")
        choice = judge.score_choice
        self.judge = judge  #: every judging option, read from its group by the part that uses it
        self.rubric = rubric if isinstance(rubric, Rubric) else load_rubric(rubric)
        self.name, self.row_names = self.rubric.name, self.rubric.row_names
        self.backend = make_backend(model, judge.api_base, judge.transport)
        self.backend.asks_logprobs = choice.asks_logprobs
        self.backend.reasoning_effort = choice.reasoning_effort
        self.backend.prompt_cache_key = f"flowrate-{self.rubric.name}-{self.rubric.version}"[:64]
        self.backend.prices = judge.prices  # the config's prices of models the price list lacks
        self.model: str = self.backend.model_name
        self.threshold, self.samples, self.cache, self.retry = judge.threshold, judge.samples, cache, retry
        self.thresholds = {name: judge.thresholds.get(name, judge.threshold) for name in self.row_names}
        weighted = {c.name: float(judge.weights.get(c.name, 1.0)) for c in self.rubric.criteria}
        self.temperature = SAMPLING_TEMPERATURE if judge.samples > 1 else TEMPERATURE
        self.budget = Budget(self.rubric, self.backend, judge.language, judge.max_input_tokens)
        if choice.asks_checklist and not self.rubric.checklist:
            raise ConfigError(
                f"--score {choice.score}: rubric {self.rubric.name} declares no checklist (add `checklist:` questions)"
            )
        if choice.score == "fitted" and self.rubric.combination is None:
            raise ConfigError(
                f"--score fitted: rubric {self.rubric.name} ships no weights ({self.rubric.name}{SUFFIX} beside it)"
            )
        self.planner = Planner(self.rubric, self.budget, self.backend, cache, judge.language, judge.cut_logs, judge.samples, self.temperature, choice.reply_order, choice.looks_first, choice.asks_checklist, choice.turn_look)  # fmt: skip
        self.rng = random.Random()  # the retries' waits
        self.row_maker = RowMaker(self.rubric, self.thresholds, weighted, self.model, judge.samples, judge.date_field, choice)  # fmt: skip
        self.weights, self.judge_identity = weighted, self.row_maker.judge_identity

    @property
    def calls_per_conversation(self) -> int:
        """Judge calls one conversation takes (`Planner.calls_per_conversation`)."""
        return self.planner.calls_per_conversation

    def warm_up(self) -> None:
        """Look up now what every call needs, and check the context budget (`Planner.warm_up`)."""
        self.planner.warm_up()

    def plan(self, case: ConversationalEvalTestCase, lookup: bool = True) -> JudgePlan:
        """The plan of `case` (`Planner.plan`; `lookup` False: the cache is left for `fill_from_cache`)."""
        return self.planner.plan(case, lookup)

    def fill_from_cache(self, plans: list[JudgePlan]) -> None:
        """Look up the replies of all `plans` with one query."""
        self.planner.replies.look_up(plans)

    def estimate(self, plan: JudgePlan, exact: bool = False) -> CallEstimate:
        """What `plan` would send and cost (`Planner.estimate`; `exact`: counted with the model's tokenizer)."""
        return self.planner.estimate(plan, exact)

    def new_row(
        self, case: ConversationalEvalTestCase, source: Source | None = None, name: str | None = None
    ) -> EvaluationRow:
        """A row for `case` (read from `source`) and the row name `name` (default: the first), before any judgement."""
        return self.row_maker.new_row(case, source, name)

    async def evaluate(
        self, case: ConversationalEvalTestCase, source: Source | None = None, *,
        plan: JudgePlan | None = None, gate: CallGate | None = None,
    ) -> list[EvaluationRow]:  # fmt: skip
        """Judge `case` (read from `source`) by `plan` (default: planned now), online: the judging
        step (`step.Judging`) over one call at a time (`online_calls.OnlineCalls`), its calls held
        by `gate`; one row per name in `row_names`, what it says to keep put in the cache."""
        from flowrate.metrics.online_calls import OnlineCalls
        from flowrate.metrics.step import Judging, keep_in_cache

        judging = Judging(self, case, source, plan)
        await OnlineCalls(self.backend, self.retry, self.rng, gate).judge(judging)
        result = judging.result()
        keep_in_cache(self, judging, result)
        return result.rows


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
