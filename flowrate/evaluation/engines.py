"""The run's life cycle, once for every engine (`run_engine`), and the choice of an engine for a
run's settings (`engine_for`). An engine is a `Transport`: how a run's requests are sent (online,
a provider's Batch API, Ray Data); the conversations become rows through the judging step
(`metrics.step.Judging`) whatever sends them."""

from __future__ import annotations

import time
from functools import partial
from typing import Any, Protocol

from flowrate.evaluation.engine import close_judges
from flowrate.evaluation.file_run import FileRun, begin, finish, tell_lost_cache_writes
from flowrate.results.events import RunListener
from flowrate.results.rows import EvaluationRow
from flowrate.results.summary import RunSummary
from flowrate.settings.options import EvalSettings

Done = dict[tuple[str, str], EvaluationRow]  #: the rows a resumed output holds, by (id, row name)


class Transport(Protocol):
    """What is an engine's own: `online.Online` (the scheduler, a call at a time per
    conversation), `provider_batch.Batches` (the provider's Batch API), `ray_engine.OnRay`
    (Ray Data). `run_engine` does the rest, the same for each."""

    def check(self, run: FileRun) -> None:
        """Refuse, as a `ConfigError`, what this way of sending cannot do, before the judge is loaded."""

    async def send(self, run: FileRun, listener: RunListener, summary: RunSummary, done: Done) -> None:
        """Give every selected conversation and metric whose rows `done` lacks its rows, its error
        rows or a skip, exactly once, each through `engine.tell_row` (or `engine.Tally`)."""

    def closed(self, run: FileRun, listener: RunListener, summary: RunSummary) -> bool:
        """After the run and its judges are closed: what is this engine's to tell. False when the
        run ends without its finish (a batch only submitted: no gate is applied to nothing)."""


async def run_engine(transport: Transport, run: FileRun, listener: RunListener, /) -> RunSummary:
    """Judge `run` by `transport`, telling `listener` each row (the results file first): the
    transport's check, then `file_run.begin` (keys and judge checked, the rows a resumed output
    holds, the summary), the transport's rounds, then, whatever happens, the run and its judges
    closed (the input, the cache flushed, the direct transport's pool) and the replies the cache
    could not keep told; then `file_run.finish` (gates, wall clock, `listener.finished`)."""
    started = time.monotonic()
    try:
        transport.check(run)
        done, summary = begin(run, listener)
    except BaseException:
        run.close()
        raise
    try:
        await transport.send(run, listener, summary, done)
    finally:
        run.close()
        await close_judges(run.metrics)
        tell_lost_cache_writes(run.cache, listener)
        finishing = transport.closed(run, listener, summary)
    summary.resumed_elsewhere = len(done) - summary.resumed
    if summary.resumed_elsewhere and not summary.interrupted:
        listener.notice(
            f"{run.settings.output}: {summary.resumed_elsewhere} row(s) are for conversations not in this input;"
            " kept in the file, not counted"
        )
    return finish(run, listener, summary, started) if finishing else summary


def engine_for(settings: EvalSettings, batch_command: dict[str, Any] | None = None, ray_processor: Any = None) -> Any:
    """The engine `settings` ask for, as a call of `run_engine` with its transport: the provider's
    Batch API for `--engine batch` (`--batch`; each batch recording `batch_command`, for `batch
    collect`), Ray Data for `--engine ray` (through `ray_processor`, default the HTTP processor),
    else online. Each transport's module is imported only when chosen."""
    transport: Transport
    if settings.batch:
        from flowrate.evaluation.provider_batch import Batches

        transport = Batches(command=batch_command)
    elif settings.engine == "ray":
        from flowrate.evaluation.ray_engine import OnRay

        transport = OnRay(processor=ray_processor)
    else:
        from flowrate.evaluation.online import Online

        transport = Online()
    return partial(run_engine, transport)
