"""The judging of a pytest session: the settings of `flowrate eval` (the plugin's options over the
FLOWRATE_* variables, the config file and the defaults), conversations judged in batches through
`flowrate.api.evaluate_files` (the same cache, concurrency, budget and retries as the command), the
outcome of each conversation kept for the test that reads it, and the session's rows and HTML
report written through the CLI's report code when the session ends."""

from __future__ import annotations

import asyncio
import os
import time
import typing
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowrate.errors import FlowrateError, InputError
from flowrate.inputs.conversation import ConversationalEvalTestCase, Source
from flowrate.inputs.files import InMemory
from flowrate.reports.escape import without_legacy_commands
from flowrate.results.book import ReportBook
from flowrate.results.events import RunListener
from flowrate.results.files import ResultsFile
from flowrate.results.rows import EvaluationRow
from flowrate.results.summary import RunSummary
from flowrate.settings.groups import Flag
from flowrate.settings.options import EvalSettings, resolve_settings

# What a session's own judging never takes from the environment or the config file: its rows go
# to a staged file per batch (the session's rows to `rows_path`), its reports are the session's,
# and each test reads its own verdict (a gate or a resume means nothing per batch).
PER_BATCH: dict[str, Any] = {
    "github": False,  # off under GITHUB_ACTIONS=true too: the session's `TestsReport` names the tests
    "junit": None,
    "html": None,
    "history": None,
    "output_parquet": None,
    "resume": False,
    "retry_errors": False,
    "batch": False,
    "batch_submit_only": False,
    "batch_export": None,
    "skip_invalid": False,
    "allow_empty": False,
    "limit": None,
    "sample": None,
    "shard": None,
    "only": [],
    "exclude": [],
    "min_pass_rate": None,
    "min_mean_score": None,
    "max_failures": None,
    "gates": {},
}


def batch_settings(given: dict[str, Any], config: Path | None, wanted: Wanted, output: str) -> EvalSettings:
    """The settings of a batch of `wanted` writing its rows to `output`: `given` (the plugin's
    options) over the FLOWRATE_* variables, the `config` file and the defaults."""
    values = {**environment_values(), **given, **PER_BATCH, "output": output}
    if wanted.metric:
        values["metric"] = list(wanted.metric)
    if wanted.rubric:
        values["rubric"] = wanted.rubric
    return resolve_settings(values, config)


class JudgeFailed(Exception):
    """The judge gave no verdict for a conversation (an error row, a rejected key, a bad option):
    the plugin reports it as a pytest error, not a failure, with `message` alone."""


