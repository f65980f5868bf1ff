"""`flowrate eval`."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from flowrate.cli.app import app
from flowrate.cli.common import (
    AllowEmptyOption,
    ApiBaseOption,
    BackoffMaxOption,
    BackoffOption,
    CacheDirOption,
    ConcurrencyOption,
    ConfigOption,
    ExcludeOption,
    HistoryOption,
    LanguageOption,
    LimitOption,
    MaxFailuresOption,
    MaxInputTokensOption,
    MaxRetriesOption,
    MetricOption,
    MinMeanScoreOption,
    MinPassRateOption,
    MinWordsOption,
    ModelOption,
    NoCacheOption,
    OnlyOption,
    OutputOption,
    Paths,
    RpmOption,
    RubricOption,
    SampleOption,
    SampleSeedOption,
    SamplesOption,
    SkipInvalidOption,
    ThresholdOption,
    TimeoutOption,
    TpmOption,
    VerboseOption,
    WeightOption,
    continue_command,
    fail,
    invoked_as,
    option,
    print_notices,
    say,
    settings_given,
    silence_stdout,
    stderr,
)
from flowrate.exit_codes import (
    ExitCode,
    FlowrateError,
    OutputError,
)


def _file_run(paths: list[str], given: dict, config: Path | None) -> Any:
    """Resolve the settings and validate the input: the run, with its notices printed."""
    from flowrate.evaluation.file_run import FileRun
    from flowrate.settings import resolve_settings

    run = FileRun(paths, resolve_settings(given, config))
    print_notices(run.notices)
    run.notices.clear()
    return run


def _judge(run: Any, also: Callable[[Any], None] = lambda row: None, command: dict | None = None) -> Any:
    """Judge a run, online or through provider batches, with progress on stderr."""
    import asyncio

    from flowrate.reports.console import Reporter

    with Reporter(stderr(), run.total_rows, verbose=run.settings.verbose) as reporter:

        def on_row(row: Any) -> None:
            reporter.row(row)
            also(row)

        if run.settings.batch:
            job = run.execute_batch(on_row=on_row, on_stage=reporter.stage, command=command)
        else:
            job = run.execute(on_row=on_row, on_stage=reporter.stage)
        summary = asyncio.run(job)
    print_notices(run.notices)
    return summary


@app.command("eval")
def eval_command(
    paths: Paths,
    model: ModelOption = None,
    api_base: ApiBaseOption = None,
    threshold: ThresholdOption = None,
    concurrency: ConcurrencyOption = None,
    max_retries: MaxRetriesOption = None,
    timeout: TimeoutOption = None,
    backoff: BackoffOption = None,
    backoff_max: BackoffMaxOption = None,
    output: OutputOption = None,
    skip_invalid: SkipInvalidOption = None,
    allow_empty: AllowEmptyOption = None,
    verbose: VerboseOption = None,
    rubric: RubricOption = None,
    language: LanguageOption = None,
    samples: SamplesOption = None,
    max_input_tokens: MaxInputTokensOption = None,
    cache_dir: CacheDirOption = None,
    no_cache: NoCacheOption = None,
    resume: Annotated[
        bool | None,
        option(
            "--resume",
            env="FLOWRATE_RESUME",
            help="Skip conversations the --output file already holds and append the rest.",
        ),
    ] = None,
    retry_errors: Annotated[
        bool | None,
        option(
            "--retry-errors",
            env="FLOWRATE_RETRY_ERRORS",
            help="Like --resume, and judge again the rows that ended in an error, replacing them.",
        ),
    ] = None,
    rpm: RpmOption = None,
    tpm: TpmOption = None,
    max_cost: Annotated[
        float | None,
        option(
            "--max-cost",
            env="FLOWRATE_MAX_COST",
            help="Budget in USD: stop scheduling calls before it would be passed; the rest is skipped.",
        ),
    ] = None,
    shard: Annotated[
        str | None,
        option("--shard", env="FLOWRATE_SHARD", help="Judge slice I of N (I/N, 1-based), chosen by id hash."),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Validate, render every prompt and estimate calls, tokens and cost; call nothing."
        ),
    ] = False,
    metric: MetricOption = None,
    weight: WeightOption = None,
    sample: SampleOption = None,
    sample_seed: SampleSeedOption = None,
    limit: LimitOption = None,
    min_words: MinWordsOption = None,
    only: OnlyOption = None,
    exclude: ExcludeOption = None,
    min_pass_rate: MinPassRateOption = None,
    min_mean_score: MinMeanScoreOption = None,
    max_failures: MaxFailuresOption = None,
    junit: Annotated[
        str | None,
        option("--junit", env="FLOWRATE_JUNIT", help="Write a JUnit XML report here (GitHub, GitLab, Jenkins)."),
    ] = None,
    html: Annotated[
        str | None, option("--html", env="FLOWRATE_HTML", help="Write a self-contained HTML report here.")
    ] = None,
    github: Annotated[
        bool | None,
        option(
            "--github",
            env="FLOWRATE_GITHUB",
            help="Write GitHub's step summary and annotations (on by itself when GITHUB_ACTIONS=true).",
        ),
    ] = None,
    date_field: Annotated[
        str | None,
        option(
            "--date-field",
            env="FLOWRATE_DATE_FIELD",
            help="The metadata field with the chat's date. [default: chat_date, started_at or timestamp]",
        ),
    ] = None,
    history: HistoryOption = None,
    batch: Annotated[
        bool | None,
        option(
            "--batch",
            env="FLOWRATE_BATCH",
            help="Judge through the provider's Batch API (half the price, within 24 h).",
        ),
    ] = None,
    batch_size: Annotated[
        int | None,
        option("--batch-size", env="FLOWRATE_BATCH_SIZE", help="Requests per batch at most. [default: 47500]"),
    ] = None,
    poll_interval: Annotated[
        float | None,
        option(
            "--poll-interval",
            env="FLOWRATE_POLL_INTERVAL",
            help="Seconds between polls of the batches, with jitter. [default: 60]",
        ),
    ] = None,
    batch_submit_only: Annotated[
        bool | None,
        option(
            "--batch-submit-only", env="FLOWRATE_BATCH_SUBMIT_ONLY", help="Submit the batches and exit; collect later."
        ),
    ] = None,
    batch_no_fallback: Annotated[
        bool | None,
        option(
            "--batch-no-fallback",
            env="FLOWRATE_BATCH_NO_FALLBACK",
            help="Leave failed, expired and unparsable batch lines as error rows instead of judging them online.",
        ),
    ] = None,
    batch_export: Annotated[
        str | None,
        option(
            "--batch-export", env="FLOWRATE_BATCH_EXPORT", help="Only write the OpenAI-format batch request file here."
        ),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Judge every conversation and write one JSONL row per conversation and metric."""
    given = settings_given(locals(), ("paths", "config", "dry_run"))
    from flowrate.limits import UNREACHABLE_AFTER
    from flowrate.reports.console import print_dry_run, print_summary

    settings = None
    try:
        run = _file_run(paths, given, config)
        settings = run.settings
        if dry_run:
            print_dry_run(stderr(), run.estimate(), settings.model)
            raise typer.Exit(int(ExitCode.OK))
        if settings.batch_export:
            count = run.export_batch(settings.batch_export)
            say(f"flowrate: {count} request(s) in {settings.batch_export} (OpenAI batch format); nothing was sent")
            raise typer.Exit(int(ExitCode.OK))
        summary = _judge(run, command=_batch_command(paths, settings) if settings.batch else None)
    except KeyboardInterrupt as error:
        if settings is not None and settings.batch:  # interrupted while polling: the batches run on
            say(
                "flowrate: interrupted while polling: the batches keep running at the provider (nothing was cancelled);"
            )
            say(f"collect them with: {collect_command()}, or run this command again")
        raise fail(error) from None
    except FlowrateError as error:
        raise fail(error) from None
    if summary.pipe_closed:
        silence_stdout()
        raise typer.Exit(int(summary.exit_code))
    if settings.batch and settings.batch_submit_only:
        say(f"flowrate: submitted {len(summary.batches)} batch(es): {', '.join(summary.batches) or 'none'}")
        say(f"collect with: {collect_command()}, or run this command again")
        raise typer.Exit(int(ExitCode.OK))
    print_summary(stderr(), summary, settings.output)
    if summary.output_error:
        say(
            f"flowrate: error: writing the results stopped: {summary.output_error}; the rows before it are kept;"
            f" free room and continue with: {continue_command('--resume')}"
        )
    if summary.batch_online:
        say(
            f"flowrate: {summary.batch_online} batch line(s) were judged online instead (failed, expired or unparsable)"
        )
    _write_reports(run, summary, settings, paths)
    if settings.history:
        _append_history(settings, summary.wall_time_s)
    if summary.unreachable:
        say(
            f"flowrate: stopped: the judge at {summary.unreachable} could not be reached (refused or dropped"
            f" {UNREACHABLE_AFTER} connections in a row); continue with: {continue_command('--retry-errors')}"
        )
    elif summary.interrupted and summary.not_judged and settings.output != "-":
        say(f"resume with: {continue_command('--resume')}")
    raise typer.Exit(int(summary.exit_code))


