"""The rubric metric's planning, before any call: the prompt for a conversation with its middle
left out where it would not fit the judge's context (its budget in `budget`), the response
cache asked (in one query for many plans), cost estimates, and a batch request."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import orjson

from flowrate.inputs.conversation import ConversationalEvalTestCase
from flowrate.judge.backend import JudgeBackend, Usage
from flowrate.judge.cache import Replies, ResponseCache, cache_key, messages_digest
from flowrate.metrics.budget import Budget
from flowrate.rubric.checklist import checklist_messages, turn_window_messages
from flowrate.rubric.fitting import PER_MESSAGE_OVERHEAD, fit_turns
from flowrate.rubric.model import Rubric
from flowrate.rubric.prompt import turn_numbers
from flowrate.scores.checklist import checklist_schema, turn_schema
from flowrate.scores.schema import reply_schema

ERROR_MESSAGE_LIMIT = 500
BYTES_PER_TOKEN_ESTIMATE = 4  # for rate ceilings and budgets; exact counts only where they matter
TEMPERATURE = 0.0  # one sample: the judge's most likely verdict
# K samples at temperature 0 are K copies of one verdict: their agreement would say nothing. 0.7 is
# the usual sampling temperature of self-consistency voting (Wang et al. 2022 used 0.5-0.7).
SAMPLING_TEMPERATURE = 0.7
TOKENS_PER_ANSWER = 12  # `", "follows_on": "yes` is 8 tokens with Qwen2.5's tokenizer, a checklist's `", "1": "yes` 6
TOKENS_PER_VERDICT = 16  # {"verdict": "partial"} is 7 tokens with Qwen2.5's tokenizer; a suite's criterion about 12


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
    cached_logprobs: list[list[dict[str, Any]] | None] = field(default_factory=list)  # their tokens' log-probabilities
    window: int | None = None  # the context window it was fitted to (tokens; None: none known)
    turn_numbers: list[int] = field(default_factory=list)  # the turns with a reply, as the transcript numbers them
    turn_positions: list[int] = field(default_factory=list)  # where each of them is in `case.turns`


@dataclass
class CallEstimate:
    """What one conversation's judging would send and cost, before any call."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0  # None when the model has no known price; nothing cached: an upper bound
    cached_tokens: int = 0  #: of `prompt_tokens`, the rubric's prefix the provider will read from its cache
    #: the cost with `cached_tokens` at the cached price (`--dry-run`); `--max-cost` reserves `cost_usd`, the
    #: bound, and settles at what the call cost, so a budget is never passed when a provider misses its cache
    cached_cost_usd: float | None = 0.0


