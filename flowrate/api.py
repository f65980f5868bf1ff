"""The library behind the commands: one call per command of `flowrate`, for Python users and
for the CLI alike. `evaluate_files` is `flowrate eval`: online or through provider batches,
resume, selection, gates, reports and the history, with listeners to watch it go.

Heavy pieces (LiteLLM, DuckDB, rich) are imported by the stages that need them, when they do.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flowrate.analysis.judged.alignment import Alignment
from flowrate.analysis.judged.bench import Judge
from flowrate.errors import ConfigError, ExitCode, FlowrateError, InputError, OutputError, ReportsNotWritten
from flowrate.evaluation.file_run import FileRun, JudgedBefore
from flowrate.inputs.files import Given, InMemory
from flowrate.judge.limits import UNREACHABLE_AFTER as UNREACHABLE_AFTER  # the failures in a row that stop a run
from flowrate.results.book import ReportBook
from flowrate.results.events import Listeners, RunListener
from flowrate.results.files import ResultsFile, read_rows
from flowrate.results.otel_events import OtelEndpoint, OtelFile
from flowrate.results.summary import DryRunEstimate, RunSummary
from flowrate.results.write_back import WriteBack, writers_for
from flowrate.settings.options import EvalSettings

if TYPE_CHECKING:
    from flowrate.analysis.judge_bench import BenchEstimate, BenchReport, BenchSet
    from flowrate.analysis.labels import Label
    from flowrate.analysis.top_issues import FailureMode
    from flowrate.inputs.redaction.redactor import Redactor
    from flowrate.judge.batch_api import BatchRecord, BatchState
    from flowrate.judge.retry import RetryPolicy
    from flowrate.results.rows import EvaluationRow


class BatchesLeftRunning(FlowrateError):
    """Ctrl-C (or SIGTERM) while waiting on provider batches: they keep running at the
    provider, and a later `flowrate batch collect` or the same command collects them."""

    exit_code = ExitCode.INTERRUPTED


class HistoryNotUpdated(OutputError):
    """The run's rows could not be added to the history after judging (another process kept it,
    the disk is full): they are kept in `output`, and `flowrate history import output
    --history history` adds them later (each row once)."""

    def __init__(self, message: str, output: str, history: str):
        super().__init__(message)
        self.output = output
        self.history = history


@dataclass
class Evaluation:
    """What `evaluate_files` did: the run's `summary` (gates applied), the notices of the
    reports it wrote, how many rows it added to the history (None: no history asked), and a
    report or history write that failed after judging (`late_error`, raised by the caller once
    the summary is shown: the rows are in the results file already)."""

    settings: EvalSettings
    summary: RunSummary
    reports: list[str] = field(default_factory=list)
    history_rows_added: int | None = None
    late_error: FlowrateError | None = None

    @property
    def exit_code(self) -> ExitCode:
        """The status `flowrate eval` exits with (submit-only batch runs: 0)."""
        if self.settings.batch and self.settings.batch_submit_only and not self.summary.pipe_closed:
            return ExitCode.OK
        return self.summary.exit_code


def evaluate_files(
    paths: Sequence[Given],
    settings: EvalSettings,
    listeners: list[RunListener] | None = None,
    batch_command: dict[str, Any] | None = None,
    defer_late_errors: bool = False,
) -> Evaluation:
    """Judge the conversations in `paths` (files, directories, `-` for stdin, records in memory as
    `inputs.files.InMemory`) as `flowrate eval`
    does, under `settings` (`EvalSettings`, or `resolve_settings` for the CLI's layering).

    Rows go to `settings.output` as they come, and to each of `listeners` (progress, your own
    collector) after it. Online or through the provider's Batch API (`settings.batch`; then
    `batch_command` is recorded so `flowrate batch collect` can finish it), with resume,
    selection, budgets and gates; then the reports (`junit`, `html`, GitHub) and the history.
    Raises `FlowrateError` (an `InputError`, `ConfigError`, `JudgeAccessError`, `OutputError`)
    for what a user can fix, each with its exit code; a run that writes no row leaves an
    existing output as it was. A report or history write that fails after judging raises
    `OutputError` too, unless `defer_late_errors` keeps it on the result (the CLI shows the
    summary first)."""
    try:
        evaluation = asyncio.run(evaluate_files_async(paths, settings, listeners, batch_command))
    except KeyboardInterrupt:  # online runs handle Ctrl-C themselves; this is a batch run's wait
        if settings.batch:
            raise BatchesLeftRunning(
                "interrupted while polling: the batches keep running at the provider (nothing was cancelled)"
            ) from None
        raise
    if evaluation.late_error is not None and not defer_late_errors:
        raise evaluation.late_error
    return evaluation


async def evaluate_files_async(
    paths: Sequence[Given],
    settings: EvalSettings,
    listeners: list[RunListener] | None = None,
    batch_command: dict[str, Any] | None = None,
    ray_processor: Any = None,
) -> Evaluation:
    """`evaluate_files` for code that runs an event loop already: the same arguments, and a
    late report or history failure always kept on the result as `late_error`. `ray_processor`
    replaces the HTTP processor of `--engine ray` (`ray_engine.vllm_processor`, say)."""
    from flowrate.evaluation.engines import engine_for

    check_engine(settings)
    writers = writers_for(paths) if settings.write_back else {}
    run = FileRun(paths, settings, judged_in_history(settings))
    try:
        check_history(settings)
    except BaseException:
        run.close()
        raise
    results = ResultsFile(settings.output, append=run.outputs.resuming)
    book = ReportBook() if settings.report_settings.wanted else None
    destinations = verdict_destinations(settings, writers)
    listener = Listeners([results, *([book] if book is not None else []), *destinations, *(listeners or [])])
    try:
        summary = await engine_for(settings, batch_command, ray_processor)(run, listener)
    finally:
        results.close()
        for destination in destinations:
            destination.close()
    evaluation = Evaluation(settings, summary)
    tell_destinations(destinations, evaluation)
    if summary.pipe_closed or (settings.batch and settings.batch_submit_only):
        return evaluation
    write_after_run(paths, settings, evaluation, book, listener)
    return evaluation


def verdict_destinations(settings: EvalSettings, writers: dict[str, Any]) -> list[Any]:
    """The listeners that send each verdict beyond the results file: `--write-back` through the
    `writers` of the inputs, `--otel-file` and `--otel-endpoint` as OpenTelemetry events."""
    chosen = settings.platform_settings
    destinations: list[Any] = []
    if chosen.write_back:
        destinations.append(WriteBack(writers, settings.output, resume=settings.resume or settings.retry_errors))
    if chosen.otel_file:
        destinations.append(OtelFile(chosen.otel_file))
    if chosen.otel_endpoint:
        destinations.append(OtelEndpoint(chosen.otel_endpoint))
    return destinations


def tell_destinations(destinations: list[Any], evaluation: Evaluation) -> None:
    """What became of the verdicts sent beyond the results file, as the run's last notices; a
    write-back refused is the run's `late_error` (exit 4: the rows are kept, `--resume` resends)."""
    for destination in destinations:
        if isinstance(destination, WriteBack):
            notices, error = destination.outcome()
            evaluation.reports.extend(notices)
            if error is not None and evaluation.late_error is None:
                evaluation.late_error = error
        elif isinstance(destination, OtelEndpoint):
            evaluation.reports.extend(destination.outcome())
        elif isinstance(destination, OtelFile) and destination.events_written:
            evaluation.reports.append(
                f"--otel-file: {destination.events_written} evaluation event(s) in {destination.path}"
            )


