"""Judging conversations from files into a JSONL results file: what `flowrate eval` does."""

from __future__ import annotations

import gc
import hashlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from pydantic import BaseModel

from flowrate.cache import ResponseCache, default_cache_dir
from flowrate.exit_codes import ConfigError, InputError
from flowrate.inputs import InputSet, ScanReport, iter_cases, raise_for_problems, scan
from flowrate.judge import RetryPolicy
from flowrate.metric import ConversationalFlowRateMetric
from flowrate.models import ConversationalEvalTestCase, EvaluationRow, Source
from flowrate.results import drop_error_rows, read_rows, repair_partial_tail
from flowrate.runner import BatchRun, RunSummary
from flowrate.settings import EvalSettings

CONNECTION_POOL_LIMIT = 500  # LiteLLM's default connections per host


def metric_from_settings(settings: EvalSettings, cache: ResponseCache | None = None) -> ConversationalFlowRateMetric:
    return ConversationalFlowRateMetric(
        model=settings.model,
        threshold=settings.threshold,
        api_base=settings.api_base,
        rubric=settings.rubric,
        language=settings.language,
        samples=settings.samples,
        max_input_tokens=settings.max_input_tokens,
        cache=cache,
        retry=RetryPolicy(
            max_retries=settings.max_retries,
            timeout=settings.timeout,
            backoff=settings.backoff,
            backoff_max=settings.backoff_max,
        ),
    )


def in_shard(conversation_id: str, shard: tuple[int, int] | None) -> bool:
    """A stable slice by id hash: the same id lands in the same shard on every machine."""
    if shard is None:
        return True
    index, count = shard
    return int(hashlib.sha256(conversation_id.encode()).hexdigest()[:16], 16) % count == index - 1


class DryRunEstimate(BaseModel):
    conversations: int = 0
    cached: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None


