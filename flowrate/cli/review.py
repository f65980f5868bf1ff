"""`flowrate review`: the local web app for browsing runs and labelling conversations."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flowrate.cli.app import app
from flowrate.cli.common import CacheDirOption, HistoryOption, ResultsPaths, RubricOption, command, say
from flowrate.cli.options import Given, takes

DEFAULT_HISTORY = "flowrate-history.duckdb"


@command(app, "review")
@takes(also=("keep_originals",))
def review_command(
    paths: ResultsPaths = None,
    history: HistoryOption = None,
    reviewer: Annotated[
        str | None,
        typer.Option("--reviewer", help="Label as this reviewer. [default: each browser asks its reviewer's name]"),
    ] = None,
    port: Annotated[
        int, typer.Option("--port", help="The port to listen on. [default: a free one]", show_default=False)
    ] = 0,
    host: Annotated[
        str, typer.Option("--host", help="The address to listen on; another than loopback needs --allow-remote.")
    ] = "127.0.0.1",
    allow_remote: Annotated[
        bool, typer.Option("--allow-remote", help="Allow a --host other than loopback (127.0.0.0/8, localhost, ::1).")
    ] = False,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            help="A Host name remote browsers may use; repeatable. [default with --allow-remote: this machine's names]",
        ),
    ] = None,
    rubric: RubricOption = None,
    show_judge: Annotated[
        bool, typer.Option("--show-judge", help="Show the judge's verdict and reason before the reviewer answers.")
    ] = False,
    inputs: Annotated[
        list[str] | None,
        typer.Option("--inputs", help="The conversations the rows were judged from, for the transcripts; repeatable."),
    ] = None,
    cache_dir: CacheDirOption = None,
    metric: Annotated[
        list[str] | None, typer.Option("--metric", help="Queue this metric only; repeatable. [default: every one]")
    ] = None,
    sample_passing: Annotated[
        float, typer.Option("--sample-passing", help="The share of passing conversations a queue takes.")
    ] = 0.2,
    seed: Annotated[int, typer.Option("--seed", help="The seed of --sample-passing, --recent and the order.")] = 0,
    recent: Annotated[
        int | None,
        typer.Option(
            "--recent", help="Queue instead N random conversations nobody has labelled, from the last --days."
        ),
    ] = None,
    days: Annotated[int, typer.Option("--days", help="The days --recent looks back over.")] = 10,
    *,
    given: Given,
) -> None:
    """Browse runs and label conversations in a local web app; answers go to the history."""
    from flowrate.inputs.redaction.redactor import redactor_of
    from flowrate.review.queue import QueueRule
    from flowrate.review.server import ReviewOptions, serve

    try:
        settings = given.settings(redact=True)  # the config's rules, for the rows that were redacted
        redactor = redactor_of(settings.redaction_settings)
        rule = QueueRule(sample_passing, seed, recent, days, tuple(metric or ()))
        options = ReviewOptions(
            results=[Path(name) for name in paths or []],
            history=Path(history or DEFAULT_HISTORY),
            reviewer=reviewer,
            port=port,
            host=host,
            allow_remote=allow_remote,
            show_judge=show_judge,
            inputs=list(inputs or []),
            cache_dir=cache_dir,
            rule=rule,
            allowed_hosts=list(allowed_host or []),
            rubric=rubric,
            redactor=redactor,
            keep_originals=settings.keep_originals,
        )
        serve(options, say)
    except KeyboardInterrupt:
        say("flowrate review: stopped")