def write_after_run(
    paths: Sequence[Given],
    settings: EvalSettings,
    evaluation: Evaluation,
    book: ReportBook | None,
    listener: RunListener,
) -> None:
    """The Parquet copy, the reports (from `book`) and the history of a run judged into
    `evaluation`, each tried whatever became of the others (they may be on other disks). The
    first failure is `evaluation.late_error` (a history's first: it carries the command that
    adds the rows later); any other is one more notice."""
    failures: list[FlowrateError] = []

    def attempt(step: Callable[[], None]) -> None:
        try:
            step()
        except FlowrateError as error:
            failures.append(error)

    if parquet := settings.output_parquet:
        attempt(lambda: evaluation.reports.append(_parquet_copy(settings.output, parquet)))
    if book is not None:

        def reports() -> None:
            try:
                evaluation.reports.extend(write_run_reports(paths, settings, book, evaluation.summary))
            except ReportsNotWritten as error:  # those written beside the ones that failed are named too
                evaluation.reports.extend(error.written)
                raise

        attempt(reports)
    if settings.history:

        def history() -> None:
            evaluation.history_rows_added = append_history(settings, evaluation.summary.wall_time_s, listener)

        attempt(history)
    failures.sort(key=lambda error: not isinstance(error, HistoryNotUpdated))
    if failures:
        evaluation.late_error = failures[0]
        evaluation.reports.extend(f"error: {error}" for error in failures[1:])


