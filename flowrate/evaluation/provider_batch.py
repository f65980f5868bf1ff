"""Judging a file run through the provider's Batch API: plan exactly as online, submit what was
never sent, poll, and map the replies back to the same rows; failed, expired and unparsable
lines go the online way. Also the request file export and the import of `vllm run-batch` output.

Memory does not depend on the batch size and barely on the run's: request lines go to a file on
disk as they are planned and are uploaded from there, results come back to disk in chunks and are
found by custom id, and a run keeps of each conversation only the custom id it waits for. The
conversations are read again from the input when their results arrive (one pass for the batches
that finish together) and planned again, as `batch collect` in a later process does. Measured
(bench/batch_memory.py, realistic dialogues): a peak of 214 MB at 2,000 conversations and 230 MB
at 20,000, at the default --batch-size and at 5000 alike, where holding the files and every
planned conversation took 1,121 MB (719 MB at --batch-size 5000).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowrate.errors import ConfigError
from flowrate.evaluation.engine import Scheduler, error_rows, tell_row
from flowrate.evaluation.file_run import FileRun, tell_logprobs
from flowrate.inputs.conversation import ConversationalEvalTestCase, Source
from flowrate.judge.batch_api import (
    TERMINAL,
    BatchRecord,
    BatchReplies,
    BatchState,
    Chunker,
    Provider,
    RequestFile,
    ResultFile,
    custom_id,
    line_error,
    request_line,
    result_replies,
)
from flowrate.judge.errors import BadReply
from flowrate.metrics.online_calls import OnlineCalls
from flowrate.metrics.protocol import Metric
from flowrate.metrics.rubric_metric import RubricMetric
from flowrate.metrics.step import ADDITIONS, CallFailed, JudgeRequest, Judging, Reply, keep_in_cache
from flowrate.results.events import RunListener
from flowrate.results.gates import apply_gates
from flowrate.results.rows import EvaluationRow
from flowrate.results.summary import RunSummary
from flowrate.settings.groups import cache_folder


def pending(run: FileRun, done: dict[tuple[str, str], EvaluationRow], lookup: bool = True, listener=None):
    """In one pass over the input, for every selected conversation and metric with rows missing
    from `done`: the conversation's place in the selection, the conversation, its source, the
    metric, and for a judged metric its plan (made exactly as online, the cache asked unless
    `lookup` is False) and custom id; for an offline metric, None for both. `listener` hears the
    conversations left out."""
    for order, (case, source) in enumerate(run.items(listener)):
        for metric in run.metrics:
            if all((case.id, name) in done for name in metric.row_names):
                continue
            if not metric.calls_per_conversation:
                yield order, case, source, metric, None, None
            else:
                cid = custom_id(metric.name, case.id or "")
                yield order, case, source, metric, metric.plan(case, lookup=lookup), cid


def _selected(run: FileRun) -> Iterator[tuple[int, ConversationalEvalTestCase, Source]]:
    """The selected conversations again, each with its place in the selection (as `pending`
    numbers them); the conversations left out were told of in the first pass."""
    for order, (case, source) in enumerate(run.items()):
        yield order, case, source


@dataclass
class _Writer:
    """Rows of a batch run: told to the listener (the results file), then counted in the
    summary, each at its conversation's place `order` (`engine.tell_row`, as online). No row is
    kept: what a run holds does not grow with the rows it writes."""

    summary: RunSummary
    listener: RunListener

    def __call__(self, row: EvaluationRow, order: int = 0) -> None:
        tell_row(self.summary, self.listener, row, order)


def export_batch(run: FileRun, path: str) -> int:
    """Write the OpenAI-format request file of `run` to `path` (cached conversations left out
    unless the cache is off); returns the number of requests."""
    run.judges.prepare()
    count = 0
    try:
        with open(path, "wb") as handle:
            for _, case, _, metric, plan, cid in pending(run, {}):
                if plan is not None and plan.cached_texts is None:
                    lines = request_lines(cid, Judging(metric, case, None, plan))
                    handle.write(b"".join(lines))
                    count += len(lines)
    finally:
        run.close()
    return count


@dataclass
class _Batches:
    """What one batch run has with the provider: the `recorded` batches it collects, the custom
    ids it `waits` for (planned in this run and not cached: their rows come from a batch), and
    the lines that go `online` instead (custom id -> (metric name, why)). `scratch` is the
    directory of the temporary request and result files."""

    recorded: list[BatchRecord]
    scratch: Path
    waits: set[str] = field(default_factory=set)
    online: dict[str, tuple[str, str]] = field(default_factory=dict)
    moved: str | None = None  #: why the scratch files went to the system's temporary directory (a full disk)

    def move(self, why: str) -> None:
        """The scratch directory has no room (`why`): the files to come go to the system's temporary one."""
        if self.moved is None:
            self.moved = f"{self.scratch}: no room for the batch files ({why}); they went to {tempfile.gettempdir()}"
        self.scratch = Path(tempfile.gettempdir())