def environment_values(environ: typing.Mapping[str, str] | None = None) -> dict[str, Any]:
    """The settings the FLOWRATE_* variables of `environ` (default: this process's) give, read as
    the CLI reads them (each option's `Flag.env`; a list option split on spaces, as click does)."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for name, info in EvalSettings.model_fields.items():
        flag = next((item for item in info.metadata if isinstance(item, Flag)), None)
        if flag is None or flag.env(name) not in environ:
            continue
        text = environ[flag.env(name)]
        kind = flag.cli_type or info.annotation
        value: Any = text.split() if typing.get_origin(kind) is list else text
        values[name] = flag.parse(value) if flag.parse else value
    return values


@dataclass(frozen=True)
class Wanted:
    """What a test asks of the judge: its `metric` names and `rubric` file (None: the session's)."""

    metric: tuple[str, ...] | None = None
    rubric: str | None = None


@dataclass(frozen=True)
class Job:
    """A conversation to judge: its `case`, its `source`, and its `place`, which with the id tells
    it from any other of the session (a marked file's path and line; a test's own call)."""

    case: ConversationalEvalTestCase
    source: Source | None
    place: str

    def key(self, wanted: Wanted) -> tuple[Wanted, str, str]:
        """Where the session keeps its `Outcome` when judged for `wanted`."""
        return wanted, self.place, self.case.id or ""


@dataclass
class Marked:
    """A conversation of a file named by a `flowrate` marker, as a `Job`, and what the marker asks
    the judge (`wanted`)."""

    job: Job
    wanted: Wanted

    @property
    def case(self) -> ConversationalEvalTestCase:
        return self.job.case

    @property
    def key(self) -> tuple[Wanted, str, str]:
        return self.job.key(self.wanted)


def read_marked(path: Path, wanted: Wanted) -> list[Marked]:
    """The conversations of `path` (any format the inputs stage reads), each as a `Marked`.
    Raises `InputError` naming the file, line and field of each invalid record."""
    from flowrate.inputs.files import InputSet, with_duplicates_marked

    inputs = InputSet([str(path)])
    try:
        records = list(with_duplicates_marked(inputs.records(), {}))
    finally:
        inputs.close()
    problems = [problem for record in records for problem in record.problems]
    if problems:
        raise InputError(problems[:10], total=len(problems), headline="problem(s) in a file of a flowrate marker")
    return [
        Marked(Job(_as_marked(record.case), record.source, str(record.source)), wanted)
        for record in records
        if record.case is not None
    ]


class MarkedCase(ConversationalEvalTestCase):
    """A conversation of a marked file, as its test is given it: pytest prints it among the
    test's arguments when the test fails, in a log a CI runner reads (`without_legacy_commands`;
    its repr shows control characters escaped already)."""

    def __repr__(self) -> str:
        return without_legacy_commands(super().__repr__())


def _as_marked(case: ConversationalEvalTestCase) -> MarkedCase:
    return MarkedCase.model_construct(_fields_set=case.model_fields_set, **dict(case))


@dataclass
class Outcome:
    """What became of one conversation: its `rows` (one per row name of its metrics), or the
    reason it was `skipped` (a budget, an unreachable judge), or the `error` of its batch."""

    rows: list[EvaluationRow] = field(default_factory=list)
    skipped: str | None = None
    error: str | None = None


class _Batch(RunListener):
    """One batch's listener for `wanted`: each row told to the session as its `jobs` (by staged id)
    has it, with the conversation's own id and source; each conversation skipped its outcome."""

    def __init__(self, session: JudgeSession, wanted: Wanted, jobs: dict[str, Job]):
        self.session, self.wanted, self.jobs = session, wanted, jobs

    def row(self, row: EvaluationRow) -> None:
        job = self.jobs[row.id]
        self.session.keep(job.key(self.wanted), row.model_copy(update={"id": job.case.id, "source": job.source}))

    def skipped(self, conversation_id: str, source: Source | None, reason: str) -> None:
        self.session.outcomes.setdefault(self.jobs[conversation_id].key(self.wanted), Outcome()).skipped = reason


class JudgeSession:
    """The judge of one pytest session: `given` settings (the plugin's options, over the
    FLOWRATE_* variables), the `config` file, where the session's rows (`rows_path`) and HTML
    report (`html_path`) go, and `workdir`, a folder of the session's own for staged batches."""

    def __init__(
        self,
        given: dict[str, Any],
        config: Path | None,
        workdir: Path,
        rows_path: str | None = None,
        html_path: str | None = None,
    ):
        self.given, self.config, self.workdir = given, config, workdir
        self.rows_path, self.html_path = rows_path, html_path
        self.outcomes: dict[tuple[Wanted, str, str], Outcome] = {}
        self.book, self.summary = ReportBook(), RunSummary()
        self.transcripts: dict[str, ConversationalEvalTestCase] = {}
        self.rows_file = ResultsFile(rows_path, append=False) if rows_path else None
        self.batches = 0
        self.unreachable: str | None = None  #: why every later conversation is an error at once
        self.tests = TestsReport() if github_wanted(given, config) else None

    def settings(self, wanted: Wanted, output: str) -> EvalSettings:
        """The settings of a batch of `wanted` writing its rows to `output`."""
        return batch_settings(self.given, self.config, wanted, output)

    def judge(self, wanted: Wanted, jobs: list[Job]) -> None:
        """Judge `jobs` not judged yet as one run of `flowrate eval` for `wanted`; each one's
        `Outcome` is kept, a run that fails as a whole (a rejected key) an error on each. They are
        given under ids of their own (two files may share an id; the judge never sees it), as
        records in memory: no input file is staged."""
        from flowrate.api import evaluate_files

        staged_jobs = {
            f"job-{n}": job for n, job in enumerate(job for job in jobs if job.key(wanted) not in self.outcomes)
        }
        if not staged_jobs:
            return
        if self.unreachable is not None:  # learned from an earlier batch: no call, no retries
            for job in staged_jobs.values():
                self.outcomes[job.key(wanted)] = Outcome(error=self.unreachable)
            return
        self.batches += 1
        cases = [job.case.model_copy(update={"id": staged_id}) for staged_id, job in staged_jobs.items()]
        records = [case.model_dump(mode="json", exclude_none=True) for case in cases]
        self.transcripts.update({job.case.id or "": job.case for job in staged_jobs.values()})
        try:
            settings = self.settings(wanted, str(self.workdir / f"batch-{self.batches}.rows.jsonl"))
            listener = _Batch(self, wanted, staged_jobs)
            given = InMemory("<pytest>", lambda: records)  # the cases as records: no file staged
            _outside_a_running_loop(lambda: evaluate_files([given], settings, [listener], None, True))
        except FlowrateError as error:
            for job in staged_jobs.values():
                self.outcomes.setdefault(job.key(wanted), Outcome()).error = plain_message(error)
        for job in staged_jobs.values():  # a conversation the run neither judged nor skipped (it stopped)
            outcome = self.outcomes.setdefault(job.key(wanted), Outcome())
            if not outcome.rows and outcome.skipped is None and outcome.error is None:
                outcome.error = "not judged: the run stopped before this conversation"
        self.unreachable = unreachable_judge([self.outcomes[job.key(wanted)] for job in staged_jobs.values()])

    def keep(self, key: tuple[Wanted, str, str], row: EvaluationRow) -> None:
        """A row of the session, of the outcome `key`: kept for its test, in the session's rows and report."""
        self.outcomes.setdefault(key, Outcome()).rows.append(row)
        self.book.add(row)
        self.summary.add(row, len(self.outcomes))
        if self.rows_file is not None:
            self.rows_file.row(row)

    def finish(self) -> list[str]:
        """Close the session's rows and write its HTML report (when asked and rows were made);
        returns the notices to show."""
        notices = []
        if self.rows_file is not None:
            self.rows_file.close()
            if self.rows_file.rows_written:
                notices.append(f"flowrate rows: {self.rows_path} ({self.rows_file.rows_written} rows)")
        if self.html_path and self.summary.metrics:
            from flowrate.reports import write_reports

            notices += write_reports(self.book, self.summary, html=self.html_path, transcripts=self.transcripts)
        return notices + (self.tests.write() if self.tests is not None else [])


def github_wanted(given: dict[str, Any], config: Path | None) -> bool:
    """Whether the session writes GitHub's step summary and annotations, as `flowrate eval` would
    under its settings (`given` over FLOWRATE_*, the `config` file): `--github`, or GitHub
    Actions runs it. A batch never does (`PER_BATCH`): it knows staged files and ids only."""
    try:
        return resolve_settings({**environment_values(), **given}, config).report_settings.for_github
    except FlowrateError:
        return False


class TestsReport:
    """GitHub's step summary and annotations of a session: the rows each test read, named by the
    test (its node id) and the conversation's id, and placed at the test's file and line."""

    def __init__(self) -> None:
        self.book, self.summary = ReportBook(), RunSummary()
        self.started = time.monotonic()
        self.told: set[tuple[str, int]] = set()
        self.annotations: list[str] = []  #: the workflow commands to print, once written

    def add(self, test: str, path: str, line: int, outcome: Outcome) -> None:
        """The rows of `outcome`, read by the test `test` defined at `path`, `line` (once)."""
        if (test, id(outcome)) in self.told:
            return
        self.told.add((test, id(outcome)))
        for row in outcome.rows:
            shown = row.model_copy(
                update={"id": f"{test} (conversation {row.id})", "source": Source(path=path, line=line)}
            )
            self.book.add(shown)
            self.summary.add(shown, len(self.told))

    def write(self) -> list[str]:
        """Append the step summary (when a test read rows) and keep the annotations; the notices."""
        if not self.summary.metrics:
            return []
        from flowrate.reports import write_reports

        self.summary.wall_time_s = time.monotonic() - self.started
        return write_reports(self.book, self.summary, github=True, annotate=self.annotations.append)


def unreachable_judge(outcomes: list[Outcome]) -> str | None:
    """After a batch of `outcomes`: when the run stopped because the judge could not be reached,
    or none of its calls was answered and one spent its retries on refused or dropped connections,
    the judge is down for the session: these conversations are errors with the message returned,
    as every later one is, with no call (`JudgeSession.unreachable`; each assert_flow spent its
    own retries, 30 s, where `flowrate eval` stops after a few). None: the judge answered."""
    from flowrate.judge.errors import Unreachable

    rows = [row for outcome in outcomes for row in outcome.rows]
    lost = next((row.error for row in rows if row.error is not None and row.error.type == Unreachable.kind), None)
    stopped = any(outcome.skipped == "unreachable" for outcome in outcomes)
    if not stopped and (lost is None or any(row.error is None for row in rows)):
        return None
    detail = f": {lost.type}: {lost.message}" if lost is not None else ""
    message = f"the judge could not be reached{detail}; the session sends it nothing more"
    for outcome in outcomes:
        if not any(row.error is None for row in outcome.rows):
            outcome.error = message
    return message


def _outside_a_running_loop(call: Callable[[], object]) -> None:
    """`call`, in a thread of its own when this one runs an event loop (an async test):
    `evaluate_files` runs a loop of its own, which asyncio allows one per thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        call()
        return
    with ThreadPoolExecutor(1) as pool:
        pool.submit(call).result()


def plain_message(error: FlowrateError) -> str:
    """A flowrate error as the CLI tells it (`cli.common.fail`): an input error's count and
    headline, its problems indented under it, then its hint."""
    if isinstance(error, InputError):
        headline = f"{error.total} {error.headline}:" if error.counted else f"{error.headline}:"
        return "\n".join(
            [headline, *(f"  {problem}" for problem in error.problems), *([error.hint] if error.hint else [])]
        )
    return str(error)