def _parquet_copy(output: str, parquet: str) -> str:
    """Write `--output-parquet` `parquet` from the results file `output` (its complete rows:
    `complete_results`); returns its notice."""
    from flowrate.results.files import complete_results
    from flowrate.results.parquet import write_parquet

    with complete_results(Path(output)) as rows_file:
        rows = write_parquet(str(rows_file), parquet)
    return f"Parquet rows: {parquet} ({rows} rows)"


def evaluate_dataset(
    dataset: Any,
    settings: EvalSettings,
    listeners: list[RunListener] | None = None,
    defer_late_errors: bool = False,
    processor: Any = None,
) -> Evaluation:
    """`evaluate_files` on the conversations of a `ray.data.Dataset` (one per row, in the turn or
    the OpenAI-messages shape, as a JSONL record has them; give each an `id`), judged on Ray Data
    as `--engine ray` judges (`settings.engine` is set to "ray"): the same selection, cache, budget,
    resume, gates, reports and history, and the same rows. The dataset is materialized once (its
    blocks stay in Ray's object store) and its rows read by the file readers from there, with no
    file staged: a row's `source` is `<dataset>` and its number. `processor` replaces the HTTP
    processor: `ray_engine.vllm_processor(settings.judge_settings, model_source, actors)` runs vLLM
    on the workers' GPUs."""
    from flowrate.evaluation.ray_engine import plain

    materialized = dataset.materialize()
    rows = InMemory("<dataset>", lambda: (plain(dict(row)) for row in materialized.iter_rows()))
    ray_settings = settings.model_copy(update={"engine": "ray"})
    evaluation = asyncio.run(evaluate_files_async([rows], ray_settings, listeners, ray_processor=processor))
    if evaluation.late_error is not None and not defer_late_errors:
        raise evaluation.late_error
    return evaluation


def check_engine(settings: EvalSettings) -> None:
    """The engine options make sense together, before anything is read: `--engine ray` is not
    `--batch`, and `--output-parquet` needs `--output` to be a file it can be written from
    (`FileRun` checks the Parquet file itself, with every other written path)."""
    if settings.engine == "ray" and settings.batch:
        raise ConfigError("--engine ray and --batch are two ways of sending the requests; choose one")
    if settings.ray_address and settings.engine != "ray":
        raise ConfigError("--ray-address is for --engine ray")
    if settings.output_parquet and settings.output == "-":
        raise ConfigError("--output-parquet needs --output to be a file")


def write_run_reports(
    paths: Sequence[Given], settings: EvalSettings, book: ReportBook, summary: RunSummary
) -> list[str]:
    """The reports `settings` asks for (JUnit, HTML with the transcripts read again, GitHub's
    step summary and annotations, the annotations on stdout unless rows are there), from the
    run's `book` and `summary`; returns one notice per report. Reports that fail here, after
    every path was checked before the first call, are one `ReportsNotWritten` (exit 4) naming them."""
    import typer

    from flowrate.inputs.files import load_transcripts
    from flowrate.inputs.redaction.redactor import as_judged, redactor_of
    from flowrate.reports import write_reports

    transcripts = None
    if settings.html:
        ids = {case.id for cases in book.cases.values() for case in cases}
        redactor = redactor_of(settings.redaction_settings)
        found = load_transcripts(
            [path for path in paths if path != "-"], ids, None if redactor is None else redactor.redact_id
        )
        # read again from the inputs: by the ids the rows hold, redacted as the judge saw them
        transcripts = as_judged(found, ids, redactor, settings.keep_originals)
    github = settings.report_settings.for_github
    annotate = typer.echo if github and settings.output != "-" else None  # workflow commands go to stdout
    return write_reports(
        book,
        summary,
        junit=settings.junit,
        html=settings.html,
        github=github,
        transcripts=transcripts,
        annotate=annotate,
    )


