"""The `flowrate` command tree: the top-level app and its command groups. The command modules register themselves on it."""

from __future__ import annotations

from typing import Annotated

import typer

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: flags shown as flags, brackets kept, and no rich import for --help
    help="Grade multi-turn chatbot conversations with an LLM judge: Conversational Flow Rate, the virtual-agent"
    " suite, repetition; gates and reports for CI, calibration against human labels, trends.",
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"flowrate {version('flowrate')}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Grade multi-turn chatbot conversations with an LLM judge: Conversational Flow Rate, the
    virtual-agent suite, repetition; gates and reports for CI, calibration against human labels, trends."""


batch_app = typer.Typer(
    help="Provider batches: status, collect, cancel, import results.", no_args_is_help=True, rich_markup_mode=None
)


labels_app = typer.Typer(
    help="Human labels: a template to fill in, and importing them into the history.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
history_app = typer.Typer(
    help="The history: a DuckDB file of every run, its rows and the labels.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


cache_app = typer.Typer(
    help="The response cache: judge replies kept so a rerun pays nothing.", no_args_is_help=True, rich_markup_mode=None
)
