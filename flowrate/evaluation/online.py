"""The online transport: one call at a time per conversation, `--concurrency` conversations at
once, rows written as they come (`engine.Scheduler`)."""

from __future__ import annotations

import gc
from dataclasses import dataclass

from flowrate.evaluation.engine import Scheduler
from flowrate.evaluation.file_run import FileRun
from flowrate.results.events import RunListener
from flowrate.results.rows import EvaluationRow
from flowrate.results.summary import RunSummary


@dataclass(eq=False)
class Online:
    """The scheduler sends every selected conversation's requests (`engines.Transport`)."""

    scheduler: Scheduler | None = None

    def check(self, run: FileRun) -> None:
        """Online takes every option."""

    async def send(
        self, run: FileRun, listener: RunListener, summary: RunSummary, done: dict[tuple[str, str], EvaluationRow]
    ) -> None:
        listener.stage("judging")
        # LiteLLM brings some 400,000 long-lived objects; every full collection would walk them
        # all again. Frozen, they are left alone: a tenth of the client's CPU in a long run.
        gc.freeze()
        limits = run.settings.limit_settings
        self.scheduler = Scheduler(
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
            await self.scheduler.run(run.items(listener))
        finally:
            gc.unfreeze()

    def closed(self, run: FileRun, listener: RunListener, summary: RunSummary) -> bool:
        oversized = self.scheduler.oversized_calls if self.scheduler is not None else 0
        if oversized:
            listener.notice(
                f"--tpm {run.settings.tpm:g}: {oversized} call(s) were larger than a whole minute's budget;"
                " each waited for an empty 60-second window and went alone"
            )
        return True
