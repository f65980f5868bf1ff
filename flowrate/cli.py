"""The `flowrate` command: a thin layer that parses options and calls the library.

Nothing heavy is imported at module level: `flowrate --help` and `flowrate validate`
never load the judging engine, LiteLLM or rich.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Annotated, Any

import typer

from flowrate.defaults import DEFAULTS
from flowrate.exit_codes import (
    ConfigError,
    ExitCode,
    FlowrateError,
    InputError,
    OutputError,
    Terminated,
    exit_code_for,
)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: flags shown as flags, brackets kept, and no rich import for --help
    help="Grade multi-turn chatbot conversations with an LLM judge: Conversational Flow Rate, the virtual-agent"
    " suite, repetition; gates and reports for CI, calibration against human labels, trends.",
)


@cache
def stderr() -> Any:
    """The console for everything a person reads; data goes to files or stdout."""
    from rich.console import Console

    return Console(stderr=True, soft_wrap=True)  # a message that scripts grep must stay on one line


def _say(text: str) -> None:
    """A message for people on stderr; no line of it is a workflow command to a CI runner
    (`escape.safe_lines`), whatever file name, id or server reply it quotes."""
    from flowrate.reports.escape import safe_lines

    stderr().print(safe_lines(text), markup=False, highlight=False)


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


def _fail(error: BaseException) -> typer.Exit:
    """Print a user error plainly, and give the exit status that goes with it."""
    if isinstance(error, InputError):
        _say(f"flowrate: {error.total} {error.headline}:" if error.counted else f"flowrate: {error.headline}:")
        for problem in error.problems:
            _say(f"  {problem}")
        if error.hint:
            _say(error.hint)
    elif isinstance(error, FlowrateError):
        _say(f"flowrate: error: {error}")
    return typer.Exit(int(exit_code_for(error)))


def _default(name: str) -> str:
    """`[default: X]` for an option, from the defaults the settings use: the help never drifts."""
    return f" [default: {DEFAULTS[name]}]"


def _option(*names: str, env: str, help: str, default_of: str | None = None, **extra: Any) -> Any:
    tail = _default(default_of) if default_of else ""
    return typer.Option(*names, envvar=env, help=help + tail, show_default=False, **extra)


# Judge options, declared once and shared by every command that calls a judge.
ModelOption = Annotated[
    str | None,
    _option(
        "--model",
        "-m",
        env="FLOWRATE_MODEL",
        default_of="model",
        help="Judge model: gpt-4o, anthropic:claude-3-5-sonnet-latest, ollama:llama3, or any LiteLLM provider/model.",
    ),
]
ApiBaseOption = Annotated[
    str | None,
    _option(
        "--api-base",
        env="FLOWRATE_API_BASE",
        help="Base URL of an OpenAI-compatible server (vLLM, llama.cpp, LM Studio, a gateway).",
    ),
]
ThresholdOption = Annotated[
    float | None,
    _option(
        "--threshold",
        env="FLOWRATE_THRESHOLD",
        default_of="threshold",
        help="A conversation passes when its score is at least this.",
    ),
]
ConcurrencyOption = Annotated[
    int | None,
    _option(
        "--concurrency",
        "-j",
        env="FLOWRATE_CONCURRENCY",
        default_of="concurrency",
        help="Judge calls in flight at most.",
    ),
]
MaxRetriesOption = Annotated[
    int | None,
    _option(
        "--max-retries",
        env="FLOWRATE_MAX_RETRIES",
        default_of="max_retries",
        help="Retries of a call after a rate limit, 5xx, timeout or dropped connection.",
    ),
]
TimeoutOption = Annotated[
    float | None,
    _option("--timeout", env="FLOWRATE_TIMEOUT", default_of="timeout", help="Seconds one attempt may take."),
]
BackoffOption = Annotated[
    float | None,
    _option(
        "--backoff",
        env="FLOWRATE_BACKOFF",
        default_of="backoff",
        help="First retry wait in seconds, doubled each retry, with jitter.",
    ),
]
BackoffMaxOption = Annotated[
    float | None,
    _option(
        "--backoff-max",
        env="FLOWRATE_BACKOFF_MAX",
        default_of="backoff_max",
        help="Longest wait between retries, Retry-After included.",
    ),
]
OutputOption = Annotated[
    str | None,
    _option("--output", "-o", env="FLOWRATE_OUTPUT", default_of="output", help="Results JSONL file; - for stdout."),
]
SkipInvalidOption = Annotated[
    bool | None,
    _option(
        "--skip-invalid",
        env="FLOWRATE_SKIP_INVALID",
        help="Judge the valid conversations and list the invalid ones as skipped.",
    ),
]
AllowEmptyOption = Annotated[
    bool | None,
    _option(
        "--allow-empty",
        env="FLOWRATE_ALLOW_EMPTY",
        help="Exit 0 when the input selects no conversation (by default that is exit 2, nothing to judge).",
    ),
]
VerboseOption = Annotated[
    bool | None,
    _option(
        "--verbose",
        "-v",
        env="FLOWRATE_VERBOSE",
        help="Print each verdict with its reason and key issues as it arrives.",
    ),
]
RubricOption = Annotated[
    str | None,
    _option("--rubric", env="FLOWRATE_RUBRIC", help="A rubric file of your own (see configs/rubric.example.yaml)."),
]
LanguageOption = Annotated[
    str | None,
    _option("--language", env="FLOWRATE_LANGUAGE", default_of="language", help="Language of reasons and key issues."),
]
SamplesOption = Annotated[
    int | None,
    _option(
        "--samples",
        env="FLOWRATE_SAMPLES",
        default_of="samples",
        help="Verdicts per conversation; the row carries the majority and the agreement.",
    ),
]
MaxInputTokensOption = Annotated[
    int | None,
    _option(
        "--max-input-tokens",
        env="FLOWRATE_MAX_INPUT_TOKENS",
        help="The judge's context budget; longer conversations lose their middle turns. [default: the model's known window]",
    ),
]
CacheDirOption = Annotated[
    str | None,
    _option(
        "--cache-dir",
        env="FLOWRATE_CACHE_DIR",
        help="Where the response cache lives. [default: the user cache directory]",
    ),
]
NoCacheOption = Annotated[
    bool | None, _option("--no-cache", env="FLOWRATE_NO_CACHE", help="Neither read nor write the response cache.")
]
RpmOption = Annotated[float | None, _option("--rpm", env="FLOWRATE_RPM", help="Requests per minute at most.")]
TpmOption = Annotated[
    float | None,
    _option(
        "--tpm", env="FLOWRATE_TPM", help="Tokens per minute at most, over any 60 seconds; estimated before each call."
    ),
]
MetricOption = Annotated[
    list[str] | None,
    _option(
        "--metric",
        env="FLOWRATE_METRIC",
        help="A metric to grade with; repeat for several (see `flowrate metrics`). [default: conversational_flow_rate]",
    ),
]
WeightOption = Annotated[
    list[str] | None,
    _option(
        "--weight",
        env="FLOWRATE_WEIGHT",
        help="NAME=W: a criterion's weight in user_satisfaction; repeatable. [default: 1 each]",
    ),
]
SampleOption = Annotated[
    float | None,
    _option(
        "--sample",
        env="FLOWRATE_SAMPLE",
        help="Judge this fraction of the conversations, chosen by a seeded hash of the id: the same on every run.",
    ),
]
SampleSeedOption = Annotated[
    int | None,
    _option("--sample-seed", env="FLOWRATE_SAMPLE_SEED", default_of="sample_seed", help="The seed of --sample."),
]
LimitOption = Annotated[
    int | None,
    _option("--limit", env="FLOWRATE_LIMIT", help="Judge at most N conversations (the first, in input order)."),
]
MinWordsOption = Annotated[
    int | None,
    _option("--min-words", env="FLOWRATE_MIN_WORDS", help="Leave out conversations with fewer words than this."),
]
OnlyOption = Annotated[
    list[str] | None,
    _option(
        "--only", env="FLOWRATE_ONLY", help="FIELD=VALUE: judge only conversations whose metadata has it; repeatable."
    ),
]
ExcludeOption = Annotated[
    list[str] | None,
    _option(
        "--exclude",
        env="FLOWRATE_EXCLUDE",
        help="FIELD=VALUE: leave out conversations whose metadata has it; repeatable.",
    ),
]
MinPassRateOption = Annotated[
    float | None,
    _option(
        "--min-pass-rate",
        env="FLOWRATE_MIN_PASS_RATE",
        help="Gate: each metric passes the run when at least this share of its rows pass (0.9: up to 10 % may fail).",
    ),
]
MinMeanScoreOption = Annotated[
    float | None,
    _option(
        "--min-mean-score", env="FLOWRATE_MIN_MEAN_SCORE", help="Gate: each metric's mean score must be at least this."
    ),
]
MaxFailuresOption = Annotated[
    int | None,
    _option(
        "--max-failures", env="FLOWRATE_MAX_FAILURES", help="Gate: each metric may have at most this many failing rows."
    ),
]
HistoryOption = Annotated[
    str | None,
    typer.Option(
        "--history", envvar="FLOWRATE_HISTORY", help="The history: a DuckDB file of every run's rows and labels."
    ),
]
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config", envvar="FLOWRATE_CONFIG", help="Config file. [default: configs/flowrate.yaml when present]"
    ),
]
Paths = Annotated[
    list[str],
    typer.Argument(help="Files, directories (every .jsonl/.json/.yaml/.yml inside) or - for JSONL on stdin."),
]


def _file_run(paths: list[str], given: dict, config: Path | None) -> Any:
    """Resolve the settings and validate the input: the run, with its notices printed."""
    from flowrate.evaluation.file_run import FileRun
    from flowrate.settings import resolve_settings

    run = FileRun(paths, resolve_settings(given, config))
    _print_notices(run.notices)
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
    _print_notices(run.notices)
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
        _option(
            "--resume",
            env="FLOWRATE_RESUME",
            help="Skip conversations the --output file already holds and append the rest.",
        ),
    ] = None,
    retry_errors: Annotated[
        bool | None,
        _option(
            "--retry-errors",
            env="FLOWRATE_RETRY_ERRORS",
            help="Like --resume, and judge again the rows that ended in an error, replacing them.",
        ),
    ] = None,
    rpm: RpmOption = None,
    tpm: TpmOption = None,
    max_cost: Annotated[
        float | None,
        _option(
            "--max-cost",
            env="FLOWRATE_MAX_COST",
            help="Budget in USD: stop scheduling calls before it would be passed; the rest is skipped.",
        ),
    ] = None,
    shard: Annotated[
        str | None,
        _option("--shard", env="FLOWRATE_SHARD", help="Judge slice I of N (I/N, 1-based), chosen by id hash."),
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
        _option("--junit", env="FLOWRATE_JUNIT", help="Write a JUnit XML report here (GitHub, GitLab, Jenkins)."),
    ] = None,
    html: Annotated[
        str | None, _option("--html", env="FLOWRATE_HTML", help="Write a self-contained HTML report here.")
    ] = None,
    github: Annotated[
        bool | None,
        _option(
            "--github",
            env="FLOWRATE_GITHUB",
            help="Write GitHub's step summary and annotations (on by itself when GITHUB_ACTIONS=true).",
        ),
    ] = None,
    date_field: Annotated[
        str | None,
        _option(
            "--date-field",
            env="FLOWRATE_DATE_FIELD",
            help="The metadata field with the chat's date. [default: chat_date, started_at or timestamp]",
        ),
    ] = None,
    history: HistoryOption = None,
    batch: Annotated[
        bool | None,
        _option(
            "--batch",
            env="FLOWRATE_BATCH",
            help="Judge through the provider's Batch API (half the price, within 24 h).",
        ),
    ] = None,
    batch_size: Annotated[
        int | None,
        _option("--batch-size", env="FLOWRATE_BATCH_SIZE", help="Requests per batch at most. [default: 47500]"),
    ] = None,
    poll_interval: Annotated[
        float | None,
        _option(
            "--poll-interval",
            env="FLOWRATE_POLL_INTERVAL",
            help="Seconds between polls of the batches, with jitter. [default: 60]",
        ),
    ] = None,
    batch_submit_only: Annotated[
        bool | None,
        _option(
            "--batch-submit-only", env="FLOWRATE_BATCH_SUBMIT_ONLY", help="Submit the batches and exit; collect later."
        ),
    ] = None,
    batch_no_fallback: Annotated[
        bool | None,
        _option(
            "--batch-no-fallback",
            env="FLOWRATE_BATCH_NO_FALLBACK",
            help="Leave failed, expired and unparsable batch lines as error rows instead of judging them online.",
        ),
    ] = None,
    batch_export: Annotated[
        str | None,
        _option(
            "--batch-export", env="FLOWRATE_BATCH_EXPORT", help="Only write the OpenAI-format batch request file here."
        ),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Judge every conversation and write one JSONL row per conversation and metric."""
    given = _settings_given(locals(), ("paths", "config", "dry_run"))
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
            _say(f"flowrate: {count} request(s) in {settings.batch_export} (OpenAI batch format); nothing was sent")
            raise typer.Exit(int(ExitCode.OK))
        summary = _judge(run, command=_batch_command(paths, settings) if settings.batch else None)
    except KeyboardInterrupt as error:
        if settings is not None and settings.batch:  # interrupted while polling: the batches run on
            _say(
                "flowrate: interrupted while polling: the batches keep running at the provider (nothing was cancelled);"
            )
            _say(f"collect them with: {_collect_command()}, or run this command again")
        raise _fail(error) from None
    except FlowrateError as error:
        raise _fail(error) from None
    if summary.pipe_closed:
        _silence_stdout()
        raise typer.Exit(int(summary.exit_code))
    if settings.batch and settings.batch_submit_only:
        _say(f"flowrate: submitted {len(summary.batches)} batch(es): {', '.join(summary.batches) or 'none'}")
        _say(f"collect with: {_collect_command()}, or run this command again")
        raise typer.Exit(int(ExitCode.OK))
    print_summary(stderr(), summary, settings.output)
    if summary.output_error:
        _say(
            f"flowrate: error: writing the results stopped: {summary.output_error}; the rows before it are kept;"
            f" free room and continue with: {_continue_command('--resume')}"
        )
    if summary.batch_online:
        _say(
            f"flowrate: {summary.batch_online} batch line(s) were judged online instead (failed, expired or unparsable)"
        )
    _write_reports(run, summary, settings, paths)
    if settings.history:
        _append_history(settings, summary.wall_time_s)
    if summary.unreachable:
        _say(
            f"flowrate: stopped: the judge at {summary.unreachable} could not be reached (refused or dropped"
            f" {UNREACHABLE_AFTER} connections in a row); continue with: {_continue_command('--retry-errors')}"
        )
    elif summary.interrupted and summary.not_judged and settings.output != "-":
        _say(f"resume with: {_continue_command('--resume')}")
    raise typer.Exit(int(summary.exit_code))


