"""`flowrate eval`."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from flowrate.cli.app import app
from flowrate.cli.common import (
    Paths,
    command,
    continue_command,
    fail,
    invoked_as,
    print_notices,
    say,
    silence_stdout,
    stderr,
)
from flowrate.cli.options import Given, takes
from flowrate.errors import ExitCode
from flowrate.settings import groups

if TYPE_CHECKING:
    from flowrate.api import Evaluation
    from flowrate.results.events import RunListener
    from flowrate.settings.options import EvalSettings

EVAL_GROUPS = (
    groups.JudgeOptions, groups.RetryOptions, groups.LimitOptions, groups.CacheOptions, groups.PromptOptions,
    groups.MetricOptions, groups.OutputOptions, groups.SelectionOptions, groups.GateOptions, groups.ReportOptions,
    groups.BatchOptions, groups.EngineOptions, groups.RedactionOptions, groups.PlatformOptions,
)  # fmt: skip


@command(app, "eval")
@takes(*EVAL_GROUPS)
def eval_command(
    paths: Paths,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Validate, render every prompt and estimate calls, tokens and cost; call nothing."
        ),
    ] = False,
    *,
    given: Given,
) -> None:
    """Judge every conversation and write one JSONL row per conversation and metric."""
    from flowrate.api import estimate_files, export_requests
    from flowrate.reports.console import print_dry_run

    settings = given.settings()
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
    paths: list[str],
    settings: EvalSettings,
    listeners: list[RunListener] | None = None,
    batch_command: dict[str, Any] | None = None,
) -> Evaluation:
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


def tell_outcome(evaluation: Evaluation) -> None:
    """What a person reads after `flowrate eval`: the summary, and the commands that continue."""
    from flowrate.api import UNREACHABLE_AFTER
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


def _batch_command(paths: list[str], settings: EvalSettings) -> dict[str, Any]:
    """What `flowrate batch collect` needs to collect a batch as the submitting command would."""
    command: dict[str, Any] = {
        "paths": [str(Path(p).resolve()) if p != "-" else p for p in paths],
        "settings": settings.model_dump(mode="json"),
    }
    command["settings"]["output"] = str(Path(settings.output).resolve())
    return command


def collect_command() -> str:
    return shlex.join([*invoked_as(), "batch", "collect"])