class FileRun:
    """A run over input paths: validated on creation, judged by `execute`.

    Creating it reads every record once and raises `InputError` (no judge call made)
    unless `settings.skip_invalid` lets it skip the invalid ones.
    """

    def __init__(self, paths: list[str], settings: EvalSettings):
        self.settings = settings
        self.notices: list[str] = []
        self.shard = settings.shard_slice
        self.concurrency = settings.concurrency
        if self.concurrency > CONNECTION_POOL_LIMIT:
            self.notices.append(
                f"--concurrency {self.concurrency} is above LiteLLM's pool of {CONNECTION_POOL_LIMIT} connections per host; using {CONNECTION_POOL_LIMIT}"
            )
            self.concurrency = CONNECTION_POOL_LIMIT
        if settings.output == "-" and (settings.resume or settings.retry_errors):
            raise ConfigError("--resume and --retry-errors need --output to be a file")
        self.inputs = InputSet(paths)
        self.scan: ScanReport = scan(self.inputs, lambda conversation_id: in_shard(conversation_id, self.shard))
        if not self.settings.skip_invalid:
            raise_for_problems(self.scan)
        cache = None
        if not settings.no_cache:
            cache = ResponseCache(Path(settings.cache_dir) if settings.cache_dir else default_cache_dir())
        self.metrics = [metric_from_settings(settings, cache)]
        if settings.max_cost is not None and any(m.backend.price(1000, 100) is None for m in self.metrics):
            raise ConfigError(f"no price is known for model {settings.model!r}, so --max-cost cannot be enforced")

    @property
    def total_rows(self) -> int:
        return self.scan.selected * len(self.metrics)

    async def execute(self, on_row: Callable[[EvaluationRow], None] = lambda row: None) -> RunSummary:
        """Judge every selected conversation, writing each row as soon as it is ready."""
        for metric in self.metrics:
            metric.check_access()
            metric.warm_up()
        # LiteLLM brings some 400,000 long-lived objects; every full collection would walk them
        # all again. Frozen, they are left alone: a tenth of the client's CPU in a long run.
        gc.freeze()
        run = BatchRun(
            metrics=self.metrics,
            concurrency=self.concurrency,
            rpm=self.settings.rpm,
            tpm=self.settings.tpm,
            max_cost_usd=self.settings.max_cost,
        )
        run.summary.skip_invalid(self.scan.invalid, self.scan.problems)
        done = self._resume_from_output(run.summary)
        run.done = done
        with _open_output(self.settings.output, append=bool(done) or self._resuming) as sink:

            def write(row: EvaluationRow) -> None:
                sink.write(row.model_dump_json().encode() + b"\n")
                sink.flush()
                on_row(row)

            run.on_row = write
            try:
                return await run.run(self._items(done))
            finally:
                self.inputs.close()
                gc.unfreeze()
                for metric in self.metrics:
                    if metric.cache is not None and metric.cache.lost_writes:
                        self.notices.append(
                            f"{metric.cache.path}: {metric.cache.lost_writes} replies could not be cached ({metric.cache.last_error})"
                        )

    @property
    def _resuming(self) -> bool:
        return (self.settings.resume or self.settings.retry_errors) and Path(self.settings.output).exists()

    def _resume_from_output(self, summary: RunSummary) -> set[tuple[str, str]]:
        """The (id, metric) pairs the output already holds; their rows count in the summary."""
        if not self._resuming:
            return set()
        path = Path(self.settings.output)
        if repair_partial_tail(path):
            self.notices.append(f"{path}: cut a partial last line left by a killed run")
        if self.settings.retry_errors:
            dropped = drop_error_rows(path)
            self.notices.append(f"{path}: {dropped} error row(s) to judge again")
        done: set[tuple[str, str]] = set()
        for row in read_rows(path):
            key = (row.id, row.metric)
            if key in done:
                raise InputError(
                    [f"{path}: more than one row for id {row.id!r} ({row.metric})"],
                    headline="problem(s) in the output file; nothing was judged",
                    hint="fix the file before resuming",
                )
            done.add(key)
            summary.add(row)
            summary.resumed += 1
        return done

    def _items(self, done: set[tuple[str, str]]) -> Iterator[tuple[ConversationalEvalTestCase, Source]]:
        names = [metric.name for metric in self.metrics]
        for record in iter_cases(self.inputs):
            case = record.case
            if in_shard(case.id, self.shard) and any((case.id, name) not in done for name in names):  # type: ignore[union-attr]
                yield case, record.source  # type: ignore[misc]

    def estimate(self) -> DryRunEstimate:
        """What judging would send and cost, with no call made: prompts rendered and counted."""
        estimate = DryRunEstimate()
        priced = True
        for case, _ in self._items(set()):
            estimate.conversations += 1
            for metric in self.metrics:
                plan = metric.plan(case)
                if plan.cached_texts is not None:
                    estimate.cached += 1
                    continue
                requests = 1 if metric.samples == 1 or metric.backend.supports_n() else metric.samples
                prompt = metric.count_prompt_tokens(plan) * requests
                estimate.calls += requests
                estimate.prompt_tokens += prompt
                estimate.completion_tokens += metric.expected_completion_tokens
                cost = metric.backend.price(prompt, metric.expected_completion_tokens)
                priced = priced and cost is not None
                estimate.cost_usd = (estimate.cost_usd or 0.0) + (cost or 0.0)
        self.inputs.close()
        if not priced:
            estimate.cost_usd = None
        return estimate


def merge_results(paths: list[str], output: str) -> RunSummary:
    """Join the results files of several shards into one; a row twice is an input error,
    and then no output is written."""
    summary = RunSummary()
    seen: dict[tuple[str, str], str] = {}
    problems: list[str] = []
    with tempfile.NamedTemporaryFile(
        "wb", delete=False, dir=None if output == "-" else Path(output).parent, suffix=".merging"
    ) as staged:
        for path in paths:
            for number, row in enumerate(read_rows(Path(path)), start=1):
                key = (row.id, row.metric)
                if key in seen:
                    problems.append(f"{path}: row {number}: id {row.id!r} ({row.metric}) is also in {seen[key]}")
                    continue
                seen[key] = path
                staged.write(row.model_dump_json().encode() + b"\n")
                summary.add(row)
    try:
        if problems:
            raise InputError(problems, headline="row(s) in more than one file; nothing was merged", hint=None)
        if output == "-":
            with open(staged.name, "rb") as merged:
                shutil.copyfileobj(merged, sys.stdout.buffer)
        else:
            os.replace(staged.name, output)
    finally:
        if os.path.exists(staged.name):
            os.unlink(staged.name)
    return summary


@contextmanager
def _open_output(output: str, append: bool) -> Iterator[BinaryIO]:
    if output == "-":
        yield sys.stdout.buffer
        return
    with open(output, "ab" if append else "wb") as handle:
        yield handle