def check_history(settings: EvalSettings) -> None:
    """Before the first call: the history `settings.history`, when it exists, is a DuckDB file
    this process can open (waiting, as `history.writing` does, while another one holds it), so
    that a run is not paid for to find it cannot be stored. Raises `ConfigError` (exit 2)."""
    if not settings.history or settings.output == "-" or not Path(settings.history).expanduser().exists():
        return
    from flowrate.analysis.history import check_history_file, writing

    check_history_file(settings.history)
    with writing(settings.history):
        pass


def judged_in_history(settings: EvalSettings) -> JudgedBefore | None:
    """What `FileRun` leaves out as judged already: the conversations the history of `settings`
    holds rows of with the same turns, metric, model and rubric version (None: no history,
    or none in use because the rows go to stdout)."""
    history = settings.history
    if not history or settings.output == "-":
        return None

    def judged(identities: list[tuple[str, str, str]]) -> set[tuple[str, str]]:
        from flowrate.analysis.history import judged_conversations

        return judged_conversations(history, identities)

    return judged


def append_history(settings: EvalSettings, wall_time_s: float, listener: RunListener) -> int | None:
    """Add the run's rows (from `settings.output`) and the run itself, started `wall_time_s`
    ago, to the history `settings.history`, in one short transaction (waiting while another
    process, the review app, holds the file); returns the rows added (0 when the run wrote no
    row, and the history is left as it was; None when no history is
    asked, or when the rows went to stdout, which `listener` is told). Raises `HistoryNotUpdated` (exit 4) when they could not
    be added: none of them then was."""
    from flowrate.analysis.history import import_results, writing

    history = settings.history
    if history is None:
        return None
    if settings.output == "-":
        listener.notice("--history needs --output to be a file; the history was not updated")
        return None
    if not Path(settings.output).expanduser().exists():  # a run that wrote no row (--allow-empty) has none to add
        return 0
    started = datetime.now(UTC) - timedelta(seconds=wall_time_s)
    try:
        with writing(history) as connection:
            return import_results(connection, settings.output, started.replace(tzinfo=None))
    except FlowrateError as error:
        raise HistoryNotUpdated(
            f"the history {history} was not updated: {error}; the rows are kept in {settings.output}",
            settings.output,
            history,
        ) from None


@dataclass
class Redacted:
    """What `redact_files` wrote: the conversations, the identifiers replaced by type over all of
    them, and the notice of the detectors that ran."""

    conversations: int = 0
    redactions: dict[str, int] = field(default_factory=dict)
    detectors: str = ""


def redact_files(paths: list[str], output: str, settings: EvalSettings) -> Redacted:
    """`flowrate redact`: every conversation of `paths`, redacted as `flowrate eval --redact` would
    send it (the rules and regions of `settings`), written as JSONL to `output` (`-`: stdout), each
    with its `redactions`; nothing is judged. The input is checked first (`InputError`, exit 2, on
    a problem or on no conversation); `output` is replaced only once every conversation is written."""
    import orjson

    from flowrate.inputs.files import InputSet, check_apart, iter_cases
    from flowrate.inputs.redaction.redactor import detectors_ran, redactor_of
    from flowrate.inputs.selection import raise_for_problems, scan
    from flowrate.results.files import check_output_path

    check_output_path(output)
    check_apart([("--output", output)], paths, of="redact")
    redactor = redactor_of(settings.model_copy(update={"redact": True}).redaction_settings)
    assert redactor is not None
    inputs = InputSet(paths, output=output, format=settings.format, conversation_key=settings.conversation_key)
    try:
        report = scan(inputs)
        raise_for_problems(report, headline="problem(s) in the input")
        if report.valid == 0:
            named = ", ".join(paths)
            raise InputError([f"{named}: no conversation to redact"], headline="nothing to redact", counted=False)
        done = Redacted(detectors=detectors_ran(redactor))
        totals: dict[str, int] = {}
        with _replaced_at_end(output) as out:
            for record in iter_cases(inputs):
                case = redactor.redact(record.case)  # type: ignore[arg-type]
                shown = {"id": case.id, **case.model_dump(mode="json", exclude_none=True)}  # the id first, as read
                out.write(orjson.dumps(shown) + b"\n")
                done.conversations += 1
                for kind, count in (case.redactions or {}).items():
                    totals[kind] = totals.get(kind, 0) + count
        done.redactions = dict(sorted(totals.items()))
        return done
    finally:
        inputs.close()


