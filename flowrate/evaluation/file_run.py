"""Judging conversations from files into a JSONL results file: what `flowrate eval` does."""

from __future__ import annotations

import asyncio
import gc
import os
import random
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import orjson

from flowrate.batches import (
    TERMINAL,
    BatchState,
    Chunker,
    Provider,
    check_lines,
    custom_id,
    line_error,
    result_texts,
)
from flowrate.cache import ResponseCache, default_cache_dir
from flowrate.evaluation.engine import BatchRun, error_rows
from flowrate.exit_codes import ConfigError, InputError
from flowrate.inputs.files import InputSet, iter_cases
from flowrate.inputs.selection import (
    SKIP_INVALID_HINT,
    ScanReport,
    Selection,
    nothing_to_judge,
    raise_for_problems,
    scan,
)
from flowrate.metrics.catalog import build_metrics
from flowrate.models import ConversationalEvalTestCase, EvaluationRow, Source
from flowrate.results.book import ReportBook
from flowrate.results.files import check_output_path, open_output, read_rows, repair_partial_tail, rewrite_rows
from flowrate.results.gates import apply_gates
from flowrate.results.summary import DryRunEstimate, RunSummary
from flowrate.scores import UnparsableReply
from flowrate.settings import EvalSettings, in_github

CONNECTION_POOL_LIMIT = 500  # LiteLLM's default connections per host


def check_report_paths(settings: EvalSettings) -> None:
    """Every file a run will write besides its rows, checked before the first call: reports,
    the history, GitHub's step summary and the batch export (exit 2 when one cannot be)."""
    for option, path in (
        ("--junit", settings.junit),
        ("--html", settings.html),
        ("--history", settings.history),
        ("--batch-export", settings.batch_export),
    ):
        if path:
            check_output_path(path, option)
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if in_github(settings.github) and step_summary:
        check_output_path(step_summary, "GITHUB_STEP_SUMMARY")


