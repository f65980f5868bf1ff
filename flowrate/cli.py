"""The `flowrate` command: a thin layer that parses options and calls the library."""

from __future__ import annotations

import asyncio
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

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

Paths = Annotated[
    list[str], typer.Argument(help="Files, directories (every .jsonl/.json/.yaml/.yml inside) or - for JSONL on stdin.")
]


def _fail(error: BaseException) -> typer.Exit:
    """Print a user error plainly, and give the exit status that goes with it."""
    if isinstance(error, InputError):
        stderr.print(f"flowrate: {error.total} {error.headline}:", markup=False)
        for problem in error.problems:
            stderr.print(f"  {problem}", markup=False, highlight=False)
        if error.hint:
            stderr.print(error.hint, markup=False)
    elif isinstance(error, FlowrateError):
        stderr.print(f"flowrate: error: {error}", markup=False, highlight=False)
    return typer.Exit(int(exit_code_for(error)))


# Judge options, declared once and shared by every command that calls a judge.
ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        envvar="FLOWRATE_MODEL",
        help="Judge model: gpt-4o, anthropic:claude-3-5-sonnet-latest, ollama:llama3, or any LiteLLM provider/model. [default: gpt-4o]",
    ),
]
ApiBaseOption = Annotated[
    str | None,
    typer.Option(
        "--api-base",
        envvar="FLOWRATE_API_BASE",
        help="Base URL of an OpenAI-compatible server (vLLM, llama.cpp, LM Studio, a gateway).",
    ),
]
ThresholdOption = Annotated[
    float | None,
    typer.Option(
        "--threshold",
        envvar="FLOWRATE_THRESHOLD",
        help="A conversation passes when its score is at least this. [default: 0.7]",
    ),
]
ConcurrencyOption = Annotated[
    int | None,
    typer.Option(
        "--concurrency", "-j", envvar="FLOWRATE_CONCURRENCY", help="Judge calls in flight at most. [default: 16]"
    ),
]
MaxRetriesOption = Annotated[
    int | None,
    typer.Option(
        "--max-retries",
        envvar="FLOWRATE_MAX_RETRIES",
        help="Retries of a call after a rate limit, 5xx, timeout or dropped connection. [default: 5]",
    ),
]
TimeoutOption = Annotated[
    float | None,
    typer.Option("--timeout", envvar="FLOWRATE_TIMEOUT", help="Seconds one attempt may take. [default: 60]"),
]
BackoffOption = Annotated[
    float | None,
    typer.Option(
        "--backoff",
        envvar="FLOWRATE_BACKOFF",
        help="First retry wait in seconds, doubled each retry, with jitter. [default: 1]",
    ),
]
BackoffMaxOption = Annotated[
    float | None,
    typer.Option(
        "--backoff-max",
        envvar="FLOWRATE_BACKOFF_MAX",
        help="Longest wait between retries, Retry-After included. [default: 60]",
    ),
]
OutputOption = Annotated[
    str | None,
    typer.Option(
        "--output",
        "-o",
        envvar="FLOWRATE_OUTPUT",
        help="Results JSONL file; - for stdout. [default: flowrate-results.jsonl]",
    ),
]
SkipInvalidOption = Annotated[
    bool | None,
    typer.Option(
        "--skip-invalid",
        envvar="FLOWRATE_SKIP_INVALID",
        help="Judge the valid conversations and list the invalid ones as skipped.",
    ),
]
VerboseOption = Annotated[
    bool | None,
    typer.Option(
        "--verbose",
        "-v",
        envvar="FLOWRATE_VERBOSE",
        help="Print each verdict with its reason and key issues as it arrives.",
    ),
]
RubricOption = Annotated[
    str | None,
    typer.Option(
        "--rubric", envvar="FLOWRATE_RUBRIC", help="A rubric file of your own (see configs/rubric.example.yaml)."
    ),
]
LanguageOption = Annotated[
    str | None,
    typer.Option(
        "--language", envvar="FLOWRATE_LANGUAGE", help="Language of reasons and key issues. [default: English]"
    ),
]
SamplesOption = Annotated[
    int | None,
    typer.Option(
        "--samples",
        envvar="FLOWRATE_SAMPLES",
        help="Verdicts per conversation; the row carries the majority and the agreement. [default: 1]",
    ),
]
MaxInputTokensOption = Annotated[
    int | None,
    typer.Option(
        "--max-input-tokens",
        envvar="FLOWRATE_MAX_INPUT_TOKENS",
        help="The judge's context budget; longer conversations lose their middle turns. [default: the model's known window]",
    ),
]
CacheDirOption = Annotated[
    str | None,
    typer.Option(
        "--cache-dir",
        envvar="FLOWRATE_CACHE_DIR",
        help="Where the response cache lives. [default: the user cache directory]",
    ),
]
NoCacheOption = Annotated[
    bool | None,
    typer.Option("--no-cache", envvar="FLOWRATE_NO_CACHE", help="Neither read nor write the response cache."),
]
RpmOption = Annotated[float | None, typer.Option("--rpm", envvar="FLOWRATE_RPM", help="Requests per minute at most.")]
TpmOption = Annotated[
    float | None,
    typer.Option("--tpm", envvar="FLOWRATE_TPM", help="Tokens per minute at most, estimated before each call."),
]
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config", envvar="FLOWRATE_CONFIG", help="Config file. [default: configs/flowrate.yaml when present]"
    ),
]