def _batch_command(paths: list[str], settings: Any) -> dict:
    """What `flowrate batch collect` needs to collect a batch as the submitting command would."""
    command = {
        "paths": [str(Path(p).resolve()) if p != "-" else p for p in paths],
        "settings": settings.model_dump(mode="json"),
    }
    command["settings"]["output"] = str(Path(settings.output).resolve())
    return command


def _collect_command() -> str:
    return shlex.join([*invoked_as(), "batch", "collect"])


def _append_history(settings: Any, wall_time_s: float) -> None:
    """Add the run's rows and the run (started when it did) to the history."""
    from datetime import UTC, datetime, timedelta

    from flowrate.analysis.history import connect, import_results

    if settings.output == "-":
        _say("flowrate: --history needs --output to be a file; the history was not updated")
        return
    try:
        started = datetime.now(UTC) - timedelta(seconds=wall_time_s)
        added = import_results(connect(settings.history), settings.output, started.replace(tzinfo=None))
    except FlowrateError as error:
        raise _fail(error) from None
    _say(f"flowrate: history {settings.history}: {added} new row(s)")


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
        raise _fail(OutputError(f"a report could not be written{where}: {error.strerror or error}")) from None
    _print_notices(notices)


def _settings_given(values: dict[str, Any], leave_out: tuple[str, ...]) -> dict[str, Any]:
    """The command's options as settings: `--weight NAME=W` pairs become `weights`, and an
    empty repeatable option counts as not given."""
    given = {name: value for name, value in values.items() if name not in leave_out}
    for name in ("metric", "only", "exclude"):
        if name in given and not given[name]:
            given[name] = None
    pairs = given.pop("weight", None)
    if pairs:
        weights = {}
        for pair in pairs:
            name, _, number = pair.partition("=")
            try:
                if not name:
                    raise ValueError(pair)
                weights[name] = float(number)
            except ValueError:
                raise _fail(ConfigError(f"option weight: {pair!r} must be NAME=W, W a number")) from None
        given["weights"] = weights
    return given


