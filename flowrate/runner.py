"""The batch engine shared by `flowrate eval` and `evaluate_conversations`.

Conversations stream in from an iterator; at most `concurrency` are judged at once;
each row goes to `on_row` as soon as it is ready.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Protocol

from flowrate.cache import ResponseCache
from flowrate.limits import CallGate, RunControl, RunStopped
from flowrate.metric import CallEstimate, JudgePlan
from flowrate.models import (
    ConversationalEvalTestCase,
    ConversationResult,
    ErrorInfo,
    EvaluationRow,
    MetricResult,
    Source,
)
from flowrate.results import RunSummary

INTERRUPT_GRACE_S = 5.0
PLAN_AHEAD = 32  # conversations planned, and looked up in the cache, together


class Metric(Protocol):
    """What the batch runner needs of a metric: `RubricMetric` (a judge call per conversation)
    and `RepetitionCheck` (no judge) both have it."""

    name: str
    row_names: list[str]
    cache: ResponseCache | None

    def plan(self, case: ConversationalEvalTestCase, lookup: bool = True) -> JudgePlan: ...

    def fill_from_cache(self, plans: list[JudgePlan]) -> None: ...

    def estimate(self, plan: JudgePlan, exact: bool = False) -> CallEstimate: ...

    def new_row(
        self, case: ConversationalEvalTestCase, source: Source | None = None, name: str | None = None
    ) -> EvaluationRow: ...

    async def evaluate(
        self,
        case: ConversationalEvalTestCase,
        source: Source | None = None,
        *,
        plan: JudgePlan | None = None,
        gate: CallGate | None = None,
    ) -> list[EvaluationRow]: ...


class CostBudget:
    """Spent plus the estimates of calls in flight never passes `limit_usd`."""

    def __init__(self, limit_usd: float):
        self.limit_usd = limit_usd
        self.spent = 0.0
        self.reserved = 0.0
        self.exhausted = False

    def reserve(self, estimate: float) -> bool:
        if self.exhausted or self.spent + self.reserved + estimate > self.limit_usd:
            self.exhausted = True
            return False
        self.reserved += estimate
        return True

    def settle(self, estimate: float, actual: float | None) -> None:
        self.reserved -= estimate
        self.spent += estimate if actual is None else actual


Item = tuple[ConversationalEvalTestCase, Source | None]


@dataclass
class BatchRun:
    """Judge a stream of conversations with every metric, `concurrency` at a time.

    Every attempt passes one `CallGate`: calls in flight shrink on 429s and grow back,
    under the optional requests- and tokens-per-minute ceilings. With `max_cost_usd`,
    scheduling stops before the budget would be passed and the rest is skipped.
    """

    metrics: list[Metric]
    concurrency: int = 16
    on_row: Callable[[EvaluationRow], None] = lambda row: None
    summary: RunSummary = field(default_factory=RunSummary)
    rpm: float | None = None
    tpm: float | None = None
    max_cost_usd: float | None = None
    # rows a resumed output already holds, by (id, metric): each is counted when its conversation comes by
    done: dict[tuple[str, str], EvaluationRow] = field(default_factory=dict)
    on_resumed: Callable[[EvaluationRow], None] = lambda row: None
    # a conversation the run did not judge: (case, source, "budget" | "unreachable")
    on_skip: Callable[[ConversationalEvalTestCase, Source | None, str], None] = lambda case, source, reason: None
    control: RunControl | None = None
    gate: CallGate | None = None

    def _missing(self, case: ConversationalEvalTestCase, metric: Metric) -> int:
        """Rows of `metric` for `case` that the output does not hold yet."""
        return sum((case.id, name) not in self.done for name in metric.row_names)

    @property
    def oversized_calls(self) -> int:
        """Calls larger than a whole minute of the --tpm budget."""
        return self.gate.tokens.oversized if self.gate is not None and self.gate.tokens is not None else 0

    async def run(self, items: Iterable[Item]) -> RunSummary:
        loop = asyncio.get_running_loop()
        started = loop.time()
        control = self.control = RunControl()
        gate = self.gate = CallGate(self.concurrency, self.rpm, self.tpm, control)
        budget = CostBudget(self.max_cost_usd) if self.max_cost_usd is not None else None
        queue: asyncio.Queue[tuple[int, ConversationalEvalTestCase, Source | None, dict[str, JudgePlan]] | None] = (
            asyncio.Queue(maxsize=self.concurrency * 2)
        )
        stop = control.stopping
        workers: list[asyncio.Task] = []

        def left_out(case: ConversationalEvalTestCase, source: Source | None, metrics: list[Metric]) -> None:
            """Judge calls the run stopped before: skipped when the judge is unreachable;
            after Ctrl-C or a closed pipe they stay unjudged, for --resume."""
            if control.unreachable and not control.interrupted:
                for metric in metrics:
                    self.summary.skip_unreachable(case.id, self._missing(case, metric))
                self.on_skip(case, source, "unreachable")

        async def produce() -> None:
            """Plan conversations a batch at a time, so the cache is asked once per batch."""
            order = 0
            for batch in _batches(items, PLAN_AHEAD):
                planned = []
                for case, source in batch:
                    order += 1
                    wanted = []
                    for metric in self.metrics:
                        missing = 0
                        for name in metric.row_names:
                            kept = self.done.get((case.id, name))  # type: ignore[arg-type]
                            if kept is None:
                                missing += 1
                                continue
                            self.summary.add(kept, order)
                            self.summary.resumed += 1
                            self.on_resumed(kept)
                        if missing:
                            wanted.append(metric)
                    if not wanted:
                        continue
                    if stop.is_set():
                        left_out(case, source, wanted)
                        continue
                    if budget is not None and budget.exhausted:
                        for metric in wanted:
                            self.summary.skip_for_budget(case.id, self._missing(case, metric))
                        self.on_skip(case, source, "budget")
                        continue
                    plans = {metric.name: metric.plan(case, lookup=False) for metric in wanted}
                    if plans:
                        planned.append((order, case, source, plans))
                for metric in self.metrics:
                    metric.fill_from_cache([plans[metric.name] for *_, plans in planned if metric.name in plans])
                for item in planned:
                    await queue.put(item)
            for _ in workers:
                await queue.put(None)

        async def judge(
            order: int, case: ConversationalEvalTestCase, source: Source | None, plans: dict[str, JudgePlan]
        ) -> None:
            for index, metric in enumerate(self.metrics):
                plan = plans.get(metric.name)
                if plan is None:
                    continue
                estimate = 0.0
                if budget is not None:
                    estimate = metric.estimate(plan).cost_usd or 0.0
                    if not budget.reserve(estimate):
                        for rest in self.metrics[index:]:
                            if rest.name in plans:
                                self.summary.skip_for_budget(case.id, self._missing(case, rest))
                        self.on_skip(case, source, "budget")
                        return
                try:
                    rows = await metric.evaluate(case, source, plan=plan, gate=gate)
                except RunStopped:
                    if budget is not None:
                        budget.settle(estimate, 0.0)
                    left_out(case, source, [rest for rest in self.metrics[index:] if rest.name in plans])
                    return
                if budget is not None:
                    budget.settle(estimate, rows[0].cost_usd)
                for row in rows:
                    if self.summary.pipe_closed:
                        return  # nobody reads the rows any more
                    if (row.id, row.metric) in self.done:
                        continue  # a resumed suite: this criterion's row is in the file already
                    self.summary.add(row, order)
                    self.on_row(row)

        async def work() -> None:
            while (item := await queue.get()) is not None:
                if stop.is_set():
                    left_out(item[1], item[2], [metric for metric in self.metrics if metric.name in item[3]])
                else:
                    await judge(*item)

        def interrupt() -> None:
            if control.interrupted:  # a second Ctrl-C: no grace
                for task in workers:
                    task.cancel()
            control.interrupt()
            self.summary.interrupted = True

        handled = _add_sigint_handler(loop, interrupt)
        try:
            workers.extend(asyncio.create_task(work()) for _ in range(self.concurrency))
            producer = asyncio.create_task(produce())
            await self._wait(producer, workers, stop)
        finally:
            if handled:
                loop.remove_signal_handler(signal.SIGINT)
            for cache in {id(m.cache): m.cache for m in self.metrics if m.cache is not None}.values():
                cache.flush()  # one cache may serve several metrics: each is flushed once
            self.summary.wall_time_s = round(loop.time() - started, 3)
            self.summary.unreachable = control.unreachable
        return self.summary

    async def _wait(self, producer: asyncio.Task, workers: list[asyncio.Task], stop: asyncio.Event) -> None:
        """Run until everything is done, or the run stops: then calls in flight get
        `INTERRUPT_GRACE_S` after Ctrl-C, none after a closed pipe, and their own timeout
        when the judge is unreachable (their retries are cut already)."""
        everything = [producer, *workers]
        pending = set(everything)
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while pending:
                done, pending = await asyncio.wait(pending | {stopping}, return_when=asyncio.FIRST_COMPLETED)
                pending.discard(stopping)
                for task in done:
                    if task is not stopping and not task.cancelled() and task.exception() is not None:
                        raise task.exception()  # type: ignore[misc]
                if stop.is_set() and pending:
                    control = self.control
                    grace = None
                    if control is not None and control.interrupted:
                        grace = 0.0 if self.summary.pipe_closed else INTERRUPT_GRACE_S
                    _, pending = await asyncio.wait(pending, timeout=grace)
                    break
        finally:
            stopping.cancel()
            for task in everything:
                task.cancel()
            await asyncio.gather(stopping, *everything, return_exceptions=True)


def _batches(items: Iterable[Item], size: int) -> Iterator[list[Item]]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


def _add_sigint_handler(loop: asyncio.AbstractEventLoop, handler: Callable[[], None]) -> bool:
    try:
        loop.add_signal_handler(signal.SIGINT, handler)
    except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
        return False
    return True


def error_rows(
    metric: Metric,
    case: ConversationalEvalTestCase,
    source: Source | None,
    error_type: str,
    message: str,
    names: Iterable[str] | None = None,
) -> list[EvaluationRow]:
    """Rows of `metric` for `case` (those in `names`, default all) holding an error, not a judgement."""
    rows = []
    for name in metric.row_names if names is None else names:
        row = metric.new_row(case, source, name)
        row.error = ErrorInfo(type=error_type, message=message)
        rows.append(row)
    return rows


async def evaluate_conversations(
    conversations: list[ConversationalEvalTestCase],
    metrics: list[Metric],
    concurrency: int = 16,
) -> list[ConversationResult]:
    """Judge each conversation with each metric; results come back in input order.

    Raises `JudgeAccessError` when the judge rejects every call (a missing or bad key).
    """
    for metric in metrics:
        metric.check_access()
    cases = [
        case if case.id else case.model_copy(update={"id": f"conversation-{n}"}) for n, case in enumerate(conversations)
    ]
    if len({case.id for case in cases}) != len(cases):
        raise ValueError("conversation ids must be unique")
    rows: dict[str, list[EvaluationRow]] = {}
    run = BatchRun(metrics=metrics, concurrency=concurrency, on_row=lambda row: rows.setdefault(row.id, []).append(row))
    summary = await run.run((case, None) for case in cases)
    if summary.unreachable:
        why = f"not judged: the judge at {summary.unreachable} could not be reached"
    else:
        why = "not judged: the run was interrupted"
    for case in cases:  # every conversation comes back with a result per metric, an error when not judged
        judged = {row.metric for row in rows.get(case.id, [])}  # type: ignore[arg-type]
        for metric in metrics:
            missing = [name for name in metric.row_names if name not in judged]
            rows.setdefault(case.id, []).extend(error_rows(metric, case, None, "NotJudged", why, missing))  # type: ignore[arg-type]
    order = {name: n for n, name in enumerate(name for metric in metrics for name in metric.row_names)}
    return [
        ConversationResult(
            test_case=original,
            metrics_data=[
                MetricResult.from_row(row) for row in sorted(rows.get(case.id, []), key=lambda r: order[r.metric])
            ],
        )
        for original, case in zip(conversations, cases)
    ]
