"""The scheduler shared by `flowrate eval` and `evaluate_conversations`: conversations stream
in, at most `concurrency` are judged at once, and each row goes to the run's listeners as soon
as it is ready."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from flowrate.inputs.conversation import ConversationalEvalTestCase, Source
from flowrate.judge.limits import CallGate, RunControl, RunStopped
from flowrate.metrics.planning import JudgePlan
from flowrate.metrics.protocol import Metric
from flowrate.results.events import KeepRows, OutputStopped, RunListener
from flowrate.results.rows import ConversationResult, ErrorInfo, EvaluationRow, MetricResult
from flowrate.results.summary import RunSummary

INTERRUPT_GRACE_S = 5.0
PLAN_AHEAD = 32  # conversations planned, and looked up in the cache, together


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
Planned = tuple[int, ConversationalEvalTestCase, Source | None, dict[str, JudgePlan]]


def tell_row(summary: RunSummary, listener: RunListener, row: EvaluationRow, order: int) -> bool:
    """Tell `listener` of `row` (at its conversation's place `order`), then count it in `summary`;
    False once the output takes no more rows (a closed pipe, or a full disk: then this row and
    every later one count as not kept, `RunSummary.skip_unwritten`)."""
    if summary.pipe_closed:
        return False  # nobody takes the rows any more
    if summary.output_error is not None:
        summary.skip_unwritten(row.id)
        return False
    try:
        listener.row(row)
    except OutputStopped as stopped:
        if stopped.pipe_closed:
            summary.pipe_closed = True
        else:
            summary.output_error = str(stopped)
            summary.skip_unwritten(row.id)
        return False
    summary.add(row, order)
    return True


@dataclass
class _Tally:
    """A run's counting and telling: every row into the summary, then to the listener; the
    rows a resumed output holds (`done`), and the conversations left out."""

    metrics: list[Metric] = field(default_factory=list)
    listener: RunListener = field(default_factory=RunListener)
    summary: RunSummary = field(default_factory=RunSummary)
    #: rows a resumed output already holds, by (id, metric): each is counted when its conversation comes by
    done: dict[tuple[str, str], EvaluationRow] = field(default_factory=dict)
    control: RunControl | None = None

    def _missing(self, case: ConversationalEvalTestCase, metric: Metric) -> int:
        """Rows of `metric` for `case` that the output does not hold yet."""
        return sum((case.id, name) not in self.done for name in metric.row_names)

    def _emit(self, row: EvaluationRow, order: int) -> None:
        """Tell the listener of a row, then count it; a listener that can take no more stops the
        run, and a row the results file could not take (a full disk) is counted as not kept."""
        if not tell_row(self.summary, self.listener, row, order) and self.control is not None:
            self.control.interrupt()

    def _left_out(self, case: ConversationalEvalTestCase, source: Source | None, metrics: list[Metric]) -> None:
        """Judge calls the run stopped before: skipped when the judge is unreachable or refuses
        every call the same way, or the results file could not be written (these `--resume`
        judges); after Ctrl-C or a closed pipe they stay unjudged, for --resume."""
        control = self.control
        if self.summary.output_error is not None:
            for metric in metrics:
                self.summary.skip_unwritten(case.id, self._missing(case, metric))
            self.listener.skipped(case.id or "", source, "unwritten")
        elif control is not None and control.unreachable and not control.interrupted:
            for metric in metrics:
                self.summary.skip_unreachable(case.id, self._missing(case, metric))
            self.listener.skipped(case.id or "", source, "unreachable")
        elif control is not None and control.refused and not control.interrupted:
            for metric in metrics:
                self.summary.skip_refused(case.id, self._missing(case, metric))
            self.listener.skipped(case.id or "", source, "refused")

    def _skip_for_budget(self, case: ConversationalEvalTestCase, source: Source | None, metrics: list[Metric]) -> None:
        for metric in metrics:
            self.summary.skip_for_budget(case.id, self._missing(case, metric))
        self.listener.skipped(case.id or "", source, "budget")

    def _wanted(self, case: ConversationalEvalTestCase, order: int) -> list[Metric]:
        """The metrics with rows still missing for `case`; the rows the output holds are counted."""
        wanted = []
        for metric in self.metrics:
            missing = 0
            for name in metric.row_names:
                kept = self.done.get((case.id, name))  # type: ignore[arg-type]
                if kept is None:
                    missing += 1
                    continue
                self.summary.add(kept, order, resumed=True)
                self.listener.resumed(kept)
            if missing:
                wanted.append(metric)
        return wanted


@dataclass
class Scheduler(_Tally):
    """Judge a stream of conversations with every metric, `concurrency` at a time, telling
    `listener` each row as soon as it is ready (and each row `done` already held, as resumed).

    Every attempt passes one `CallGate`: calls in flight shrink on 429s and grow back, under
    the optional requests- and tokens-per-minute ceilings. With `max_cost_usd`, scheduling
    stops before the budget would be passed and the rest is skipped. Ctrl-C and SIGTERM stop
    it: no new call starts, calls in flight get `INTERRUPT_GRACE_S`.
    """

    concurrency: int = 16
    rpm: float | None = None
    tpm: float | None = None
    max_cost_usd: float | None = None
    gate: CallGate | None = None

    @property
    def oversized_calls(self) -> int:
        """Calls larger than a whole minute of the --tpm budget."""
        return self.gate.tokens.oversized if self.gate is not None and self.gate.tokens is not None else 0

    async def run(self, items: Iterable[Item]) -> RunSummary:
        """Judge every item; returns the summary (also on Ctrl-C, SIGTERM or a stopped output)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        control = self.control = RunControl()
        self.gate = CallGate(self.concurrency, self.rpm, self.tpm, control)
        self._budget = CostBudget(self.max_cost_usd) if self.max_cost_usd is not None else None
        self._queue = _StopAwareQueue(self.concurrency * 2, control.stopping)
        self._workers: list[asyncio.Task] = []
        tasks: list[asyncio.Task] = []

        def interrupt(signal_number: int = signal.SIGINT) -> None:
            if control.interrupted:  # a second Ctrl-C or SIGTERM: no grace
                for task in tasks:
                    task.cancel()
            control.interrupt()
            self.summary.interrupted = True
            if signal_number == signal.SIGTERM:
                self.summary.terminated = True

        handled = _add_stop_handlers(loop, interrupt)
        try:
            self._workers.extend(asyncio.create_task(self._work()) for _ in range(self.concurrency))
            producer = asyncio.create_task(self._produce(items))
            tasks.extend([producer, *self._workers])
            await _wait(producer, self._workers, self.control, lambda: self.summary.pipe_closed, self._drain)
        finally:
            _remove_stop_handlers(loop, handled)
            for cache in {id(m.cache): m.cache for m in self.metrics if m.cache is not None}.values():
                cache.flush()  # one cache may serve several metrics: each is flushed once
            self.summary.wall_time_s = round(loop.time() - started, 3)
            self.summary.unreachable = self.control.unreachable
            self.summary.refused = self.control.refused
            if "flowrate.judge.direct" in sys.modules:  # the direct transport's pool, closed with its run
                await sys.modules["flowrate.judge.direct"].close_sessions()
        return self.summary

    # -- producing ----------------------------------------------------------------------------
    async def _produce(self, items: Iterable[Item]) -> None:
        """Plan conversations `PLAN_AHEAD` at a time, so the cache is asked once per chunk.
        Once the run stops, it only counts the rows a resumed output holds."""
        stop = self.control.stopping  # type: ignore[union-attr]
        order = 0
        for chunk in _chunks(items, PLAN_AHEAD):
            planned = []
            for case, source in chunk:
                order += 1
                wanted = self._wanted(case, order)
                if not wanted:
                    continue
                if stop.is_set():
                    self._left_out(case, source, wanted)
                elif self._budget is not None and self._budget.exhausted:
                    self._skip_for_budget(case, source, wanted)
                else:
                    planned.append((order, case, source, {m.name: m.plan(case, lookup=False) for m in wanted}))
            for metric in self.metrics:
                metric.fill_from_cache([plans[metric.name] for *_, plans in planned if metric.name in plans])
            for item in planned:
                if not await self._queue.put(item):
                    self._left_out(item[1], item[2], self._metrics_of(item))
        for _ in self._workers:
            if not await self._queue.put(None):
                break  # stopped: `_drain` ends the workers

    def _metrics_of(self, item: Planned) -> list[Metric]:
        return [metric for metric in self.metrics if metric.name in item[3]]

    def _drain(self) -> None:
        """After a stop: what is still queued is left out, and every worker is told to end."""
        for item in self._queue.drain(len(self._workers)):
            self._left_out(item[1], item[2], self._metrics_of(item))

    # -- judging ----------------------------------------------------------------------------------
    async def _work(self) -> None:
        while (item := await self._queue.get()) is not None:
            if self.control.stopping.is_set():  # type: ignore[union-attr]
                self._left_out(item[1], item[2], self._metrics_of(item))
            else:
                await self._judge(*item)

    async def _judge(
        self, order: int, case: ConversationalEvalTestCase, source: Source | None, plans: dict[str, JudgePlan]
    ) -> None:
        budget = self._budget
        for index, metric in enumerate(self.metrics):
            plan = plans.get(metric.name)
            if plan is None:
                continue
            estimate = 0.0
            if budget is not None:
                estimate = metric.estimate(plan).cost_usd or 0.0
                if not budget.reserve(estimate):
                    self._skip_for_budget(case, source, [m for m in self.metrics[index:] if m.name in plans])
                    return
            try:
                rows = await metric.evaluate(case, source, plan=plan, gate=self.gate)
            except RunStopped:
                if budget is not None:
                    budget.settle(estimate, 0.0)
                self._left_out(case, source, [rest for rest in self.metrics[index:] if rest.name in plans])
                return
            if budget is not None:
                budget.settle(estimate, rows[0].cost_usd)
            for row in rows:
                if (row.id, row.metric) not in self.done:  # a resumed suite: this row is in the file already
                    self._emit(row, order)


class _StopAwareQueue:
    """The planned conversations between the producer and the workers, bounded, with a put that
    gives up when the run stops (the producer then only counts resumed rows)."""

    def __init__(self, size: int, stop: asyncio.Event):
        self._queue: asyncio.Queue[Planned | None] = asyncio.Queue(maxsize=size)
        self._stop = stop

    async def get(self) -> Planned | None:
        return await self._queue.get()

    async def put(self, item: Planned | None) -> bool:
        """Queue `item` unless the run stops first; False when it was not queued."""
        if not self._queue.full():
            self._queue.put_nowait(item)
            return True
        putting = asyncio.ensure_future(self._queue.put(item))
        stopping = asyncio.ensure_future(self._stop.wait())
        await asyncio.wait({putting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if putting.done() and not putting.cancelled():
            return True
        putting.cancel()
        return False

    def drain(self, workers: int) -> list[Planned]:
        """Empty the queue, then tell each of `workers` to end; returns what was still queued."""
        left = []
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if item is not None:
                left.append(item)
        for _ in range(workers):
            self._queue.put_nowait(None)
        return left


async def _wait(
    producer: asyncio.Task,
    workers: list[asyncio.Task],
    control: RunControl,
    pipe_closed: Callable[[], bool],
    drain: Callable[[], None],
) -> None:
    """Run until everything is done, or the run stops: then the producer finishes counting
    (it makes no call any more), what is queued is left out, and calls in flight get
    `INTERRUPT_GRACE_S` after Ctrl-C or SIGTERM, none after a closed pipe, and their own
    timeout when the judge is unreachable (their retries are cut already)."""
    stop = control.stopping
    everything = [producer, *workers]
    pending = set(everything)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        while pending:
            done, pending = await asyncio.wait(pending | {stopping}, return_when=asyncio.FIRST_COMPLETED)
            pending.discard(stopping)
            _raise_failure(done, stopping)
            if stop.is_set() and pending:
                if not producer.done():
                    done, _ = await asyncio.wait({producer})
                    _raise_failure(done, stopping)
                drain()
                grace = None
                if control.interrupted:
                    grace = 0.0 if pipe_closed() else INTERRUPT_GRACE_S
                _, pending = await asyncio.wait(pending - {producer}, timeout=grace)
                break
    finally:
        stopping.cancel()
        for task in everything:
            task.cancel()
        await asyncio.gather(stopping, *everything, return_exceptions=True)


def _chunks(items: Iterable[Item], size: int) -> Iterator[list[Item]]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


def _raise_failure(done: Iterable[asyncio.Future[Any]], stopping: asyncio.Future[Any]) -> None:
    """Raise the error of the first task in `done` (other than `stopping`) that failed."""
    for task in done:
        if task is not stopping and not task.cancelled() and (error := task.exception()) is not None:
            raise error


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # Ctrl-C, and how CI runners, `timeout` and Kubernetes stop a job


def _add_stop_handlers(loop: asyncio.AbstractEventLoop, handler: Callable[[int], None]) -> dict[int, object]:
    """Handle Ctrl-C and SIGTERM alike while the run lasts; returns the handlers they replace.

    The handler is installed even where the signal was ignored (a process started in the
    background by a shell ignores SIGINT): a run that is told to stop, stops."""
    replaced: dict[int, object] = {}
    for number in STOP_SIGNALS:
        try:
            previous = signal.getsignal(number)
            loop.add_signal_handler(number, handler, number)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
            continue
        replaced[number] = previous
    return replaced


def _remove_stop_handlers(loop: asyncio.AbstractEventLoop, replaced: dict[int, object]) -> None:
    """Put back the handlers the run replaced (asyncio alone would leave SIGTERM at its default)."""
    for number, previous in replaced.items():
        loop.remove_signal_handler(number)
        if previous is not None:
            signal.signal(number, previous)  # type: ignore[arg-type]


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
    kept = KeepRows()
    summary = await Scheduler(metrics=metrics, concurrency=concurrency, listener=kept).run(
        (case, None) for case in cases
    )
    rows: dict[str, list[EvaluationRow]] = {}
    for row in kept.rows:
        rows.setdefault(row.id, []).append(row)
    if summary.unreachable:
        why = f"not judged: the judge at {summary.unreachable} could not be reached"
    else:
        why = "not judged: the run was interrupted"
    for case in cases:  # every conversation comes back with a result per metric, an error when not judged
        cid = case.id or ""  # every case has its id by now
        judged = {row.metric for row in rows.get(cid, [])}
        for metric in metrics:
            missing = [name for name in metric.row_names if name not in judged]
            rows.setdefault(cid, []).extend(error_rows(metric, case, None, "NotJudged", why, missing))
    order = {name: n for n, name in enumerate(name for metric in metrics for name in metric.row_names)}
    return [
        ConversationResult(
            test_case=original,
            metrics_data=[
                MetricResult.from_row(row) for row in sorted(rows.get(case.id or "", []), key=lambda r: order[r.metric])
            ],
        )
        for original, case in zip(conversations, cases)
    ]