def invoked_as() -> list[str]:
    """The words that started this process: `flowrate` when that is what PATH finds,
    `python -m flowrate` when run as a module, else the path as given."""
    first = sys.argv[0] if sys.argv else "flowrate"
    if os.path.basename(first) == "__main__.py":
        return [sys.executable, "-m", "flowrate"]
    name = os.path.basename(first)
    found = shutil.which(name)
    if found and os.path.realpath(found) == os.path.realpath(first):
        return [name]
    return [first]


def _continue_command(flag: str) -> str:
    words = sys.argv[1:]
    flags = {"--resume", "--retry-errors"}
    if flag not in words:
        words = [word for word in words if word not in flags or word == flag] + [flag]
    return shlex.join([*invoked_as(), *words])


def _silence_stdout() -> None:
    """After the reader of stdout went away, point stdout at /dev/null so that Python's own
    flush at exit does not fail again (as the signal module's docs advise for SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real stdout (a test runner's buffer)
        pass


def _write_stdout(text: str, nl: bool = True) -> None:
    """`text` (and a newline if `nl`) on stdout as UTF-8, for a reader that may go away
    (`... | head -c1`): a closed pipe, whenever it closes, stops the command quietly with exit
    141, as `eval -o -` does. With PYTHONUNBUFFERED=1 stdout is unbuffered and a write into a
    pipe whose reader left returns short instead of failing (the text layer drops the rest),
    so the bytes are written in a loop until all are out or the pipe is seen closed."""
    data = memoryview((text + ("\n" if nl else "")).encode())
    try:
        sys.stdout.flush()
        while data:
            data = data[sys.stdout.buffer.write(data) :]
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        _silence_stdout()
        raise typer.Exit(int(ExitCode.BROKEN_PIPE)) from None


def _print_notices(notices: list[str]) -> None:
    for notice in notices:
        _say(f"flowrate: {notice}")


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
    metric: Annotated[
        str | None,
        typer.Option(
            "--metric",
            help="The metric whose rows are compared with the label: a metric, or a criterion of a suite"
            " (coherence judges with virtual_agent). [default: conversational_flow_rate]",
        ),
    ] = None,
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
    weight: WeightOption = None,
    config: ConfigOption = None,
) -> None:
    """Measure how well the judge agrees with human labels: Spearman, Kendall, Pearson, kappa."""
    given = _settings_given(locals(), ("paths", "config", "label", "results", "as_json", "metric"))
    from flowrate.analysis.agreement import agreement_report, labels_named, pair_up
    from flowrate.metrics.catalog import metric_making, scale_values
    from flowrate.reports.console import print_agreement
    from flowrate.results.files import read_rows

    compared = metric or "conversational_flow_rate"
    given["output"] = given["output"] or "flowrate-agreement.jsonl"
    try:
        labels = labels_named(paths, label)
        if results is not None:
            rows = list(read_rows(results))
            incomplete = False
        else:
            given["metric"] = [metric_making(compared)]
            rows = []
            summary = _judge(_file_run(paths, given, config), also=rows.append)
            incomplete = summary.errors > 0 or summary.interrupted
        pairs, unpaired = pair_up(labels, rows, label, compared)
        report = agreement_report(pairs, label, compared, scale_values(compared, rubric))
    except (FlowrateError, KeyboardInterrupt) as error:
        raise _fail(error) from None
    print_agreement(stderr(), report)
    if unpaired:
        where = f" in {results}" if results is not None else ""
        _say(
            f"flowrate: {unpaired} of {len(labels)} labeled conversation(s) have no usable {compared} row{where}"
            " (missing, or an error row); they are left out of n"
        )
    if as_json:
        typer.echo(report.model_dump_json())
    raise typer.Exit(int(ExitCode.INCOMPLETE if incomplete or unpaired else ExitCode.OK))


@app.command("metrics")
def metrics_command(
    weight: WeightOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the list as JSON on stdout.")] = False,
) -> None:
    """List every metric: its criteria, scales, weights and judge calls per conversation."""
    from dataclasses import asdict

    import orjson

    from flowrate.metrics.catalog import NAMES, check_weights, describe

    weights = _settings_given({"weight": weight}, ()).get("weights")
    try:
        check_weights(weights or {})
    except FlowrateError as error:
        raise _fail(error) from None
    infos = [describe(name, weights) for name in NAMES]
    if as_json:
        typer.echo(orjson.dumps([asdict(info) for info in infos]).decode())
    for info in infos:
        calls = f"{info.calls_per_conversation} judge call(s) per conversation"
        _say(f"{info.name}: {info.title}; {calls}")
        for name, scale, description in info.rows:
            weight_note = f", weight {info.weights[name]:g}" if info.weights and name in info.weights else ""
            _say(f"  {name}: {scale}{weight_note}: {description}")


@app.command("merge")
def merge_command(
    paths: Annotated[list[str], typer.Argument(help="Results files of the shards of one run.")],
    output: Annotated[str, typer.Option("--output", "-o", help="The merged results file; - for stdout.")],
    allow_empty: AllowEmptyOption = None,
    min_pass_rate: MinPassRateOption = None,
    min_mean_score: MinMeanScoreOption = None,
    max_failures: MaxFailuresOption = None,
    config: ConfigOption = None,
) -> None:
    """Join the results of shards (--shard I/N) into one file and one summary, gates included."""
    from flowrate.reports.console import print_summary
    from flowrate.results.gates import apply_gates
    from flowrate.results.merge import merge_results
    from flowrate.settings import resolve_settings

    given = {"min_pass_rate": min_pass_rate, "min_mean_score": min_mean_score, "max_failures": max_failures}
    try:
        settings = resolve_settings(given, config)
        summary = merge_results(paths, output, allow_empty=bool(allow_empty))
        apply_gates(summary, settings.default_gates, settings.gates)
    except FlowrateError as error:
        raise _fail(error) from None
    print_summary(stderr(), summary, output)
    raise typer.Exit(int(summary.exit_code))


@app.command("report")
def report_command(
    paths: Annotated[list[str], typer.Argument(help="Results files (flowrate eval -o FILE).")],
    html: Annotated[str, typer.Option("--html", help="Where the HTML page goes.")],
    inputs: Annotated[
        list[str] | None,
        typer.Option("--inputs", help="The conversations the rows were judged from, for the transcripts; repeatable."),
    ] = None,
) -> None:
    """Write a self-contained HTML report of results files: totals, a table of rows, transcripts."""
    from flowrate.inputs.files import load_transcripts
    from flowrate.reports.html import write_html
    from flowrate.results.book import ReportBook
    from flowrate.results.files import read_rows
    from flowrate.results.summary import RunSummary

    book, summary = ReportBook(), RunSummary()
    try:
        for path in paths:
            for order, row in enumerate(read_rows(Path(path)), start=1):
                book.add(row)
                summary.add(row, order)
        ids = {case.id for cases in book.cases.values() for case in cases}
        write_html(html, book, summary, load_transcripts(inputs or [], ids))
    except FlowrateError as error:
        raise _fail(error) from None
    except OSError as error:
        raise _fail(ConfigError(f"--html {html}: cannot be written: {error.strerror}")) from None
    _say(f"HTML report: {html} ({sum(stats.rows for stats in summary.metrics.values())} rows)")


@app.command("compare")
def compare_command(
    baseline: Annotated[Path, typer.Argument(help="The results of the last good run.")],
    current: Annotated[Path, typer.Argument(help="The results of this run.")],
    tolerance: Annotated[
        float,
        typer.Option(
            "--tolerance",
            help="A metric's drop fails (exit 1) when the upper end of the 95 % interval of its mean delta is below -this.",
        ),
    ] = 0.0,
    fail_on_any_regression: Annotated[
        bool, typer.Option("--fail-on-any-regression", help="Exit 1 when any one conversation got worse.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON on stdout.")] = False,
    as_markdown: Annotated[
        bool, typer.Option("--markdown", help="Print a Markdown fragment for a pull-request comment on stdout.")
    ] = False,
) -> None:
    """Compare a run with a baseline: changed verdicts, regressions first, and per metric the
    mean score delta with a seeded bootstrap 95 % interval."""
    from flowrate.analysis.compare import compare_files
    from flowrate.reports.console import comparison_markdown, print_comparison

    try:
        comparison = compare_files(baseline, current, tolerance)
    except FlowrateError as error:
        raise _fail(error) from None
    print_comparison(stderr(), comparison)
    if as_json:
        _write_stdout(comparison.model_dump_json())
    if as_markdown:
        _write_stdout(comparison_markdown(comparison), nl=False)
    worse = any(change.delta < 0 for change in comparison.changes)
    failed = comparison.regressed or (fail_on_any_regression and worse)
    raise typer.Exit(int(ExitCode.FAILED if failed else ExitCode.OK))


batch_app = typer.Typer(
    help="Provider batches: status, collect, cancel, import results.", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(batch_app, name="batch")


def _batch_state(cache_dir: str | None):
    from flowrate.batches import BatchState
    from flowrate.cache import default_cache_dir

    return BatchState(Path(cache_dir) if cache_dir else default_cache_dir())


def _named_batches(state: Any, ids: list[str]) -> list[dict]:
    """The recorded batches that `ids` name, in that order. An id never recorded is an error
    (exit 2) that names it and the most recent recorded ones."""
    recorded = {batch["batch_id"]: batch for batch in state.all()}
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
    return [recorded[batch_id] for batch_id in dict.fromkeys(ids)]


@batch_app.command("status")
def batch_status_command(
    ids: Annotated[list[str] | None, typer.Argument(help="Batch ids. [default: every batch not yet collected]")] = None,
    show_all: Annotated[bool, typer.Option("--all", help="Every recorded batch, collected or not.")] = False,
    cache_dir: CacheDirOption = None,
) -> None:
    """The recorded batches with their provider status and request counts."""
    import asyncio

    from flowrate.batches import Provider

    state = _batch_state(cache_dir)
    try:
        batches = _named_batches(state, ids) if ids else state.all() if show_all else state.uncollected()
    except FlowrateError as error:
        raise _fail(error) from None

    async def show() -> None:
        for batch in batches:
            line = f"{batch['batch_id']}: {len(batch['custom_ids'])} requests for {batch['output']}"
            if batch["collected"]:
                _say(f"{line}: {batch['status']}, collected")
                continue
            info = await Provider(batch["provider"], batch["api_base"]).retrieve(batch["batch_id"])
            counts = info.request_counts
            _say(f"{line}: {info.status}, {counts.completed} done, {counts.failed} failed of {counts.total}")

    try:
        asyncio.run(show())
    except FlowrateError as error:
        raise _fail(error) from None
    if not batches:
        _say("no batches to show")


@batch_app.command("collect")
def batch_collect_command(
    ids: Annotated[list[str] | None, typer.Argument(help="Batch ids. [default: every batch not yet collected]")] = None,
    cache_dir: CacheDirOption = None,
) -> None:
    """Collect every finished batch not yet collected into its results file, as the command that
    submitted it would; exit 3 while some are still running."""
    import asyncio

    from flowrate.evaluation.file_run import FileRun
    from flowrate.reports.console import print_summary
    from flowrate.settings import EvalSettings

    state = _batch_state(cache_dir)
    try:
        named = _named_batches(state, ids) if ids else None
    except FlowrateError as error:
        raise _fail(error) from None
    commands = {}
    for batch in state.uncollected() if named is None else named:
        if batch["collected"]:
            _say(f"flowrate: {batch['batch_id']} was collected already ({batch['status']}) into {batch['output']}")
        else:
            commands.setdefault(batch["output"], batch["command"])
    if not commands:
        _say("no batches to collect")
        raise typer.Exit(int(ExitCode.OK))
    worst = ExitCode.OK
    for output, command in commands.items():
        try:
            settings = EvalSettings.model_validate({**command["settings"], "batch_submit_only": False})
            run = FileRun(command["paths"], settings)
            summary = asyncio.run(run.execute_batch(submit=False, only=set(ids) if ids else None))
        except FlowrateError as error:
            raise _fail(error) from None
        print_summary(stderr(), summary, output)
        code = ExitCode.INCOMPLETE if summary.still_running else summary.exit_code
        if summary.still_running:
            _say(f"flowrate: still running: {', '.join(summary.still_running)}")
        worst = max(worst, code)
    raise typer.Exit(int(worst))


@batch_app.command("cancel")
def batch_cancel_command(
    ids: Annotated[list[str] | None, typer.Argument(help="Batch ids.")] = None,
    cancel_all: Annotated[bool, typer.Option("--all", help="Every batch not yet collected.")] = False,
    cache_dir: CacheDirOption = None,
) -> None:
    """Cancel batches at the provider, saying for each what the provider did; a batch that has
    finished is left as it is. `collect` then judges online what the cancelled ones left."""
    import asyncio

    from flowrate.batches import TERMINAL, Provider

    state = _batch_state(cache_dir)
    try:
        if ids:
            batches = _named_batches(state, ids)
        elif cancel_all:
            batches = state.uncollected()
        else:
            raise ConfigError("name the batches to cancel, or --all")
    except FlowrateError as error:
        raise _fail(error) from None
    if not batches:
        _say("flowrate: no batches to cancel")
        raise typer.Exit(int(ExitCode.OK))

    async def cancel() -> None:
        for batch in batches:
            batch_id = batch["batch_id"]
            if batch["collected"]:
                _say(f"{batch_id}: collected already ({batch['status']}), nothing to cancel")
                continue
            provider = Provider(batch["provider"], batch["api_base"])
            info = await provider.retrieve(batch_id)
            if info.status not in TERMINAL:
                info = await provider.cancel(batch_id)
                _say(f"{batch_id}: {info.status} (flowrate batch collect then judges online what it left)")
            else:
                _say(f"{batch_id}: already {info.status}, nothing to cancel (flowrate batch collect collects it)")
            state.mark(batch_id, info.status)

    try:
        asyncio.run(cancel())
    except FlowrateError as error:
        raise _fail(error) from None


@batch_app.command("import-results")
def batch_import_results_command(
    results_file: Annotated[
        Path, typer.Argument(help="A batch output file: OpenAI's format, as vllm run-batch writes it.")
    ],
    paths: Paths,
    model: ModelOption = None,
    api_base: ApiBaseOption = None,
    threshold: ThresholdOption = None,
    output: OutputOption = None,
    rubric: RubricOption = None,
    language: LanguageOption = None,
    samples: SamplesOption = None,
    max_input_tokens: MaxInputTokensOption = None,
    metric: MetricOption = None,
    weight: WeightOption = None,
    config: ConfigOption = None,
) -> None:
    """Rows from a batch output file, mapped back by custom id to the conversations in PATHS,
    planned as the export was (give the same judge options)."""
    given = _settings_given(locals(), ("results_file", "paths", "config"))
    import asyncio

    from flowrate.evaluation.file_run import FileRun
    from flowrate.reports.console import print_summary
    from flowrate.settings import resolve_settings

    given["no_cache"] = True
    try:
        settings = resolve_settings(given, config)
        run = FileRun(paths, settings)
        summary = asyncio.run(run.import_batch_results(str(results_file)))
    except FlowrateError as error:
        raise _fail(error) from None
    print_summary(stderr(), summary, settings.output)
    raise typer.Exit(int(summary.exit_code))


labels_app = typer.Typer(
    help="Human labels: a template to fill in, and importing them into the history.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(labels_app, name="labels")
history_app = typer.Typer(
    help="The history: a DuckDB file of every run, its rows and the labels.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(history_app, name="history")
ResultsPaths = Annotated[list[str] | None, typer.Argument(help="Results files (flowrate eval -o FILE).")]


@labels_app.command("template")
def labels_template_command(
    paths: Annotated[list[str], typer.Argument(help="Results files (flowrate eval -o FILE).")],
    output: Annotated[str, typer.Option("--output", "-o", help="The CSV to write.")] = "labels.csv",
    sample: Annotated[
        float | None, typer.Option("--sample", help="Keep this fraction of conversations, by a seeded id hash.")
    ] = None,
    sample_seed: Annotated[int, typer.Option("--sample-seed", help="The seed of --sample.")] = 0,
) -> None:
    """Write the CSV a person fills in: id, metric, the judge's score and reason, empty label columns."""
    from flowrate.analysis.labels import write_template

    try:
        rows = _rows_of(paths)
        written = write_template(rows, output, sample, sample_seed)
    except FlowrateError as error:
        raise _fail(error) from None
    except OSError as error:
        raise _fail(ConfigError(f"--output {output}: cannot be written: {error.strerror}")) from None
    _say(f"{written} row(s) to label in {output}: fill in one of rating, verdict or score, and labeled_at")


