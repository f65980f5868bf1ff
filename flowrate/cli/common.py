"""What every command shares: the options declared once (as sqlite-utils does), the console for people, plain error messages, and writing to stdout."""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Annotated, Any

import typer

from flowrate.errors import ConfigError, ExitCode, FlowrateError, InputError, exit_code_for
from flowrate.settings.defaults import DEFAULTS


@cache
def stderr() -> Any:
    """The console for everything a person reads; data goes to files or stdout."""
    from rich.console import Console

    return Console(stderr=True, soft_wrap=True)  # a message that scripts grep must stay on one line


def say(text: str) -> None:
    """A message for people on stderr; no line of it is a workflow command to a CI runner
    (`escape.safe_lines`), whatever file name, id or server reply it quotes."""
    from flowrate.reports.escape import safe_lines

    stderr().print(safe_lines(text), markup=False, highlight=False)


def fail(error: BaseException) -> typer.Exit:
    """Print a user error plainly, and give the exit status that goes with it."""
    if isinstance(error, InputError):
        say(f"flowrate: {error.total} {error.headline}:" if error.counted else f"flowrate: {error.headline}:")
        for problem in error.problems:
            say(f"  {problem}")
        if error.hint:
            say(error.hint)
    elif isinstance(error, FlowrateError):
        say(f"flowrate: error: {error}")
    return typer.Exit(int(exit_code_for(error)))


