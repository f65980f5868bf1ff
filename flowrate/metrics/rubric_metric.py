"""Metrics: rubric data plus one judging engine.

`RubricMetric` is the engine: for one conversation it plans the prompt (fitting long
conversations), looks the reply up in the response cache, makes one judge call (or K for
`samples` where the provider cannot return several), re-asks once after an unusable reply,
counts the spend, and turns the judgement into one row per criterion of the rubric (plus
`user_satisfaction` for a suite). The named metrics are this engine with a packaged rubric.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

import orjson

from flowrate.errors import ConfigError, JudgeAccessError
from flowrate.inputs.conversation import ConversationalEvalTestCase, EvalTestCase, Source, chat_date
from flowrate.judge.backend import Completion, Usage
from flowrate.judge.cache import ResponseCache, cache_key
from flowrate.judge.limits import CallGate, RunStopped
from flowrate.judge.litellm_backend import make_backend
from flowrate.judge.retry import CallStats, RetryPolicy, complete_with_retries, error_message, is_n_refusal
from flowrate.results.rows import ErrorInfo, EvaluationRow
from flowrate.rubric.fitting import PER_MESSAGE_OVERHEAD, fit_turns
from flowrate.rubric.model import USER_SATISFACTION, Rubric, load_rubric
from flowrate.rubric.prompt import grading_request
from flowrate.scores.reading import (
    REPLY_EXCERPT_CHARS,
    CopiedExample,
    Judgement,
    Reading,
    ReplyCut,
    UnparsableReply,
    copied_example,
    judgement_text,
    majority,
    parse_reply,
    read_reply,
    weighted_mean,
)
from flowrate.scores.schema import corrective_messages, reply_schema

ERROR_MESSAGE_LIMIT = 500
REPLY_RESERVE_TOKENS = 1024  # room for the reply in the context, where no reply limit is sent
BYTES_PER_TOKEN_ESTIMATE = 4  # for rate ceilings and budgets; exact counts only where they matter
MIN_TRANSCRIPT_TOKENS = 64  # a budget must hold at least a short turn besides the rubric
TEMPERATURE = 0.0  # one sample: the judge's most likely verdict
# K samples at temperature 0 are K copies of one verdict: their agreement would say nothing. 0.7 is
# the usual sampling temperature of self-consistency voting (Wang et al. 2022 used 0.5-0.7).
SAMPLING_TEMPERATURE = 0.7
# max_tokens of each reply: the rubric's longest example reply, in tokens, times REPLY_TOKENS_MARGIN,
# and never below REPLY_TOKENS_FLOOR. The examples measure 59-113 tokens (flow), 172-286 (the
# virtual-agent suite) with LiteLLM's default tokenizer; a real reply runs longer when a conversation
# has more lapses, and a small model's tokenizer counts 10-25 % more. A runaway key-issue list from
# a 1.5B model reached 1,352 tokens (254 s on CPU) before it stopped (issue 14).
REPLY_TOKENS_MARGIN = 3
REPLY_TOKENS_FLOOR = 512


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


@dataclass
class CallEstimate:
    """What one conversation's judging would send and cost, before any call."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0  # None when the model has no known price


