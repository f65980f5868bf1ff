"""`flowrate batch status|collect|cancel|import-results`: provider batches after they were submitted."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from flowrate.cli.app import batch_app
from flowrate.cli.common import CacheDirOption, Paths, command, say, stderr
from flowrate.cli.options import Given, option_of, takes
from flowrate.errors import ConfigError, ExitCode
from flowrate.settings import groups

MaxRetriesOption = Annotated[int | None, option_of(groups.RetryOptions, "max_retries")]
BackoffOption = Annotated[float | None, option_of(groups.RetryOptions, "backoff")]
BackoffMaxOption = Annotated[float | None, option_of(groups.RetryOptions, "backoff_max")]


@command(batch_app, "status")
def batch_status_command(
    ids: Annotated[list[str] | None, typer.Argument(help="Batch ids. [default: every batch not yet collected]")] = None,
    show_all: Annotated[bool, typer.Option("--all", help="Every recorded batch, collected or not.")] = False,
    cache_dir: CacheDirOption = None,
    max_retries: MaxRetriesOption = None,
    backoff: BackoffOption = None,
    backoff_max: BackoffMaxOption = None,
) -> None:
    """The recorded batches with their provider status and request counts."""
    from flowrate.api import batch_retry, batch_statuses, recorded_batches

    retry = batch_retry(max_retries, backoff, backoff_max)
    _, batches = recorded_batches(cache_dir, ids, every=show_all)
    ids_seen = [batch.batch_id for batch in batches]

    def tell(batch: Any, info: Any) -> None:
        shared = ids_seen.count(batch.batch_id) > 1  # two endpoints gave it: say whose this is
        where = f" at {batch.api_base or batch.provider}" if shared else ""
        line = f"{batch.batch_id}{where}: {len(batch.custom_ids)} requests for {batch.output}"
        if info is None:
            say(f"{line}: {batch.status}, collected")
        else:
            counts = info.request_counts
            say(f"{line}: {info.status}, {counts.completed} done, {counts.failed} failed of {counts.total}")

    batch_statuses(batches, retry, tell)
    if not batches:
        say("no batches to show")


@command(batch_app, "collect")
def batch_collect_command(
    ids: Annotated[list[str] | None, typer.Argument(help="Batch ids. [default: every batch not yet collected]")] = None,
    cache_dir: CacheDirOption = None,
) -> None:
    """Collect every finished batch not yet collected into its results file, as the command that
    submitted it would; exit 3 while some are still running."""
    from flowrate.api import collect_batches, recorded_batches, recorded_settings
    from flowrate.reports.console import Reporter, print_summary

    _, batches = recorded_batches(cache_dir, ids)
    submitted: dict[str, Any] = {}
    for batch in batches:
        if batch.collected:
            say(f"flowrate: {batch.batch_id} was collected already ({batch.status}) into {batch.output}")
        else:
            submitted.setdefault(batch.output, batch)
    if not submitted:
        say("no batches to collect")
        raise typer.Exit(int(ExitCode.OK))
    worst = ExitCode.OK
    for output, batch in submitted.items():
        paths, settings = recorded_settings(batch)
        with Reporter(stderr(), verbose=settings.verbose) as progress:  # the run's notices, as flowrate eval's
            summary = collect_batches(paths, settings, set(ids) if ids else None, [progress])
        print_summary(stderr(), summary, output)
        code = ExitCode.INCOMPLETE if summary.still_running else summary.exit_code
        if summary.still_running:
            say(f"flowrate: still running: {', '.join(summary.still_running)}")
        worst = max(worst, code)
    raise typer.Exit(int(worst))


@command(batch_app, "cancel")
def batch_cancel_command(
    ids: Annotated[list[str] | None, typer.Argument(help="Batch ids.")] = None,
    cancel_all: Annotated[bool, typer.Option("--all", help="Every batch not yet collected.")] = False,
    cache_dir: CacheDirOption = None,
    max_retries: MaxRetriesOption = None,
    backoff: BackoffOption = None,
    backoff_max: BackoffMaxOption = None,
) -> None:
    """Cancel batches at the provider, saying for each what the provider did; a batch that has
    finished is left as it is. `collect` then judges online what the cancelled ones left."""
    from flowrate.api import batch_retry, cancel_batches, recorded_batches

    retry = batch_retry(max_retries, backoff, backoff_max)
    if not ids and not cancel_all:
        raise ConfigError("name the batches to cancel, or --all")
    state, batches = recorded_batches(cache_dir, ids)
    if not batches:
        say("flowrate: no batches to cancel")
        raise typer.Exit(int(ExitCode.OK))

    def tell(batch: Any, status: str, cancelled: bool) -> None:
        if batch.collected:
            say(f"{batch.batch_id}: collected already ({status}), nothing to cancel")
        elif cancelled:
            say(f"{batch.batch_id}: {status} (flowrate batch collect then judges online what it left)")
        else:
            say(f"{batch.batch_id}: already {status}, nothing to cancel (flowrate batch collect collects it)")

    cancel_batches(state, batches, retry, tell)


@command(batch_app, "import-results")
@takes(groups.JudgeOptions, groups.PromptOptions, groups.MetricOptions, also=("output", "redact"))
def batch_import_results_command(
    results_file: Annotated[
        Path, typer.Argument(help="A batch output file: OpenAI's format, as vllm run-batch writes it.")
    ],
    paths: Paths,
    *,
    given: Given,
) -> None:
    """Rows from a batch output file, mapped back by custom id to the conversations in PATHS,
    planned as the export was (give the same judge options, and --redact if it was redacted)."""
    from flowrate.api import import_batch_file
    from flowrate.reports.console import Reporter, print_summary

    settings = given.settings(no_cache=True)
    with Reporter(stderr(), verbose=settings.verbose) as progress:  # the run's notices, as flowrate eval's
        summary = import_batch_file(paths, settings, results_file, [progress])
    print_summary(stderr(), summary, settings.output)
    raise typer.Exit(int(summary.exit_code))