@dataclass(eq=False)
class Batches:
    """The provider's Batch API as a run's transport (`engines.Transport`): collect what earlier
    runs submitted, submit what was never sent (unless `submit` is False: `batch collect`), then,
    unless `--batch-submit-only`, poll and collect. `command` is recorded with each batch so that
    `batch collect` can finish it; `only` restricts collecting to those batch ids. Cached
    conversations, offline metrics, failed and expired lines go online, and so does what the
    judging step asks after a batch's reply (a re-ask)."""

    command: dict | None = None
    submit: bool = True
    only: set[str] | None = None
    state: BatchState | None = None
    batches: _Batches | None = None

    def check(self, run: FileRun) -> None:
        if not any(m.calls_per_conversation for m in run.metrics):
            raise ConfigError("--batch needs a metric that calls a judge")

    async def send(self, run: FileRun, listener: RunListener, summary: RunSummary, done: dict) -> None:
        started = time.monotonic()
        judged = [m for m in run.metrics if m.calls_per_conversation]
        backend = judged[0].backend
        judge = run.settings.judge_settings
        provider = Provider(backend.provider, judge.api_base, judge.transport, judged[0].retry)
        self.state = state = BatchState(cache_folder(judge.cache_dir))
        write = _Writer(summary, listener)
        for row in list(done.values()):
            summary.add(row, resumed=True)
            listener.resumed(row)
        self.batches = await _submit(
            run, listener, provider, state, backend, write, done, self.command, self.submit, self.only
        )
        summary.batches = [batch.batch_id for batch in self.batches.recorded]
        if not run.settings.batch_settings.batch_submit_only:
            await _poll(run, listener, provider, state, self.batches, write, summary, self.submit, started)
            await _settle_online(run, self.batches, write, summary, done)

    def closed(self, run: FileRun, listener: RunListener, summary: RunSummary) -> bool:
        if self.state is not None:
            _tell_disk_troubles(self.state, self.batches, listener)
        return not run.settings.batch_settings.batch_submit_only


def _tell_disk_troubles(state: BatchState, batches: _Batches | None, listener: RunListener) -> None:
    """What a full disk cost a batch run, told as notices (the run went on): scratch files moved,
    and batches the state could not keep (the replies the cache could not keep: `run_engine`)."""
    if batches is not None and batches.moved:
        listener.notice(batches.moved)
    if state.not_kept:
        listener.notice(
            f"{state.path}: batch(es) {', '.join(state.not_kept)} could not be recorded ({state.last_error});"
            " a later `flowrate batch collect` cannot see them: collect them in this run"
        )


async def _submit(run, listener, provider, state, backend, write, done, command, submit, only) -> _Batches:
    """Plan every pending conversation; judge cached and offline ones at once, and submit the
    rest in files cut by the provider's limits (those already sent are not sent again). Each
    request line goes to a file on disk as it is planned; a full file is uploaded from there."""
    output = str(Path(run.settings.output).resolve())
    recorded = [b for b in state.uncollected(output) if only is None or b.batch_id in only]
    sent = {cid for batch in recorded for cid in batch.custom_ids}
    batches = _Batches(recorded, state.path.parent)
    chunker = Chunker(run.settings.batch_settings.batch_size)
    requests: RequestFile | None = None

    async def send(full: RequestFile) -> None:
        file_id, batch_id = await provider.submit(full)
        batch = state.record(
            batch_id,
            backend.provider,
            backend.model_name,
            run.settings.api_base,
            file_id,
            output,
            full.ids,
            command or {},
        )
        recorded.append(batch)
        listener.stage(f"submitted batch {batch_id}: {len(full.ids)} requests")

    try:
        for order, case, source, metric, plan, cid in pending(run, done, listener=listener):
            if plan is None or plan.cached_texts is not None:  # offline, or cached: no batch needed
                for row in await metric.evaluate(case, source, plan=plan):
                    write(row, order)
                continue
            batches.waits.add(cid)
            if cid in sent or not submit:
                continue
            lines = request_lines(cid, Judging(metric, case, source, plan))
            if chunker.starts_batch(sum(map(len, lines)), len(lines)) and requests is not None:
                await send(requests)
                requests.close()
                requests = None
            if requests is None:
                requests = RequestFile(batches.scratch)
            for line in lines:
                requests.add(line)
            if requests.moved:
                batches.move(requests.moved)
        if requests is not None:
            await send(requests)
    finally:
        if requests is not None:
            requests.close()
    return batches