class RubricMetric:
    """One judge call per conversation that rates every criterion of `rubric`.

    `rubric` is a `Rubric`, a rubric file's path or a packaged metric's name. `model` is a
    model string (`gpt-4o`, `anthropic:claude-3-5-sonnet-latest`, `ollama:llama3`, any LiteLLM
    `provider/model`) or a `CustomLLMClient`. A row passes when its score is at least its
    threshold: `thresholds[name]`, else `threshold`. `weights` (criterion name to weight, 1 when
    not named) make a suite's `user_satisfaction`. `date_field` names the metadata field with the
    chat's date (default: `chat_date`, `started_at` or `timestamp`). `samples` asks for K judgements and keeps the
    majority; `max_input_tokens` caps the prompt; `cache` is the run's response cache.
    """

    def __init__(
        self,
        rubric: Rubric | str | Path | None,
        model: str | Any = "gpt-4o",
        threshold: float = 0.7,
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
    ):
        if not 0.0 <= threshold <= 1.0:
            raise ValueError("threshold must be between 0 and 1")
        if samples < 1:
            raise ValueError("samples must be at least 1")
        self.rubric = rubric if isinstance(rubric, Rubric) else load_rubric(rubric)
        self.name = self.rubric.name
        self.row_names = self.rubric.row_names
        self.backend = make_backend(model, api_base)
        self.model = self.backend.model_name
        self.threshold = threshold
        self.thresholds = {name: (thresholds or {}).get(name, threshold) for name in self.row_names}
        self.weights = {c.name: float((weights or {}).get(c.name, 1.0)) for c in self.rubric.criteria}
        self.verbose = verbose
        self.language = language
        self.retry = retry or RetryPolicy()
        self.samples = samples
        self.temperature = SAMPLING_TEMPERATURE if samples > 1 else TEMPERATURE
        self.cache = cache
        self.date_field = date_field
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
        wrapper = self.backend.count_tokens(grading_request(empty, self.language, self.rubric.task))
        return self._prefix_tokens + wrapper + self._reply_reserve

    @cached_property
    def reply_token_limit(self) -> int:
        """max_tokens of each reply: what the rubric's schema needs (see `REPLY_TOKENS_MARGIN`)."""
        longest = max(
            (self.backend.count_tokens(orjson.dumps(e.reply).decode()) for e in self.rubric.examples), default=0
        )
        return max(REPLY_TOKENS_FLOOR, REPLY_TOKENS_MARGIN * longest)

    @cached_property
    def _reply_limit(self) -> int | None:
        """The max_tokens sent: none to a judge that cannot take it or spends it on hidden reasoning."""
        return self.reply_token_limit if self.backend.bounds_replies() else None

    @property
    def _reply_reserve(self) -> int:
        """Room left in the context for one reply (each of n choices has its own)."""
        return self._reply_limit or REPLY_RESERVE_TOKENS

    # -- before the call -----------------------------------------------------------
    @cached_property
    def _response_format(self) -> dict[str, Any] | None:
        return self.backend.structured_output(self.name, reply_schema(self.rubric))

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
        replies = [orjson.dumps(example.reply) for example in self.rubric.examples] or [b"{}" * 100]
        size = sum(len(reply) for reply in replies) / len(replies)
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
        if self._window is not None and size > self._window - self._reply_reserve:
            fitted, elided = fit_turns(case, self.input_budget or 0, self.backend.count_tokens)
            if fitted is not case:
                messages = self.rubric.build_messages(fitted, self.language, elided)
        keys = []
        if self.cache is not None:
            keys = [(self._cache_key(messages, form), form) for form in self.backend.response_format_ids()]
        plan = JudgePlan(fitted, messages, fitted is not case, keys, None, size // BYTES_PER_TOKEN_ESTIMATE)
        if lookup and self.cache is not None:
            self._take_cached(plan, {key: texts for key, _ in keys if (texts := self.cache.get(key)) is not None})
        return plan

    def _cache_key(self, messages: list[dict[str, str]], form: str | None) -> str:
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

    # -- the call ------------------------------------------------------------------
    def new_row(
        self, case: ConversationalEvalTestCase, source: Source | None = None, name: str | None = None
    ) -> EvaluationRow:
        """A row for `case` and the row name `name` (default: the first), before any judgement."""
        name = name or self.row_names[0]
        return EvaluationRow(
            id=case.id or "",
            source=source,
            metric=name,
            suite=self.name if self.rubric.is_suite else None,
            threshold=self.thresholds[name],
            model=self.model,
            rubric_version=self.rubric.version,
            evaluated_at=datetime.now(UTC),
            number_of_turns=len(case.turns),
            chat_date=chat_date(case, self.date_field),
        )

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
        rows = self._new_rows(case, source, plan)
        spent = _Spend()
        cached = plan.cached_texts is not None
        try:
            if cached:
                judgements = [parse_reply(text, self.rubric) for text in plan.cached_texts]  # type: ignore[union-attr]
                for judgement in judgements:
                    judgement.repaired = False  # no reply was read this run
                spent.response_format = plan.cached_form
            else:
                judgements = await self._judge(plan, spent, gate)
                if not any(judgement.cut for judgement in judgements):  # a cut judgement may be missing issues
                    self._remember(plan, [judgement.text for judgement in judgements], spent.response_format)
        except (JudgeAccessError, RunStopped):
            raise
        except Exception as error:
            message = error_message(error, ERROR_MESSAGE_LIMIT)
            reply = getattr(error, "reply", None)
            for row in rows:
                row.error = ErrorInfo(type=type(error).__name__, message=message)
                row.raw_reply = reply
        else:
            self._fill(rows, judgements)
        now = datetime.now(UTC)  # when the verdict (or the error) arrived
        for row in rows:
            row.evaluated_at = now
            row.cached = cached
            row.response_format = spent.response_format
        first = _charge(rows, spent.usage, spent.cost_usd if spent.calls or cached else None)
        first.attempts = spent.stats.attempts
        first.latency_s = round(spent.stats.latency_s, 3)
        first.wait_s = round(spent.stats.wait_s, 3)
        return rows

    def _new_rows(
        self, case: ConversationalEvalTestCase, source: Source | None, plan: JudgePlan
    ) -> list[EvaluationRow]:
        rows = [self.new_row(case, source, name) for name in self.row_names]
        for row in rows:
            row.truncated = plan.truncated
            row.samples = self.samples
        return rows

    def _remember(self, plan: JudgePlan, texts: list[str], form: str | None) -> None:
        """Put a judge's usable replies in the cache, under the form the schema was sent in."""
        if self.cache is not None:
            self.cache.put(self._cache_key(plan.messages, form), self.model, self.rubric.version, texts)

    def rows_from_replies(
        self,
        case: ConversationalEvalTestCase,
        source: Source | None,
        plan: JudgePlan,
        texts: list[str],
        usage: dict[str, int],
        batch_id: str,
    ) -> list[EvaluationRow]:
        """Rows from the replies a provider batch returned for `plan`: parsed as online, put in the
        cache, priced at the batch price (null when unknown). Raises `UnparsableReply` when a reply
        holds no judgement, for the caller to send the conversation online."""
        judgements = [parse_reply(text, self.rubric) for text in texts]
        form = "json_schema" if self._response_format else None  # a batch line carries OpenAI's form
        self._remember(plan, texts, form)
        rows = self._new_rows(case, source, plan)
        self._fill(rows, judgements)
        for row in rows:
            row.batch = True
            row.batch_id = batch_id
            row.response_format = form
        price = getattr(self.backend, "batch_price", lambda prompt, completion: None)
        cost = price(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0))
        _charge(rows, Usage(**usage), cost).attempts = 1
        return rows

    def batch_request(self, cid: str, plan: JudgePlan) -> bytes:
        """The plan as one line of an OpenAI batch input file."""
        from flowrate.judge.batch_api import request_line

        n = self.samples if self.samples > 1 and self.backend.supports_n() else 1
        model = getattr(self.backend, "batch_model", self.model)
        return request_line(cid, model, plan.messages, n, self._response_format)

    def _fill(self, rows: list[EvaluationRow], judgements: list[Judgement]) -> None:
        by_name = {row.metric: row for row in rows}
        for criterion in self.rubric.criteria:
            row = by_name[criterion.name]
            rating, agreement, values = majority(judgements, criterion.name)
            if criterion.scale.levels is not None:
                row.verdict = str(rating.value)
            else:
                row.rating = int(rating.value)
                row.scale = criterion.scale.points
            row.score = rating.score
            row.success = row.score >= row.threshold
            row.reason = rating.reason
            row.key_issues = rating.key_issues
            if self.samples > 1:
                row.agreement = agreement
                row.sample_verdicts = values
        reasons = list(dict.fromkeys(judgement.reasked for judgement in judgements if judgement.reasked))
        for row in rows:
            row.samples = len(judgements)
            row.repaired = any(judgement.repaired for judgement in judgements)
            row.cut = any(judgement.cut for judgement in judgements)
            row.reasked = "; ".join(reasons) or None
        if self.rubric.user_satisfaction:
            row = by_name[USER_SATISFACTION]
            scores = {c.name: by_name[c.name].score for c in self.rubric.criteria}
            row.score = weighted_mean(scores, self.weights)  # type: ignore[arg-type]
            row.success = row.score >= row.threshold
            row.weights = dict(self.weights)
            row.reason = f"weighted mean of the {len(scores)} criteria's scores"

    async def _judge(self, plan: JudgePlan, spent: _Spend, gate: CallGate | None) -> list[Judgement]:
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
            except Exception as error:
                if not is_n_refusal(error):
                    raise
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
        """The judgement in one reply, re-asking once when it is unusable. The re-ask says what was
        wrong; when only some criteria of a suite were, it asks for those alone and keeps the rest.
        Raises `UnparsableReply`, `CopiedExample` or `ReplyCut` (with both replies) when the
        re-ask's reply is unusable too."""
        reading = read_reply(text, self.rubric)
        problem = self._problem(reading, cut)
        if problem is None:
            return Judgement(reading.ratings, text, repaired=reading.repaired, cut=cut)
        _, why, only = problem
        retry = await call(corrective_messages(plan.messages, text, why, self.rubric, only), 1)
        again = read_reply(retry.texts[0], self.rubric, only)
        still = self._problem(again, retry.cut(0), only)
        if still is not None:
            kind, wrong, _ = still
            replies = f"{_excerpt(text)}\n--- the reply to the re-ask ---\n{_excerpt(retry.texts[0])}"
            said = f"{wrong} (and again after a re-ask)" if wrong == why else f"{wrong} (asked again after: {why})"
            raise kind(said, replies)
        if not only:
            return Judgement(again.ratings, retry.texts[0], again.repaired, why, retry.cut(0))
        ratings = {c.name: (again.ratings.get(c.name) or reading.ratings[c.name]) for c in self.rubric.criteria}
        return Judgement(
            ratings, judgement_text(ratings, self.rubric), reading.repaired or again.repaired, why, cut or retry.cut(0)
        )

    def _problem(
        self, reading: Reading, cut: bool, only: list[str] | None = None
    ) -> tuple[type, str, list[str] | None] | None:
        """What makes a reply unusable: its kind, what to tell the judge, and the criteria to ask
        again for (None: the whole reply). None for a usable reply."""
        if reading.usable:
            copied = copied_example(reading, self.rubric)
            return (CopiedExample, copied, None) if copied else None
        if cut:
            return (
                ReplyCut,
                f"it stopped at its limit of {self._reply_limit} tokens before the JSON object was complete;"
                " keep the reason to a few sentences and list only the most serious key issues",
                None,
            )
        if reading.problem is None and self.rubric.is_suite and reading.ratings and only is None:
            return UnparsableReply, reading.describe(), list(reading.problems)
        return UnparsableReply, reading.describe(), None


