"""Judging a file run through the provider's Batch API: plan exactly as online, submit what was
never sent, poll, and map the replies back to the same rows; failed, expired and unparsable
lines go the online way. Also the request file export and the import of `vllm run-batch` output."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from flowrate.errors import ConfigError, InputError
from flowrate.evaluation.engine import Scheduler, error_rows
from flowrate.evaluation.file_run import FileRun
from flowrate.inputs.conversation import ConversationalEvalTestCase, Source
from flowrate.judge.batch_api import (
    TERMINAL,
    BatchRecord,
    BatchState,
    Chunker,
    Provider,
    check_lines,
    custom_id,
    line_error,
    result_texts,
)
from flowrate.judge.cache import default_cache_dir
from flowrate.metrics.protocol import Metric
from flowrate.results.events import RunListener
from flowrate.results.gates import apply_gates
from flowrate.results.rows import EvaluationRow
from flowrate.results.summary import RunSummary
from flowrate.scores.reading import UnparsableReply


def pending(run: FileRun, done: dict[tuple[str, str], EvaluationRow], lookup: bool = True, listener=None):
    """In one pass over the input, for every selected conversation and metric with rows missing:
    the conversation, its source, the metric, and for a judged metric its plan (made exactly as
    online) and custom id; for an offline metric, None for both."""
    for case, source in run.items(listener):
        for metric in run.metrics:
            if all((case.id, name) in done for name in metric.row_names):
                continue
            if not metric.calls_per_conversation:
                yield case, source, metric, None, None
            else:
                yield case, source, metric, metric.plan(case, lookup=lookup), custom_id(metric.name, case.id or "")


@dataclass
class _Writer:
    """Rows of a batch run: counted in the summary and in `done`, then told to the listener;
    `order_of` gives a conversation's place in the input."""

    summary: RunSummary
    listener: RunListener
    done: dict[tuple[str, str], EvaluationRow] = field(default_factory=dict)
    order_of: dict[str, int] = field(default_factory=dict)

    def __call__(self, row: EvaluationRow, order: int | None = None) -> None:
        self.done[(row.id, row.metric)] = row
        self.summary.add(row, self.order_of.get(row.id, 0) if order is None else order)
        self.listener.row(row)


def export_batch(run: FileRun, path: str) -> int:
    """Write the OpenAI-format request file of `run` to `path` (cached conversations left out
    unless the cache is off); returns the number of requests."""
    run.prepare()
    count = 0
    try:
        with open(path, "wb") as handle:
            for _, _, metric, plan, cid in pending(run, {}):
                if plan is not None and plan.cached_texts is None:
                    handle.write(metric.batch_request(cid, plan))
                    count += 1
    finally:
        run.close()
    return count


@dataclass
class _Submission:
    """What one batch run planned and what it has recorded with the provider."""

    recorded: list[BatchRecord]
    planned: dict[str, tuple] = field(default_factory=dict)


async def judge_in_batches(
    run: FileRun,
    listener: RunListener,
    command: dict | None = None,
    submit: bool = True,
    only: set[str] | None = None,
) -> RunSummary:
    """Judge `run` through the provider's Batch API: collect what earlier runs submitted, submit
    what was never sent (unless `submit` is False: `batch collect`), then, unless
    `batch_submit_only`, poll and collect. `command` is recorded with each batch so that
    `batch collect` can finish it; `only` restricts collecting to those batch ids. Cached
    conversations, offline metrics, failed and expired lines and unparsable replies go online."""
    started = time.monotonic()
    run.prepare(listener)
    judged = [m for m in run.metrics if m.calls_per_conversation]
    if not judged:
        raise ConfigError("--batch needs a metric that calls a judge")
    if any(m.samples > 1 and not m.backend.supports_n() for m in judged):
        raise ConfigError("--samples with --batch needs a model that returns several replies in one request (n)")
    backend = judged[0].backend
    judge = run.settings.judge_settings
    provider = Provider(backend.provider, judge.api_base)
    state = BatchState(Path(judge.cache_dir) if judge.cache_dir else default_cache_dir())
    done = run.done_rows(listener)
    summary = run.start(listener)
    write = _Writer(summary, listener, done)
    for row in list(done.values()):
        summary.add(row, resumed=True)
        listener.resumed(row)
    try:
        submission = await _submit(run, listener, provider, state, backend, write, command, submit, only)
        summary.batches = [batch.batch_id for batch in submission.recorded]
        if run.settings.batch_settings.submit_only:
            return summary
        online = await _poll(run, listener, provider, state, submission, write, summary, submit, started)
        await _settle_online(run, online, submission.planned, write, summary, done)
    finally:
        run.close()
        if run.cache is not None:
            run.cache.flush()
    apply_gates(summary, run.settings.gate_settings)
    summary.wall_time_s = round(time.monotonic() - started, 3)
    listener.finished(summary)
    return summary


