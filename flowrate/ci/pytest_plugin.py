"""flowrate inside pytest (the `pytest11` entry point `flowrate`): inert until a test uses it.

- `flowrate.assert_flow(conversation, at_least=..., metric=..., rubric=...)`, or the `flowrate`
  fixture's method of that name, judges a conversation (flowrate's turn format, OpenAI messages,
  a `ConversationalEvalTestCase`, or a record of any format the inputs stage reads) and fails the
  test with the verdict, the reason and the key issues in pytest's assertion report.
- `@pytest.mark.flowrate("conversations.jsonl", at_least=..., metric=..., rubric=...)` makes a
  test of each conversation of the file (the `conversation` argument, the conversation's id as
  the test id). Collect first, judge once: the first such test to run judges every selected
  conversation of every marked file in one run of `flowrate eval` (its bounded concurrency, the
  response cache, `--max-cost`), and each test then reports its own verdict. Under xdist each
  worker judges the conversations of the tests it is given, one at a time: a worker is sent its
  tests as it goes, and judging all of them in every worker would pay for each one per worker.
- `assert_flow` on anything else judges at the call (one conversation; the cache still applies).
- A conversation the judge gave no verdict for is a pytest error, not a failure; one a budget
  left out is skipped.
- `--flowrate-model`, `--flowrate-config` (else FLOWRATE_CONFIG, else configs/flowrate.yaml), the
  FLOWRATE_* variables: the settings of `flowrate eval`. `--flowrate-output` and `--flowrate-html`
  write the session's rows and HTML report; each test's verdict, score and cost are JUnit
  properties of `--junitxml`.

Nothing of flowrate is imported at pytest's start: a project that does not use it pays nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from flowrate.ci.session import JudgeSession, Marked, Outcome, Wanted
    from flowrate.results.rows import EvaluationRow

MARKER = "flowrate"
ERROR_PROPERTY = "flowrate_error"
_SESSION = pytest.StashKey["JudgeSession"]()
_PENDING = pytest.StashKey["list[Marked]"]()
_NOTICES = pytest.StashKey["list[str]"]()
_OUTER = pytest.StashKey["pytest.Config | None"]()
_state: dict[str, Any] = {"config": None, "item": None}  # for `flowrate.assert_flow`, outside a fixture


def pytest_addoption(parser: pytest.Parser) -> None:
    """The plugin's options on `parser`: the judge, the config file, the session's rows and report."""
    group = parser.getgroup("flowrate", "flowrate: conversations judged by an LLM judge")
    group.addoption("--flowrate-model", help="The judge model of the session (flowrate eval --model).")
    group.addoption("--flowrate-config", help="flowrate's config file (flowrate eval --config).")
    group.addoption("--flowrate-output", help="Write the session's rows here (JSONL, as flowrate eval --output).")
    group.addoption("--flowrate-html", help="Write the session's HTML report here (flowrate eval --html).")


def pytest_configure(config: pytest.Config) -> None:
    """The `flowrate` marker declared on `config`, which `flowrate.assert_flow` then uses."""
    config.addinivalue_line(
        "markers",
        "flowrate(path, at_least=None, metric=None, rubric=None): a test for each conversation of the file"
        " (argument `conversation`), all judged in one batch",
    )
    config.stash[_OUTER] = _state["config"]  # a pytester run inside a session gives it back after
    _state["config"] = config


def pytest_unconfigure(config: pytest.Config) -> None:
    """`config` is over: `flowrate.assert_flow` goes back to the session around it, if any."""
    if _state["config"] is config:
        _state["config"] = config.stash.get(_OUTER, None)


def _wanted(metric: str | list[str] | tuple[str, ...] | None, rubric: str | os.PathLike[str] | None) -> Wanted:
    from flowrate.ci.session import Wanted

    names = (metric,) if isinstance(metric, str) else tuple(metric) if metric else None
    return Wanted(names, str(rubric) if rubric else None)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A marked test of `metafunc` made a test per conversation of its file (a bad file: a
    collection error naming its file, line and field)."""
    marker = metafunc.definition.get_closest_marker(MARKER)
    if marker is None:
        return
    from flowrate.ci.session import plain_message, read_marked
    from flowrate.errors import FlowrateError

    where = metafunc.definition.nodeid
    if not marker.args:
        pytest.fail(f"{where}: @pytest.mark.flowrate needs the path of a conversations file", pytrace=False)
    if "conversation" not in metafunc.fixturenames:
        pytest.fail(f"{where}: a test marked flowrate takes the argument `conversation`", pytrace=False)
    path = Path(metafunc.definition.path).parent / marker.args[0]
    options = marker.kwargs
    wanted = _wanted(options.get("metric"), options.get("rubric"))
    problem = _argument_problem(metafunc.config, wanted, options.get("at_least"))
    if problem is not None:
        pytest.fail(f"{where}: @pytest.mark.flowrate: {problem}", pytrace=False)
    try:
        marked = read_marked(path, wanted)
    except FlowrateError as error:
        problem = plain_message(error)  # told below, outside the handler: no "During handling of ..."
    if problem is not None:
        pytest.fail(f"{where}: {problem}", pytrace=False)
    from flowrate.reports.escape import without_legacy_commands

    ids = [without_legacy_commands(item.case.id or "") for item in marked]  # pytest escapes control characters itself
    metafunc.parametrize("conversation", marked, ids=ids, indirect=True)


