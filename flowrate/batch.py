"""Judging conversations from files into a JSONL results file: what `flowrate eval` does."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import BinaryIO

from flowrate.inputs import InputSet, ScanReport, iter_cases, raise_for_problems, scan
from flowrate.judge import RetryPolicy
from flowrate.metric import ConversationalFlowRateMetric
from flowrate.models import ConversationalEvalTestCase, EvaluationRow, Source
from flowrate.runner import BatchRun, RunSummary
from flowrate.settings import EvalSettings


def metric_from_settings(settings: EvalSettings) -> ConversationalFlowRateMetric:
    return ConversationalFlowRateMetric(
        model=settings.model,
        threshold=settings.threshold,
        api_base=settings.api_base,
        rubric=settings.rubric,
        language=settings.language,
        samples=settings.samples,
        max_input_tokens=settings.max_input_tokens,
        retry=RetryPolicy(
            max_retries=settings.max_retries,
            timeout=settings.timeout,
            backoff=settings.backoff,
            backoff_max=settings.backoff_max,
        ),
    )


class FileRun:
    """A run over input paths: validated on creation, judged by `execute`.

    Creating it reads every record once and raises `InputError` (no judge call made)
    unless `settings.skip_invalid` lets it skip the invalid ones.
    """

    def __init__(self, paths: list[str], settings: EvalSettings):
        self.settings = settings
        self.inputs = InputSet(paths)
        self.scan: ScanReport = scan(self.inputs)
        if not self.settings.skip_invalid:
            raise_for_problems(self.scan)
        self.metrics = [metric_from_settings(settings)]

    @property
    def total_rows(self) -> int:
        return self.scan.valid * len(self.metrics)

    async def execute(self, on_row: Callable[[EvaluationRow], None] = lambda row: None) -> RunSummary:
        """Judge every valid conversation, writing each row as soon as it is ready."""
        for metric in self.metrics:
            metric.check_access()
        run = BatchRun(metrics=self.metrics, concurrency=self.settings.concurrency)
        for problem in self.scan.problems:
            run.summary.skip(problem)
        run.summary.skipped = self.scan.invalid
        with _open_output(self.settings.output) as sink:

            def write(row: EvaluationRow) -> None:
                sink.write(row.model_dump_json().encode() + b"\n")
                sink.flush()
                on_row(row)

            run.on_row = write
            try:
                return await run.run(self._items())
            finally:
                self.inputs.close()

    def _items(self) -> Iterator[tuple[ConversationalEvalTestCase, Source]]:
        for record in iter_cases(self.inputs):
            yield record.case, record.source  # type: ignore[misc]


@contextmanager
def _open_output(output: str) -> Iterator[BinaryIO]:
    if output == "-":
        yield sys.stdout.buffer
        return
    with open(output, "wb") as handle:
        yield handle
