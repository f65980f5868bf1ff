"""The library behind the commands: one call per command of `flowrate`, for Python users and
for the CLI alike. `evaluate_files` is `flowrate eval`: online or through provider batches,
resume, selection, gates, reports and the history, with listeners to watch it go.

Heavy pieces (LiteLLM, DuckDB, rich) are imported by the stages that need them, when they do.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from flowrate.errors import ExitCode, FlowrateError, OutputError
from flowrate.evaluation.file_run import FileRun
from flowrate.results.book import ReportBook
from flowrate.results.events import Listeners, RunListener
from flowrate.results.files import ResultsFile, read_rows
from flowrate.results.summary import DryRunEstimate, RunSummary
from flowrate.settings.options import EvalSettings, in_github

if TYPE_CHECKING:
    from flowrate.analysis.judge_bench import BenchEstimate, BenchReport, BenchSet


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


@dataclass(frozen=True)
class Judge:
    """A candidate judge of `bench_judges`: a model, and the server it is at (None: its provider)."""

    model: str
    api_base: str | None = None


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
    """`flowrate judge-bench`: each of `judges` judges each of `sets` (`BenchSet`s, read from
    `data_dir` or, for the user's own labels, from their path) as `flowrate eval` would under
    `settings` (its limit, concurrency, retries, cache and budget), and is scored against the
    set's human label with the agreement statistics and their intervals.

    The rows of each judge and set go to `work_dir/JUDGE/SET.jsonl`. The whole benchmark is
    estimated first (calls the cache does not answer, and their cost) and `estimated` is told
    before any call; `settings.max_cost` then bounds the spend of all runs together. With
    `stability_conversations` N, the first N conversations of each set are judged twice more
    without the cache, and the share given the same verdict every time is reported.
    `evaluate` runs one evaluation (default `evaluate_files`; the CLI's shows progress).
    Stops after a run Ctrl-C interrupted, with `interrupted` set on the report."""
    from importlib.metadata import version

    from flowrate.analysis.agreement import labels_named
    from flowrate.analysis.judge_bench import (
        STABILITY_RUNS,
        BenchEstimate,
        BenchReport,
        bench_score,
        set_file,
        slug,
        stability,
    )

    def this_runs_rows(run: Evaluation, output: str) -> list:
        """The rows a run wrote: none when it judged nothing (an earlier benchmark's file is then
        left as it was, and is not this run's)."""
        return list(read_rows(Path(output))) if run.summary.rows_written else []

    evaluate = evaluate or (lambda paths, run_settings: evaluate_files(paths, run_settings, defer_late_errors=True))
    given = settings.model_dump(exclude_unset=True)
    named = {bench.name: bench for bench in sets}
    files = {bench.name: str(set_file(bench, data_dir)) for bench in sets}
    labels = {bench.name: labels_named([files[bench.name]], bench.label) for bench in sets}

    def settings_for(judge: Judge, bench: BenchSet, output: str, **update) -> EvalSettings:
        run = {"model": judge.model, "api_base": judge.api_base, "metric": [bench.metric], "cut_logs": bench.cut_logs}
        limits = [count for count in (settings.limit, bench.limit, update.pop("limit", None)) if count]
        fixed = {"output": output, "skip_invalid": True, "limit": min(limits) if limits else None}
        return EvalSettings(**(given | run | fixed | update))

    folders: dict[Judge, str] = {}
    for judge in judges:  # two judges whose names make one file name get one folder each
        name = slug(judge.model)
        folders[judge] = name if name not in folders.values() else f"{name}-{len(folders) + 1}"
    outputs = {
        (judge, bench.name): str(Path(work_dir) / folders[judge] / f"{bench.name}.jsonl")
        for judge in judges
        for bench in sets
    }
    estimate = BenchEstimate()
    estimated_runs: dict[tuple, int] = {}  # a set with another's file and metric is answered by the cache
    selected: dict[tuple[Judge, str], int] = {}
    for (judge, name), output in outputs.items():
        bench = named[name]
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        same = (judge, files[name], bench.metric, bench.cut_logs)
        if same in estimated_runs and not settings.no_cache:
            selected[judge, name] = estimated_runs[same]
            estimate.conversations += estimated_runs[same]
            estimate.cached += estimated_runs[same]
            continue
        guess = estimate_files([files[name]], settings_for(judge, bench, output, max_cost=None))
        estimated_runs[same] = selected[judge, name] = guess.conversations
        estimate.conversations += guess.conversations
        estimate.cached += guess.cached
        estimate.calls += guess.calls
        if estimate.cost_usd is not None:
            estimate.cost_usd = None if guess.cost_usd is None else estimate.cost_usd + guess.cost_usd
    if estimated is not None:
        estimated(estimate)
    report = BenchReport(
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        flowrate_version=version("flowrate"),
        judges=[judge.model for judge in judges],
        estimate=estimate,
    )
    spent_usd = 0.0

    def budget_left() -> float | None:
        """What `settings.max_cost` leaves for the next run (None: no budget)."""
        return None if settings.max_cost is None else max(settings.max_cost - spent_usd, 0.0)

    for (judge, name), output in outputs.items():
        bench = named[name]
        run = evaluate([files[name]], settings_for(judge, bench, output, max_cost=budget_left()))
        spent_usd += run.summary.run_cost_usd
        rows = this_runs_rows(run, output)
        score = bench_score(judge.model, bench, rows, labels[name], run.summary, output, selected[judge, name])
        if run.summary.interrupted:
            report.scores.append(score)
            report.interrupted = True
            return report
        if stability_conversations:
            reruns = [rows]
            for number in range(1, STABILITY_RUNS):
                again = output.removesuffix(".jsonl") + f".rerun{number}.jsonl"
                rerun = evaluate(
                    [files[name]],
                    settings_for(
                        judge, bench, again, max_cost=budget_left(), limit=stability_conversations, no_cache=True
                    ),
                )
                spent_usd += rerun.summary.run_cost_usd
                reruns.append(this_runs_rows(rerun, again))
                if rerun.summary.interrupted:
                    report.interrupted = True
                    break
            first = {row.id for row in reruns[1] if row.metric == bench.row}
            reruns[0] = [row for row in rows if row.id in first]
            score.stability = stability(reruns, bench.row)
        report.scores.append(score)
        if report.interrupted:
            return report
    return report