async def _poll(run, listener, provider, state, batches, write, summary, submit, started) -> None:
    """Poll the recorded batches until each is finished, collecting together those that finish
    in one round; with `submit` False (`batch collect`), one round only."""
    recorded = batches.recorded
    remaining = list(recorded)
    while remaining:
        still: list[tuple[BatchRecord, Any]] = []  # (the record, the provider's batch object)
        finished: list[tuple[BatchRecord, Any]] = []
        done_requests = failed_requests = total_requests = 0
        for batch in remaining:
            info = await provider.retrieve(batch.batch_id)
            counts = getattr(info, "request_counts", None)
            done_requests += getattr(counts, "completed", 0) or 0
            failed_requests += getattr(counts, "failed", 0) or 0
            total_requests += getattr(counts, "total", 0) or len(batch.custom_ids)
            (finished if info.status in TERMINAL else still).append((batch, info))
        if finished:
            await _collect(run, provider, finished, batches, write)
            for batch, info in finished:  # one whose rows the results file could not take stays to collect again
                state.mark(batch, info.status, collected=summary.output_error is None)
        remaining = [batch for batch, _ in still]
        if remaining:
            listener.stage(
                f"batches: {len(recorded) - len(remaining)} of {len(recorded)} done; requests {done_requests} done,"
                f" {failed_requests} failed of {total_requests} in those running; {time.monotonic() - started:.0f}s"
            )
            if not submit:
                summary.still_running = [b.batch_id for b in remaining]
                break
            await asyncio.sleep(run.settings.batch_settings.poll_interval * random.uniform(0.8, 1.2))


async def _settle_online(run, batches: _Batches, write: _Writer, summary, done) -> None:
    """The lines a batch did not answer usably: judged online once (a pass over the input for
    each metric that has some), or, with `--batch-no-fallback`, error rows."""
    online = batches.online
    if not online:
        return
    judged = [m for m in run.metrics if m.calls_per_conversation]
    if summary.output_error is not None:  # the results file takes no row: judging these would be paid for nothing
        rows = {metric.name: len(metric.row_names) for metric in judged}
        for cid, (name, _) in online.items():
            summary.skip_unwritten(cid, rows.get(name, 1))
        return
    if run.settings.batch_settings.batch_no_fallback:
        for order, case, source in _selected(run):
            for metric in judged:
                entry = online.get(custom_id(metric.name, case.id or ""))
                if entry is None:
                    continue
                missing = [name for name in metric.row_names if (case.id, name) not in done]
                for row in error_rows(metric, case, source, "BatchLineFailed", entry[1], missing):
                    row.batch = True
                    write(row, order)
        return
    summary.batch_online = len(online)
    names = {name for name, _ in online.values()}
    for metric in [m for m in judged if m.name in names]:
        orders: dict[str, int] = {}
        fallback = Scheduler(
            metrics=[metric], concurrency=run.concurrency, done=dict(done), listener=_Forward(write, orders)
        )
        await fallback.run(_going_online(run, metric, online, orders))


def _going_online(run: FileRun, metric: Metric, online: dict, orders: dict[str, int]):
    """The conversations whose line of `metric` goes online, read again from the input; `orders`
    learns each one's place in the selection."""
    for order, case, source in _selected(run):
        if custom_id(metric.name, case.id or "") in online:
            orders[case.id or ""] = order
            yield case, source


class _Forward(RunListener):
    """The online fallback's rows, into the batch run's writer (which counts them once), each at
    its conversation's place in `orders`."""

    def __init__(self, write: _Writer, orders: dict[str, int]):
        self.write = write
        self.orders = orders

    def row(self, row: EvaluationRow) -> None:
        self.write(row, self.orders.get(row.id, 0))


