"""The judging step as a public, pure API: the exact request one conversation's judging sends, and
the rows a reply to it makes. `RubricMetric.evaluate` is built from the same pieces (its re-asks
by `replies.first_look` and `replies.second_look`, its rows by `RowMaker.settle`), and an engine that sends
the requests itself (Ray Data, a queue of your own) uses the same two public functions:

    request = build_request(metric, case)               # messages, body, cache key, rubric version
    answer = post(f"{base}/chat/completions", json=request.body).json()   # your engine's call
    step = rows_from_reply(metric, case, request, reply_from_answer(metric, request, answer))
    for reask in step.reasks:  # a reply that needs a re-ask: its rows say so until one is sent
        ...send reask.body, then rows_from_reply(..., reask_replies={reask.sample: reply})

With `--score combined` and the reason first, `build_look(metric, request)` is the verdict-first
look to send beside the request (None otherwise), and its reply goes to `rows_from_reply(...,
look_reply=reply)`: the rows' `verdict_first_*` and `combined_score` come from it, its tokens are
added to the first row's, and `StepResult.look_kept` is what to keep in the cache under the
look's own key.

Nothing here makes a call or writes anything: `build_request` reads the metric's cache (when it
has one and `lookup` is left on), and `StepResult.cache_texts` says what to put in it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flowrate.inputs.conversation import ConversationalEvalTestCase, Source
from flowrate.judge.backend import Usage, chat_body
from flowrate.judge.cache import messages_digest
from flowrate.metrics.planning import TEMPERATURE, JudgePlan
from flowrate.metrics.replies import Look, cached_judgements, first_look, second_look
from flowrate.metrics.rubric_metric import RubricMetric
from flowrate.results.rows import EvaluationRow
from flowrate.rubric.model import Rubric
from flowrate.scores.distribution import distributions
from flowrate.scores.reading import (
    Judgement,
    UnparsableReply,
)
from flowrate.scores.schema import corrective_messages

REQUEST_FIELDS = (
    "conversation_id", "metric", "messages", "body", "response_format", "cache_key", "rubric_version",
    "truncated", "cached_replies", "cached_form", "cached_logprobs", "sample", "reask_of", "why", "only",
)  # fmt: skip


class ReaskNeeded(UnparsableReply):
    """A reply was unusable and the engine sent no re-ask: `flowrate eval` would have re-asked
    once (the row's message says why); send `StepResult.reasks` to finish it."""


@dataclass
class JudgeRequest:
    """What judging one conversation with one metric sends. `body` is the OpenAI
    chat-completions request (`messages`, the reply schema in the form the server takes, named by
    `response_format`, temperature, `n` and `max_tokens`); `cache_key` is where its reply is
    cached, `rubric_version` the rubric it judges by. `cached_replies` holds the replies the cache
    had (then nothing need be sent), `cached_logprobs` their tokens' log-probabilities (a look's;
    a request's own are in its `plan`). On a re-ask, `sample` is the reply it corrects (by index),
    `reask_of` that reply's text, `why` what was wrong and `only` the criteria asked again."""

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
    plan: JudgePlan | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The request as plain JSON data (what an engine's rows carry; `plan` is left out)."""
        return {name: getattr(self, name) for name in REQUEST_FIELDS}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JudgeRequest:
        """The request `to_dict` gave."""
        fields: dict[str, Any] = {name: data.get(name) for name in REQUEST_FIELDS}
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

    def tokens(self, index: int) -> list[dict[str, Any]] | None:
        """Choice `index`'s tokens with their log-probabilities; None without."""
        return self.logprobs[index] if index < len(self.logprobs) else None

    def is_cut(self, index: int) -> bool:
        return index < len(self.cut) and self.cut[index]


def spend_of(*replies: Reply) -> Reply:
    """What `replies` spent together, as one reply with no text: their tokens, their cost (None
    once one has no price), their calls and their clocks; nothing at all for no reply."""
    costs = [reply.cost_usd for reply in replies]
    priced = [cost for cost in costs if cost is not None]
    return Reply(
        [],
        usage=sum((reply.usage for reply in replies), Usage()),
        cost_usd=sum(priced, 0.0) if len(priced) == len(costs) else None,
        attempts=sum(reply.attempts for reply in replies),
        latency_s=sum((reply.latency_s for reply in replies), 0.0),
        wait_s=sum((reply.wait_s for reply in replies), 0.0),
    )


@dataclass
class StepResult:
    """What a reply made: the conversation's `rows` (error rows while a re-ask is outstanding),
    the re-asks `flowrate eval` would send next (`reasks`, empty when none is needed), and the
    replies to put in the cache under the request's key (`cache_texts`; None: nothing to cache)
    with their tokens' log-probabilities (`cache_logprobs`, one per reply, None for one without);
    `look_kept` is the verdict-first look's reply to keep under its own key (None: nothing to keep)."""

    rows: list[EvaluationRow]
    reasks: list[JudgeRequest] = field(default_factory=list)
    cache_texts: list[str] | None = None
    cache_logprobs: list[list[dict[str, Any]] | None] | None = None
    look_kept: Reply | None = None


# -- the request ---------------------------------------------------------------------------
def build_request(metric: RubricMetric, case: ConversationalEvalTestCase, *, lookup: bool = True) -> JudgeRequest:
    """The exact request judging `case` with `metric` (a `RubricMetric`) sends, as `flowrate eval`
    sends it: the prompt (the conversation's middle left out where it would not fit the judge's
    context), the reply schema in the form the judge's server takes, the cache key and the rubric
    version. With `lookup` (and a metric with a cache) the cache is read: `cached_replies` then
    holds the replies, and nothing need be sent."""
    plan = metric.plan(case, lookup=lookup)
    planner, limit = metric.planner, metric.budget.reply_limit
    n = metric.samples if metric.samples > 1 and metric.backend.supports_n() else 1
    form, body = request_body(metric, plan.messages, n, planner.response_format, metric.temperature, limit)
    key = next((key for key, planned in plan.keys if planned == form), None)
    return JudgeRequest(
        conversation_id=case.id or "",
        metric=metric.name,
        messages=plan.messages,
        body=body,
        response_format=form,
        cache_key=key or planner.replies.key(messages_digest(plan.messages), form),
        rubric_version=metric.rubric.version,
        truncated=plan.truncated,
        cached_replies=plan.cached_texts,
        cached_form=plan.cached_form,
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
    reason first sends beside it (`first_look.VerdictFirstLook`): the same messages, a schema of
    the verdicts alone, a few tokens, temperature 0, one reply; None when the metric asks none.
    `cached_replies` holds the look's reply when the cache has it (then nothing need be sent)."""
    look = metric.judging.first_look
    if look is None:
        return None
    form, body = request_body(metric, request.messages, 1, look.response_format, TEMPERATURE, look.max_tokens)
    cached = look.replies.found_for(request.messages)
    return JudgeRequest(
        conversation_id=request.conversation_id,
        metric=request.metric,
        messages=request.messages,
        body=body,
        response_format=form,
        cache_key=look.replies.key(request.messages, form),
        rubric_version=request.rubric_version,
        truncated=request.truncated,
        cached_replies=cached.texts if cached is not None and cached.logprobs else None,
        cached_logprobs=cached.logprobs if cached is not None and cached.logprobs else None,
    )


def reply_from_answer(metric: RubricMetric, request: JudgeRequest, answer: Any) -> Reply:
    """A decoded chat-completions answer to `request` as a `Reply`, priced as `flowrate eval`
    prices it. Raises the error `flowrate eval` would (a `BadReply` for an answer that is not a
    chat completion: an error body, say)."""
    from flowrate.judge.direct import completion_of

    completion = completion_of(answer, request.response_format)
    usage = completion.usage
    return Reply(
        texts=completion.texts,
        cut=[completion.cut(index) for index in range(len(completion.texts))],
        usage=usage,
        cost_usd=metric.backend.price(usage),
        response_format=request.response_format,
        logprobs=completion.logprobs,
    )


# -- the reply -------------------------------------------------------------------------------
def rows_from_reply(
    metric: RubricMetric,
    case: ConversationalEvalTestCase,
    request: JudgeRequest,
    reply: Reply | None,
    *,
    reask_replies: dict[int, Reply] | None = None,
    source: Source | None = None,
    look_reply: Reply | None = None,
) -> StepResult:
    """The rows `flowrate eval` writes for `case` from `reply` to `request` (None: the request's
    `cached_replies`), with the same scores, fields and re-ask rules: an unusable reply is re-asked
    once, for just what was wrong. A reply whose re-ask's reply is not in `reask_replies` (by sample
    index) makes error rows of type `ReaskNeeded` saying why, and the re-ask to send is in
    `StepResult.reasks`; a re-ask's reply that is unusable too makes the error rows `flowrate eval`
    writes (`UnparsableReply`, `CopiedExample`, `ReplyCut`). `look_reply` is the reply to the
    verdict-first look `build_look` made (a cached one: `cached_look`): its distributions
    score the rows, and its tokens, cost and clocks are the first row's too."""
    rows = metric.row_maker.new_rows(case, source, request.truncated)
    levels = {}
    if look_reply is not None and look_reply.texts:
        levels = distributions(look_reply.texts[0], look_reply.tokens(0), metric.rubric)
    kept = look_reply if levels else None
    paid = [look_reply] if look_reply is not None else []  # a look that failed counts its tries
    if reply is None:
        if request.cached_replies is None:
            raise ValueError("rows_from_reply needs a reply, or a request with cached_replies")
        logprobs = request.plan.cached_logprobs if request.plan is not None else None
        cached = cached_judgements(metric.rubric, request.cached_replies, logprobs)
        spent = spend_of(*paid)  # a look sent for a cached reply is paid
        metric.row_maker.settle(
            rows, cached, cached=True, response_format=request.cached_form, usage=spent.usage,
            cost_usd=spent.cost_usd, attempts=spent.attempts, latency_s=spent.latency_s, wait_s=spent.wait_s,
            first_look=levels or None,
        )  # fmt: skip
        return StepResult(rows, look_kept=kept)
    rubric, limit = metric.rubric, metric.budget.reply_limit
    paid.append(reply)
    judgements: list[Judgement] = []
    reasks: list[JudgeRequest] = []
    outcome: list[Judgement] | Exception = judgements
    try:
        if not reply.texts:
            raise UnparsableReply("the judge returned no reply")
        if len(reply.texts) < metric.samples:
            raise UnparsableReply(f"the judge returned {len(reply.texts)} of the {metric.samples} replies asked for")
        for index, text in enumerate(reply.texts[: metric.samples]):
            look = first_look(rubric, limit, text, reply.is_cut(index), reply.tokens(index))
            if look.judgement is not None:
                judgements.append(look.judgement)
                continue
            again = (reask_replies or {}).get(index)
            if again is None:
                reasks.append(corrective_request(rubric, request, text, look, index, metric.planner.reply_order))
                continue
            paid.append(again)
            retry_text = again.texts[0] if again.texts else ""
            cut = reply.is_cut(index)
            judgements.append(second_look(rubric, limit, text, cut, look, retry_text, again.is_cut(0), again.tokens(0)))
        if reasks:
            why = "; ".join(dict.fromkeys(reask.why or "" for reask in reasks))
            raise ReaskNeeded(f"a re-ask would have been needed: {why}", reasks[0].reask_of)
    except UnparsableReply as error:
        outcome = error
    spent = spend_of(*paid)
    metric.row_maker.settle(
        rows, outcome, cached=False, response_format=reply.response_format, usage=spent.usage,
        cost_usd=spent.cost_usd, attempts=spent.attempts, latency_s=spent.latency_s, wait_s=spent.wait_s,
        first_look=levels or None,
    )  # fmt: skip
    if outcome is not judgements or any(judgement.cut for judgement in judgements):
        return StepResult(rows, reasks, look_kept=kept)
    return StepResult(rows, reasks, [j.text for j in judgements], [j.tokens for j in judgements], kept)


def cached_look(look: JudgeRequest) -> Reply | None:
    """The reply a look `build_look` made holds from the cache, as `rows_from_reply` takes it
    (nothing spent); None when the cache had none."""
    if look.cached_replies is None:
        return None
    return Reply(look.cached_replies, usage=Usage(), cost_usd=0.0, attempts=0, logprobs=look.cached_logprobs or [])


# -- the re-ask ------------------------------------------------------------------------------------
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
    )
