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
from flowrate.settings.groups import DEFAULT_CONCURRENCY

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


@dataclass(eq=False)
class Tally:
    """A run's bookkeeping of rows: each row told to `listener`, then counted in `summary`; the
    rows a resumed output holds (`done`, by (id, metric)), each counted when its conversation
    comes by; the conversations left out, each told skipped once with its reason. `control`
    (None: a run that cannot be stopped this way) says why calls stopped, and is interrupted
    once the output takes no more rows."""

    metrics: list[Metric]
    listener: RunListener
    summary: RunSummary
    done: dict[tuple[str, str], EvaluationRow]
    control: RunControl | None = None

    def missing(self, case: ConversationalEvalTestCase, metric: Metric) -> int:
        """Rows of `metric` for `case` that the output does not hold yet."""
        return sum((case.id, name) not in self.done for name in metric.row_names)

    def emit(self, row: EvaluationRow, order: int) -> None:
        """Tell the listener of a row, then count it; a listener that can take no more stops the
        run, and a row the results file could not take (a full disk) is counted as not kept."""
        if not tell_row(self.summary, self.listener, row, order) and self.control is not None:
            self.control.interrupt()

    def left_out(self, case: ConversationalEvalTestCase, source: Source | None, metrics: list[Metric]) -> None:
        """Judge calls the run stopped before: skipped when the judge is unreachable or refuses
        every call the same way, or the results file could not be written (these `--resume`
        judges); after Ctrl-C or a closed pipe they stay unjudged, for --resume."""
        control = self.control
        if self.summary.output_error is not None:
            for metric in metrics:
                self.summary.skip_unwritten(case.id, self.missing(case, metric))
            self.listener.skipped(case.id or "", source, "unwritten")
        elif control is not None and control.unreachable and not control.interrupted:
            for metric in metrics:
                self.summary.skip_unreachable(case.id, self.missing(case, metric))
            self.listener.skipped(case.id or "", source, "unreachable")
        elif control is not None and control.refused and not control.interrupted:
            for metric in metrics:
                self.summary.skip_refused(case.id, self.missing(case, metric))
            self.listener.skipped(case.id or "", source, "refused")

    def skip_for_budget(self, case: ConversationalEvalTestCase, source: Source | None, metrics: list[Metric]) -> None:
        """`metrics` of `case` skipped: the --max-cost budget is spent."""
        for metric in metrics:
            self.summary.skip_for_budget(case.id, self.missing(case, metric))
        self.listener.skipped(case.id or "", source, "budget")

    def wanted(self, case: ConversationalEvalTestCase, order: int) -> list[Metric]:
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

    def planned_metrics(self, item: Planned) -> list[Metric]:
        """The metrics `item` was planned for."""
        return [metric for metric in self.metrics if metric.name in item[3]]


@dataclass(eq=False)
class Producer:
    """The producer of a run's queue: conversations planned `PLAN_AHEAD` at a time, the cache
    asked once per chunk, each planned one put on `queue` for the `workers`; once `stop` is set
    (or the `budget` is spent; None: no bound) a conversation is left out through `tally`, and
    only the rows a resumed output holds are counted."""

    tally: Tally
    queue: _StopAwareQueue
    stop: asyncio.Event
    budget: CostBudget | None
    workers: int

    async def run(self, items: Iterable[Item]) -> None:
        """Plan and queue every item of `items`, then tell each worker to end."""
        tally, order = self.tally, 0
        for chunk in _chunks(items, PLAN_AHEAD):
            planned = []
            for case, source in chunk:
                order += 1
                wanted = tally.wanted(case, order)
                if not wanted:
                    continue
                if self.stop.is_set():
                    tally.left_out(case, source, wanted)
                elif self.budget is not None and self.budget.exhausted:
                    tally.skip_for_budget(case, source, wanted)
                else:
                    planned.append((order, case, source, {m.name: m.plan(case, lookup=False) for m in wanted}))
            for metric in tally.metrics:
                metric.fill_from_cache([plans[metric.name] for *_, plans in planned if metric.name in plans])
            for item in planned:
                if not await self.queue.put(item):
                    tally.left_out(item[1], item[2], tally.planned_metrics(item))
        for _ in range(self.workers):
            if not await self.queue.put(None):
                break  # stopped: the scheduler's drain ends the workers