def command(group: typer.Typer, name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register a command on `group` under `name`, running through `handled`."""

    def register(function: Callable[..., None]) -> Callable[..., None]:
        group.command(name)(handled(function))
        return function

    return register


def handled(function: Callable[..., None]) -> Callable[..., None]:
    """The one place that maps errors to exit statuses, as httpie's `core.raw_main` does: every
    command runs through it. A user's error is a plain message and its documented code (2 for
    usage and input, 3 incomplete, 4 an output that failed late, 130 Ctrl-C, 143 SIGTERM),
    a closed stdout is 141, and nothing else is caught: a bug keeps its traceback."""

    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> None:
        try:
            function(*args, **kwargs)
        except (FlowrateError, KeyboardInterrupt) as error:
            raise fail(error) from None
        except BrokenPipeError:
            silence_stdout()
            raise typer.Exit(int(ExitCode.BROKEN_PIPE)) from None

    return run


def default_note(name: str) -> str:
    """`[default: X]` for an option, from the defaults the settings use: the help never drifts."""
    return f" [default: {DEFAULTS[name]}]"


def option(*names: str, env: str, help: str, default_of: str | None = None, **extra: Any) -> Any:
    tail = default_note(default_of) if default_of else ""
    return typer.Option(*names, envvar=env, help=help + tail, show_default=False, **extra)


# Judge options, declared once and shared by every command that calls a judge.
ModelOption = Annotated[
    str | None,
    option(
        "--model",
        "-m",
        env="FLOWRATE_MODEL",
        default_of="model",
        help="Judge model: gpt-4o, anthropic:claude-3-5-sonnet-latest, ollama:llama3, or any LiteLLM provider/model.",
    ),
]
ApiBaseOption = Annotated[
    str | None,
    option(
        "--api-base",
        env="FLOWRATE_API_BASE",
        help="Base URL of an OpenAI-compatible server (vLLM, llama.cpp, LM Studio, a gateway).",
    ),
]
TransportOption = Annotated[
    str | None,
    option(
        "--transport",
        env="FLOWRATE_TRANSPORT",
        help="How a judge speaking OpenAI's protocol (OpenAI, Azure, any --api-base) is called: auto and direct"
        " over flowrate's own HTTP client, litellm through LiteLLM; other providers always go through LiteLLM."
        " [default: auto]",
    ),
]
EngineOption = Annotated[
    str | None,
    option(
        "--engine",
        env="FLOWRATE_ENGINE",
        help="What sends the requests: local (flowrate's own scheduler, in this process) or ray (a Ray Data"
        " processor on a Ray cluster; pip install 'flowrate[ray]'). [default: local]",
    ),
]
RayAddressOption = Annotated[
    str | None,
    option(
        "--ray-address",
        env="FLOWRATE_RAY_ADDRESS",
        help="The Ray cluster --engine ray joins (ray://HOST:10001, which needs pip install 'ray[client]';"
        " or HOST:6379 on the cluster)."
        " [default: RAY_ADDRESS, else a local cluster for the run]",
    ),
]
OutputParquetOption = Annotated[
    str | None,
    option(
        "--output-parquet",
        env="FLOWRATE_OUTPUT_PARQUET",
        help="Also write the rows as a Parquet file here once the run is over (the JSONL output stays the record).",
    ),
]
ThresholdOption = Annotated[
    float | None,
    option(
        "--threshold",
        env="FLOWRATE_THRESHOLD",
        default_of="threshold",
        help="A conversation passes when its score is at least this.",
    ),
]
ConcurrencyOption = Annotated[
    int | None,
    option(
        "--concurrency",
        "-j",
        env="FLOWRATE_CONCURRENCY",
        default_of="concurrency",
        help="Judge calls in flight at most.",
    ),
]
MaxRetriesOption = Annotated[
    int | None,
    option(
        "--max-retries",
        env="FLOWRATE_MAX_RETRIES",
        default_of="max_retries",
        help="Retries of a call after a rate limit, 5xx, timeout or dropped connection.",
    ),
]
TimeoutOption = Annotated[
    float | None,
    option(
        "--timeout",
        env="FLOWRATE_TIMEOUT",
        help="Seconds one attempt may take. [default: 60; 600 for a self-hosted model, so a cold CPU server finishes]",
    ),
]
BackoffOption = Annotated[
    float | None,
    option(
        "--backoff",
        env="FLOWRATE_BACKOFF",
        default_of="backoff",
        help="First retry wait in seconds, doubled each retry, with jitter.",
    ),
]
BackoffMaxOption = Annotated[
    float | None,
    option(
        "--backoff-max",
        env="FLOWRATE_BACKOFF_MAX",
        default_of="backoff_max",
        help="Longest wait between retries, Retry-After included.",
    ),
]
OutputOption = Annotated[
    str | None,
    option("--output", "-o", env="FLOWRATE_OUTPUT", default_of="output", help="Results JSONL file; - for stdout."),
]
SkipInvalidOption = Annotated[
    bool | None,
    option(
        "--skip-invalid",
        env="FLOWRATE_SKIP_INVALID",
        help="Judge the valid conversations and list the invalid ones as skipped.",
    ),
]
AllowEmptyOption = Annotated[
    bool | None,
    option(
        "--allow-empty",
        env="FLOWRATE_ALLOW_EMPTY",
        help="Exit 0 when the input selects no conversation (by default that is exit 2, nothing to judge).",
    ),
]
VerboseOption = Annotated[
    bool | None,
    option(
        "--verbose",
        "-v",
        env="FLOWRATE_VERBOSE",
        help="Print each verdict with its reason and key issues as it arrives.",
    ),
]
RubricOption = Annotated[
    str | None,
    option("--rubric", env="FLOWRATE_RUBRIC", help="A rubric file of your own (see configs/rubric.example.yaml)."),
]
LanguageOption = Annotated[
    str | None,
    option("--language", env="FLOWRATE_LANGUAGE", default_of="language", help="Language of reasons and key issues."),
]
CutLogsOption = Annotated[
    bool | None,
    option(
        "--cut-logs",
        env="FLOWRATE_CUT_LOGS",
        help="The logs were cut after their last message: a final user message nobody answered is left out,"
        ' not judged as a user left hanging (a record\'s "log_cut" says so for itself).',
    ),
]
SamplesOption = Annotated[
    int | None,
    option(
        "--samples",
        env="FLOWRATE_SAMPLES",
        default_of="samples",
        help="Verdicts per conversation; the row carries the majority and the agreement.",
    ),
]
MaxInputTokensOption = Annotated[
    int | None,
    option(
        "--max-input-tokens",
        env="FLOWRATE_MAX_INPUT_TOKENS",
        help="The judge's context budget; longer conversations lose their middle turns. [default: the model's known window]",
    ),
]
CacheDirOption = Annotated[
    str | None,
    option(
        "--cache-dir",
        env="FLOWRATE_CACHE_DIR",
        help="Where the response cache lives. [default: the user cache directory]",
    ),
]
NoCacheOption = Annotated[
    bool | None, option("--no-cache", env="FLOWRATE_NO_CACHE", help="Neither read nor write the response cache.")
]
MaxCostOption = Annotated[
    float | None,
    option(
        "--max-cost",
        env="FLOWRATE_MAX_COST",
        help="Budget in USD: stop scheduling calls before it would be passed; the rest is skipped.",
    ),
]
RpmOption = Annotated[float | None, option("--rpm", env="FLOWRATE_RPM", help="Requests per minute at most.")]
TpmOption = Annotated[
    float | None,
    option(
        "--tpm", env="FLOWRATE_TPM", help="Tokens per minute at most, over any 60 seconds; estimated before each call."
    ),
]
MetricOption = Annotated[
    list[str] | None,
    option(
        "--metric",
        env="FLOWRATE_METRIC",
        help="A metric to grade with; repeat for several (see `flowrate metrics`). [default: conversational_flow_rate]",
    ),
]
WeightOption = Annotated[
    list[str] | None,
    option(
        "--weight",
        env="FLOWRATE_WEIGHT",
        help="NAME=W: a criterion's weight in user_satisfaction; repeatable. [default: 1 each]",
    ),
]
SampleOption = Annotated[
    float | None,
    option(
        "--sample",
        env="FLOWRATE_SAMPLE",
        help="Judge this fraction of the conversations, chosen by a seeded hash of the id: the same on every run.",
    ),
]
SampleSeedOption = Annotated[
    int | None,
    option("--sample-seed", env="FLOWRATE_SAMPLE_SEED", default_of="sample_seed", help="The seed of --sample."),
]
LimitOption = Annotated[
    int | None,
    option("--limit", env="FLOWRATE_LIMIT", help="Judge at most N conversations (the first, in input order)."),
]
MinWordsOption = Annotated[
    int | None,
    option("--min-words", env="FLOWRATE_MIN_WORDS", help="Leave out conversations with fewer words than this."),
]
OnlyOption = Annotated[
    list[str] | None,
    option(
        "--only", env="FLOWRATE_ONLY", help="FIELD=VALUE: judge only conversations whose metadata has it; repeatable."
    ),
]
ExcludeOption = Annotated[
    list[str] | None,
    option(
        "--exclude",
        env="FLOWRATE_EXCLUDE",
        help="FIELD=VALUE: leave out conversations whose metadata has it; repeatable.",
    ),
]
MinPassRateOption = Annotated[
    float | None,
    option(
        "--min-pass-rate",
        env="FLOWRATE_MIN_PASS_RATE",
        help="Gate: each metric passes the run when at least this share of its rows pass (0.9: up to 10 % may fail).",
    ),
]
MinMeanScoreOption = Annotated[
    float | None,
    option(
        "--min-mean-score", env="FLOWRATE_MIN_MEAN_SCORE", help="Gate: each metric's mean score must be at least this."
    ),
]
MaxFailuresOption = Annotated[
    int | None,
    option(
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
    typer.Argument(help="Files, directories (every .jsonl/.json/.yaml/.yml/.parquet inside) or - for JSONL on stdin."),
]


def settings_given(values: dict[str, Any], leave_out: tuple[str, ...]) -> dict[str, Any]:
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
                raise fail(ConfigError(f"option weight: {pair!r} must be NAME=W, W a number")) from None
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


def continue_command(flag: str) -> str:
    words = sys.argv[1:]
    flags = {"--resume", "--retry-errors"}
    if flag not in words:
        words = [word for word in words if word not in flags or word == flag] + [flag]
    return shlex.join([*invoked_as(), *words])


def silence_stdout() -> None:
    """After the reader of stdout went away, point stdout at /dev/null so that Python's own
    flush at exit does not fail again (as the signal module's docs advise for SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real stdout (a test runner's buffer)
        pass


def write_stdout(text: str, nl: bool = True) -> None:
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
        silence_stdout()
        raise typer.Exit(int(ExitCode.BROKEN_PIPE)) from None


def print_notices(notices: list[str]) -> None:
    for notice in notices:
        say(f"flowrate: {notice}")


ResultsPaths = Annotated[list[str] | None, typer.Argument(help="Results files (flowrate eval -o FILE).")]