@labels_app.command("import")
def labels_import_command(
    path: Annotated[Path, typer.Argument(help="A labels file, JSONL or CSV.")],
    history: HistoryOption = None,
) -> None:
    """Add labels to the history (each distinct label once)."""
    from flowrate.analysis.history import connect, import_labels, stored_rows
    from flowrate.analysis.labels import Scales, read_labels

    try:
        connection = connect(_need_history(history))
        added = import_labels(connection, read_labels(path, Scales(stored_rows(connection))))
    except FlowrateError as error:
        raise _fail(error) from None
    _say(f"{added} new label(s) in {history}")


@history_app.command("import")
def history_import_command(
    paths: Annotated[list[str], typer.Argument(help="Results files (flowrate eval -o FILE).")],
    history: HistoryOption = None,
) -> None:
    """Add results files to the history; a row already there is not added again."""
    from flowrate.analysis.history import connect, import_results

    try:
        connection = connect(_need_history(history))
        added = [import_results(connection, path) for path in paths]
    except FlowrateError as error:
        raise _fail(error) from None
    _say(f"{sum(added)} new row(s) in {history} from {len(paths)} file(s)")


def _need_history(history: str | None) -> str:
    if not history:
        raise ConfigError("--history PATH (or FLOWRATE_HISTORY) names the history file")
    return history