class FileRun:
    """A run over input paths: validated on creation, judged by `execute`.

    Creating it reads every record once and raises `InputError` (no judge call made)
    unless `settings.skip_invalid` lets it skip the invalid ones. A run that selects no
    conversation is an input error too, unless `settings.allow_empty`.
    """

    def __init__(self, paths: list[str], settings: EvalSettings):
        self.settings = settings
        self.paths = paths
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
        check_output_path(settings.output)
        check_report_paths(settings)
        self.inputs = InputSet(paths, output=settings.output)
        self.notices.extend(self.inputs.notices)
        self.selection = Selection(
            self.shard,
            settings.sample,
            settings.sample_seed,
            settings.min_words,
            settings.only,
            settings.exclude,
            settings.limit,
        )
        self.scan: ScanReport = scan(self.inputs, self.selection.fresh(), settings.date_field)
        if not self.settings.skip_invalid:
            raise_for_problems(self.scan, hint=SKIP_INVALID_HINT)
        if self.scan.selected == 0 and not settings.allow_empty:
            self.inputs.close()
            raise nothing_to_judge(paths)
        if self.scan.unreadable_dates:
            self.notices.append(
                f"{self.scan.unreadable_dates} conversation(s) have a chat date that cannot be read"
                f" (first: {self.scan.first_unreadable_date}); their rows have chat_date null"
            )
        self.cache = None  # the run's: every judged metric reads and writes it
        if not settings.no_cache:
            self.cache = ResponseCache(Path(settings.cache_dir) if settings.cache_dir else default_cache_dir())
        self.metrics = build_metrics(settings, self.cache)
        self.book: ReportBook | None = None  # what reports need, kept when one is asked for
        if settings.junit or settings.html or in_github(settings.github):
            self.book = ReportBook()
            seen: set[str] = set()
            for source in self.scan.invalid_records:
                if str(source) not in seen:
                    seen.add(str(source))
                    self.book.skip(self.scan.invalid_names[str(source)], source.path, source.line, "invalid")

    @property
    def total_rows(self) -> int:
        return self.scan.selected * sum(len(metric.row_names) for metric in self.metrics)

    def prepare(self, on_stage: Callable[[str], None] = lambda text: None) -> None:
        """Check keys (before LiteLLM is imported, so a missing key is told at once), then load
        the judge and check the model, the context budget and the price a budget needs."""
        for metric in self.metrics:
            metric.check_keys()
        if any(metric.calls_per_conversation for metric in self.metrics):
            on_stage(f"loading the judge ({self.settings.model})…")
        for metric in self.metrics:
            metric.check_access()
            metric.warm_up()
        if self.settings.max_cost is not None and not all(metric.price_known() for metric in self.metrics):
            raise ConfigError(f"no price is known for model {self.settings.model!r}, so --max-cost cannot be enforced")

    async def execute(
        self,
        on_row: Callable[[EvaluationRow], None] = lambda row: None,
        on_stage: Callable[[str], None] = lambda text: None,
    ) -> RunSummary:
        """Judge every selected conversation, writing each row as soon as it is ready."""
        started = time.monotonic()
        try:
            self.prepare(on_stage)
            done = self._resume_from_output()
        except BaseException:
            self.inputs.close()
            raise
        on_stage("judging")
        # LiteLLM brings some 400,000 long-lived objects; every full collection would walk them
        # all again. Frozen, they are left alone: a tenth of the client's CPU in a long run.
        gc.freeze()
        run = BatchRun(
            metrics=self.metrics,
            concurrency=self.concurrency,
            rpm=self.settings.rpm,
            tpm=self.settings.tpm,
            max_cost_usd=self.settings.max_cost,
            done=done,
        )
        run.summary.expected_rows = self.total_rows
        run.summary.skip_invalid(self.scan.invalid, self.scan.problems)
        run.summary.left_out = dict(self.scan.left_out)
        book = self.book

        def resumed(row: EvaluationRow) -> None:
            if book is not None:
                book.add(row)
            on_row(row)

        run.on_resumed = resumed
        if book is not None:
            run.on_skip = lambda case, source, reason: book.skip(
                case.id or "", source.path if source else None, source.line if source else None, reason
            )
        try:
            handle = open_output(self.settings.output, append=self._resuming)
        except OSError as error:
            self.inputs.close()
            gc.unfreeze()
            raise ConfigError(f"--output {self.settings.output}: cannot be written: {error.strerror}") from None
        try:

            def write(row: EvaluationRow) -> None:
                if run.summary.pipe_closed:
                    return
                if run.summary.output_error is not None:
                    return
                try:
                    handle.write(row.model_dump_json().encode() + b"\n")
                    handle.flush()
                    if book is not None:
                        book.add(row)
                except BrokenPipeError:  # `... -o - | head`: the reader is gone; stop quietly
                    run.summary.pipe_closed = True
                    if run.control is not None:
                        run.control.interrupt()
                    return
                except OSError as error:  # disk full, a device error: stop, keep what was written
                    run.summary.output_error = f"{self.settings.output}: {error.strerror or error}"
                    if run.control is not None:
                        run.control.interrupt()
                    return
                on_row(row)

            run.on_row = write
            summary = await run.run(self._items())
        finally:
            self.inputs.close()
            gc.unfreeze()
            self._note_after_run(run)
            if handle is not sys.stdout.buffer:
                handle.close()
        summary.resumed_elsewhere = len(done) - summary.resumed
        if summary.resumed_elsewhere and not summary.interrupted:
            self.notices.append(
                f"{self.settings.output}: {summary.resumed_elsewhere} row(s) are for conversations not in this input;"
                " kept in the file, not counted"
            )
        apply_gates(summary, self.settings.default_gates, self.settings.gates)
        summary.wall_time_s = round(time.monotonic() - started, 3)  # loading the judge included, as the progress clock
        return summary

    def _note_after_run(self, run: BatchRun) -> None:
        if self.cache is not None and self.cache.lost_writes:
            self.notices.append(
                f"{self.cache.path}: {self.cache.lost_writes} replies could not be cached ({self.cache.last_error})"
            )
        gate_notes = run.oversized_calls
        if gate_notes:
            self.notices.append(
                f"--tpm {self.settings.tpm:g}: {gate_notes} call(s) were larger than a whole minute's budget;"
                " each waited for an empty 60-second window and went alone"
            )

    @property
    def _resuming(self) -> bool:
        resuming = self.settings.resume or self.settings.retry_errors or self.settings.batch
        return resuming and Path(self.settings.output).exists()

    def _resume_from_output(self) -> dict[tuple[str, str], EvaluationRow]:
        """The rows the output already holds, by (id, metric), made to agree with this run.

        Rows from another model or rubric version are refused: one file never mixes judges.
        `success` is derived again from the stored score under this run's threshold (no call
        needed), and with --retry-errors error rows are dropped; the file is rewritten
        atomically when anything changed."""
        if not self._resuming:
            return {}
        path = Path(self.settings.output)
        if repair_partial_tail(path):
            self.notices.append(f"{path}: cut a partial last line left by a killed run")
        by_name = {name: metric for metric in self.metrics for name in metric.row_names}
        done: dict[tuple[str, str], EvaluationRow] = {}
        changed = dropped = 0
        for row in read_rows(path):
            metric = by_name.get(row.metric)
            if metric is not None:
                _same_judge(path, row, metric)
            key = (row.id, row.metric)
            if key in done:
                raise InputError(
                    [f"{path}: more than one row for id {row.id!r} ({row.metric})"],
                    headline="problem(s) in the output file; nothing was judged",
                    hint="fix the file before resuming",
                )
            if row.error is not None and self.settings.retry_errors:
                dropped += 1
                changed += 1
                continue
            threshold = metric.thresholds.get(row.metric, metric.threshold) if metric is not None else None
            if threshold is not None and row.score is not None and row.threshold != threshold:
                row.threshold = threshold
                row.success = row.score >= threshold
                changed += 1
            done[key] = row
        if self.settings.retry_errors:
            self.notices.append(f"{path}: {dropped} error row(s) to judge again")
        if changed:
            rewrite_rows(path, done.values())
        return done

    def _items(self) -> Iterator[tuple[ConversationalEvalTestCase, Source]]:
        """The selected conversations, in input order."""
        selection = self.selection.fresh()
        for record in iter_cases(self.inputs):
            if selection.choose(record.case):  # type: ignore[arg-type]
                yield record.case, record.source  # type: ignore[misc]
            elif self.book is not None and selection.last_reason != "shard":
                self.book.skip(record.case.id, record.source.path, record.source.line, selection.last_reason)  # type: ignore[union-attr,arg-type]

    # -- provider batch mode ---------------------------------------------------------
    def _pending(self, done: dict[tuple[str, str], EvaluationRow], lookup: bool = True):
        """In one pass over the input, for every selected conversation and metric with rows
        missing: the conversation, its source, the metric, and for a judged metric its plan
        (made exactly as online) and custom id; for an offline metric, None for both."""
        for case, source in self._items():
            for metric in self.metrics:
                if all((case.id, name) in done for name in metric.row_names):
                    continue
                if not metric.calls_per_conversation:
                    yield case, source, metric, None, None
                else:
                    yield case, source, metric, metric.plan(case, lookup=lookup), custom_id(metric.name, case.id or "")

    def _row_writer(self, handle: BinaryIO, summary: RunSummary, on_row, done: dict | None = None, order_of=None):
        """Write a row to the results file, and count it in `summary`, the report book and `done`;
        `order_of` gives a conversation's place in the input when the caller does not."""

        def write(row: EvaluationRow, order: int | None = None) -> None:
            if order is None:
                order = order_of.get(row.id, 0) if order_of is not None else 0
            handle.write(row.model_dump_json().encode() + b"\n")
            handle.flush()
            if done is not None:
                done[(row.id, row.metric)] = row
            summary.add(row, order)
            if self.book is not None:
                self.book.add(row)
            on_row(row)

        return write

    def export_batch(self, path: str) -> int:
        """Write the OpenAI-format request file of this run (cached conversations left out unless
        the cache is off); returns the number of requests."""
        self.prepare()
        count = 0
        try:
            with open(path, "wb") as handle:
                for _, _, metric, plan, cid in self._pending({}):
                    if plan is not None and plan.cached_texts is None:
                        handle.write(metric.batch_request(cid, plan))
                        count += 1
        finally:
            self.inputs.close()
        return count

    async def execute_batch(
        self,
        on_row: Callable[[EvaluationRow], None] = lambda row: None,
        on_stage: Callable[[str], None] = lambda text: None,
        command: dict | None = None,
        submit: bool = True,
        only: set[str] | None = None,
    ) -> RunSummary:
        """Judge through the provider's Batch API: collect what earlier runs submitted, submit what
        was never sent, then (unless `batch_submit_only`) poll and collect. Cached conversations,
        offline metrics, failed and expired lines and unparsable replies go the online way."""
        started = time.monotonic()
        self.prepare(on_stage)
        metric0 = next((m for m in self.metrics if m.calls_per_conversation), None)
        if metric0 is None:
            raise ConfigError("--batch needs a metric that calls a judge")
        if any(m.samples > 1 and not m.backend.supports_n() for m in self.metrics if m.calls_per_conversation):
            raise ConfigError("--samples with --batch needs a model that returns several replies in one request (n)")
        backend = metric0.backend
        provider = Provider(backend.provider, self.settings.api_base)
        state = BatchState(Path(self.settings.cache_dir) if self.settings.cache_dir else default_cache_dir())
        done = self._resume_from_output()
        summary = RunSummary(expected_rows=self.total_rows)
        summary.skip_invalid(self.scan.invalid, self.scan.problems)
        summary.left_out = dict(self.scan.left_out)
        output = self.settings.output
        handle = open_output(output, append=self._resuming)
        order_of: dict[str, int] = {}
        write = self._row_writer(handle, summary, on_row, done, order_of)
        for row in list(done.values()):
            summary.add(row, resumed=True)
            on_row(row)
        try:
            recorded = [
                b for b in state.uncollected(str(Path(output).resolve())) if only is None or b["batch_id"] in only
            ]
            sent = {cid for batch in recorded for cid in batch["custom_ids"]}
            planned: dict[str, tuple] = {}
            online: list[tuple] = []
            chunker = Chunker(self.settings.batch_size)

            async def submit_chunk(chunk: list[bytes] | None) -> None:
                if not chunk:
                    return
                check_lines(chunk)
                file_id, batch_id = await provider.submit(chunk)
                ids = [orjson.loads(line)["custom_id"] for line in chunk]
                resolved = str(Path(output).resolve())
                state.record(
                    batch_id,
                    backend.provider,
                    backend.model_name,
                    self.settings.api_base,
                    file_id,
                    resolved,
                    ids,
                    command or {},
                )
                recorded.append({"batch_id": batch_id, "custom_ids": ids})
                on_stage(f"submitted batch {batch_id}: {len(ids)} requests")

            for case, source, metric, plan, cid in self._pending(done):
                order_of.setdefault(case.id or "", len(order_of))
                if plan is None or plan.cached_texts is not None:  # offline, or cached: no batch needed
                    for row in await metric.evaluate(case, source, plan=plan):
                        write(row)
                    continue
                planned[cid] = (case, source, metric, plan)
                if cid not in sent and submit:
                    await submit_chunk(chunker.add(metric.batch_request(cid, plan)))
                plan.messages = []  # not needed again: collecting maps the replies back by custom id
            await submit_chunk(chunker.rest())
            summary.batches = [batch["batch_id"] for batch in recorded]
            if self.settings.batch_submit_only:
                return summary
            pending = list(recorded)
            while pending:
                still = []
                done_requests = failed_requests = total_requests = 0
                for batch in pending:
                    info = await provider.retrieve(batch["batch_id"])
                    counts = getattr(info, "request_counts", None)
                    done_requests += getattr(counts, "completed", 0) or 0
                    failed_requests += getattr(counts, "failed", 0) or 0
                    total_requests += getattr(counts, "total", 0) or len(batch["custom_ids"])
                    if info.status not in TERMINAL:
                        still.append(batch)
                        continue
                    online += await self._collect(provider, info, batch, planned, write)
                    state.mark(batch["batch_id"], info.status, collected=True)
                pending = still
                if pending:
                    on_stage(
                        f"batches: {len(recorded) - len(pending)} of {len(recorded)} done; requests {done_requests} done,"
                        f" {failed_requests} failed of {total_requests} in those running; {time.monotonic() - started:.0f}s"
                    )
                    if not submit:
                        summary.still_running = [b["batch_id"] for b in pending]
                        break
                    await asyncio.sleep(self.settings.poll_interval * random.uniform(0.8, 1.2))
            if online and not self.settings.batch_no_fallback:
                summary.batch_online = len(online)
                fallback = BatchRun(metrics=self.metrics, concurrency=self.concurrency, done=dict(done))
                fallback.on_row = write
                await fallback.run(list({case.id: (case, source) for case, source, _, _ in online}.values()))
            elif online:
                for case, source, cid, why in online:
                    metric = planned[cid][2]
                    missing = [name for name in metric.row_names if (case.id, name) not in done]
                    for row in error_rows(metric, case, source, "BatchLineFailed", why, missing):
                        row.batch = True
                        write(row)
        finally:
            self.inputs.close()
            if handle is not sys.stdout.buffer:
                handle.close()
            if self.cache is not None:
                self.cache.flush()
        apply_gates(summary, self.settings.default_gates, self.settings.gates)
        summary.wall_time_s = round(time.monotonic() - started, 3)
        return summary

    async def _collect(self, provider: Provider, info, batch: dict, planned: dict, write) -> list[tuple]:
        """Rows from a finished batch; returns (case, source, custom id, why) for the lines that
        must go online instead: failed, not answered, or unparsable."""
        results = {line["custom_id"]: line for line in await provider.content(getattr(info, "output_file_id", None))}
        failed = {line["custom_id"]: line for line in await provider.content(getattr(info, "error_file_id", None))}
        online = []
        for cid in batch["custom_ids"]:
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
                rows = metric.rows_from_replies(case, source, plan, replies[0], replies[1], batch["batch_id"])
            except UnparsableReply:
                online.append((case, source, cid, "unparsable reply in the batch"))
                continue
            for row in rows:
                write(row)
        return online

    async def import_batch_results(
        self, path: str, on_row: Callable[[EvaluationRow], None] = lambda row: None
    ) -> RunSummary:
        """Rows from an OpenAI-format batch output file (as `vllm run-batch` writes: successes and
        errors in one file), mapped back by custom id to this run's conversations. A failed or
        missing line is an error row; nothing is sent online."""
        self.prepare()
        try:
            results = {}
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
            self.inputs.close()
            raise ConfigError(f"{path}: cannot read batch results: {error.strerror}") from None
        summary = RunSummary(expected_rows=self.total_rows)
        handle = open_output(self.settings.output, append=False)
        write = self._row_writer(handle, summary, on_row)
        try:
            for index, (case, source, metric, plan, cid) in enumerate(self._pending({}, lookup=False)):
                if plan is None:  # an offline metric
                    for row in await metric.evaluate(case, source):
                        write(row, index)
                    continue
                found = results.get(cid)
                replies = result_texts(found) if found is not None else None
                rows = None
                if replies is not None:
                    try:
                        rows = metric.rows_from_replies(case, source, plan, replies[0], replies[1], path)
                    except UnparsableReply as problem:
                        why = f"unparsable reply: {problem}"
                else:
                    why = (
                        "no line for it in the results"
                        if found is None
                        else f"failed in the batch: {line_error(found)}"
                    )
                for row in rows if rows is not None else error_rows(metric, case, source, "BatchLineFailed", why):
                    write(row, index)
        finally:
            self.inputs.close()
            if handle is not sys.stdout.buffer:
                handle.close()
        apply_gates(summary, self.settings.default_gates, self.settings.gates)
        return summary

    def estimate(self) -> DryRunEstimate:
        """What judging would send and cost, with no call made: prompts rendered and counted."""
        estimate = DryRunEstimate(cost_usd=0.0)
        try:
            self.prepare()
            for case, _ in self._items():
                estimate.conversations += 1
                for metric in self.metrics:
                    plan = metric.plan(case)
                    if plan.cached_texts is not None:
                        estimate.cached += 1
                        continue
                    call = metric.estimate(plan, exact=True)
                    estimate.calls += call.calls
                    estimate.prompt_tokens += call.prompt_tokens
                    estimate.completion_tokens += call.completion_tokens
                    if call.cost_usd is None or estimate.cost_usd is None:
                        estimate.cost_usd = None  # one call with no known price: the total is unknown
                    else:
                        estimate.cost_usd += call.cost_usd
        finally:
            self.inputs.close()
        return estimate


def _same_judge(path: Path, row: EvaluationRow, metric) -> None:
    """Refuse to resume into a file judged by another model or rubric version."""
    theirs = {"model": row.model, "rubric version": row.rubric_version}
    for what, ours in metric.judge_identity.items():
        if theirs[what] != ours:
            raise ConfigError(
                f"{path}: its rows were judged with {what} {theirs[what]!r}, this run uses {ours!r};"
                " resume with the same judge, or write to another --output"
            )