async def _submit(run, listener, provider, state, backend, write, command, submit, only) -> _Submission:
    """Plan every pending conversation; judge cached and offline ones at once, and submit the
    rest in files cut by the provider's limits (those already sent are not sent again)."""
    output = str(Path(run.settings.output).resolve())
    recorded = [b for b in state.uncollected(output) if only is None or b.batch_id in only]
    sent = {cid for batch in recorded for cid in batch.custom_ids}
    submission = _Submission(recorded)
    chunker = Chunker(run.settings.batch_settings.batch_size)

    async def submit_chunk(chunk: list[bytes] | None) -> None:
        if not chunk:
            return
        check_lines(chunk)
        file_id, batch_id = await provider.submit(chunk)
        ids = [orjson.loads(line)["custom_id"] for line in chunk]
        batch = state.record(
            batch_id, backend.provider, backend.model_name, run.settings.api_base, file_id, output, ids, command or {}
        )
        recorded.append(batch)
        listener.stage(f"submitted batch {batch_id}: {len(ids)} requests")

    for case, source, metric, plan, cid in pending(run, write.done, listener=listener):
        write.order_of.setdefault(case.id or "", len(write.order_of))
        if plan is None or plan.cached_texts is not None:  # offline, or cached: no batch needed
            for row in await metric.evaluate(case, source, plan=plan):
                write(row)
            continue
        submission.planned[cid] = (case, source, metric, plan)
        if cid not in sent and submit:
            await submit_chunk(chunker.add(metric.batch_request(cid, plan)))
        plan.messages = []  # not needed again: collecting maps the replies back by custom id
    await submit_chunk(chunker.rest())
    return submission


async def _poll(run, listener, provider, state, submission, write, summary, submit, started) -> list[tuple]:
    """Poll the recorded batches until each is finished, collecting each as it finishes; with
    `submit` False (`batch collect`), one round only. Returns the lines that go online."""
    recorded, online = submission.recorded, []
    remaining = list(recorded)
    while remaining:
        still = []
        done_requests = failed_requests = total_requests = 0
        for batch in remaining:
            info = await provider.retrieve(batch.batch_id)
            counts = getattr(info, "request_counts", None)
            done_requests += getattr(counts, "completed", 0) or 0
            failed_requests += getattr(counts, "failed", 0) or 0
            total_requests += getattr(counts, "total", 0) or len(batch.custom_ids)
            if info.status not in TERMINAL:
                still.append(batch)
                continue
            online += await _collect(provider, info, batch, submission.planned, write)
            state.mark(batch.batch_id, info.status, collected=True)
        remaining = still
        if remaining:
            listener.stage(
                f"batches: {len(recorded) - len(remaining)} of {len(recorded)} done; requests {done_requests} done,"
                f" {failed_requests} failed of {total_requests} in those running; {time.monotonic() - started:.0f}s"
            )
            if not submit:
                summary.still_running = [b.batch_id for b in remaining]
                break
            await asyncio.sleep(run.settings.batch_settings.poll_interval_s * random.uniform(0.8, 1.2))
    return online


