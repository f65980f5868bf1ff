"""The `flowrate` command: a thin layer that parses options and calls the library."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Optional

import orjson
import typer
from rich.console import Console

from flowrate.exit_codes import ExitCode, FlowrateError, InputError, exit_code_for

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Grade multi-turn chatbot conversations with an LLM judge (Conversational Flow Rate).",
)
stderr = Console(stderr=True, soft_wrap=True)  # a message that scripts grep must stay on one line

Paths = Annotated[list[str], typer.Argument(help="Files, directories (every .jsonl/.json/.yaml/.yml inside) or - for JSONL on stdin.")]


def _fail(error: BaseException) -> typer.Exit:
    """Print a user error plainly, and give the exit status that goes with it."""
    if isinstance(error, InputError):
        stderr.print(f"flowrate: {error.total} problem(s) in the input; no conversation was judged:", markup=False)
        for problem in error.problems:
            stderr.print(f"  {problem}", markup=False, highlight=False)
        stderr.print("fix them, or pass --skip-invalid to judge the valid conversations only", markup=False)
    elif isinstance(error, FlowrateError):
        stderr.print(f"flowrate: error: {error}", markup=False, highlight=False)
    return typer.Exit(int(exit_code_for(error)))


@app.command("eval")
def eval_command(
    paths: Paths,
    model: Annotated[Optional[str], typer.Option("--model", "-m", envvar="FLOWRATE_MODEL", help="Judge model: gpt-4o, anthropic:claude-3-5-sonnet-latest, ollama:llama3, or any LiteLLM provider/model. [default: gpt-4o]")] = None,
    api_base: Annotated[Optional[str], typer.Option("--api-base", envvar="FLOWRATE_API_BASE", help="Base URL of an OpenAI-compatible server (vLLM, llama.cpp, LM Studio, a gateway).")] = None,
    threshold: Annotated[Optional[float], typer.Option("--threshold", envvar="FLOWRATE_THRESHOLD", help="A conversation passes when its score is at least this. [default: 0.7]")] = None,
    concurrency: Annotated[Optional[int], typer.Option("--concurrency", "-j", envvar="FLOWRATE_CONCURRENCY", help="Judge calls in flight at most. [default: 16]")] = None,
    max_retries: Annotated[Optional[int], typer.Option("--max-retries", envvar="FLOWRATE_MAX_RETRIES", help="Retries of a call after a rate limit, 5xx, timeout or dropped connection. [default: 5]")] = None,
    timeout: Annotated[Optional[float], typer.Option("--timeout", envvar="FLOWRATE_TIMEOUT", help="Seconds one attempt may take. [default: 60]")] = None,
    backoff: Annotated[Optional[float], typer.Option("--backoff", envvar="FLOWRATE_BACKOFF", help="First retry wait in seconds, doubled each retry, with jitter. [default: 1]")] = None,
    backoff_max: Annotated[Optional[float], typer.Option("--backoff-max", envvar="FLOWRATE_BACKOFF_MAX", help="Longest wait between retries, Retry-After included. [default: 60]")] = None,
    output: Annotated[Optional[str], typer.Option("--output", "-o", envvar="FLOWRATE_OUTPUT", help="Results JSONL file; - for stdout. [default: flowrate-results.jsonl]")] = None,
    skip_invalid: Annotated[Optional[bool], typer.Option("--skip-invalid", envvar="FLOWRATE_SKIP_INVALID", help="Judge the valid conversations and list the invalid ones as skipped.")] = None,
    verbose: Annotated[Optional[bool], typer.Option("--verbose", "-v", envvar="FLOWRATE_VERBOSE", help="Print each verdict with its reason and key issues as it arrives.")] = None,
    rubric: Annotated[Optional[str], typer.Option("--rubric", envvar="FLOWRATE_RUBRIC", help="A rubric file of your own (see configs/rubric.example.yaml).")] = None,
    language: Annotated[Optional[str], typer.Option("--language", envvar="FLOWRATE_LANGUAGE", help="Language of reasons and key issues. [default: English]")] = None,
    config: Annotated[Optional[Path], typer.Option("--config", envvar="FLOWRATE_CONFIG", help="Config file. [default: configs/flowrate.yaml when present]")] = None,
) -> None:
    """Judge every conversation and write one JSONL row per conversation."""
    from flowrate.batch import FileRun
    from flowrate.report import Reporter, print_summary
    from flowrate.settings import resolve_settings

    given = dict(
        model=model, api_base=api_base, threshold=threshold, concurrency=concurrency, max_retries=max_retries,
        timeout=timeout, backoff=backoff, backoff_max=backoff_max, output=output, skip_invalid=skip_invalid,
        verbose=verbose, rubric=rubric, language=language,
    )  # fmt: skip
    try:
        settings = resolve_settings(given, config)
        run = FileRun(paths, settings)
        with Reporter(stderr, run.total_rows, verbose=settings.verbose) as reporter:
            summary = asyncio.run(run.execute(on_row=reporter.row))
    except (FlowrateError, KeyboardInterrupt) as error:
        raise _fail(error) from None
    print_summary(stderr, summary, settings.output)
    raise typer.Exit(int(summary.exit_code))


@app.command("validate")
def validate_command(
    paths: Paths,
    as_json: Annotated[bool, typer.Option("--json", help="Print the counts as JSON on stdout.")] = False,
) -> None:
    """Check the input without calling a judge: record counts per format, and every problem."""
    from flowrate.inputs import InputSet, raise_for_problems, scan

    try:
        inputs = InputSet(paths)
        try:
            report = scan(inputs)
        finally:
            inputs.close()
        counts = {"files": report.files, "valid": report.valid, "invalid": report.invalid, "formats": dict(report.formats)}
        if as_json:
            typer.echo(orjson.dumps(counts).decode())
        raise_for_problems(report)
    except FlowrateError as error:
        raise _fail(error) from None
    formats = ", ".join(f"{count} in {name} format" for name, count in sorted(report.formats.items())) or "none"
    stderr.print(f"{report.valid} valid conversation(s) in {report.files} file(s): {formats}", markup=False, highlight=False)
    raise typer.Exit(int(ExitCode.OK))


def main() -> None:
    app()