def _replaced_at_end(output: str) -> Any:
    """A binary file to write `output` through: stdout for `-`, else a partial file beside it that
    replaces it once closed without an error (a failed write leaves an existing output as it was)."""
    import contextlib
    import sys

    @contextlib.contextmanager
    def opened() -> Any:
        if output == "-":
            yield sys.stdout.buffer
            sys.stdout.buffer.flush()
            return
        target = Path(output).expanduser()
        partial = target.with_name(target.name + ".partial")
        try:
            with partial.open("wb") as handle:
                yield handle
            partial.replace(target)
        except OSError as error:
            partial.unlink(missing_ok=True)
            raise OutputError(f"--output {output}: cannot be written ({error.strerror or error})") from None
        except BaseException:
            partial.unlink(missing_ok=True)
            raise

    return opened()


def estimate_files(paths: list[str], settings: EvalSettings) -> DryRunEstimate:
    """What `flowrate eval --dry-run` prints: every prompt rendered and counted with the model's
    tokenizer, the calls, tokens and cost by the price list; nothing is sent."""
    return FileRun(paths, settings, judged_in_history(settings)).estimate()


def export_requests(paths: list[str], settings: EvalSettings, path: str) -> int:
    """Write the OpenAI-format batch request file of the run to `path` (`--batch-export`);
    returns the number of requests. Nothing is sent."""
    from flowrate.evaluation.provider_batch import export_batch

    return export_batch(FileRun(paths, settings), path)


def batch_retry(max_retries: int | None, backoff: float | None, backoff_max: float | None) -> RetryPolicy:
    """How hard `batch status` and `batch cancel` try each call: `max_retries`, `backoff` and
    `backoff_max` as given, else eval's defaults (`settings.groups.RetryOptions`)."""
    from flowrate.judge.retry import RetryPolicy

    given = {"max_retries": max_retries, "backoff": backoff, "backoff_max": backoff_max}
    return RetryPolicy(**{name: value for name, value in given.items() if value is not None})


def recorded_batches(
    cache_dir: str | None, ids: list[str] | None = None, every: bool = False
) -> tuple[BatchState, list[BatchRecord]]:
    """The batch state of `cache_dir` (default: the user cache folder), created by none of the
    batch commands (no state yet reads as no batch recorded), and its batches that `ids` name, in
    that order (every batch of an id two endpoints gave); without `ids`, every recorded batch with
    `every`, else those not collected yet. An id never recorded is a `ConfigError` (exit 2) naming
    it and the most recent recorded ones."""
    from flowrate.judge.batch_api import BatchState
    from flowrate.settings.groups import cache_folder

    state = BatchState(cache_folder(cache_dir), create=False)
    if not ids:
        return state, state.all() if every else state.uncollected()
    batches = state.all()
    recorded = {batch.batch_id: batch for batch in batches}
    unknown = [batch_id for batch_id in dict.fromkeys(ids) if batch_id not in recorded]
    if unknown:
        known = list(reversed(recorded))  # newest first
        listed = ", ".join(known[:5]) + (f" and {len(known) - 5} more" if len(known) > 5 else "")
        where = (
            f"recorded: {listed} (flowrate batch status --all lists them)"
            if known
            else f"no batch is recorded in {state.path.parent}"
        )
        raise ConfigError(f"unknown batch id{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; {where}")
    return state, [batch for batch_id in dict.fromkeys(ids) for batch in batches if batch.batch_id == batch_id]


def batch_statuses(
    batches: list[BatchRecord], retry: RetryPolicy, tell: Callable[[BatchRecord, Any | None], None]
) -> None:
    """Ask the provider the status of each of `batches` (trying each call as `retry` says) and
    `tell` it, batch by batch, with the provider's batch object (None: collected already, not asked)."""
    from flowrate.judge.batch_api import Provider

    async def ask() -> None:
        for batch in batches:
            if batch.collected:
                tell(batch, None)
            else:
                tell(batch, await Provider(batch.provider, batch.api_base, retry=retry).retrieve(batch.batch_id))

    asyncio.run(ask())


def cancel_batches(
    state: BatchState, batches: list[BatchRecord], retry: RetryPolicy, tell: Callable[[BatchRecord, str, bool], None]
) -> None:
    """Cancel `batches` (of `state`) at the provider, trying each call as `retry` says; a batch
    collected or finished already is left as it is. `tell` hears each batch, batch by batch, with
    its status and whether it was cancelled now; `state` keeps the status."""
    from flowrate.judge.batch_api import TERMINAL, Provider

    async def cancel() -> None:
        for batch in batches:
            if batch.collected:
                tell(batch, batch.status, False)
                continue
            provider = Provider(batch.provider, batch.api_base, retry=retry)
            info = await provider.retrieve(batch.batch_id)
            cancelled = info.status not in TERMINAL
            if cancelled:
                info = await provider.cancel(batch.batch_id)
            tell(batch, info.status, cancelled)
            state.mark(batch, info.status)

    asyncio.run(cancel())