def pytest_collection_finish(session: pytest.Session) -> None:
    """The marked conversations of the tests selected to run (after -k, -m, deselection)."""
    pending = []
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and MARKER in item.keywords and "conversation" in callspec.params:
            pending.append(callspec.params["conversation"])
    session.config.stash[_PENDING] = pending


def judge_session(config: pytest.Config) -> JudgeSession:
    """The session's judge, made on first use (settings read then)."""
    if _SESSION not in config.stash:
        from flowrate.ci.session import JudgeSession

        given, named = _session_options(config)
        workdir = Path(tempfile.mkdtemp(prefix="flowrate-pytest-"))
        worker = getattr(config, "workerinput", {}).get("workerid")
        config.stash[_SESSION] = JudgeSession(
            given,
            named,
            workdir,
            _per_worker(config.getoption("flowrate_output"), worker),
            _per_worker(config.getoption("flowrate_html"), worker),
        )
    return config.stash[_SESSION]


def _session_options(config: pytest.Config) -> tuple[dict[str, Any], Path | None]:
    """The settings the plugin's options give, and the config file (`--flowrate-config`, else
    FLOWRATE_CONFIG)."""
    given = {"model": config.getoption("flowrate_model")} if config.getoption("flowrate_model") else {}
    named = config.getoption("flowrate_config") or os.environ.get("FLOWRATE_CONFIG")
    return given, Path(named) if named else None


def _argument_problem(config: pytest.Config, wanted: Wanted, at_least: Any) -> str | None:
    """What is wrong with a test's `at_least`, `metric` and `rubric` (`verdicts.argument_problem`)
    under the session's settings; None when the settings themselves cannot be read (the batch
    tells that, as it tells every run's)."""
    from flowrate.ci.session import batch_settings
    from flowrate.ci.verdicts import argument_problem
    from flowrate.errors import FlowrateError

    try:
        settings = batch_settings(*_session_options(config), wanted, "-")
    except FlowrateError:
        return None
    return argument_problem(settings, at_least)


def _per_worker(path: str | None, worker: str | None) -> str | None:
    """Under xdist, each worker's own file: `rows.jsonl` is `rows.gw0.jsonl` for worker gw0."""
    if path is None or worker is None:
        return path
    target = Path(path)
    return str(target.with_name(f"{target.stem}.{worker}{target.suffix}"))


def _judge_marked(config: pytest.Config, marked: Marked) -> Outcome:
    """The outcome of a marked conversation: on first need, every pending one of its kind is judged
    in one batch (under xdist, this one alone)."""
    session = judge_session(config)
    if marked.key not in session.outcomes:
        pending = [marked] if hasattr(config, "workerinput") else config.stash.get(_PENDING, [marked])
        together = {item.key: item.job for item in pending if item.wanted == marked.wanted}
        together.setdefault(marked.key, marked.job)
        session.judge(marked.wanted, list(together.values()))
    return session.outcomes[marked.key]


@pytest.fixture
def conversation(request: pytest.FixtureRequest) -> Any:
    """A conversation of the file of the test's `flowrate` marker, judged before the test runs."""
    marked = getattr(request, "param", None)
    if marked is None:
        pytest.fail("`conversation` comes from @pytest.mark.flowrate(path)", pytrace=False)
    outcome = _judge_marked(request.config, marked)
    _tell_github(request.config, request.node, outcome)
    _raise_for(outcome, request.node)
    return marked.case


def _tell_github(config: pytest.Config, item: pytest.Item, outcome: Outcome) -> None:
    """`outcome`, read by the test `item`, in the session's GitHub report (when it writes one):
    named by its node id, at its file and line."""
    tests = judge_session(config).tests
    if tests is not None:
        path, line, _ = item.reportinfo()
        tests.add(item.nodeid, str(path), (line or 0) + 1, outcome)


def _raise_for(outcome: Outcome, item: pytest.Item) -> None:
    """A conversation with no verdict ends its test: an error (`JudgeFailed`) when the judge gave
    none or could not be reached, skipped when a budget left it out."""
    __tracebackhide__ = True
    from flowrate.ci.session import JudgeFailed
    from flowrate.reports.escape import log_text

    errors = [f"{row.metric}: {row.error.type}: {row.error.message}" for row in outcome.rows if row.error]
    problem = outcome.error or "; ".join(errors)
    if problem:
        item.user_properties.append((ERROR_PROPERTY, problem))
        raise JudgeFailed(log_text(f"flowrate: the judge gave no verdict: {problem}"))  # pytest prints it
    if outcome.skipped is not None:
        pytest.skip(f"flowrate: not judged ({outcome.skipped})")