@dataclass
class Scheduler:
    """Judge a stream of conversations with every metric, `concurrency` at a time, telling
    `listener` each row as soon as it is ready (and each row `done` already held, as resumed),
    counted in `summary` (its `Tally`); a `Producer` plans and queues them.

    Every attempt passes one `CallGate`: calls in flight shrink on 429s and grow back, under
    the optional requests- and tokens-per-minute ceilings (`rpm`, `tpm`). With `max_cost_usd`,
    scheduling stops before the budget would be passed and the rest is skipped. Ctrl-C and
    SIGTERM stop it: no new call starts, calls in flight get `INTERRUPT_GRACE_S`.
    """

    metrics: list[Metric] = field(default_factory=list)
    listener: RunListener = field(default_factory=RunListener)
    summary: RunSummary = field(default_factory=RunSummary)
    #: rows a resumed output already holds, by (id, metric): each is counted when its conversation comes by
    done: dict[tuple[str, str], EvaluationRow] = field(default_factory=dict)
    concurrency: int = DEFAULT_CONCURRENCY
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
        self.tally = Tally(self.metrics, self.listener, self.summary, self.done, control)
        self.gate = CallGate(self.concurrency, self.rpm, self.tpm, control)
        self._budget = CostBudget(self.max_cost_usd) if self.max_cost_usd is not None else None
        self._queue = _StopAwareQueue(self.concurrency * 2, control.stopping)
        self._workers: list[asyncio.Task] = []
        tasks: list[asyncio.Task] = []
        handled = _add_stop_handlers(loop, interrupter(control, self.summary, tasks))
        try:
            self._workers.extend(asyncio.create_task(self._work()) for _ in range(self.concurrency))
            producer = Producer(self.tally, self._queue, control.stopping, self._budget, self.concurrency)
            producing = asyncio.create_task(producer.run(items))
            tasks.extend([producing, *self._workers])
            await _wait(producing, self._workers, control, lambda: self.summary.pipe_closed, self._drain)
        finally:
            _remove_stop_handlers(loop, handled)
            await close_judges(self.metrics)
            self.summary.wall_time_s = round(loop.time() - started, 3)
            self.summary.unreachable = control.unreachable
            self.summary.refused = control.refused
        return self.summary

    def _drain(self) -> None:
        """After a stop: what is still queued is left out, and every worker is told to end."""
        for item in self._queue.drain(len(self._workers)):
            self.tally.left_out(item[1], item[2], self.tally.planned_metrics(item))

    async def _work(self) -> None:
        while (item := await self._queue.get()) is not None:
            if self.control.stopping.is_set():
                self.tally.left_out(item[1], item[2], self.tally.planned_metrics(item))
            else:
                await self._judge(*item)

    async def _judge(
        self, order: int, case: ConversationalEvalTestCase, source: Source | None, plans: dict[str, JudgePlan]
    ) -> None:
        budget, tally = self._budget, self.tally
        for index, metric in enumerate(self.metrics):
            plan = plans.get(metric.name)
            if plan is None:
                continue
            estimate = 0.0
            if budget is not None:
                estimate = metric.estimate(plan).cost_usd or 0.0
                if not budget.reserve(estimate):
                    tally.skip_for_budget(case, source, [m for m in self.metrics[index:] if m.name in plans])
                    return
            try:
                rows = await metric.evaluate(case, source, plan=plan, gate=self.gate)
            except RunStopped:
                if budget is not None:
                    budget.settle(estimate, 0.0)
                tally.left_out(case, source, [rest for rest in self.metrics[index:] if rest.name in plans])
                return
            if budget is not None:
                budget.settle(estimate, rows[0].cost_usd)
            for row in rows:
                if (row.id, row.metric) not in self.done:  # a resumed suite: this row is in the file already
                    tally.emit(row, order)


def interrupter(control: RunControl, summary: RunSummary, tasks: list[asyncio.Task]) -> Callable[[int], None]:
    """What Ctrl-C and SIGTERM do to a run: `control` interrupted (no new call starts) and
    `summary` marked; a second one cancels its `tasks` at once, with no grace."""

    def interrupt(signal_number: int = signal.SIGINT) -> None:
        if control.interrupted:  # a second Ctrl-C or SIGTERM: no grace
            for task in tasks:
                task.cancel()
        control.interrupt()
        summary.interrupted = True
        if signal_number == signal.SIGTERM:
            summary.terminated = True

    return interrupt


async def close_judges(metrics: list[Metric]) -> None:
    """A run's end for the judges of `metrics`: each response cache flushed once (one cache may
    serve several metrics), and the direct transport's pool closed with its run."""
    for cache in {id(m.cache): m.cache for m in metrics if m.cache is not None}.values():
        cache.flush()
    if "flowrate.judge.direct" in sys.modules:
        await sys.modules["flowrate.judge.direct"].close_sessions()


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
    concurrency: int = DEFAULT_CONCURRENCY,
) -> list[ConversationResult]:
    """Judge each conversation with each metric; results come back in input order.

    Raises `JudgeAccessError` when the judge rejects every call (a missing or bad key).
    """
    for metric in metrics:
        if metric.backend is not None:
            metric.backend.check_access()
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