def _judge_run(paths: list[str], given: dict, config: Path | None, also: Callable[[Any], None] = lambda row: None):
    """Resolve the settings, validate the input and judge it, with progress on stderr."""
    from flowrate.batch import FileRun
    from flowrate.report import Reporter
    from flowrate.settings import resolve_settings

    settings = resolve_settings(given, config)
    run = FileRun(paths, settings)
    with Reporter(stderr, run.total_rows, verbose=settings.verbose) as reporter:
        summary = asyncio.run(run.execute(on_row=lambda row: (reporter.row(row), also(row))))
    _print_notices(run.notices)
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
    cache_dir: CacheDirOption = None,
    no_cache: NoCacheOption = None,
    resume: Annotated[
        bool | None,
        typer.Option(
            "--resume",
            envvar="FLOWRATE_RESUME",
            help="Skip conversations the --output file already holds and append the rest.",
        ),
    ] = None,
    retry_errors: Annotated[
        bool | None,
        typer.Option(
            "--retry-errors",
            envvar="FLOWRATE_RETRY_ERRORS",
            help="Like --resume, and judge again the rows that ended in an error, replacing them.",
        ),
    ] = None,
    rpm: RpmOption = None,
    tpm: TpmOption = None,
    max_cost: Annotated[
        float | None,
        typer.Option(
            "--max-cost",
            envvar="FLOWRATE_MAX_COST",
            help="Budget in USD: stop scheduling calls before it would be passed; the rest is skipped.",
        ),
    ] = None,
    shard: Annotated[
        str | None,
        typer.Option("--shard", envvar="FLOWRATE_SHARD", help="Judge slice I of N (I/N, 1-based), chosen by id hash."),
    ] = None,
    dry_run: Annotated[
        bool | None,
        typer.Option(
            "--dry-run", help="Validate, render every prompt and estimate calls, tokens and cost; call nothing."
        ),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Judge every conversation and write one JSONL row per conversation."""
    given = {name: value for name, value in locals().items() if name not in ("paths", "config", "dry_run")}
    from flowrate.report import print_dry_run, print_summary

    try:
        if dry_run:
            from flowrate.batch import FileRun
            from flowrate.settings import resolve_settings

            run = FileRun(paths, resolve_settings(given, config))
            _print_notices(run.notices)
            print_dry_run(stderr, run.estimate(), run.settings.model)
            raise typer.Exit(int(ExitCode.OK))
        settings, run, summary = _judge_run(paths, given, config)
    except (FlowrateError, KeyboardInterrupt) as error:
        raise _fail(error) from None
    print_summary(stderr, summary, settings.output)
    if summary.interrupted and settings.output != "-":
        stderr.print(f"resume with: {_resume_command()}", markup=False, highlight=False)
    raise typer.Exit(int(summary.exit_code))


def _resume_command() -> str:
    words = ["flowrate", *sys.argv[1:]]
    return shlex.join(words if "--resume" in words else [*words, "--resume"])


def _print_notices(notices: list[str]) -> None:
    for notice in notices:
        stderr.print(f"flowrate: {notice}", markup=False, highlight=False)


@app.command("agreement")
def agreement_command(
    paths: Paths,
    label: Annotated[
        str, typer.Option("--label", help='The human label to compare with, as named in each record\'s "labels".')
    ],
    results: Annotated[
        Path | None, typer.Option("--results", help="Use the rows of an earlier run instead of calling the judge.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")] = False,
    model: ModelOption = None,
    api_base: ApiBaseOption = None,
    concurrency: ConcurrencyOption = None,
    max_retries: MaxRetriesOption = None,
    timeout: TimeoutOption = None,
    backoff: BackoffOption = None,
    backoff_max: BackoffMaxOption = None,
    output: Annotated[
        str | None,
        typer.Option(
            "--output",
            "-o",
            envvar="FLOWRATE_OUTPUT",
            help="Where the judged rows go. [default: flowrate-agreement.jsonl]",
        ),
    ] = None,
    skip_invalid: SkipInvalidOption = None,
    verbose: VerboseOption = None,
    rubric: RubricOption = None,
    language: LanguageOption = None,
    samples: SamplesOption = None,
    max_input_tokens: MaxInputTokensOption = None,
    cache_dir: CacheDirOption = None,
    no_cache: NoCacheOption = None,
    rpm: RpmOption = None,
    tpm: TpmOption = None,
    config: ConfigOption = None,
) -> None:
    """Measure how well the judge agrees with human labels: Spearman, Kendall, Pearson, kappa."""
    given = {
        name: value
        for name, value in locals().items()
        if name not in ("paths", "config", "label", "results", "as_json")
    }
    from flowrate.agreement import agreement_report, pair_up
    from flowrate.inputs import labels_named
    from flowrate.report import print_agreement
    from flowrate.results import read_rows

    given["output"] = given["output"] or "flowrate-agreement.jsonl"
    try:
        labels = labels_named(paths, label)
        if results is not None:
            rows = list(read_rows(results))
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


@app.command("merge")
def merge_command(
    paths: Annotated[list[str], typer.Argument(help="Results files of the shards of one run.")],
    output: Annotated[str, typer.Option("--output", "-o", help="The merged results file; - for stdout.")],
) -> None:
    """Join the results of shards (--shard I/N) into one file and one summary."""
    from flowrate.batch import merge_results
    from flowrate.report import print_summary

    try:
        summary = merge_results(paths, output)
    except FlowrateError as error:
        raise _fail(error) from None
    print_summary(stderr, summary, output)
    raise typer.Exit(int(summary.exit_code))


cache_app = typer.Typer(help="The response cache: judge replies kept so a rerun pays nothing.", no_args_is_help=True)
app.add_typer(cache_app, name="cache")


def _open_cache(cache_dir: str | None):
    from flowrate.cache import ResponseCache, default_cache_dir

    return ResponseCache(Path(cache_dir) if cache_dir else default_cache_dir())


@cache_app.command("stats")
def cache_stats_command(
    cache_dir: CacheDirOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the numbers as JSON on stdout.")] = False,
) -> None:
    """Entries per model, size on disk and where the cache is."""
    try:
        stats = _open_cache(cache_dir).stats()
    except FlowrateError as error:
        raise _fail(error) from None
    if as_json:
        typer.echo(orjson.dumps(stats).decode())
    models = ", ".join(f"{name}: {count}" for name, count in stats["models"].items()) or "no entries"
    stderr.print(
        f"{stats['entries']} cached replies ({models}), {stats['bytes']} bytes in {stats['path']}",
        markup=False,
        highlight=False,
    )


@cache_app.command("clear")
def cache_clear_command(cache_dir: CacheDirOption = None) -> None:
    """Remove every cached reply."""
    try:
        removed = _open_cache(cache_dir).clear()
    except FlowrateError as error:
        raise _fail(error) from None
    stderr.print(f"removed {removed} cached replies", markup=False)


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
        counts = {
            "files": report.files,
            "valid": report.valid,
            "invalid": report.invalid,
            "formats": dict(report.formats),
        }
        if as_json:
            typer.echo(orjson.dumps(counts).decode())
        raise_for_problems(report)
    except FlowrateError as error:
        raise _fail(error) from None
    formats = ", ".join(f"{count} in {name} format" for name, count in sorted(report.formats.items())) or "none"
    stderr.print(
        f"{report.valid} valid conversation(s) in {report.files} file(s): {formats}", markup=False, highlight=False
    )
    raise typer.Exit(int(ExitCode.OK))


def main() -> None:
    app()