def recorded_settings(batch: BatchRecord) -> tuple[list[str], EvalSettings]:
    """The paths and settings the command that submitted `batch` ran with, to collect it as that
    command would."""
    return batch.command["paths"], EvalSettings.model_validate(
        {**batch.command["settings"], "batch_submit_only": False}
    )


def collect_batches(
    paths: list[str], settings: EvalSettings, only: set[str] | None, listeners: list[RunListener] | None = None
) -> RunSummary:
    """Collect the finished provider batches of a run submitted earlier (with its `paths` and
    `settings`, as recorded), restricted to the ids in `only` when given; nothing new is
    submitted and a batch still running is listed in `summary.still_running`."""
    from flowrate.evaluation.engines import run_engine
    from flowrate.evaluation.provider_batch import Batches

    run = FileRun(paths, settings, judged_in_history(settings))
    results = ResultsFile(settings.output, append=run.outputs.resuming)
    try:
        listener = Listeners([results, *(listeners or [])])
        return asyncio.run(run_engine(Batches(submit=False, only=only), run, listener))
    finally:
        results.close()


def import_batch_file(
    paths: list[str], settings: EvalSettings, results_file: Path, listeners: list[RunListener] | None = None
) -> RunSummary:
    """Rows from an OpenAI-format batch output file (`vllm run-batch`), mapped back to the
    conversations in `paths` planned under `settings`, written to `settings.output`, which may
    not be `results_file` (`check_apart`: writing the rows would empty it before it is read);
    `listeners` hear the rows and the notices too."""
    from flowrate.evaluation.provider_batch import import_batch_results
    from flowrate.inputs.files import check_apart

    check_apart([("--output", settings.output)], [results_file], of="batch import-results")
    run = FileRun(paths, settings)
    results = ResultsFile(settings.output, append=False)
    try:
        return asyncio.run(import_batch_results(run, str(results_file), Listeners([results, *(listeners or [])])))
    finally:
        results.close()


def _evaluate_deferred(paths: list[str], settings: EvalSettings) -> Evaluation:
    """`evaluate_files` with a late report or history failure kept on the result."""
    return evaluate_files(paths, settings, defer_late_errors=True)


def bench_judges(
    judges: list[Judge],
    sets: list[BenchSet],
    settings: EvalSettings,
    data_dir: str | None = None,
    work_dir: str = "flowrate-bench",
    stability_conversations: int = 0,
    evaluate: Callable[[list[str], EvalSettings], Evaluation] | None = None,
    estimated: Callable[[BenchEstimate], None] | None = None,
) -> BenchReport:
    """`flowrate judge-bench`: `analysis.judged.bench.bench_judges` with the same arguments
    (`judges`, `sets`, `settings`, `data_dir`, `work_dir`, `stability_conversations`,
    `estimated`), each run through `evaluate` (default `evaluate_files`)."""
    from flowrate.analysis.judged.bench import bench_judges as bench

    return bench(
        judges,
        sets,
        settings,
        data_dir,
        work_dir,
        stability_conversations,
        evaluate=evaluate or _evaluate_deferred,
        estimated=estimated,
    )


def align_rubric(
    conversations: list[str],
    rows: list[EvaluationRow],
    labels: list[Label],
    metric: str,
    output: str,
    settings: EvalSettings | None = None,
    evaluate: Callable[[list[str], EvalSettings], Evaluation] | None = None,
    **options: Any,
) -> Alignment:
    """`flowrate align`: `analysis.judged.alignment.align_rubric` with the same arguments
    (`conversations`, `rows`, `labels`, `metric`, `output`, `settings` and its keyword `options`:
    `rubric_path`, `comments`, `holdout`, `seed`, `budget_tokens`, `max_examples`, `work_dir`),
    the held-out runs through `evaluate` (default `evaluate_files`)."""
    from flowrate.analysis.judged.alignment import align_rubric as align

    return align(
        conversations, rows, labels, metric, output, settings, evaluate=evaluate or _evaluate_deferred, **options
    )


