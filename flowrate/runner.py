"""The batch engine shared by `flowrate eval` and `evaluate_conversations`.

Conversations stream in from an iterator; at most `concurrency` are judged at once;
each row goes to `on_row` as soon as it is ready.
"""

from __future__ import annotations

import asyncio
import bisect
import signal
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice

from pydantic import BaseModel, Field

from flowrate.exit_codes import ExitCode, exit_code_for_outcome
from flowrate.limits import CallGate, RunControl, RunStopped
from flowrate.metric import ConversationalFlowRateMetric, JudgePlan
from flowrate.models import (
    ConversationalEvalTestCase,
    ConversationResult,
    ErrorInfo,
    EvaluationRow,
    MetricResult,
    Source,
)

FAILURES_KEPT = 50
INTERRUPT_GRACE_S = 5.0
PLAN_AHEAD = 32  # conversations planned, and looked up in the cache, together


class FailureNote(BaseModel):
    id: str
    metric: str
    detail: str
    order: int = 0  #: the conversation's place in the input: notes are listed in input order


class RunSummary(BaseModel):
    """Totals of a run, built row by row."""

    judged: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    budget_skipped: int = 0
    unreachable_skipped: int = 0  #: not judged: the run stopped because the judge could not be reached
    unreachable: str | None = None  #: the endpoint that could not be reached
    expected_rows: int | None = None  #: rows this run should end with (selected conversations x metrics)
    pipe_closed: bool = False  #: the reader of stdout went away (`... -o - | head`)
    unstable: int = 0
    truncated: int = 0
    cached: int = 0
    resumed: int = 0
    resumed_elsewhere: int = 0  #: rows in a resumed output for conversations not in this run's input
    verdicts: dict[str, int] = Field(default_factory=dict)
    score_sum: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    rows_without_cost: int = 0
    wall_time_s: float = 0.0
    interrupted: bool = False
    failures: list[FailureNote] = Field(default_factory=list)
    error_notes: list[FailureNote] = Field(default_factory=list)
    skipped_notes: list[str] = Field(default_factory=list)
    unstable_notes: list[FailureNote] = Field(default_factory=list)

    def add(self, row: EvaluationRow, order: int = 0) -> None:
        self.prompt_tokens += row.usage.prompt_tokens
        self.completion_tokens += row.usage.completion_tokens
        self.cached += row.cached
        if row.cost_usd is None:
            self.rows_without_cost += 1
        else:
            self.cost_usd += row.cost_usd
        if row.error is not None:
            self.errors += 1
            _keep(
                self.error_notes,
                FailureNote(id=row.id, metric=row.metric, detail=f"{row.error.type}: {row.error.message}", order=order),
            )
            return
        self.judged += 1
        self.truncated += row.truncated
        if row.agreement is not None and row.agreement < 1.0:
            self.unstable += 1
            split = ", ".join(v.value for v in row.sample_verdicts)
            _keep(
                self.unstable_notes,
                FailureNote(
                    id=row.id,
                    metric=row.metric,
                    detail=f"{row.verdict.value} with {row.agreement:.0%} agreement ({split})",
                    order=order,
                ),
            )
        self.score_sum += row.score or 0.0
        self.verdicts[row.verdict.value] = self.verdicts.get(row.verdict.value, 0) + 1
        if row.success:
            self.passed += 1
        else:
            self.failed += 1
            first = row.key_issues[0] if row.key_issues else (row.reason or "")
            _keep(
                self.failures,
                FailureNote(id=row.id, metric=row.metric, detail=f"{row.verdict.value}: {first}", order=order),
            )

    def skip_for_budget(self, conversation_id: str | None) -> None:
        self.skipped += 1
        self.budget_skipped += 1
        _keep(self.skipped_notes, f"{conversation_id}: not judged, the --max-cost budget is spent")

    def skip_unreachable(self, conversation_id: str | None) -> None:
        self.skipped += 1
        self.unreachable_skipped += 1
        _keep(self.skipped_notes, f"{conversation_id}: not judged, the judge could not be reached")

    @property
    def rows_written(self) -> int:
        return self.judged + self.errors

    @property
    def not_judged(self) -> int:
        """Rows still missing: conversations an interruption left unjudged."""
        if self.expected_rows is None:
            return 0
        return max(self.expected_rows - self.rows_written - self.budget_skipped - self.unreachable_skipped, 0)

    def skip_invalid(self, records: int, problems: list[str]) -> None:
        """Invalid records left out by --skip-invalid: counted once each, every problem noted."""
        self.skipped += records
        for problem in problems:
            _keep(self.skipped_notes, problem)

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.judged if self.judged else None

    @property
    def mean_score(self) -> float | None:
        return self.score_sum / self.judged if self.judged else None

    @property
    def exit_code(self) -> ExitCode:
        return exit_code_for_outcome(
            errors=self.errors,
            failed=self.failed,
            interrupted=self.interrupted,
            incomplete=self.budget_skipped + self.unreachable_skipped > 0,
            pipe_closed=self.pipe_closed,
        )