async def _settle_online(run, online, planned, write, summary, done) -> None:
    """The lines a batch did not answer usably: judged online once, or, with
    `--batch-no-fallback`, error rows."""
    if online and not run.settings.batch_settings.no_fallback:
        summary.batch_online = len(online)
        fallback = Scheduler(
            metrics=run.metrics, concurrency=run.concurrency, done=dict(done), listener=_Forward(write)
        )
        await fallback.run(list({case.id: (case, source) for case, source, _, _ in online}.values()))
    elif online:
        for case, source, cid, why in online:
            metric = planned[cid][2]
            missing = [name for name in metric.row_names if (case.id, name) not in done]
            for row in error_rows(metric, case, source, "BatchLineFailed", why, missing):
                row.batch = True
                write(row)


class _Forward(RunListener):
    """The online fallback's rows, into the batch run's writer (which counts them once)."""

    def __init__(self, write: _Writer):
        self.write = write

    def row(self, row: EvaluationRow) -> None:
        self.write(row)


async def _collect(provider: Provider, info, batch: BatchRecord, planned: dict, write) -> list[tuple]:
    """Rows from a finished batch; returns (case, source, custom id, why) for the lines that
    must go online instead: failed, not answered, or unparsable."""
    results = {line["custom_id"]: line for line in await provider.content(getattr(info, "output_file_id", None))}
    failed = {line["custom_id"]: line for line in await provider.content(getattr(info, "error_file_id", None))}
    online = []
    for cid in batch.custom_ids:
        if cid not in planned:
            continue  # a conversation no longer in this run's input
        case, source, metric, plan = planned[cid]
        found = results.get(cid)
        replies = result_texts(found) if found is not None else None
        if replies is None:
            if cid in failed or found is not None:
                why = f"failed in the batch: {line_error(failed.get(cid, found))}"
            else:
                why = f"not answered (batch {info.status})"
            online.append((case, source, cid, why))
            continue
        try:
            rows = metric.rows_from_replies(case, source, plan, replies[0], replies[1], batch.batch_id)
        except UnparsableReply:
            online.append((case, source, cid, "unparsable reply in the batch"))
            continue
        for row in rows:
            write(row)
    return online


def _read_batch_results(path: str) -> dict[str, dict]:
    """An OpenAI-format batch output file, by custom id; a bad line is an input error naming it."""
    results = {}
    try:
        with open(path, "rb") as handle:
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    try:
                        item = orjson.loads(line)
                        results[item["custom_id"]] = item
                    except (orjson.JSONDecodeError, KeyError, TypeError):
                        raise InputError(
                            [f"{path}:{number}: not a batch result line (custom_id)"],
                            headline="problem(s) in the batch results",
                        ) from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read batch results: {error.strerror}") from None
    return results


async def import_batch_results(run: FileRun, path: str, listener: RunListener) -> RunSummary:
    """Rows from an OpenAI-format batch output file at `path` (as `vllm run-batch` writes:
    successes and errors in one file), mapped back by custom id to `run`'s conversations and
    told to `listener`. A failed or missing line is an error row; nothing is sent online."""
    run.prepare()
    try:
        results = _read_batch_results(path)
    except BaseException:
        run.close()
        raise
    summary = RunSummary(expected_rows=run.total_rows)
    write = _Writer(summary, listener)
    try:
        for index, (case, source, metric, plan, cid) in enumerate(pending(run, {}, lookup=False)):
            for row in await _imported_rows(case, source, metric, plan, cid, results, path):
                write(row, index)
    finally:
        run.close()
    apply_gates(summary, run.settings.gate_settings)
    listener.finished(summary)
    return summary


async def _imported_rows(
    case: ConversationalEvalTestCase, source: Source | None, metric: Metric, plan, cid, results: dict, path: str
) -> list[EvaluationRow]:
    if plan is None:  # an offline metric
        return await metric.evaluate(case, source)
    found = results.get(cid)
    replies = result_texts(found) if found is not None else None
    if replies is not None:
        try:
            return metric.rows_from_replies(case, source, plan, replies[0], replies[1], path)
        except UnparsableReply as problem:
            why = f"unparsable reply: {problem}"
    else:
        why = "no line for it in the results" if found is None else f"failed in the batch: {line_error(found)}"
    return error_rows(metric, case, source, "BatchLineFailed", why)