async def _collect(run: FileRun, provider: Provider, finished: list[tuple], batches: _Batches, write) -> None:
    """Rows from the batches that finished in one poll round (`finished`: (record, provider's
    record) pairs). Their results and errors files are streamed to disk and indexed by custom id;
    one pass over the input then maps each line back to its conversation, planned again. The
    lines that must go online instead (failed, not answered, or unparsable) go to `batches.online`."""
    owner = {
        cid: index for index, (batch, _) in enumerate(finished) for cid in batch.custom_ids if cid in batches.waits
    }
    if not owner:
        return  # every line was answered already (cached, resumed) or left this run's input
    judged = [m for m in run.metrics if m.calls_per_conversation]
    with contextlib.ExitStack() as files:
        try:
            results, failed = await _download(provider, finished, files, batches.scratch)
        except OSError as error:  # no room left next to the cache: download again, elsewhere
            batches.move(error.strerror or str(error))
            results, failed = await _download(provider, finished, files, batches.scratch)
        for order, case, source in _selected(run):
            for metric in judged:
                cid = custom_id(metric.name, case.id or "")
                index = owner.pop(cid, None)
                if index is None:
                    continue
                batches.waits.discard(cid)
                why = await _rows_from_line(
                    run, metric, (case, source), cid, finished[index], (results, failed), write, order
                )
                if why is not None:
                    batches.online[cid] = (metric.name, why)
            if not owner:
                break  # every line of these batches is mapped back: the rest of the input is not read


async def _download(
    provider: Provider, finished: list[tuple], files: contextlib.ExitStack, directory: Path
) -> tuple[ResultFile, ResultFile]:
    """The results and errors files of the `finished` batches, downloaded into two temporary
    files in `directory` (closed with `files`) and indexed by custom id."""
    results, failed = (ResultFile(files.enter_context(tempfile.TemporaryFile(dir=directory))) for _ in range(2))
    for _, info in finished:
        for lines, kind in ((results, "output_file_id"), (failed, "error_file_id")):
            file_id = getattr(info, kind, None)
            start = lines.handle.seek(0, 2)
            await provider.download(file_id, lines.handle)
            lines.index(start, f"batch file {file_id}")
    return results, failed


async def _rows_from_line(
    run: FileRun,
    metric: Any,
    item: tuple[ConversationalEvalTestCase, Source | None],
    cid: str,
    finished: tuple,
    lines: tuple[ResultFile, ResultFile],
    write,
    order: int,
) -> str | None:
    """Write the rows of the conversation `item` (at `order`) for `metric` from its lines (custom
    ids from `cid`) in the results or errors file (`lines`) of the batch `finished` ((record,
    provider's record)); returns None, or why the conversation goes online instead. The judging
    step takes each line's reply; what it asks next (a re-ask, a sample the server did not
    return) is sent online, unless `--batch-no-fallback`."""
    (batch, info), (results, failed) = finished, lines
    case, source = item
    judging = Judging(metric, case, source, metric.plan(case, lookup=False))  # planned again, as when it was sent
    why = take_lines(judging, cid, results, failed, f"not answered (batch {info.status})")
    if why is not None:
        return why
    if judging.outstanding:
        if run.settings.batch_settings.batch_no_fallback:
            return f"unparsable reply in the batch: {judging.still_needed()}"
        await OnlineCalls(metric.backend, metric.retry, metric.rng).judge(judging)
    for row in settled(metric, judging, batch.batch_id):
        write(row, order)
    return None


def take_lines(judging: Judging, cid: str, results: ResultFile, failed: ResultFile, unanswered: str) -> str | None:
    """Hand `judging` the replies its first requests got in a batch: each line (custom ids from
    `cid`) from `results`, its error from `failed` (`unanswered` said of a line in neither).
    Returns None, or why the conversation cannot be judged from the batch (its judge request
    failed); a failed look is a look missing, and the verdict stands without it."""
    for request in judging.requests():
        found = results.get(line_id(cid, request))
        replies = result_replies(found) if found is not None else None
        if replies is not None:
            judging.take(request, batch_reply(judging.metric, request, replies))
            continue
        error = failed.get(line_id(cid, request))
        why = unanswered if error is None and found is None else None
        why = why or f"failed in the batch: {line_error(error if error is not None else found)}"
        if request.kind not in ADDITIONS:
            return why
        judging.take(request, CallFailed(BadReply(why)))
    return None


LINE_SUFFIXES = {"look": "look", "checklist": "check"}  #: an addition's line, after its conversation's id