@dataclass(eq=False)
class CachedReplies:
    """A plan's replies in the run's response `cache` (None: nothing is cached): the keys its
    messages are cached under, one per response form `backend` may send them in, the lookup of
    one plan or of many in one query, and the usable replies remembered. `backend`'s identity,
    the `rubric`'s version, the `temperature`, the `samples` and the `reply_order` of the schema
    are part of what a reply answers."""

    cache: ResponseCache | None
    backend: JudgeBackend
    rubric: Rubric
    temperature: float
    samples: int
    reply_order: str = "reason-first"

    def keys(self, messages: list[dict[str, str]]) -> list[tuple[str, str | None]]:
        """(cache key, response form) of `messages`, for each form a reply may be cached under."""
        if self.cache is None:
            return []
        digest = messages_digest(messages)
        return [(self.key(digest, form), form) for form in self.backend.response_format_ids()]

    def key(self, messages: list[dict[str, str]] | str, form: str | None) -> str:
        """Where the reply to `messages` (or their digest) sent in response form `form` is cached:
        the judge, the rubric, the messages, the temperature, the samples and the form make it."""
        # the reason-first schema's keys are those of every run before the order could be chosen
        version = (
            self.rubric.version if self.reply_order == "reason-first" else f"{self.rubric.version}:{self.reply_order}"
        )
        return cache_key(self.backend.cache_identity(), version, messages, self.temperature, self.samples, form)

    def look_up(self, plans: list[JudgePlan]) -> None:
        """Set the cached replies of all `plans`, asked with one query."""
        if self.cache is None or not plans:
            return
        found = self.cache.get_many([key for plan in plans for key, _ in plan.keys])
        if asked := self.backend.top_logprobs():  # kept without log-probabilities: asked again, with them
            found = {key: replies for key, replies in found.items() if not replies.kept_without_logprobs}
            if self.backend.logprobs is not None:  # kept with unusable ones: used, and said as a new reply is
                for replies in found.values():
                    self.backend.logprobs.heard(asked, replies.texts, list(replies.logprobs))
        for plan in plans:
            take_cached(plan, found)

    def remember(
        self,
        plan: JudgePlan,
        texts: list[str],
        form: str | None,
        logprobs: list[list[dict[str, Any]] | None] | None = None,
    ) -> None:
        """Put a judge's usable replies `texts` to `plan` in the cache, under the response form
        `form` the schema was sent in, with the messages they answer (`flowrate review` shows a
        row's exact request) and their tokens' `logprobs` (None: none)."""
        key = next((key for key, planned in plan.keys if planned == form), None)
        self.keep(plan.messages, texts, form, logprobs, plan.case.id, key)

    def keep(
        self,
        messages: list[dict[str, str]],
        texts: list[str],
        form: str | None,
        logprobs: list[list[dict[str, Any]] | None] | None,
        conversation_id: str | None,
        key: str | None = None,
    ) -> None:
        """Put `texts`, the replies to `messages` sent in response form `form`, in the cache with
        their tokens' `logprobs`, for `conversation_id`, under `key` (None: the messages' own)."""
        if self.cache is not None:
            key = key or self.key(messages, form)
            version = self.rubric.version
            self.cache.put(key, self.backend.model_name, version, texts, messages, conversation_id, logprobs)

    def found_for(self, messages: list[dict[str, str]]) -> Replies | None:
        """The replies the cache holds for `messages`, under the first of the backend's forms that has them."""
        if self.cache is None:
            return None
        keys = [key for key, _ in self.keys(messages)]
        found = self.cache.get_many(keys)
        return next((found[key] for key in keys if key in found), None)