class Flow:
    """The `flowrate` fixture: `assert_flow` for the test it was given to."""

    def __init__(self, config: pytest.Config, item: pytest.Item):
        self.config, self.item = config, item
        self.calls = 0

    def assert_flow(
        self,
        conversation: Any,
        at_least: str | float | None = None,
        metric: str | list[str] | None = None,
        rubric: str | os.PathLike[str] | None = None,
    ) -> list[EvaluationRow]:
        """Judge `conversation` and fail the test unless every row passes: at the level
        `at_least` names (a verdict such as "partial", or a score in [0, 1]), else at the
        run's threshold. `metric` (a name or names) and `rubric` (a file) replace the marker's
        and the session's. A marked test's conversation has its verdict from the batch already.
        Returns the rows (one per row name of the metrics)."""
        __tracebackhide__ = True
        marker = self.item.get_closest_marker(MARKER)
        from_marker = marker.kwargs if marker is not None else {}
        wanted = _wanted(metric or from_marker.get("metric"), rubric or from_marker.get("rubric"))
        at_least = at_least if at_least is not None else from_marker.get("at_least")
        problem = _argument_problem(self.config, wanted, at_least)
        if problem is not None:  # before any call: a usage error, not the judge's
            pytest.fail(f"assert_flow: {problem}", pytrace=False)
        outcome = self._outcome(conversation, wanted)
        _tell_github(self.config, self.item, outcome)
        _raise_for(outcome, self.item)
        from flowrate.ci.verdicts import failures, record

        record(self.item.user_properties, outcome.rows)
        failed = failures(outcome.rows, at_least, wanted.rubric)
        if failed:
            raise AssertionError(failed)
        return outcome.rows

    def _outcome(self, conversation: Any, wanted: Wanted) -> Outcome:
        from flowrate.ci.session import Job
        from flowrate.ci.verdicts import as_case

        session = judge_session(self.config)
        callspec = getattr(self.item, "callspec", None)
        marked = callspec.params.get("conversation") if callspec is not None else None
        if marked is not None and marked.case is conversation and marked.wanted == wanted:
            return _judge_marked(self.config, marked)
        self.calls += 1
        default_id = re.sub(r"[^\w.\[\]-]+", "_", self.item.nodeid) + (f"-{self.calls}" if self.calls > 1 else "")
        job = Job(as_case(conversation, default_id), None, f"{self.item.nodeid} call {self.calls}")
        session.judge(wanted, [job])
        return session.outcomes[job.key(wanted)]


@pytest.fixture
def flowrate(request: pytest.FixtureRequest) -> Flow:
    """flowrate's judge for this test: `flowrate.assert_flow(conversation, at_least=...)`."""
    return Flow(request.config, request.node)


def assert_flow(
    conversation: Any,
    at_least: str | float | None = None,
    metric: str | list[str] | None = None,
    rubric: str | os.PathLike[str] | None = None,
) -> list[EvaluationRow]:
    """`Flow.assert_flow` for the test running now (`flowrate.assert_flow`, with no fixture):
    `conversation`, `at_least`, `metric` and `rubric` as there."""
    __tracebackhide__ = True
    if _state["config"] is None or _state["item"] is None:
        raise RuntimeError("flowrate.assert_flow runs inside a pytest test (the flowrate plugin judges it)")
    return Flow(_state["config"], _state["item"]).assert_flow(conversation, at_least, metric, rubric)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, Any, Any]:
    """`item` is the test `flowrate.assert_flow` judges for while it runs."""
    _state["item"] = item
    try:
        return (yield)
    finally:
        _state["item"] = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A judge that gave no verdict: the report is that message alone, and an error."""
    report: pytest.TestReport = yield
    judging = sys.modules.get("flowrate.ci.session")  # imported once a test asked for a verdict
    if judging is not None and call.excinfo is not None and isinstance(call.excinfo.value, judging.JudgeFailed):
        report.longrepr = str(call.excinfo.value)
        if not any(name == ERROR_PROPERTY for name, _ in report.user_properties):
            report.user_properties.append((ERROR_PROPERTY, str(call.excinfo.value)))
    return report


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, str] | None:
    """A test whose judge gave no verdict counts as an error, in its call as at its setup."""
    if report.when == "call" and report.failed and any(name == ERROR_PROPERTY for name, _ in report.user_properties):
        return "error", "E", "ERROR"
    return None


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The session's rows and report written, its staged batches removed."""
    config = session.config
    if _SESSION in config.stash:
        judge = config.stash[_SESSION]
        try:
            config.stash[_NOTICES] = judge.finish()
        finally:
            shutil.rmtree(judge.workdir, ignore_errors=True)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """The session's GitHub annotations (workflow commands, escaped as they require), then the
    notices of its rows and reports, at the end of `terminalreporter`'s output (stdout, where a
    runner reads workflow commands; an xdist worker's is not shown: its annotations are lost)."""
    judge = config.stash.get(_SESSION, None)
    for line in judge.tests.annotations if judge is not None and judge.tests is not None else []:
        terminalreporter.write_line(line)
    for notice in config.stash.get(_NOTICES, []):
        terminalreporter.write_line(notice)
