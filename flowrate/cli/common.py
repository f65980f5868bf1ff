"""What every command shares: the console for people, plain error messages, the one place that maps errors to exit statuses, and writing to stdout. The options themselves are declared in `flowrate.settings.groups`."""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import sys
from collections.abc import Callable
from functools import cache
from typing import Annotated, Any

import typer

from flowrate.cli.options import Given, option_of
from flowrate.errors import ConfigError, ExitCode, FlowrateError, InputError, exit_code_for
from flowrate.settings import groups


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


def option(*names: str, env: str, help: str, **extra: Any) -> Any:
    """A command's own option (not a setting) read from the environment variable `env` too."""
    return typer.Option(*names, envvar=env, help=help, show_default=False, **extra)


HistoryOption = Annotated[
    str | None, option_of(groups.ReportOptions, "history")
]  # for the commands that only read the history


def labels_history(given: Given, labels_file: object) -> str | None:
    """The history a command that takes the option `history` reads people's labels from: as eval
    reads it, `--history`, else FLOWRATE_HISTORY, else the config file's `history`; None when
    `labels_file` (`--labels`) names the labels instead. A history from FLOWRATE_HISTORY or the
    config is then not read (it is the default of a project's commands, not a second source of
    labels); one given on the command line beside `--labels` is refused."""
    if labels_file is None:
        history: str | None = given.settings().history
        return history
    if "history" in given.typed:
        raise ConfigError("give --history or --labels, not both")
    return None


CacheDirOption = Annotated[
    str | None, option_of(groups.CacheOptions, "cache_dir")
]  # for the commands that only read the cache
RubricOption = Annotated[
    str | None, option_of(groups.PromptOptions, "rubric")
]  # review: the levels of a rubric of your own
Paths = Annotated[
    list[str],
    typer.Argument(help="Files, directories (every .jsonl/.json/.yaml/.yml/.parquet inside) or - for JSONL on stdin."),
]


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