@dataclass(eq=False)
class Planner:
    """The plan of one conversation before any call: its messages fitted to `budget`, its cache
    keys and any reply `cache` holds (`replies`), its estimate. `rubric`, `language` and
    `cut_logs` make the messages (`cut_logs`: a final user message nobody answered is left out);
    `backend` counts tokens, names the response forms and prices; `samples` and `temperature`
    are part of what a cached reply answers."""

    rubric: Rubric
    budget: Budget
    backend: JudgeBackend
    cache: ResponseCache | None
    language: str
    cut_logs: bool
    samples: int
    temperature: float
    reply_order: str = "reason-first"
    first_look: bool = False  #: a verdict-first look is asked after each reply (`--score combined`)
    checklist: bool = False  #: the rubric's checklist is asked after them (`--score checklist` or `fitted`)
    turn_look: bool = False  #: each turn is asked whether it breaks the flow (`--turn-look`)
    replies: CachedReplies = field(init=False)

    def __post_init__(self) -> None:
        self.replies = CachedReplies(
            self.cache, self.backend, self.rubric, self.temperature, self.samples, self.reply_order
        )

    @cached_property
    def response_format(self) -> dict[str, Any] | None:
        """The reply schema, its fields in `reply_order`, in the form the backend sends it (None:
        the backend sends none)."""
        return self.backend.structured_output(self.rubric.name, reply_schema(self.rubric, self.reply_order))

    @cached_property
    def expected_completion_tokens(self) -> int:
        """Tokens a reply takes, estimated from the rubric's own example replies, times the samples."""
        replies = [orjson.dumps(example.reply) for example in self.rubric.examples] or [b"{}" * 100]
        size = sum(len(reply) for reply in replies) / len(replies)
        return self.samples * round(size / BYTES_PER_TOKEN_ESTIMATE)

    @property
    def look_max_tokens(self) -> int:
        """The reply limit of a verdict-first look: a verdict per criterion, and one more."""
        return TOKENS_PER_VERDICT * (len(self.rubric.criteria) + 1)

    @cached_property
    def look_format(self) -> dict[str, Any] | None:
        """The verdict-first look's schema (the verdicts alone), in the form the backend sends it.
        The probe on the 1.5B judge (issue 28) found the reasoned verdict's distribution collapsed
        (median top probability 0.99) and the verdict-first one spread (0.54); the look's prompt is
        the reasoned call's, so a server that keeps the previous prompt's cache (llama-cpp-python)
        computes none of it again."""
        return self.backend.structured_output(self.rubric.name, reply_schema(self.rubric, "verdict-only"))

    @cached_property
    def look_replies(self) -> CachedReplies:
        """Where verdict-first looks are cached: their own keys (temperature 0, one reply)."""
        return CachedReplies(self.cache, self.backend, self.rubric, TEMPERATURE, 1, "verdict-only")

    @property
    def checklist_max_tokens(self) -> int:
        """The reply limit of a checklist: an answer per question, and one more."""
        return TOKENS_PER_ANSWER * (len(self.rubric.checklist) + 1)

    @cached_property
    def checklist_format(self) -> dict[str, Any] | None:
        """The checklist's schema (a "yes" or "no" per question), in the form the backend sends it."""
        return self.backend.structured_output(f"{self.rubric.name}_checklist", checklist_schema(self.rubric))

    @cached_property
    def checklist_replies(self) -> CachedReplies:
        """Where checklist replies are cached: their own keys (temperature 0, one reply)."""
        return CachedReplies(self.cache, self.backend, self.rubric, TEMPERATURE, 1, "checklist")

    @property
    def turn_max_tokens(self) -> int:
        """The reply limit of one turn's look: its answer, and one more."""
        return TOKENS_PER_ANSWER * 2

    @cached_property
    def turn_format(self) -> dict[str, Any] | None:
        """A turn's look's schema (one "yes" or "no"), in the form the backend sends it."""
        return self.backend.structured_output(f"{self.rubric.name}_turn", turn_schema())

    def turn_windows(self, plan: JudgePlan) -> list[tuple[int, list[dict[str, str]]]]:
        """The per-turn look at `plan` (`--turn-look`): each turn with a reply, by the number the
        transcript shows, and the messages asking of it (`turn_window_messages`); none unless asked."""
        if not self.asks_turns(plan):
            return []
        turns = plan.case.turns
        return [
            (number, turn_window_messages(self.rubric, turns, index))
            for number, index in zip(plan.turn_numbers, plan.turn_positions)
        ]

    @cached_property
    def turn_replies(self) -> CachedReplies:
        """Where per-turn looks are cached: their own keys (temperature 0, one reply)."""
        return CachedReplies(self.cache, self.backend, self.rubric, TEMPERATURE, 1, "turns")

    def addition_replies(self, kind: str) -> CachedReplies:
        """Where the replies of an addition of `kind` (`metrics.step.ADDITIONS`) are cached."""
        return {"look": self.look_replies, "checklist": self.checklist_replies, "turns": self.turn_replies}[kind]

    def warm_up(self) -> None:
        """Look up now what every call needs (the model's window, its response format), and check
        that the context budget holds the rubric and a conversation."""
        _ = self.budget.window, self.response_format
        self.budget.check()

    @property
    def calls_per_conversation(self) -> int:
        """Judge calls one conversation takes: one, or `samples` where the backend cannot return
        several; one more for a verdict-first look, one for the checklist, and for the per-turn look
        at least one (a call per turn with a reply: `estimate` counts them)."""
        calls = 1 if self.samples == 1 or self.backend.supports_n() else self.samples
        return calls + self.first_look + self.checklist + self.turn_look

    def plan(self, case: ConversationalEvalTestCase, lookup: bool = True) -> JudgePlan:
        """The messages for `case` (its middle left out if too long) and any cached reply;
        with `lookup` False the cache is left for `replies.look_up` to ask in one go.

        Bytes bound tokens from above, so the tokenizer runs only for a conversation that may
        not fit; nearly every conversation is settled by a byte count.
        """
        case = case.judged_turns(self.cut_logs)
        messages = self.rubric.build_messages(case, self.language)
        size = self.budget.prefix_bytes + len(messages[-1]["content"].encode()) + PER_MESSAGE_OVERHEAD
        fitted, elided = case, None
        if self.budget.may_overflow(size):
            fitted, elided = fit_turns(case, self.budget.input_budget or 0, self.backend.count_tokens)
            if fitted is not case:
                messages = self.rubric.build_messages(fitted, self.language, elided)
        estimated = size // BYTES_PER_TOKEN_ESTIMATE
        keys = self.replies.keys(messages)
        numbers = turn_numbers(len(fitted.turns), elided if fitted is not case else None)
        answered = [
            (number, index)
            for index, (number, turn) in enumerate(zip(numbers, fitted.turns))
            if (turn.actual_output or "").strip()
        ]
        plan = JudgePlan(fitted, messages, fitted is not case, keys, None, estimated, window=self.budget.window,
                         turn_numbers=[n for n, _ in answered], turn_positions=[i for _, i in answered])  # fmt: skip
        if lookup:
            self.replies.look_up([plan])
        return plan

    def _missing_additions(self, plan: JudgePlan) -> tuple[int, int]:
        """The calls and reply tokens of the look and the checklist asked beside `plan`'s cached
        verdict that the cache does not hold: a run asking them of an earlier run's verdicts."""
        calls = completion = 0
        if self.first_look and self.look_replies.found_for(plan.messages) is None:
            calls, completion = calls + 1, completion + self.look_max_tokens
        asked = checklist_messages(self.rubric, plan.messages) if self.checklist else None
        if asked is not None and self.checklist_replies.found_for(asked) is None:
            calls, completion = calls + 1, completion + self.checklist_max_tokens
        return calls, completion

    def _window_tokens(self, messages: list[dict[str, str]], exact: bool) -> int:
        """The prompt tokens of one turn's look: counted with the model's tokenizer (`exact`) or by bytes."""
        if exact:
            return sum(self.backend.count_tokens(m["content"]) + PER_MESSAGE_OVERHEAD for m in messages)
        return sum(len(m["content"].encode()) // BYTES_PER_TOKEN_ESTIMATE + PER_MESSAGE_OVERHEAD for m in messages)

    def asks_turns(self, plan: JudgePlan) -> bool:
        """Whether a per-turn look is asked of `plan`: `turn_look`, and a turn with a reply to ask of."""
        return self.turn_look and bool(plan.turn_numbers)

    def estimate(self, plan: JudgePlan, exact: bool = False) -> CallEstimate:
        """What `plan` would send and cost by the price list: the one estimator that both the
        budget (bytes, cheap) and `--dry-run` (`exact`: counted with the model's tokenizer) use.
        For a cached plan, only the look, the checklist and the turns' looks the cache lacks;
        `cost_usd` None when the price is unknown."""
        windows = [asked for _, asked in self.turn_windows(plan)]
        if plan.cached_texts is not None:
            calls, completion = self._missing_additions(plan)
            windows = [asked for asked in windows if self.turn_replies.found_for(asked) is None]
            if not calls and not windows:
                return CallEstimate()
        else:
            calls = self.calls_per_conversation - self.turn_look  # the turns' looks are counted below
            completion = self.expected_completion_tokens + (self.look_max_tokens if self.first_look else 0)
            completion += self.checklist_max_tokens if self.checklist else 0
        completion += self.turn_max_tokens * len(windows)
        prompt = plan.estimated_prompt_tokens
        if exact:
            counted = self.backend.count_tokens(plan.messages[-1]["content"])
            prompt = self.budget.prefix_tokens + counted + PER_MESSAGE_OVERHEAD
        prompt *= calls
        cached = min(self.backend.cached_prefix_tokens(self.budget.prefix_tokens) * calls, prompt)
        prompt += sum(self._window_tokens(asked, exact) for asked in windows)  # short: its own small prefix
        calls += len(windows)
        usage = Usage(prompt_tokens=prompt, completion_tokens=completion)
        cost = self.backend.price(usage)
        cached_cost = self.backend.price(usage.model_copy(update={"cached_tokens": cached})) if cached else cost
        return CallEstimate(calls, prompt, completion, cost, cached, cached_cost)


def take_cached(plan: JudgePlan, found: dict[str, Replies]) -> None:
    """Set `plan`'s cached replies from `found` (cache key to replies), under the first of its
    forms that has them."""
    plan.cached_texts = None
    for key, form in plan.keys:
        if key in found:
            plan.cached_texts, plan.cached_form = found[key].texts, form
            plan.cached_logprobs = found[key].logprobs
            return
