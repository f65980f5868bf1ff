"""Judging a file run online: one call per conversation and metric, rows written as they come."""

from __future__ import annotations

import gc
import time

from flowrate.evaluation.engine import Scheduler
from flowrate.evaluation.file_run import FileRun, begin, finish
from flowrate.results.events import RunListener
from flowrate.results.summary import RunSummary


async def judge_online(run: FileRun, listener: RunListener) -> RunSummary:
    """Judge every selected conversation of `run`, telling `listener` each row as it is ready
    (the results file is the listener's first part). Returns the summary with gates applied."""
    started = time.monotonic()
    done, summary = begin(run, listener)
    listener.stage("judging")
    # LiteLLM brings some 400,000 long-lived objects; every full collection would walk them
    # all again. Frozen, they are left alone: a tenth of the client's CPU in a long run.
    gc.freeze()
    limits = run.settings.limit_settings
    scheduler = Scheduler(
        metrics=run.metrics,
        concurrency=run.concurrency,
        listener=listener,
        summary=summary,
        rpm=limits.rpm,
        tpm=limits.tpm,
        max_cost_usd=limits.max_cost,
        done=done,
    )
    try:
        summary = await scheduler.run(run.items(listener))
    finally:
        run.close()
        gc.unfreeze()
        run.after_run(scheduler, listener)
    summary.resumed_elsewhere = len(done) - summary.resumed
    if summary.resumed_elsewhere and not summary.interrupted:
        listener.notice(
            f"{run.settings.output}: {summary.resumed_elsewhere} row(s) are for conversations not in this input;"
            " kept in the file, not counted"
        )
    return finish(run, listener, summary, started)
