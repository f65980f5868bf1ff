"""`flowrate eval`."""

from __future__ import annotations

import shlex
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
    CutLogsOption,
    EngineOption,
    ExcludeOption,
    HistoryOption,
    LanguageOption,
    LimitOption,
    MaxCostOption,
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
    OutputParquetOption,
    Paths,
    RayAddressOption,
    RpmOption,
    RubricOption,
    SampleOption,
    SampleSeedOption,
    SamplesOption,
    SkipInvalidOption,
    ThresholdOption,
    TimeoutOption,
    TpmOption,
    TransportOption,
    VerboseOption,
    WeightOption,
    command,
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
from flowrate.errors import ExitCode


@command(app, "eval")
def eval_command(
    paths: Paths,
    model: ModelOption = None,
    api_base: ApiBaseOption = None,
    transport: TransportOption = None,
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
    cut_logs: CutLogsOption = None,
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
    max_cost: MaxCostOption = None,
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
    engine: EngineOption = None,
    ray_address: RayAddressOption = None,
    output_parquet: OutputParquetOption = None,
    config: ConfigOption = None,
) -> None:
    """Judge every conversation and write one JSONL row per conversation and metric."""
    given = settings_given(locals(), ("paths", "config", "dry_run"))
    from flowrate.api import estimate_files, export_requests
    from flowrate.reports.console import print_dry_run
    from flowrate.settings.options import resolve_settings

    settings = resolve_settings(given, config)
    if dry_run:
        print_dry_run(stderr(), estimate_files(paths, settings), settings.model)
        raise typer.Exit(int(ExitCode.OK))
    if settings.batch_export:
        count = export_requests(paths, settings, settings.batch_export)
        say(f"flowrate: {count} request(s) in {settings.batch_export} (OpenAI batch format); nothing was sent")
        raise typer.Exit(int(ExitCode.OK))
    evaluation = run_with_progress(paths, settings, batch_command=_batch_command(paths, settings))
    tell_outcome(evaluation)
    raise typer.Exit(int(evaluation.exit_code))


def run_with_progress(
    paths: list[str], settings: Any, listeners: list | None = None, batch_command: dict | None = None
) -> Any:
    """`api.evaluate_files` with progress and notices on stderr; a late report or history
    failure stays on the result for `tell_outcome`."""
    from flowrate.api import BatchesLeftRunning, evaluate_files
    from flowrate.reports.console import Reporter

    try:
        with Reporter(stderr(), verbose=settings.verbose) as progress:
            return evaluate_files(
                paths, settings, [progress, *(listeners or [])], batch_command if settings.batch else None, True
            )
    except BatchesLeftRunning as error:
        say(f"flowrate: {error};")
        say(f"collect them with: {collect_command()}, or run this command again")
        raise typer.Exit(int(error.exit_code)) from None


def tell_outcome(evaluation: Any) -> None:
    """What a person reads after `flowrate eval`: the summary, and the commands that continue."""
    from flowrate.judge.limits import UNREACHABLE_AFTER
    from flowrate.reports.console import print_summary

    summary, settings = evaluation.summary, evaluation.settings
    if summary.pipe_closed:
        silence_stdout()
        return
    if settings.batch and settings.batch_submit_only:
        say(f"flowrate: submitted {len(summary.batches)} batch(es): {', '.join(summary.batches) or 'none'}")
        say(f"collect with: {collect_command()}, or run this command again")
        return
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
    print_notices(evaluation.reports)
    if evaluation.history_rows_added is not None:
        say(f"flowrate: history {settings.history}: {evaluation.history_rows_added} new row(s)")
    if evaluation.late_error is not None:
        failed = fail(evaluation.late_error)
        tell_history_import(evaluation.late_error)
        raise failed
    if summary.unreachable:
        say(
            f"flowrate: stopped: the judge at {summary.unreachable} could not be reached (refused or dropped"
            f" {UNREACHABLE_AFTER} connections in a row); continue with: {continue_command('--retry-errors')}"
        )
    elif summary.refused:
        say(
            f"flowrate: stopped: the judge refused every call the same way: {summary.refused};"
            f" fix the request (see the message), then continue with: {continue_command('--retry-errors')}"
        )
    elif summary.interrupted and summary.not_judged and settings.output != "-":
        say(f"resume with: {continue_command('--resume')}")


def tell_history_import(error: BaseException) -> None:
    """After a run whose rows did not reach the history (`error`): the command that adds them later."""
    from flowrate.api import HistoryNotUpdated

    if isinstance(error, HistoryNotUpdated):
        command = shlex.join([*invoked_as(), "history", "import", error.output, "--history", error.history])
        say(f"add them to the history later with: {command}")


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