def _rows_of(paths: list[str]) -> list:
    from flowrate.results.files import read_rows

    return [row for path in paths for row in read_rows(Path(path))]


def _rows_and_labels(paths: list[str] | None, history: str | None, labels_file: Path | None):
    """Rows from results files, or else from the history; labels from the file, or else the
    history's whenever it is given. The history is opened read-only: it must exist."""
    from flowrate.analysis.labels import Scales, read_labels

    connection = None
    if history:
        from flowrate.analysis.history import connect, stored_rows

        connection = connect(history, read_only=True)
    if paths:
        rows = _rows_of(paths)
    elif connection is not None:
        rows = stored_rows(connection)
    else:
        raise ConfigError("give results files, or --history PATH")
    if labels_file is not None:
        labels = read_labels(labels_file, Scales(rows))
    elif connection is not None:
        from flowrate.analysis.history import stored_labels

        labels = stored_labels(connection)
    else:
        labels = None
    return rows, labels


@app.command("calibrate")
def calibrate_command(
    paths: ResultsPaths = None,
    labels: Annotated[
        Path | None, typer.Option("--labels", help="Human labels, JSONL or CSV. [default: the history's]")
    ] = None,
    history: HistoryOption = None,
    as_of: Annotated[
        str | None, typer.Option("--as-of", help="The day the window ends (YYYY-MM-DD). [default: today]")
    ] = None,
    window: Annotated[
        str, typer.Option("--window", help="Labels dated in this window count: months (6mo) or days (90d).")
    ] = "6mo",
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")] = False,
    adjusted_output: Annotated[
        str | None, typer.Option("--adjusted-output", help="Write the rows with adjusted_score added here.")
    ] = None,
) -> None:
    """How far the judge sits from human labels, per metric, and scores adjusted by that band."""
    from datetime import date

    import orjson

    from flowrate.analysis.calibration import adjusted_rows, calibrate
    from flowrate.reports.console import print_calibration

    try:
        if adjusted_output:
            target = Path(adjusted_output).expanduser().resolve()
            inputs = [*(paths or []), *([labels] if labels else []), *([history] if history else [])]
            if any(Path(name).expanduser().resolve() == target for name in inputs):
                raise ConfigError(
                    f"--adjusted-output {adjusted_output}: is also an input of calibrate; name another file"
                )
        rows, found = _rows_and_labels(paths, history, labels)
        if found is None:
            raise ConfigError("--labels FILE names the human labels (or --history with labels imported)")
        try:
            day = date.fromisoformat(as_of) if as_of else date.today()
        except ValueError:
            raise ConfigError(f"option as-of: {as_of!r} is not a date (YYYY-MM-DD)") from None
        report, bands = calibrate(rows, found, day, window)
        if adjusted_output:
            with open(adjusted_output, "wb") as handle:
                for item in adjusted_rows(rows, bands):
                    handle.write(orjson.dumps(item) + b"\n")
    except FlowrateError as error:
        raise _fail(error) from None
    except OSError as error:
        raise _fail(ConfigError(f"--adjusted-output {adjusted_output}: cannot be written: {error.strerror}")) from None
    print_calibration(stderr(), report)
    if as_json:
        _write_stdout(orjson.dumps(report).decode())


