"""The `flowrate` command: a thin layer that parses options and calls the library."""

from __future__ import annotations

import asyncio
from pathlib import Path
from collections.abc import Callable
from typing import Annotated, Any, Optional

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


# Judge options, declared once and shared by every command that calls a judge.
ModelOption = Annotated[Optional[str], typer.Option("--model", "-m", envvar="FLOWRATE_MODEL", help="Judge model: gpt-4o, anthropic:claude-3-5-sonnet-latest, ollama:llama3, or any LiteLLM provider/model. [default: gpt-4o]")]
ApiBaseOption = Annotated[Optional[str], typer.Option("--api-base", envvar="FLOWRATE_API_BASE", help="Base URL of an OpenAI-compatible server (vLLM, llama.cpp, LM Studio, a gateway).")]
ThresholdOption = Annotated[Optional[float], typer.Option("--threshold", envvar="FLOWRATE_THRESHOLD", help="A conversation passes when its score is at least this. [default: 0.7]")]
ConcurrencyOption = Annotated[Optional[int], typer.Option("--concurrency", "-j", envvar="FLOWRATE_CONCURRENCY", help="Judge calls in flight at most. [default: 16]")]
MaxRetriesOption = Annotated[Optional[int], typer.Option("--max-retries", envvar="FLOWRATE_MAX_RETRIES", help="Retries of a call after a rate limit, 5xx, timeout or dropped connection. [default: 5]")]
TimeoutOption = Annotated[Optional[float], typer.Option("--timeout", envvar="FLOWRATE_TIMEOUT", help="Seconds one attempt may take. [default: 60]")]
BackoffOption = Annotated[Optional[float], typer.Option("--backoff", envvar="FLOWRATE_BACKOFF", help="First retry wait in seconds, doubled each retry, with jitter. [default: 1]")]
BackoffMaxOption = Annotated[Optional[float], typer.Option("--backoff-max", envvar="FLOWRATE_BACKOFF_MAX", help="Longest wait between retries, Retry-After included. [default: 60]")]
OutputOption = Annotated[Optional[str], typer.Option("--output", "-o", envvar="FLOWRATE_OUTPUT", help="Results JSONL file; - for stdout. [default: flowrate-results.jsonl]")]
SkipInvalidOption = Annotated[Optional[bool], typer.Option("--skip-invalid", envvar="FLOWRATE_SKIP_INVALID", help="Judge the valid conversations and list the invalid ones as skipped.")]
VerboseOption = Annotated[Optional[bool], typer.Option("--verbose", "-v", envvar="FLOWRATE_VERBOSE", help="Print each verdict with its reason and key issues as it arrives.")]
RubricOption = Annotated[Optional[str], typer.Option("--rubric", envvar="FLOWRATE_RUBRIC", help="A rubric file of your own (see configs/rubric.example.yaml).")]
LanguageOption = Annotated[Optional[str], typer.Option("--language", envvar="FLOWRATE_LANGUAGE", help="Language of reasons and key issues. [default: English]")]
SamplesOption = Annotated[Optional[int], typer.Option("--samples", envvar="FLOWRATE_SAMPLES", help="Verdicts per conversation; the row carries the majority and the agreement. [default: 1]")]
MaxInputTokensOption = Annotated[Optional[int], typer.Option("--max-input-tokens", envvar="FLOWRATE_MAX_INPUT_TOKENS", help="The judge's context budget; longer conversations lose their middle turns. [default: the model's known window]")]
ConfigOption = Annotated[Optional[Path], typer.Option("--config", envvar="FLOWRATE_CONFIG", help="Config file. [default: configs/flowrate.yaml when present]")]


def _judge_run(paths: list[str], given: dict, config: Path | None, also: Callable[[Any], None] = lambda row: None):
    """Resolve the settings, validate the input and judge it, with progress on stderr."""
    from flowrate.batch import FileRun
    from flowrate.report import Reporter
    from flowrate.settings import resolve_settings

    settings = resolve_settings(given, config)
    run = FileRun(paths, settings)
    with Reporter(stderr, run.total_rows, verbose=settings.verbose) as reporter:
        summary = asyncio.run(run.execute(on_row=lambda row: (reporter.row(row), also(row))))
    return settings, run, summary


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
    verbose: VerboseOption = None,
    rubric: RubricOption = None,
    language: LanguageOption = None,
    samples: SamplesOption = None,
    max_input_tokens: MaxInputTokensOption = None,
    config: ConfigOption = None,
) -> None:
    """Judge every conversation and write one JSONL row per conversation."""
    given = {name: value for name, value in locals().items() if name not in ("paths", "config")}
    from flowrate.report import print_summary

    try:
        settings, _, summary = _judge_run(paths, given, config)
    except (FlowrateError, KeyboardInterrupt) as error:
        raise _fail(error) from None
    print_summary(stderr, summary, settings.output)
    raise typer.Exit(int(summary.exit_code))


@app.command("agreement")
def agreement_command(
    paths: Paths,
    label: Annotated[str, typer.Option("--label", help="The human label to compare with, as named in each record's \"labels\".")],
    results: Annotated[Optional[Path], typer.Option("--results", help="Use the rows of an earlier run instead of calling the judge.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")] = False,
    model: ModelOption = None,
    api_base: ApiBaseOption = None,
    concurrency: ConcurrencyOption = None,
    max_retries: MaxRetriesOption = None,
    timeout: TimeoutOption = None,
    backoff: BackoffOption = None,
    backoff_max: BackoffMaxOption = None,
    output: Annotated[Optional[str], typer.Option("--output", "-o", envvar="FLOWRATE_OUTPUT", help="Where the judged rows go. [default: flowrate-agreement.jsonl]")] = None,
    skip_invalid: SkipInvalidOption = None,
    verbose: VerboseOption = None,
    rubric: RubricOption = None,
    language: LanguageOption = None,
    samples: SamplesOption = None,
    max_input_tokens: MaxInputTokensOption = None,
    config: ConfigOption = None,
) -> None:
    """Measure how well the judge agrees with human labels: Spearman, Kendall, Pearson, kappa."""
    given = {name: value for name, value in locals().items() if name not in ("paths", "config", "label", "results", "as_json")}
    from flowrate.agreement import agreement_report, pair_up, read_results
    from flowrate.inputs import labels_named
    from flowrate.report import print_agreement

    given["output"] = given["output"] or "flowrate-agreement.jsonl"
    try:
        labels = labels_named(paths, label)
        if results is not None:
            rows = list(read_results(results))
            incomplete = False
        else:
            rows = []
            _, _, summary = _judge_run(paths, given, config, also=rows.append)
            incomplete = summary.errors > 0 or summary.interrupted
        report = agreement_report(pair_up(labels, rows, label), label)
    except (FlowrateError, KeyboardInterrupt) as error:
        raise _fail(error) from None
    print_agreement(stderr, report)
    if as_json:
        typer.echo(report.model_dump_json())
    raise typer.Exit(int(ExitCode.INCOMPLETE if incomplete else ExitCode.OK))


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