def _excerpt(text: str) -> str:
    """An unusable reply as kept on its error row: the first half of `REPLY_EXCERPT_CHARS`."""
    limit = REPLY_EXCERPT_CHARS // 2
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _charge(rows: list[EvaluationRow], usage: Usage, cost_usd: float | None) -> EvaluationRow:
    """A call's tokens and cost go on its first row; the others carry cost 0, or null when the
    price is unknown, so totals add up. Returns the first row."""
    for row in rows:
        row.cost_usd = None if cost_usd is None else 0.0
    rows[0].usage = usage
    rows[0].cost_usd = cost_usd
    return rows[0]


class _Spend:
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


class ConversationalFlowRateMetric(RubricMetric):
    """Conversational Flow Rate: the whole conversation on five levels (fully 1.0, mostly 0.9,
    partial 0.7, minor 0.3, none 0.0), in one holistic call. `rubric` swaps in a rubric file of
    your own; the other arguments are `RubricMetric`'s."""

    def __init__(self, model: str | Any = "gpt-4o", threshold: float = 0.7, verbose: bool = False, **options: Any):
        super().__init__(options.pop("rubric", None), model, threshold, verbose, **options)


class RepetitivePatternDetectionMetric(RubricMetric):
    """Repetitive Pattern Detection, as eval_lib names it: how much the assistant repeats itself,
    on an inverted scale (none 1.0, minor 0.9, partial 0.7, mostly 0.3, fully 0.0), in one call.
    The other arguments are `RubricMetric`'s."""

    def __init__(self, model: str | Any = "gpt-4o", threshold: float = 0.7, verbose: bool = False, **options: Any):
        super().__init__("repetitive_pattern_detection", model, threshold, verbose, **options)


class VirtualAgentSuite(RubricMetric):
    """The virtual-agent suite: eight criteria rated in one call per conversation, and
    `user_satisfaction`, their weighted mean under `weights`. `thresholds` sets a threshold per
    criterion; the other arguments are `RubricMetric`'s."""

    def __init__(self, model: str | Any = "gpt-4o", threshold: float = 0.7, verbose: bool = False, **options: Any):
        super().__init__("virtual_agent", model, threshold, verbose, **options)