def line_id(cid: str, request: JudgeRequest) -> str:
    """The custom id of `request`'s line, of the conversation and metric of custom id `cid`: `cid`
    itself for the (first) judge request, with `-s<k>` for sample k where the server does not
    serve `n`, `-look` for the verdict-first look, `-check` for the checklist and `-t<n>` for the
    per-turn look at turn n (at most 64 characters: `custom_id`'s 57 and a turn below 100,000)."""
    if request.kind == "turns":
        return f"{cid}-t{request.sample}"
    if request.kind in ADDITIONS:
        return f"{cid}-{LINE_SUFFIXES[request.kind]}"
    return f"{cid}-s{request.sample}" if request.sample else cid


def request_lines(cid: str, judging: Judging) -> list[bytes]:
    """The batch input lines of what `judging` sends first (the conversation of custom id `cid`):
    each request's body as online, under its `line_id`."""
    return [request_line(line_id(cid, request), request.body) for request in judging.requests()]


def batch_reply(metric: Any, request: JudgeRequest, replies: BatchReplies) -> Reply:
    """A batch line's `replies` to `request` as the judging step takes them: at the batch price
    (null when unknown), the schema's form OpenAI's (a batch line carries it), one attempt; the
    log-probabilities they hold told once, at the run's end, as online."""
    backend = metric.backend
    if backend.logprobs is not None and request.kind not in ADDITIONS:
        backend.logprobs.heard(backend.top_logprobs(), replies.texts, replies.logprobs)
    price = getattr(backend, "batch_price", lambda usage: None)
    return Reply(
        replies.texts,
        usage=replies.usage,
        cost_usd=price(replies.usage),
        response_format="json_schema" if request.schema else None,
        logprobs=replies.logprobs,
    )


def settled(metric: Any, judging: Judging, batch_id: str) -> list[EvaluationRow]:
    """The rows `judging` came to, marked as a batch's (`batch_id`), what it says to keep cached."""
    result = judging.result()
    keep_in_cache(metric, judging, result)
    for row in result.rows:
        row.batch = True
        row.batch_id = batch_id
    return result.rows


async def import_batch_results(run: FileRun, path: str, listener: RunListener) -> RunSummary:
    """Rows from an OpenAI-format batch output file at `path` (as `vllm run-batch` writes:
    successes and errors in one file), mapped back by custom id to `run`'s conversations and
    told to `listener`. A failed or missing line is an error row; nothing is sent online. The
    file is indexed by custom id and each line read back when its conversation comes by."""
    run.judges.prepare()
    try:
        results = _open_batch_results(path)
    except BaseException:
        run.close()
        raise
    summary = RunSummary(expected_rows=run.total_rows)
    write = _Writer(summary, listener)
    try:
        for order, case, source, metric, plan, cid in pending(run, {}, lookup=False):
            for row in await _imported_rows(case, source, metric, plan, cid, results, path):
                write(row, order)
    finally:
        results.handle.close()
        run.close()
    tell_logprobs(run, listener)
    apply_gates(summary, run.settings.gate_settings)
    listener.finished(summary)
    return summary


def _open_batch_results(path: str) -> ResultFile:
    """An OpenAI-format batch output file, indexed by custom id; a bad line is an input error
    naming it, an unreadable file a configuration error."""
    try:
        results = ResultFile(open(path, "rb"))  # closed by the caller, after its last line is read
    except OSError as error:
        raise ConfigError(f"{path}: cannot read batch results: {error.strerror}") from None
    try:
        results.index(0, path)
    except OSError as error:
        results.handle.close()
        raise ConfigError(f"{path}: cannot read batch results: {error.strerror}") from None
    except BaseException:
        results.handle.close()
        raise
    return results


async def _imported_rows(
    case: ConversationalEvalTestCase, source: Source | None, metric: Metric, plan, cid, results: ResultFile, path: str
) -> list[EvaluationRow]:
    if plan is None or not isinstance(metric, RubricMetric):  # an offline metric
        return await metric.evaluate(case, source)
    judging = Judging(metric, case, source, plan)
    why = take_lines(judging, cid, results, results, "no line for it in the results")
    if why is not None:
        return error_rows(metric, case, source, "BatchLineFailed", why)
    if judging.outstanding:  # nothing is sent from an import
        return error_rows(metric, case, source, "BatchLineFailed", f"unparsable reply: {judging.still_needed()}")
    return settled(metric, judging, path)
