"""`flowrate batch status|collect|cancel|import-results`: provider batches after they were submitted."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flowrate.cli.app import batch_app
from flowrate.cli.common import CacheDirOption, Paths, command, say, stderr
from flowrate.cli.options import Given, declared, takes
from flowrate.errors import ConfigError, ExitCode
from flowrate.settings import groups

MaxRetriesOption = declared(groups.RetryOptions, "max_retries")
BackoffOption = declared(groups.RetryOptions, "backoff")
BackoffMaxOption = declared(groups.RetryOptions, "backoff_max")

if TYPE_CHECKING:  # for the annotations only: the commands import flowrate.batches when they run
    from flowrate.judge.batch_api import BatchRecord, BatchState
    from flowrate.judge.retry import RetryPolicy


def _batch_state(cache_dir: str | None) -> BatchState:
    """The batch state the commands read, created by none of them: no state yet (no directory,
    no file) reads as no batch recorded."""
    from flowrate.judge.batch_api import BatchState
    from flowrate.settings.groups import cache_folder

    return BatchState(cache_folder(cache_dir), create=False)


def _named_batches(state: BatchState, ids: list[str]) -> list[BatchRecord]:
    """The recorded batches of `state` that `ids` name, in that order (every batch of an id two
    endpoints gave). An id never recorded is an error (exit 2) that names it and the most recent
    recorded ones."""
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
    return [batch for batch_id in dict.fromkeys(ids) for batch in batches if batch.batch_id == batch_id]


def _retry_policy(max_retries: int | None, backoff: float | None, backoff_max: float | None) -> RetryPolicy:
    """How hard `batch status` and `batch cancel` try each call: the options, else eval's defaults."""
    from flowrate.judge.retry import RetryPolicy

    given = {"max_retries": max_retries, "backoff": backoff, "backoff_max": backoff_max}
    defaults = groups.RetryOptions.model_fields
    return RetryPolicy(**{name: defaults[name].default if value is None else value for name, value in given.items()})


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
    import asyncio

    from flowrate.judge.batch_api import Provider

    retry = _retry_policy(max_retries, backoff, backoff_max)
    state = _batch_state(cache_dir)
    batches = _named_batches(state, ids) if ids else state.all() if show_all else state.uncollected()

    ids_seen = [batch.batch_id for batch in batches]

    async def show() -> None:
        for batch in batches:
            shared = ids_seen.count(batch.batch_id) > 1  # two endpoints gave it: say whose this is
            where = f" at {batch.api_base or batch.provider}" if shared else ""
            line = f"{batch.batch_id}{where}: {len(batch.custom_ids)} requests for {batch.output}"
            if batch.collected:
                say(f"{line}: {batch.status}, collected")
                continue
            info = await Provider(batch.provider, batch.api_base, retry=retry).retrieve(batch.batch_id)
            counts = info.request_counts
            say(f"{line}: {info.status}, {counts.completed} done, {counts.failed} failed of {counts.total}")

    asyncio.run(show())
    if not batches:
        say("no batches to show")


@command(batch_app, "collect")
def batch_collect_command(
    ids: Annotated[list[str] | None, typer.Argument(help="Batch ids. [default: every batch not yet collected]")] = None,
    cache_dir: CacheDirOption = None,
) -> None:
    """Collect every finished batch not yet collected into its results file, as the command that
    submitted it would; exit 3 while some are still running."""
    from flowrate.api import collect_batches
    from flowrate.reports.console import print_summary
    from flowrate.settings.options import EvalSettings

    state = _batch_state(cache_dir)
    named = _named_batches(state, ids) if ids else None
    commands = {}
    for batch in state.uncollected() if named is None else named:
        if batch.collected:
            say(f"flowrate: {batch.batch_id} was collected already ({batch.status}) into {batch.output}")
        else:
            commands.setdefault(batch.output, batch.command)
    if not commands:
        say("no batches to collect")
        raise typer.Exit(int(ExitCode.OK))
    worst = ExitCode.OK
    for output, recorded in commands.items():
        settings = EvalSettings.model_validate({**recorded["settings"], "batch_submit_only": False})
        summary = collect_batches(recorded["paths"], settings, set(ids) if ids else None)
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
    import asyncio

    from flowrate.judge.batch_api import TERMINAL, Provider

    retry = _retry_policy(max_retries, backoff, backoff_max)
    state = _batch_state(cache_dir)
    if ids:
        batches = _named_batches(state, ids)
    elif cancel_all:
        batches = state.uncollected()
    else:
        raise ConfigError("name the batches to cancel, or --all")
    if not batches:
        say("flowrate: no batches to cancel")
        raise typer.Exit(int(ExitCode.OK))

    async def cancel() -> None:
        for batch in batches:
            batch_id = batch.batch_id
            if batch.collected:
                say(f"{batch_id}: collected already ({batch.status}), nothing to cancel")
                continue
            provider = Provider(batch.provider, batch.api_base, retry=retry)
            info = await provider.retrieve(batch_id)
            if info.status not in TERMINAL:
                info = await provider.cancel(batch_id)
                say(f"{batch_id}: {info.status} (flowrate batch collect then judges online what it left)")
            else:
                say(f"{batch_id}: already {info.status}, nothing to cancel (flowrate batch collect collects it)")
            state.mark(batch, info.status)

    asyncio.run(cancel())


@command(batch_app, "import-results")
@takes(groups.JudgeOptions, groups.PromptOptions, groups.MetricOptions, also=("output",))
def batch_import_results_command(
    results_file: Annotated[
        Path, typer.Argument(help="A batch output file: OpenAI's format, as vllm run-batch writes it.")
    ],
    paths: Paths,
    *,
    given: Given,
) -> None:
    """Rows from a batch output file, mapped back by custom id to the conversations in PATHS,
    planned as the export was (give the same judge options)."""
    from flowrate.api import import_batch_file
    from flowrate.reports.console import print_summary

    settings = given.settings(no_cache=True)
    summary = import_batch_file(paths, settings, results_file)
    print_summary(stderr(), summary, settings.output)
    raise typer.Exit(int(summary.exit_code))
