"""The judging step: the one way a conversation becomes rows, whatever sends the requests.

`Judging` is a small state machine per conversation and metric. It gives the requests to send
(`requests()`), takes each reply or failure (`take`), and answers with more requests (the extra
samples where a server does not serve `n`, a re-ask for just what was wrong, a refit after a
server named its context window) until it has the rows (`result()`). An engine is only a
transport: online (`evaluation.transports.OnlineCalls`, one call at a time per conversation),
a provider batch (files, rounds collected) or Ray Data (a dataset per round); none decides
anything about a judgement.

The public face, for an engine of your own, is two pure functions over it:

    request = build_request(metric, case)               # messages, body, cache key, rubric version
    answer = post(f"{base}/chat/completions", json=request.body).json()   # your engine's call
    step = rows_from_reply(metric, case, request, reply_from_answer(metric, request, answer))
    for reask in step.reasks:  # a reply that needs a re-ask: its rows say so until one is sent
        ...send reask.body, then rows_from_reply(..., reask_replies={reask.sample: reply})

With `--score combined` and the reason first, `build_look(metric, request)` is the verdict-first
look to send beside the request (None otherwise), and its reply goes to `rows_from_reply(...,
look_reply=reply)`: the rows' `verdict_first_*` and `combined_score` come from it, its tokens are
added to the first row's, and `StepResult.look_kept` is what to keep in the cache under the
look's own key. With `--score checklist` or `fitted`, `build_checklist(metric, request)` is the
rubric's yes/no questions asked about the same conversation, and its reply goes to
`rows_from_reply(..., checklist_reply=reply)` (kept as `StepResult.checklist_kept`). With
`--turn-look`, `build_turn_looks(metric, request)` asks of each turn, a request each, whether its
reply breaks the flow (`turns_replies=`, by turn number; `StepResult.turns_kept`).

Nothing here makes a call or writes anything: `build_request` reads the metric's cache (when it
has one and `lookup` is left on), and `StepResult.cache_texts` says what to put in it
(`keep_in_cache` puts it there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

from flowrate.inputs.conversation import ConversationalEvalTestCase, Source
from flowrate.judge.backend import Completion, JudgeBackend, Usage, chat_body
from flowrate.judge.cache import messages_digest
from flowrate.judge.errors import ChoicesRefused
from flowrate.judge.retry import told_window
from flowrate.metrics.budget import Budget
from flowrate.metrics.planning import BYTES_PER_TOKEN_ESTIMATE, TEMPERATURE, JudgePlan, Planner
from flowrate.metrics.replies import Look, cached_judgements, first_look, second_look
from flowrate.metrics.rows import RowMaker
from flowrate.results.rows import EvaluationRow
from flowrate.rubric.checklist import checklist_messages
from flowrate.rubric.model import Rubric
from flowrate.scores.checklist import ChecklistReading, checklist_reading, turn_reading
from flowrate.scores.distribution import LevelProbs, distributions
from flowrate.scores.reading import Judgement, UnparsableReply
from flowrate.scores.schema import corrective_messages


class RubricMetric(Protocol):
    """What the judging step reads of a metric (`rubric_metric.RubricMetric` has it all): its
    name, judge and rubric, the samples and temperature it asks, its context `budget`, its
    `planner` (the plans and the cache) and its `row_maker` (judgements to rows)."""

    name: str
    model: str
    rubric: Rubric
    samples: int
    temperature: float
    backend: JudgeBackend
    budget: Budget
    planner: Planner
    row_maker: RowMaker

    def plan(self, case: ConversationalEvalTestCase, lookup: bool = True) -> JudgePlan: ...


REQUEST_FIELDS = (
    "conversation_id", "metric", "kind", "messages", "body", "response_format", "cache_key", "rubric_version",
    "truncated", "cached_replies", "cached_form", "cached_logprobs", "sample", "reask_of", "why", "only", "n",
    "temperature", "max_tokens", "schema", "estimated_tokens",
)  # fmt: skip


ADDITIONS = ("look", "checklist", "turns")  #: requests beside the verdict: a failed one leaves the verdict standing


class ReaskNeeded(UnparsableReply):
    """A reply was unusable and the engine sent no re-ask: `flowrate eval` would have re-asked
    once (the row's message says why); send `StepResult.reasks` to finish it."""


@dataclass
class JudgeRequest:
    """One request of judging a conversation with a metric. `kind` is "judge" (the reasoned
    call), "reask" (the one re-ask after an unusable reply), "look" (the verdict-first look of
    `--score combined`), "checklist" (the rubric's yes/no questions, `--score checklist`) or "turns"
    (one turn's yes/no, `--turn-look`, its number in `sample`). `body` is the OpenAI chat-completions request (`messages`, the reply
    schema in the form the server takes, named by `response_format`, temperature, `n` and
    `max_tokens`), built from `schema`, `n`, `temperature` and `max_tokens`, which a transport
    that builds its own request (LiteLLM's) sends instead; `cache_key` is where its reply is
    cached, `rubric_version` the rubric it judges by. `cached_replies` holds the replies the
    cache had (then nothing need be sent), `cached_logprobs` their tokens' log-probabilities (a
    look's; a request's own are in its `plan`). `sample` is the reply it asks for (a judge
    request where the server does not serve `n`) or corrects (a re-ask), `reask_of` that
    reply's text, `why` what was wrong and `only` the criteria asked again."""

    conversation_id: str
    metric: str
    messages: list[dict[str, str]]
    body: dict[str, Any]
    response_format: str | None
    cache_key: str
    rubric_version: str
    truncated: bool = False
    cached_replies: list[str] | None = None
    cached_form: str | None = None
    cached_logprobs: list[list[dict[str, Any]] | None] | None = None
    sample: int | None = None
    reask_of: str | None = None
    why: str | None = None
    only: list[str] | None = None
    kind: str = "judge"
    n: int = 1
    temperature: float = TEMPERATURE
    max_tokens: int | None = None
    schema: dict[str, Any] | None = None
    estimated_tokens: int = 0  #: what the call may take, for the rate ceilings: the prompt's bytes by 4, and a reply
    plan: JudgePlan | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The request as plain JSON data (what an engine's rows carry; `plan` is left out)."""
        return {name: getattr(self, name) for name in REQUEST_FIELDS}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JudgeRequest:
        """The request `to_dict` gave."""
        fields: dict[str, Any] = {name: data[name] for name in REQUEST_FIELDS if name in data}
        return cls(**fields)


@dataclass
class Reply:
    """The server's answer to one request: a text per choice, whether each was cut at its token
    limit, the tokens and the cost (None: no price known), the calls it took and their clocks, and
    each choice's tokens with their log-probabilities (`logprobs`, None for one without)."""

    texts: list[str]
    cut: list[bool] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    response_format: str | None = None
    attempts: int = 1
    latency_s: float = 0.0
    wait_s: float = 0.0
    logprobs: list[list[dict[str, Any]] | None] = field(default_factory=list)

    @classmethod
    def of(cls, completion: Completion, cost_usd: float | None, response_format: str | None, **clocks: Any) -> Reply:
        """A backend's `completion` as a reply at `cost_usd`, its schema sent in `response_format`,
        with the `attempts`, `latency_s` and `wait_s` its calls took (`clocks`; else one call)."""
        choices = range(len(completion.texts))
        return cls(
            texts=completion.texts,
            cut=[completion.cut(index) for index in choices],
            usage=completion.usage,
            cost_usd=cost_usd,
            response_format=response_format,
            logprobs=[completion.tokens(index) for index in choices],
            **clocks,
        )

    def tokens(self, index: int) -> list[dict[str, Any]] | None:
        """Choice `index`'s tokens with their log-probabilities; None without."""
        return self.logprobs[index] if index < len(self.logprobs) else None

    def is_cut(self, index: int) -> bool:
        return index < len(self.cut) and self.cut[index]


@dataclass
class CallFailed:
    """A request that got no reply: the `error` its last try ended in, and what its tries spent
    (`spent`: attempts and clocks; no tokens, cost 0)."""

    error: BaseException
    spent: Reply = field(default_factory=lambda: Reply([], cost_usd=0.0, attempts=0))


def spend_of(*replies: Reply) -> Reply:
    """What `replies` spent together, as one reply with no text: their tokens, their cost (None
    once one has no price), their calls and their clocks; nothing at all for no reply."""
    costs = [reply.cost_usd for reply in replies]
    priced = [cost for cost in costs if cost is not None]
    return Reply(
        [],
        usage=sum((reply.usage for reply in replies), Usage()),
        cost_usd=math.fsum(priced) if len(priced) == len(costs) else None,  # in any order: engines differ in it
        attempts=sum(reply.attempts for reply in replies),
        latency_s=sum((reply.latency_s for reply in replies), 0.0),
        wait_s=sum((reply.wait_s for reply in replies), 0.0),
    )


@dataclass
class StepResult:
    """What a conversation's judging made: its `rows` (error rows while a re-ask is outstanding),
    the requests `flowrate eval` would send next (`reasks`: the re-asks, or the samples a server
    did not return; empty when none is needed), and the
    replies to put in the cache under the request's key (`cache_texts`; None: nothing to cache)
    with their tokens' log-probabilities (`cache_logprobs`, one per reply, None for one without);
    `look_kept` is the verdict-first look's reply to keep under its own key (None: nothing to keep),
    `checklist_kept` the checklist's, `turns_kept` the per-turn look's (by turn number)."""

    rows: list[EvaluationRow]
    reasks: list[JudgeRequest] = field(default_factory=list)
    cache_texts: list[str] | None = None
    cache_logprobs: list[list[dict[str, Any]] | None] | None = None
    look_kept: Reply | None = None
    checklist_kept: Reply | None = None
    turns_kept: dict[int, Reply] = field(default_factory=dict)


# -- the requests ----------------------------------------------------------------------------------
def build_request(
    metric: RubricMetric, case: ConversationalEvalTestCase, *, lookup: bool = True, plan: JudgePlan | None = None
) -> JudgeRequest:
    """The exact request judging `case` with `metric` (a `RubricMetric`) sends, as `flowrate eval`
    sends it: the prompt (the conversation's middle left out where it would not fit the judge's
    context), the reply schema in the form the judge's server takes, the cache key and the rubric
    version. With `lookup` (and a metric with a cache) the cache is read: `cached_replies` then
    holds the replies, and nothing need be sent. `plan` is the conversation's plan when one was
    made already (the cache then as it found it)."""
    plan = plan or metric.plan(case, lookup=lookup)
    planner = metric.planner
    n = metric.samples if metric.samples > 1 and metric.backend.supports_n() else 1
    request = judge_request(metric, plan, n, planner.response_format, metric.temperature, metric.budget.reply_limit)
    key = next((key for key, planned in plan.keys if planned == request.response_format), None)
    request.cache_key = key or request.cache_key
    request.cached_replies, request.cached_form = plan.cached_texts, plan.cached_form
    return request


def judge_request(
    metric: RubricMetric, plan: JudgePlan, n: int, schema: dict[str, Any] | None, temperature: float,
    limit: int | None, kind: str = "judge",
) -> JudgeRequest:  # fmt: skip
    """A request of `kind` asking `n` replies to `plan`'s messages in `schema`, at `temperature`,
    each at most `limit` tokens: its body as every engine sends it (`request_body`)."""
    form, body = request_body(metric, plan.messages, n, schema, temperature, limit)
    planner = metric.planner
    replies = planner.look_replies if kind == "look" else planner.replies
    expected = planner.look_max_tokens if kind == "look" else planner.expected_completion_tokens
    return JudgeRequest(
        conversation_id=plan.case.id or "",
        metric=metric.name,
        messages=plan.messages,
        body=body,
        response_format=form,
        cache_key=replies.key(messages_digest(plan.messages), form),
        rubric_version=metric.rubric.version,
        truncated=plan.truncated,
        kind=kind,
        n=n,
        temperature=temperature,
        max_tokens=limit,
        schema=schema,
        estimated_tokens=plan.estimated_prompt_tokens + expected,
        plan=plan,
    )


def request_body(
    metric: RubricMetric, messages: list[dict[str, str]], n: int, schema: dict[str, Any] | None, temperature: float,
    limit: int | None,
) -> tuple[str | None, dict[str, Any]]:  # fmt: skip
    """The form `schema` goes in to `metric`'s judge and the body asking `n` replies to `messages`
    in it, at `temperature`, each at most `limit` tokens, with log-probabilities where asked."""
    backend = metric.backend
    form, sent = None, None
    if schema is not None and hasattr(backend, "request_format"):
        form, sent = backend.request_format(schema, limit)
    model: str = getattr(backend, "batch_model", metric.model)
    return form, backend.provider_body(chat_body(model, messages, n, sent, temperature, limit, backend.top_logprobs()))


def build_look(metric: RubricMetric, request: JudgeRequest) -> JudgeRequest | None:
    """The verdict-first look at the conversation of `request` that `--score combined` with the
    reason first sends beside it: the same messages, a schema of the verdicts alone, a few
    tokens, temperature 0, one reply; None when the metric asks none. `cached_replies` holds the
    look's reply when the cache has it (then nothing need be sent)."""
    planner = metric.planner
    if not planner.first_look or request.plan is None:
        return None
    look = judge_request(metric, request.plan, 1, planner.look_format, TEMPERATURE, planner.look_max_tokens, "look")
    cached = planner.look_replies.found_for(request.messages)
    if cached is not None and cached.logprobs:
        look.cached_replies, look.cached_logprobs = cached.texts, cached.logprobs
    return look


def build_checklist(metric: RubricMetric, request: JudgeRequest) -> JudgeRequest | None:
    """The rubric's checklist asked about the conversation of `request` (`--score checklist` or
    `fitted`): the request's messages with the questions after them (`rubric.checklist`), so a
    server that keeps its last prompt's cache evaluates only the questions; a schema of a "yes" or
    "no" per question, temperature 0, one reply. None when the metric asks none. `cached_replies`
    holds its reply when the cache has it with log-probabilities (or the judge gives none)."""
    planner = metric.planner
    if not planner.checklist or request.plan is None:
        return None
    messages = checklist_messages(metric.rubric, request.messages)
    schema, limit = planner.checklist_format, planner.checklist_max_tokens
    return yes_no_request(metric, request, "checklist", messages, schema, limit)


def build_turn_looks(metric: RubricMetric, request: JudgeRequest) -> list[JudgeRequest]:
    """The per-turn look at the conversation of `request` (`--turn-look`): a request per turn with
    a reply (its number, as the transcript shows it, in `sample`), asking whether that reply
    breaks the flow, the judge shown it and the turns just before it (`Planner.turn_windows`); as
    `build_checklist`. Empty when the metric asks none or the conversation has no reply to ask of."""
    planner, plan = metric.planner, request.plan
    if plan is None:
        return []
    looks = []
    for number, messages in planner.turn_windows(plan):
        look = yes_no_request(metric, request, "turns", messages, planner.turn_format, planner.turn_max_tokens)
        look.sample = number
        looks.append(look)
    return looks


def yes_no_request(
    metric: RubricMetric, request: JudgeRequest, kind: str, messages: list[dict[str, str]],
    schema: dict[str, Any] | None, limit: int,
) -> JudgeRequest:  # fmt: skip
    """A request of `kind` (an addition of yes/no answers) asking `messages` about the conversation
    of `request`, in `schema`, at most `limit` tokens, one reply at temperature 0; `cached_replies`
    holds its reply when the cache has it with log-probabilities (or the judge gives none)."""
    replies = metric.planner.addition_replies(kind)
    form, body = request_body(metric, messages, 1, schema, TEMPERATURE, limit)
    plan = request.plan
    prompt_tokens = plan.estimated_prompt_tokens if plan is not None else 0  # the conversation's, and a few more
    if kind == "turns":  # a window of the conversation: its own, shorter prompt
        prompt_tokens = sum(len(message["content"].encode()) for message in messages) // BYTES_PER_TOKEN_ESTIMATE
    asked = JudgeRequest(
        conversation_id=request.conversation_id,
        metric=request.metric,
        messages=messages,
        body=body,
        response_format=form,
        cache_key=replies.key(messages_digest(messages), form),
        rubric_version=request.rubric_version,
        truncated=request.truncated,
        kind=kind,
        temperature=TEMPERATURE,
        max_tokens=limit,
        schema=schema,
        estimated_tokens=prompt_tokens + limit,
        plan=plan,
    )
    cached = replies.found_for(messages)
    if cached is not None and (any(cached.logprobs or []) or not metric.backend.top_logprobs()):
        asked.cached_replies, asked.cached_logprobs = cached.texts, cached.logprobs
    return asked


def cached_look(look: JudgeRequest) -> Reply | None:
    """The reply a look `build_look` (or `build_checklist`) made holds from the cache, as
    `rows_from_reply` takes it (nothing spent); None when the cache had none."""
    if look.cached_replies is None:
        return None
    return Reply(look.cached_replies, usage=Usage(), cost_usd=0.0, attempts=0, logprobs=look.cached_logprobs or [])


def corrective_request(
    rubric: Rubric, request: JudgeRequest, text: str, look: Look, sample: int = 0, order: str = "reason-first"
) -> JudgeRequest:
    """The one re-ask after `text`, the unusable reply `sample` to `request` (judged by `rubric`):
    the messages say what was wrong and show the reply's fields in `order`
    (`scores.schema.corrective_messages`); the body asks for one reply, as before."""
    messages = corrective_messages(request.messages, text, look.why, rubric, look.only, order)
    body = {key: value for key, value in request.body.items() if key != "n"}
    body["messages"] = messages
    return JudgeRequest(
        conversation_id=request.conversation_id,
        metric=request.metric,
        messages=messages,
        body=body,
        response_format=request.response_format,
        cache_key=request.cache_key,
        rubric_version=request.rubric_version,
        truncated=request.truncated,
        sample=sample,
        reask_of=text,
        why=look.why,
        only=look.only,
        kind="reask",
        n=1,
        temperature=request.temperature,
        max_tokens=request.max_tokens,
        schema=request.schema,
        estimated_tokens=request.estimated_tokens,
        plan=request.plan,
    )


def reply_from_answer(metric: RubricMetric, request: JudgeRequest, answer: Any) -> Reply:
    """A decoded chat-completions answer to `request` as a `Reply`, priced as `flowrate eval`
    prices it. Raises the error `flowrate eval` would (a `BadReply` for an answer that is not a
    chat completion: an error body, say)."""
    from flowrate.judge.direct import completion_of

    completion = completion_of(answer, request.response_format)
    return Reply.of(completion, metric.backend.price(completion.usage), request.response_format)


# -- the state machine -----------------------------------------------------------------------------
class Judging:
    """Judging one conversation (`case`, read from `source`) with `metric`: see the module.

    `requests()` is what to send now, in order (the reasoned call before its verdict-first look,
    so a server that keeps its last prompt's cache computes the shared prefix once); `take` each
    one's `Reply`, or its `CallFailed`; once nothing is outstanding, `result()` holds the rows.
    A plan made already (`plan`) is used unless it was fitted before a server named its window."""

    def __init__(
        self, metric: RubricMetric, case: ConversationalEvalTestCase, source: Source | None = None,
        plan: JudgePlan | None = None, *, lookup: bool = True, request: JudgeRequest | None = None,
    ) -> None:  # fmt: skip
        self.metric, self.case, self.source = metric, case, source
        if request is None:
            if plan is not None and plan.cached_texts is None and plan.window != metric.budget.window:
                plan = None  # fitted before a server named its window: planned again
            request = build_request(metric, case, lookup=lookup, plan=plan)
        self.request = request
        self.look = build_look(metric, request)
        self.checklist = build_checklist(metric, request)
        self.checklist_reading: ChecklistReading | None = None
        self.checklist_kept: Reply | None = None
        self.turns = build_turn_looks(metric, request)
        self.turn_p: dict[int, float] = {}  # P(the reply breaks the flow), by turn number
        self.turns_kept: dict[int, Reply] = {}
        self.paid: list[Reply] = []
        self.judgements: dict[int, Judgement] = {}
        self.looks: dict[int, Look] = {}  # an unusable reply's reading, by sample, while its re-ask is out
        self.texts: dict[int, tuple[str, bool]] = {}  # an unusable reply and whether it was cut, by sample
        self.outcome_error: BaseException | None = None
        self.levels: dict[str, LevelProbs] = {}
        self.look_kept: Reply | None = None
        self.answered = False
        self.refitted = False
        self.response_format: str | None = None
        self.outstanding: list[JudgeRequest] = []
        if request.cached_replies is None:
            self.outstanding = self._asks(request)
        self.outstanding += self._to_send(self.look, self.checklist, *self.turns)

    @property
    def cached(self) -> bool:
        return self.request.cached_replies is not None

    @property
    def done(self) -> bool:
        return not self.outstanding

    def requests(self) -> list[JudgeRequest]:
        """The requests to send now, in order; empty once the rows are settled."""
        return list(self.outstanding)

    def _asks(self, request: JudgeRequest) -> list[JudgeRequest]:
        """The judge requests for `metric.samples` replies: `request` itself where the server
        serves `n` (or one is asked), else one request per sample."""
        samples = self.metric.samples
        if request.n == samples:
            return [request]
        return [self._one(request, sample) for sample in range(samples) if sample not in self.judgements]

    def _one(self, request: JudgeRequest, sample: int) -> JudgeRequest:
        """`request` asking one reply, for sample `sample`."""
        body = {key: value for key, value in request.body.items() if key != "n"}
        single = JudgeRequest(**{**request.__dict__, "body": body, "n": 1, "sample": sample})
        single.cached_replies = None
        return single

    def _to_send(self, *additions: JudgeRequest | None) -> list[JudgeRequest]:
        """Of `additions`, those whose reply the cache held taken now; the others, to send."""
        sent = []
        for addition in additions:
            if addition is not None:
                seen = cached_look(addition)
                if seen is None:
                    sent.append(addition)
                else:
                    self._take_addition(addition, seen)
        return sent

    # -- taking replies ----------------------------------------------------------------------------
    def take(self, request: JudgeRequest, outcome: Reply | CallFailed) -> None:
        """`request`'s reply or failure, read; the requests it makes outstanding instead of it."""
        self.outstanding = [pending for pending in self.outstanding if pending is not request]
        self.paid.append(outcome.spent if isinstance(outcome, CallFailed) else outcome)
        if request.kind in ADDITIONS:
            if isinstance(outcome, Reply):
                self._take_addition(request, outcome)
            return  # a failed look, checklist or per-turn look is an addition missing: the verdict stands without it
        if isinstance(outcome, CallFailed):
            self._failed(request, outcome.error)
            return
        self.answered = True
        self.response_format = outcome.response_format
        try:
            if request.kind == "reask":
                self._take_reask(request, outcome)
            else:
                self._take_judge(request, outcome)
        except UnparsableReply as error:
            self._stop(error)

    def _take_addition(self, asked: JudgeRequest, reply: Reply) -> None:
        if asked.kind == "turns":
            self._take_turn(asked.sample or 0, reply)
        else:
            {"look": self._take_look, "checklist": self._take_checklist}[asked.kind](reply)

    def _take_look(self, reply: Reply) -> None:
        if reply.texts:
            self.levels = distributions(reply.texts[0], reply.tokens(0), self.metric.rubric)
        self.look_kept = reply if self.levels else None

    def _take_checklist(self, reply: Reply) -> None:
        reading = checklist_reading(self.metric.rubric, reply.texts[0], reply.tokens(0)) if reply.texts else None
        self.checklist_reading = reading if reading is not None and reading.score is not None else None
        self.checklist_kept = reply if self.checklist_reading is not None else None

    def _take_turn(self, number: int, reply: Reply) -> None:
        p_problem = turn_reading(reply.texts[0], reply.tokens(0)) if reply.texts else None
        if p_problem is not None:
            self.turn_p[number], self.turns_kept[number] = p_problem, reply

    @property
    def turn_reading(self) -> ChecklistReading | None:
        """The per-turn look's answers, P(the reply breaks the flow) by turn number (as text), in
        the transcript's order; None when no turn was answered."""
        if not self.turn_p:
            return None
        return ChecklistReading(p_yes={str(number): self.turn_p[number] for number in sorted(self.turn_p)})

    def _take_judge(self, request: JudgeRequest, reply: Reply) -> None:
        metric = self.metric
        if not reply.texts:
            raise UnparsableReply("the judge returned no reply")
        first = request.sample or 0
        texts = reply.texts[: request.n]
        if len(texts) < request.n:  # llama-cpp-python answers n=K with one choice: the rest one at a time
            metric.backend.ignores_n()
            self.outstanding[:0] = [self._one(request, sample) for sample in range(len(texts), request.n)]
        rubric, limit = metric.rubric, metric.budget.reply_limit
        for index, text in enumerate(texts):
            sample = first + index
            look = first_look(rubric, limit, text, reply.is_cut(index), reply.tokens(index))
            if look.judgement is not None:
                self.judgements[sample] = look.judgement
                continue
            self.looks[sample], self.texts[sample] = look, (text, reply.is_cut(index))
            order = metric.planner.reply_order
            self.outstanding.insert(0, corrective_request(rubric, self.request, text, look, sample, order))

    def _take_reask(self, request: JudgeRequest, reply: Reply) -> None:
        sample = request.sample or 0
        look, (text, cut) = self.looks.pop(sample), self.texts.pop(sample)
        retry_text = reply.texts[0] if reply.texts else ""
        rubric, limit = self.metric.rubric, self.metric.budget.reply_limit
        self.judgements[sample] = second_look(
            rubric, limit, text, cut, look, retry_text, reply.is_cut(0), reply.tokens(0)
        )

    def _failed(self, request: JudgeRequest, error: BaseException) -> None:
        metric = self.metric
        if isinstance(error, ChoicesRefused) and request.n > 1:  # llama-server: "Only one completion choice is allowed"
            metric.backend.ignores_n()
            self.outstanding[:0] = [self._one(request, sample) for sample in range(request.n)]
            return
        told = told_window(error)
        if told is not None and request.kind == "judge" and not self.refitted:
            self.refitted = True
            metric.budget.learn_window(told)
            refitted = build_request(metric, self.case, lookup=False)
            if refitted.messages != self.request.messages:
                self.request = refitted
                kept = [pending.kind for pending in self.outstanding if pending.kind in ADDITIONS]
                again = {
                    "look": build_look(metric, refitted), "checklist": build_checklist(metric, refitted),
                }  # fmt: skip
                self.look = again["look"] if "look" in kept else self.look
                self.checklist = again["checklist"] if "checklist" in kept else self.checklist
                added = [asked for kind in dict.fromkeys(kept) if kind in again and (asked := again[kind]) is not None]
                if "turns" in kept:  # the turns not answered yet, of the refitted plan: from the cache, or asked
                    self.turns = [look for look in build_turn_looks(metric, refitted) if look.sample not in self.turn_p]
                    added += self._to_send(*self.turns)
                self.outstanding = [*self._asks(refitted), *added]
                self.judgements.clear()
                return
        self._stop(error)

    def still_needed(self) -> str:
        """Why requests are still outstanding: each re-ask's reason, or samples not returned."""
        fewer = f"the judge returned fewer than the {self.metric.samples} replies asked for"
        return "; ".join(dict.fromkeys(pending.why or fewer for pending in self.outstanding))

    def _stop(self, error: BaseException) -> None:
        """Judging ends in `error`: nothing more is sent (a verdict-first look is not asked of a
        conversation without a verdict)."""
        self.outcome_error = error
        self.outstanding = []

    # -- the rows ----------------------------------------------------------------------------------
    def result(self, waiting: str | None = None) -> StepResult:
        """The rows, and what to keep in the cache. `waiting` (the public step: a re-ask not sent)
        makes them error rows of type `ReaskNeeded` saying so, and the re-asks are in `reasks`."""
        metric, request = self.metric, self.request
        rows = metric.row_maker.new_rows(self.case, self.source, request.truncated)
        spent = spend_of(*self.paid)
        levels = self.levels or None
        reasks = list(self.outstanding)
        if self.cached and self.outcome_error is None:
            cached = cached_judgements(metric.rubric, request.cached_replies or [], self._cached_logprobs())
            metric.row_maker.settle(
                rows, cached, cached=True, response_format=request.cached_form, usage=spent.usage,
                cost_usd=spent.cost_usd, attempts=spent.attempts, latency_s=spent.latency_s, wait_s=spent.wait_s,
                first_look=levels, checklist=self.checklist_reading, turns=self.turn_reading,
            )  # fmt: skip
            return StepResult(
                rows, look_kept=self.look_kept, checklist_kept=self.checklist_kept, turns_kept=self.turns_kept
            )
        outcome: list[Judgement] | BaseException
        if self.outcome_error is not None:
            outcome = self.outcome_error
        elif waiting is not None:
            outcome = ReaskNeeded(waiting, reasks[0].reask_of if reasks else None)
        else:
            outcome = [self.judgements[sample] for sample in sorted(self.judgements)]
        metric.row_maker.settle(
            rows, outcome, cached=False, response_format=self.response_format, usage=spent.usage,
            cost_usd=spent.cost_usd if self.answered else None, attempts=spent.attempts, latency_s=spent.latency_s,
            wait_s=spent.wait_s, first_look=levels, checklist=self.checklist_reading, turns=self.turn_reading,
        )  # fmt: skip
        kept = StepResult(
            rows, reasks, look_kept=self.look_kept, checklist_kept=self.checklist_kept, turns_kept=self.turns_kept
        )
        if isinstance(outcome, BaseException) or any(judgement.cut for judgement in outcome):
            return kept  # a cut judgement may be missing issues
        kept.cache_texts, kept.cache_logprobs = [j.text for j in outcome], [j.tokens for j in outcome]
        return kept

    def _cached_logprobs(self) -> list[list[dict[str, Any]] | None] | None:
        plan = self.request.plan
        return plan.cached_logprobs if plan is not None else None


def keep_in_cache(metric: RubricMetric, judging: Judging, result: StepResult) -> None:
    """Put what `result` says to keep in `metric`'s cache: the replies under the request's key,
    the verdict-first look's, the checklist's and the per-turn look's under their own."""
    request, planner = judging.request, metric.planner
    if result.cache_texts is not None and request.plan is not None:
        planner.replies.remember(request.plan, result.cache_texts, judging.response_format, result.cache_logprobs)
    turns = {look.sample: look for look in judging.turns}
    for kept, asked, replies in (
        (result.look_kept, judging.look, planner.look_replies),
        (result.checklist_kept, judging.checklist, planner.checklist_replies),
        *((reply, turns.get(number), planner.turn_replies) for number, reply in result.turns_kept.items()),
    ):
        if kept is not None and asked is not None and asked.cached_replies is None:
            replies.keep(asked.messages, kept.texts[:1], kept.response_format, kept.logprobs[:1], judging.case.id)


# -- the public face -------------------------------------------------------------------------------
def rows_from_reply(
    metric: RubricMetric,
    case: ConversationalEvalTestCase,
    request: JudgeRequest,
    reply: Reply | None,
    *,
    reask_replies: dict[int, Reply] | None = None,
    source: Source | None = None,
    look_reply: Reply | None = None,
    checklist_reply: Reply | None = None,
    turns_replies: dict[int, Reply] | None = None,
) -> StepResult:
    """The rows `flowrate eval` writes for `case` from `reply` to `request` (None: the request's
    `cached_replies`), with the same scores, fields and re-ask rules: an unusable reply is re-asked
    once, for just what was wrong. A reply whose re-ask's reply is not in `reask_replies` (by sample
    index) makes error rows of type `ReaskNeeded` saying why, and the re-ask to send is in
    `StepResult.reasks`; a re-ask's reply that is unusable too makes the error rows `flowrate eval`
    writes (`UnparsableReply`, `CopiedExample`, `ReplyCut`). `look_reply` is the reply to the
    verdict-first look `build_look` made (a cached one: `cached_look`): its distributions
    score the rows, and its tokens, cost and clocks are the first row's too; `checklist_reply`,
    the reply to `build_checklist`'s request, likewise gives the rows' `checklist_*`, and
    `turns_replies`, to `build_turn_looks`' requests by turn number (`sample`), their
    `turn_p_problem` and `problem_turns`."""
    if request.plan is None:
        raise ValueError("rows_from_reply needs a request build_request made (JudgeRequest.from_dict keeps no plan)")
    judging = Judging(metric, case, source, request=request)
    judging.outstanding = [request] if request.cached_replies is None else []
    judging.levels, judging.look_kept = {}, None  # only the look and checklist replies given here count
    judging.checklist_reading, judging.checklist_kept = None, None
    judging.turn_p, judging.turns_kept = {}, {}
    turns = {look.sample: look for look in judging.turns}
    given_to = [(judging.look, look_reply), (judging.checklist, checklist_reply)]
    given_to += [(turns.get(number), reply) for number, reply in (turns_replies or {}).items()]
    for asked, given in given_to:
        if asked is not None and given is not None:
            judging.paid.append(given)
            judging._take_addition(asked, given)
    if judging.outstanding:
        if reply is None:
            raise ValueError("rows_from_reply needs a reply, or a request with cached_replies")
        judging.take(request, reply)
    for pending in judging.requests():
        again = (reask_replies or {}).get(pending.sample or 0)
        if pending.kind == "reask" and again is not None:
            judging.take(pending, again)
    if judging.outstanding:
        return judging.result(f"a re-ask would have been needed: {judging.still_needed()}")
    return judging.result()