@app.command("trends")
def trends_command(
    paths: ResultsPaths = None,
    history: HistoryOption = None,
    by: Annotated[str, typer.Option("--by", help="day, week (ISO weeks) or month.")] = "week",
    date_kind: Annotated[
        str, typer.Option("--date", help="evaluated: the day a row was judged; chat: the day the chat happened.")
    ] = "evaluated",
    metric: Annotated[str | None, typer.Option("--metric", help="Only this metric.")] = None,
    labels: Annotated[
        Path | None, typer.Option("--labels", help="Human labels, JSONL or CSV. [default: the history's]")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the trend as JSON on stdout.")] = False,
    html: Annotated[
        str | None, typer.Option("--html", help="Write a self-contained page with a chart per metric here.")
    ] = None,
) -> None:
    """Per period and metric: conversations, mean score, pass rate; with labels, the mean human
    score, the adjusted mean and the deviation band."""
    import orjson

    from flowrate.analysis.history import (
        connect,
        import_labels,
        import_results,
        replace_labels,
        stored_labels,
        stored_rows,
    )
    from flowrate.analysis.labels import Scales, read_labels
    from flowrate.analysis.trends import render_html, trends, undated_rows
    from flowrate.reports.console import print_trends

    try:
        if paths:
            connection = connect(None)
            for path in paths:
                import_results(connection, path)
            if history and labels is None:  # results files, with the history's labels
                source = connect(history, read_only=True)
                try:
                    import_labels(connection, stored_labels(source))
                finally:
                    source.close()
        elif history:
            connection = connect(history, read_only=True)
        else:
            raise ConfigError("give results files, or --history PATH")
        if labels is not None:
            replace_labels(connection, read_labels(labels, Scales(stored_rows(connection))))
        with_labels = connection.execute("SELECT count(*) FROM labels").fetchone()[0] > 0
        items = trends(connection, by, date_kind, metric, with_labels)
        undated = undated_rows(connection, metric) if date_kind == "chat" else 0
        if html:
            Path(html).write_text(render_html(items), encoding="utf-8")
    except FlowrateError as error:
        raise _fail(error) from None
    except OSError as error:
        raise _fail(ConfigError(f"--html {html}: cannot be written: {error.strerror}")) from None
    if undated:
        _say(
            f"flowrate: {undated} row(s) have no chat date and are left out of --date chat"
            " (eval --date-field names the metadata field with the chat's date)"
        )
    print_trends(stderr(), items)
    if html:
        _say(f"HTML trends: {html}")
    if as_json:
        _write_stdout(orjson.dumps(items).decode())


cache_app = typer.Typer(
    help="The response cache: judge replies kept so a rerun pays nothing.", no_args_is_help=True, rich_markup_mode=None
)
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
    import orjson

    from flowrate.cache import default_cache_dir, read_stats

    try:  # a directory named with --cache-dir must exist; the default one may not yet
        stats = read_stats(Path(cache_dir) if cache_dir else default_cache_dir(), must_exist=cache_dir is not None)
    except FlowrateError as error:
        raise _fail(error) from None
    if as_json:
        _write_stdout(orjson.dumps(stats).decode())
    models = ", ".join(f"{name}: {count}" for name, count in stats["models"].items()) or "no entries"
    _say(f"{stats['entries']} cached replies ({models}), {stats['bytes']} bytes in {stats['path']}")


@cache_app.command("clear")
def cache_clear_command(cache_dir: CacheDirOption = None) -> None:
    """Remove every cached reply."""
    try:
        removed = _open_cache(cache_dir).clear()
    except FlowrateError as error:
        raise _fail(error) from None
    _say(f"removed {removed} cached replies")


@app.command("validate")
def validate_command(
    paths: Paths,
    as_json: Annotated[bool, typer.Option("--json", help="Print the counts as JSON on stdout.")] = False,
) -> None:
    """Check the input without calling a judge: record counts per format, and every problem."""
    import orjson

    from flowrate.inputs.files import InputSet
    from flowrate.inputs.selection import raise_for_problems, scan

    try:
        inputs = InputSet(paths)
        try:
            report = scan(inputs)
        finally:
            inputs.close()
        _print_notices(inputs.notices)
        counts = {
            "files": report.files,
            "valid": report.valid,
            "invalid": report.invalid,
            "formats": dict(report.formats),
        }
        if as_json:
            typer.echo(orjson.dumps(counts).decode())
        raise_for_problems(report, headline="problem(s) in the input")
    except FlowrateError as error:
        raise _fail(error) from None
    formats = ", ".join(f"{count} in {name} format" for name, count in sorted(report.formats.items())) or "none"
    _say(f"{report.valid} valid conversation(s) in {report.files} file(s): {formats}")
    raise typer.Exit(int(ExitCode.OK))


def main() -> None:
    """The console entry point. SIGTERM (how CI runners, `timeout` and Kubernetes stop a job)
    stops flowrate as Ctrl-C does, and Ctrl-C is heard even by a process a shell started in the
    background, which inherits SIGINT ignored."""
    import signal

    def terminate(number: int, frame: Any) -> None:
        raise Terminated()

    signal.signal(signal.SIGTERM, terminate)
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    app()
