"""The library behind the commands: one call per command of `flowrate`, for Python users and
for the CLI alike. `evaluate_files` is `flowrate eval`: online or through provider batches,
resume, selection, gates, reports and the history, with listeners to watch it go.

Heavy pieces (LiteLLM, DuckDB, rich) are imported by the stages that need them, when they do.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from flowrate.errors import ExitCode, FlowrateError, OutputError
from flowrate.evaluation.file_run import FileRun
from flowrate.results.book import ReportBook
from flowrate.results.events import Listeners, RunListener
from flowrate.results.files import ResultsFile
from flowrate.results.summary import DryRunEstimate, RunSummary
from flowrate.settings.options import EvalSettings, in_github


class BatchesLeftRunning(FlowrateError):
    """Ctrl-C (or SIGTERM) while waiting on provider batches: they keep running at the
    provider, and a later `flowrate batch collect` or the same command collects them."""

    exit_code = ExitCode.INTERRUPTED


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
    paths: list[str],
    settings: EvalSettings,
    listeners: list[RunListener] | None = None,
    batch_command: dict | None = None,
    defer_late_errors: bool = False,
) -> Evaluation:
    """Judge the conversations in `paths` (files, directories, `-` for stdin) as `flowrate eval`
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
    paths: list[str],
    settings: EvalSettings,
    listeners: list[RunListener] | None = None,
    batch_command: dict | None = None,
) -> Evaluation:
    """`evaluate_files` for code that runs an event loop already: the same arguments, and a
    late report or history failure always kept on the result as `late_error`."""
    from flowrate.evaluation.online import judge_online
    from flowrate.evaluation.provider_batch import judge_in_batches

    run = FileRun(paths, settings)
    results = ResultsFile(settings.output, append=run.resuming)
    book = ReportBook() if settings.report_settings.wanted else None
    listener = Listeners([results, *([book] if book is not None else []), *(listeners or [])])
    try:
        if settings.batch:
            summary = await judge_in_batches(run, listener, command=batch_command)
        else:
            summary = await judge_online(run, listener)
    finally:
        results.close()
    evaluation = Evaluation(settings, summary)
    if summary.pipe_closed or (settings.batch and settings.batch_submit_only):
        return evaluation
    try:
        if book is not None:
            evaluation.reports = write_run_reports(paths, settings, book, summary)
        if settings.history:
            evaluation.history_rows_added = append_history(settings, summary.wall_time_s, listener)
    except FlowrateError as error:
        evaluation.late_error = error
    return evaluation


def write_run_reports(paths: list[str], settings: EvalSettings, book: ReportBook, summary: RunSummary) -> list[str]:
    """The reports `settings` asks for (JUnit, HTML with the transcripts read again, GitHub's
    step summary and annotations, the annotations on stdout unless rows are there), from the
    run's `book` and `summary`; returns one notice per report. A write that fails here, after
    every path was checked before the first call, is an `OutputError` (exit 4)."""
    import typer

    from flowrate.inputs.files import load_transcripts
    from flowrate.reports import write_reports

    transcripts = None
    if settings.html:
        ids = {case.id for cases in book.cases.values() for case in cases}
        transcripts = load_transcripts([path for path in paths if path != "-"], ids)
    github = in_github(settings.github)
    annotate = typer.echo if github and settings.output != "-" else None  # workflow commands go to stdout
    try:
        return write_reports(
            book,
            summary,
            junit=settings.junit,
            html=settings.html,
            github=github,
            transcripts=transcripts,
            annotate=annotate,
        )
    except OSError as error:
        where = f" {error.filename}" if error.filename else ""
        raise OutputError(f"a report could not be written{where}: {error.strerror or error}") from None


def append_history(settings: EvalSettings, wall_time_s: float, listener: RunListener) -> int | None:
    """Add the run's rows (from `settings.output`) and the run itself, started `wall_time_s`
    ago, to the history `settings.history`; returns the rows added (None when the rows went to
    stdout, which `listener` is told)."""
    from flowrate.analysis.history import connect, import_results

    if settings.output == "-":
        listener.notice("--history needs --output to be a file; the history was not updated")
        return None
    started = datetime.now(UTC) - timedelta(seconds=wall_time_s)
    return import_results(connect(settings.history), settings.output, started.replace(tzinfo=None))


def estimate_files(paths: list[str], settings: EvalSettings) -> DryRunEstimate:
    """What `flowrate eval --dry-run` prints: every prompt rendered and counted with the model's
    tokenizer, the calls, tokens and cost by the price list; nothing is sent."""
    return FileRun(paths, settings).estimate()


def export_requests(paths: list[str], settings: EvalSettings, path: str) -> int:
    """Write the OpenAI-format batch request file of the run to `path` (`--batch-export`);
    returns the number of requests. Nothing is sent."""
    from flowrate.evaluation.provider_batch import export_batch

    return export_batch(FileRun(paths, settings), path)


def collect_batches(
    paths: list[str], settings: EvalSettings, only: set[str] | None, listeners: list[RunListener] | None = None
) -> RunSummary:
    """Collect the finished provider batches of a run submitted earlier (with its `paths` and
    `settings`, as recorded), restricted to the ids in `only` when given; nothing new is
    submitted and a batch still running is listed in `summary.still_running`."""
    from flowrate.evaluation.provider_batch import judge_in_batches

    run = FileRun(paths, settings)
    results = ResultsFile(settings.output, append=run.resuming)
    try:
        return asyncio.run(judge_in_batches(run, Listeners([results, *(listeners or [])]), submit=False, only=only))
    finally:
        results.close()


def import_batch_file(paths: list[str], settings: EvalSettings, results_file: Path) -> RunSummary:
    """Rows from an OpenAI-format batch output file (`vllm run-batch`), mapped back to the
    conversations in `paths` planned under `settings`, written to `settings.output`."""
    from flowrate.evaluation.provider_batch import import_batch_results

    run = FileRun(paths, settings)
    results = ResultsFile(settings.output, append=False)
    try:
        return asyncio.run(import_batch_results(run, str(results_file), Listeners([results])))
    finally:
        results.close()
