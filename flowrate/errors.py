"""Exit statuses, and the one place that maps outcomes and errors to them."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """What `flowrate` tells a shell script or CI gate."""

    OK = 0  #: every conversation was judged and passed
    FAILED = 1  #: at least one conversation scored below the threshold
    USAGE = 2  #: bad options, bad input, a missing or rejected API key
    INCOMPLETE = 3  #: at least one conversation could not be judged (wins over FAILED)
    OUTPUT_FAILED = 4  #: a results file or report could not be written part-way (disk full); rows written are kept
    INTERRUPTED = 130  #: stopped by Ctrl-C
    TERMINATED = 143  #: stopped by SIGTERM (128 + 15), as CI runners, `timeout` and Kubernetes stop a job
    BROKEN_PIPE = 141  #: the reader of stdout went away (128 + SIGPIPE), as `... | head` expects


class FlowrateError(Exception):
    """An error a user can fix; printed as a plain message, never a traceback."""

    exit_code = ExitCode.USAGE


class InputError(FlowrateError):
    """One or more input records are invalid. `problems` holds one line per problem;
    `headline` and `hint` say what that stopped and what to do."""

    def __init__(
        self,
        problems: list[str],
        total: int | None = None,
        headline: str = "problem(s) in the input; no conversation was judged",
        hint: str | None = None,
        counted: bool = True,
    ):
        self.problems = problems
        self.total = total if total is not None else len(problems)
        self.counted = counted  #: the headline follows a count of problems ("3 problem(s) ...")
        self.headline = headline
        self.hint = hint
        super().__init__("\n".join(problems))


class ConfigError(FlowrateError):
    """A bad option value, config file or rubric file."""


class OutputError(FlowrateError):
    """A results file, report or history could not be written after the run had begun
    (disk full, a device error): the rows already written are kept."""

    exit_code = ExitCode.OUTPUT_FAILED


class ReportsNotWritten(OutputError):
    """Reports a run asked for that could not be written, each named in the message; `written`
    holds the notices of those that were (they are written whatever became of the others)."""

    def __init__(self, message: str, written: list[str]):
        super().__init__(message)
        self.written = written


class WriteBackIncomplete(OutputError):
    """Verdicts `--write-back` could not write to their platform: the rows are in the results
    file, the writes wait in the pending-writes file beside it, and `--resume` retries them."""


class JudgeAccessError(FlowrateError):
    """The judge refuses every call: a missing or rejected key, an unknown model.

    Never retried: the run stops at once.
    """


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived outside a run's own handler (while loading, say): handled as Ctrl-C is."""


def exit_code_for(error: BaseException) -> ExitCode:
    """The exit status for an error that ended a run."""
    if isinstance(error, FlowrateError):
        return error.exit_code
    if isinstance(error, Terminated):
        return ExitCode.TERMINATED
    if isinstance(error, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    return ExitCode.INCOMPLETE


def exit_code_for_outcome(
    *,
    errors: int,
    failed: int,
    interrupted: bool = False,
    terminated: bool = False,
    incomplete: bool = False,
    pipe_closed: bool = False,
    output_failed: bool = False,
) -> ExitCode:
    """The exit status of a finished run: a closed pipe, a failed write, SIGTERM, Ctrl-C, then
    errors (3), then failures (1)."""
    if pipe_closed:
        return ExitCode.BROKEN_PIPE
    if output_failed:
        return ExitCode.OUTPUT_FAILED
    if terminated:
        return ExitCode.TERMINATED
    if interrupted:
        return ExitCode.INTERRUPTED
    if errors or incomplete:
        return ExitCode.INCOMPLETE
    if failed:
        return ExitCode.FAILED
    return ExitCode.OK