def _keep(notes: list, note: object) -> None:
    """Keep the first `FAILURES_KEPT` notes; `FailureNote`s by input order, whatever order they came in."""
    if isinstance(note, FailureNote):
        bisect.insort(notes, note, key=lambda kept: kept.order)
        del notes[FAILURES_KEPT:]
    elif len(notes) < FAILURES_KEPT:
        notes.append(note)


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

    metrics: list[ConversationalFlowRateMetric]
    concurrency: int = 16
    on_row: Callable[[EvaluationRow], None] = lambda row: None
    summary: RunSummary = field(default_factory=RunSummary)
    rpm: float | None = None
    tpm: float | None = None
    max_cost_usd: float | None = None
    # rows a resumed output already holds, by (id, metric): each is counted when its conversation comes by
    done: dict[tuple[str, str], EvaluationRow] = field(default_factory=dict)
    on_resumed: Callable[[EvaluationRow], None] = lambda row: None
    control: RunControl | None = None
    gate: CallGate | None = None

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

        def left_out(case: ConversationalEvalTestCase) -> None:
            """A conversation the run stopped before: skipped when the judge is unreachable;
            after Ctrl-C or a closed pipe it stays unjudged, for --resume."""
            if control.unreachable and not control.interrupted:
                self.summary.skip_unreachable(case.id)

        async def produce() -> None:
            """Plan conversations a batch at a time, so the cache is asked once per batch."""
            order = 0
            for batch in _batches(items, PLAN_AHEAD):
                planned = []
                for case, source in batch:
                    order += 1
                    for metric in self.metrics:
                        kept = self.done.get((case.id, metric.name))  # type: ignore[arg-type]
                        if kept is not None:
                            self.summary.add(kept, order)
                            self.summary.resumed += 1
                            self.on_resumed(kept)
                    if stop.is_set():
                        left_out(case)
                        continue
                    if budget is not None and budget.exhausted:
                        self.summary.skip_for_budget(case.id)
                        continue
                    plans = {
                        m.name: m.plan(case, lookup=False) for m in self.metrics if (case.id, m.name) not in self.done
                    }
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
            for metric in self.metrics:
                plan = plans.get(metric.name)
                if plan is None:
                    continue
                estimate = 0.0
                if budget is not None:
                    estimate = metric.estimated_cost(plan) or 0.0
                    if not budget.reserve(estimate):
                        self.summary.skip_for_budget(case.id)
                        return
                try:
                    row = await metric.evaluate(case, source, plan=plan, gate=gate)
                except RunStopped:
                    if budget is not None:
                        budget.settle(estimate, 0.0)
                    left_out(case)
                    return
                if budget is not None:
                    budget.settle(estimate, row.cost_usd)
                if self.summary.pipe_closed:
                    return  # nobody reads the rows any more
                self.summary.add(row, order)
                self.on_row(row)

        async def work() -> None:
            while (item := await queue.get()) is not None:
                if stop.is_set():
                    left_out(item[1])
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
            for metric in self.metrics:
                if metric.cache is not None:
                    metric.cache.flush()
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


def _not_judged(case: ConversationalEvalTestCase, metric: ConversationalFlowRateMetric, why: str) -> EvaluationRow:
    row = metric.new_row(case)
    row.error = ErrorInfo(type="NotJudged", message=why)
    return row


async def evaluate_conversations(
    conversations: list[ConversationalEvalTestCase],
    metrics: list[ConversationalFlowRateMetric],
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
            if metric.name not in judged:
                rows.setdefault(case.id, []).append(_not_judged(case, metric, why))  # type: ignore[arg-type]
    order = {metric.name: n for n, metric in enumerate(metrics)}
    return [
        ConversationResult(
            test_case=original,
            metrics_data=[
                MetricResult.from_row(row) for row in sorted(rows.get(case.id, []), key=lambda r: order[r.metric])
            ],
        )
        for original, case in zip(conversations, cases)
    ]
