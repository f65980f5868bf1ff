"""The engines' contract, `Engine`, and the choice of one for a run's settings (`engine_for`)."""

from __future__ import annotations

from functools import partial
from typing import Any, Protocol

from flowrate.evaluation.file_run import FileRun
from flowrate.results.events import RunListener
from flowrate.results.summary import RunSummary
from flowrate.settings.options import EvalSettings


class Engine(Protocol):
    """A way of judging a `FileRun`: `online.judge_online` (the scheduler, a call per conversation
    and metric), `provider_batch.judge_in_batches` (the provider's Batch API) and
    `ray_engine.judge_on_ray` (Ray Data); `engine_for` picks one. Called with the
    `run` and the `listener` (the results file first), an engine
    - begins with `file_run.begin`: keys and judge checked, the rows a resumed output holds, the summary;
    - gives each selected conversation and metric without those rows its rows, error rows or a
      skip exactly once, each told to the listener and counted (`engine.tell_row`); what a metric
      offers an engine is `metrics.protocol.Metric` (and `JudgedMetric` for a provider batch);
    - closes the run and flushes the cache whatever happens;
    - ends with `file_run.finish` (gates, wall clock, `listener.finished`) and returns the summary.
    """

    async def __call__(self, run: FileRun, listener: RunListener, /) -> RunSummary: ...


def engine_for(
    settings: EvalSettings, batch_command: dict[str, Any] | None = None, ray_processor: Any = None
) -> Engine:
    """The engine `settings` ask for: the provider's Batch API for `--batch` (each batch recording
    `batch_command`, for `batch collect`), Ray Data for `--engine ray` (through `ray_processor`,
    default the HTTP processor), else online. Each engine's module is imported only when chosen."""
    if settings.batch:
        from flowrate.evaluation.provider_batch import judge_in_batches

        return partial(judge_in_batches, command=batch_command)
    if settings.engine == "ray":
        from flowrate.evaluation.ray_engine import judge_on_ray

        return partial(judge_on_ray, processor=ray_processor)
    from flowrate.evaluation.online import judge_online

    return judge_online