def _batch_command(paths: list[str], settings: Any) -> dict:
    """What `flowrate batch collect` needs to collect a batch as the submitting command would."""
    command = {
        "paths": [str(Path(p).resolve()) if p != "-" else p for p in paths],
        "settings": settings.model_dump(mode="json"),
    }
    command["settings"]["output"] = str(Path(settings.output).resolve())
    return command


def collect_command() -> str:
    return shlex.join([*invoked_as(), "batch", "collect"])


def _append_history(settings: Any, wall_time_s: float) -> None:
    """Add the run's rows and the run (started when it did) to the history."""
    from datetime import UTC, datetime, timedelta

    from flowrate.analysis.history import connect, import_results

    if settings.output == "-":
        say("flowrate: --history needs --output to be a file; the history was not updated")
        return
    try:
        started = datetime.now(UTC) - timedelta(seconds=wall_time_s)
        added = import_results(connect(settings.history), settings.output, started.replace(tzinfo=None))
    except FlowrateError as error:
        raise fail(error) from None
    say(f"flowrate: history {settings.history}: {added} new row(s)")


def _write_reports(run: Any, summary: Any, settings: Any, paths: list[str]) -> None:
    """The reports a run asked for: JUnit, HTML (with the transcripts read again), GitHub."""
    if run.book is None:
        return
    from flowrate.inputs.files import load_transcripts
    from flowrate.reports import write_reports
    from flowrate.settings import in_github

    transcripts = None
    if settings.html:
        ids = {case.id for cases in run.book.cases.values() for case in cases}
        transcripts = load_transcripts([path for path in paths if path != "-"], ids)
    github = in_github(settings.github)
    annotate = None
    if github and settings.output != "-":  # annotations are workflow commands: on stdout, unless rows are there
        annotate = typer.echo
    try:
        notices = write_reports(
            run.book,
            summary,
            junit=settings.junit,
            html=settings.html,
            github=github,
            transcripts=transcripts,
            annotate=annotate,
        )
    except OSError as error:  # checked before the first call, so this is a late failure: disk full
        where = f" {error.filename}" if error.filename else ""
        raise fail(OutputError(f"a report could not be written{where}: {error.strerror or error}")) from None
    print_notices(notices)