def top_issues(
    paths: list[str] | None = None,
    history: str | None = None,
    *,
    by: str = "week",
    date: str = "evaluated",
    growth: float = 0.05,
    metric: str | None = None,
    name_with_judge: EvalSettings | None = None,
) -> list[FailureMode]:
    """`flowrate top-issues`: the failure modes (`analysis.top_issues.FailureMode`) of the
    results files `paths`, or else of the history file `history`, ranked by severity then
    conversations, each with its trend per `by` period (day, week or month) of `date`
    (evaluated or chat), flagged growing past `growth`; `metric` keeps one metric (or a suite).
    With `name_with_judge`, the settings of a judge (model, api_base, max_cost, …) that names
    and merges the modes in one call. For rows already in memory, `analysis.top_issues.top_issues(rows)`."""
    from flowrate.analysis.top_issues import load_top_issues

    run = load_top_issues(paths, history, by, date, growth, metric)
    modes = run.modes()
    if name_with_judge is None:
        return modes
    from flowrate.analysis.judged.mode_naming import name_top_issues

    return name_top_issues(run, modes, name_with_judge)[0]


def cache_stats(cache_dir: str | None) -> dict[str, Any]:
    """`flowrate cache stats`: the entries per model, the bytes on disk and the path of the
    response cache in `cache_dir` (default: the user cache folder, which may not exist yet; a
    `cache_dir` named must exist)."""
    from flowrate.judge.cache import read_stats
    from flowrate.settings.groups import cache_folder

    return read_stats(cache_folder(cache_dir), must_exist=cache_dir is not None)


def clear_cache(cache_dir: str | None) -> int:
    """`flowrate cache clear`: remove every reply of the response cache in `cache_dir`
    (default: the user cache folder); returns how many were removed."""
    from flowrate.judge.cache import ResponseCache
    from flowrate.settings.groups import cache_folder

    return ResponseCache(cache_folder(cache_dir)).clear()


def merge_files(paths: list[str], output: str, settings: EvalSettings, allow_empty: bool = False) -> RunSummary:
    """`flowrate merge`: the results files of the shards of one run, `paths`, joined into
    `output` (`-`: stdout) and one summary, the gates of `settings` applied; files with no row
    are an input error unless `allow_empty`."""
    from flowrate.results.gates import apply_gates
    from flowrate.results.merge import merge_results

    summary = merge_results(paths, output, allow_empty=allow_empty)
    apply_gates(summary, settings.gate_settings)
    return summary


def write_report(
    paths: list[str],
    html: str,
    inputs: list[str] | None = None,
    redactor: Redactor | None = None,
    originals: bool = False,
) -> tuple[int, int]:
    """`flowrate report`: a self-contained HTML page at `html` of the results files `paths` (the
    totals, a table of rows, and the transcripts read from `inputs`, the conversation files, those
    whose rows were redacted found by their redacted ids and redacted again by `redactor`, or shown
    as read with `originals`; None: all shown as read). A transcript `redactor` cannot redact as
    its run did (`shown_as_judged`: the run's `redact_rules` not given) is left out. Returns the
    rows shown and the transcripts left out. A page that cannot be written is a `ConfigError`
    naming `--html`."""
    from flowrate.inputs.files import check_apart, load_transcripts
    from flowrate.inputs.redaction.redactor import shown_as_judged
    from flowrate.reports.html import write_html

    book, summary = ReportBook(), RunSummary()
    recorded: dict[str, tuple[dict[str, int], str | None]] = {}  # the redacted rows' redactions, by id
    try:
        check_apart([("--html", html)], [*paths, *(inputs or [])], of="report")
        for path in paths:
            for order, row in enumerate(read_rows(Path(path)), start=1):
                book.add(row)
                summary.add(row, order)
                if row.redactions is not None:
                    recorded[row.id] = (row.redactions, row.redacted_by)
        ids = {case.id for cases in book.cases.values() for case in cases}
        found = load_transcripts(inputs or [], ids, None if redactor is None else redactor.redact_id)
        shown, withheld = shown_as_judged(found, recorded, redactor, originals)
        write_html(html, book, summary, shown)
    except OSError as error:
        raise ConfigError(f"--html {html}: cannot be written: {error.strerror}") from None
    return sum(stats.rows for stats in summary.metrics.values()), len(withheld)
