"""A run over files: the input validated once, the selection, the cache and the metrics, set up
before any call; every engine judges it in one life cycle (`engines.run_engine`), which begins with `begin` and ends
with `finish`."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from flowrate.errors import ConfigError
from flowrate.evaluation.resume import resumed_rows
from flowrate.inputs.conversation import ConversationalEvalTestCase, Source
from flowrate.inputs.files import Given, InputSet, check_apart, iter_cases
from flowrate.inputs.redaction.redactor import detectors_ran, redactor_of
from flowrate.inputs.selection import (
    SKIP_INVALID_HINT,
    ScanReport,
    Selection,
    barren_lines,
    nothing_to_judge,
    raise_for_problems,
    scan,
)
from flowrate.judge.backend import Usage
from flowrate.judge.cache import ResponseCache
from flowrate.metrics.catalog import build_metrics
from flowrate.metrics.protocol import Metric
from flowrate.results.events import RunListener
from flowrate.results.files import check_output_path, read_rows
from flowrate.results.gates import apply_gates
from flowrate.results.rows import EvaluationRow
from flowrate.results.summary import DryRunEstimate, RunSummary
from flowrate.settings.groups import SelectionOptions, cache_folder
from flowrate.settings.options import EvalSettings

#: given the (row name, model, rubric version) a run judges, the (id, turns_sha256) already judged
JudgedBefore = Callable[[list[tuple[str, str, str]]], set[tuple[str, str]]]

CONNECTION_POOL_LIMIT = 500  # LiteLLM's default connections per host


def written_paths(settings: EvalSettings) -> list[tuple[str, str | None]]:
    """Every file a run writes besides its rows, as (option, path): reports, the history, the
    Parquet copy, GitHub's step summary and the batch export."""
    reports, step_summary = settings.report_settings, os.environ.get("GITHUB_STEP_SUMMARY")
    return [
        ("--junit", reports.junit),
        ("--html", reports.html),
        ("--history", reports.history),
        ("--output-parquet", settings.output_parquet),
        ("--batch-export", settings.batch_settings.batch_export),
        ("GITHUB_STEP_SUMMARY", step_summary if reports.for_github else None),
        ("--otel-file", settings.platform_settings.otel_file),
    ]


def check_report_paths(settings: EvalSettings) -> None:
    """Every file a run will write, checked before the first call: each can be written, and no
    two are one file (`check_apart`; that none is an input, `InputSet` checks). Exit 2 if not."""
    written = written_paths(settings)
    for option, path in written:
        if path:
            check_output_path(path, option)
    rows = [] if settings.batch_settings.batch_export else [("--output", settings.output)]  # an export writes no row
    check_apart([*rows, *written])


class FileRun:
    """A run over its inputs (paths, or records in memory: `inputs.files.InMemory`): validated on
    creation; `engines.run_engine` judges it, by one transport.

    Creating it reads every record once and raises `InputError` (no judge call made)
    unless `settings.skip_invalid` lets it skip the invalid ones. A run that selects no
    conversation is an input error too, unless `settings.allow_empty`. `judged_before`, given
    the (row name, model, rubric version) of every row this run makes for a conversation,
    returns the (id, turns_sha256) of those already judged (`--history`): they are left out.
    """

    def __init__(self, paths: Sequence[Given], settings: EvalSettings, judged_before: JudgedBefore | None = None):
        self.settings = settings
        self.paths = paths
        self.notices: list[str] = []
        limits, output, chosen = settings.limit_settings, settings.output_settings, settings.selection_settings
        self.concurrency = limits.concurrency
        if self.concurrency > CONNECTION_POOL_LIMIT:
            self.notices.append(
                f"--concurrency {self.concurrency} is above LiteLLM's pool of {CONNECTION_POOL_LIMIT} connections per host; using {CONNECTION_POOL_LIMIT}"
            )
            self.concurrency = CONNECTION_POOL_LIMIT
        self.outputs = RunOutputs(settings)
        # the history's lookup needs the metrics' identities before the input is read; without a
        # history, bad input is told before any judge is made or the response cache opened
        early = RunJudges(settings) if judged_before is not None else None
        judged = already_judged(early.metrics, settings, judged_before) if early is not None else set()
        self.inputs = InputSet(
            paths,
            output.output,
            written_paths(settings),
            chosen.format,
            conversation_key=chosen.conversation_key,
            since=chosen.since,
            until=chosen.until,
        )
        self.redactor = redactor_of(settings.redaction_settings)  #: None: the conversations go as read
        if self.redactor is not None:
            self.notices.append(detectors_ran(self.redactor))
        self.selection = selection_of(chosen, judged, None if self.redactor is None else self.redactor.redact)
        self.scan: ScanReport = scan(self.inputs, self.selection.fresh(), chosen.date_field)
        self.notices.extend(self.inputs.notices)  # after the scan, which tells the readers' notices
        self.notices.extend(barren_lines(self.scan))
        if not chosen.skip_invalid:
            raise_for_problems(self.scan, hint=SKIP_INVALID_HINT)
        if self.scan.selected == 0 and not chosen.allow_empty:
            self.inputs.close()
            raise nothing_to_judge(paths, self.scan.left_out)
        self.notices.extend(scan_notices(self.scan))
        self.judges = early or RunJudges(settings)
        self.cache, self.metrics = self.judges.cache, self.judges.metrics

    @property
    def total_rows(self) -> int:
        return self.scan.selected * sum(len(metric.row_names) for metric in self.metrics)

    def start(self, listener: RunListener) -> RunSummary:
        """A new summary for this run, and the listener told what the scan found: the notices,
        the rows to come and each invalid record skipped."""
        for notice in self.notices:
            listener.notice(notice)
        self.notices.clear()
        listener.started(self.total_rows)
        summary = RunSummary(expected_rows=self.total_rows)
        summary.skip_invalid(self.scan.invalid, self.scan.problems)
        summary.left_out = dict(self.scan.left_out)
        seen: set[str] = set()
        for source in self.scan.invalid_records:
            if str(source) not in seen:
                seen.add(str(source))
                listener.skipped(self.scan.invalid_names[str(source)], source, "invalid")
        return summary

    def items(self, listener: RunListener | None = None) -> Iterator[tuple[ConversationalEvalTestCase, Source]]:
        """The selected conversations, in input order, redacted with `--redact` (so that nothing
        after this sees the original text); the listener hears each one left out."""
        selection = self.selection.fresh()
        self.inputs.push_down(selection)
        for record in iter_cases(self.inputs):
            if selection.choose(record.case):  # type: ignore[arg-type]
                case = record.case if self.redactor is None else self.redactor.redact(record.case)  # type: ignore[arg-type]
                yield case, record.source  # type: ignore[misc]
            elif listener is not None:
                shown = record.case.id if self.redactor is None else self.redactor.redact_id(record.case)  # type: ignore[union-attr,arg-type]
                listener.skipped(shown, record.source, selection.last_reason)  # type: ignore[arg-type]

    def close(self) -> None:
        """Close the input files."""
        self.inputs.close()

    def estimate(self) -> DryRunEstimate:
        """What judging would send and cost, with no call made: prompts rendered and counted."""
        try:
            self.judges.prepare()
            estimate = self.judges.estimate(case for case, _ in self.items())
            estimate.notices = list(self.notices)  # what a run would tell before judging
            return estimate
        finally:
            self.inputs.close()


class RunOutputs:
    """Where a run writes (`settings`): every path checked before any call (exit 2 when one
    cannot be written), and the rows a resumed output holds."""

    def __init__(self, settings: EvalSettings):
        self.settings = settings
        output = settings.output_settings
        if output.output == "-" and (output.resume or output.retry_errors):
            raise ConfigError("--resume and --retry-errors need --output to be a file")
        check_output_path(output.output)
        check_report_paths(settings)

    @property
    def resuming(self) -> bool:
        """True when rows are appended to an output that exists (`--resume`, `--retry-errors`, `--batch`)."""
        resuming = self.settings.resume or self.settings.retry_errors or self.settings.batch
        return resuming and Path(self.settings.output).exists()

    def done_rows(self, metrics: list[Metric], listener: RunListener) -> dict[tuple[str, str], EvaluationRow]:
        """The rows of `metrics` a resumed output holds (empty unless resuming into an existing file)."""
        if not self.resuming:
            return {}
        return resumed_rows(self.settings.output, metrics, self.settings.retry_errors, listener.notice)


class RunJudges:
    """A run's metrics and the response cache they share, made from `settings` before any call:
    readied by `prepare`, and what their calls would cost counted by `estimate`."""

    def __init__(self, settings: EvalSettings):
        self.settings = settings
        judge = settings.judge_settings
        self.cache = None  # the run's: every judged metric reads and writes it
        if not judge.no_cache:
            self.cache = ResponseCache(cache_folder(judge.cache_dir))
        self.metrics = build_metrics(judge, self.cache, settings.gate_settings)

    def prepare(self, listener: RunListener | None = None) -> None:
        """Check keys (before LiteLLM is imported, so a missing key is told at once), then load
        the judge (`listener` told) and check the model, the context budget and the price a
        budget needs."""
        judges = [metric.backend for metric in self.metrics if metric.backend is not None]
        for judge in judges:
            judge.check_keys()
        if any(metric.calls_per_conversation for metric in self.metrics):
            (listener or RunListener()).stage(f"loading the judge ({self.settings.model})…")
        for metric in self.metrics:
            if metric.backend is not None:
                metric.backend.check_access()
            metric.warm_up()
        sample = Usage(prompt_tokens=1000, completion_tokens=100)
        if self.settings.max_cost is not None and any(judge.price(sample) is None for judge in judges):
            raise ConfigError(f"no price is known for model {self.settings.model!r}, so --max-cost cannot be enforced")

    def estimate(self, cases: Iterable[ConversationalEvalTestCase]) -> DryRunEstimate:
        """What judging `cases` would send and cost by the price list, each prompt counted with
        the model's tokenizer; a reply in the cache costs nothing."""
        estimate = DryRunEstimate(cost_usd=0.0)
        for case in cases:
            estimate.conversations += 1
            for metric in self.metrics:
                plan = metric.plan(case)
                estimate.cached += plan.cached_texts is not None
                call = metric.estimate(plan, exact=True)  # a cached verdict's look or checklist may be missing
                estimate.calls += call.calls
                estimate.prompt_tokens += call.prompt_tokens
                estimate.cached_tokens += call.cached_tokens
                estimate.completion_tokens += call.completion_tokens
                if call.cached_cost_usd is None or estimate.cost_usd is None:
                    estimate.cost_usd = None  # one call with no known price: the total is unknown
                else:
                    estimate.cost_usd += call.cached_cost_usd
                    estimate.uncached_cost_usd += call.cost_usd or 0.0
        return estimate


def resumes(settings: EvalSettings) -> bool:
    """True when a run under `settings` appends rows to an output that exists (`--resume`,
    `--retry-errors`, `--batch`)."""
    resuming = settings.resume or settings.retry_errors or settings.batch
    return resuming and Path(settings.output).exists()


def already_judged(
    metrics: list[Metric], settings: EvalSettings, judged_before: JudgedBefore | None
) -> set[tuple[str, str]]:
    """The (id, turns_sha256) of every conversation `judged_before` (the history) holds rows of
    `metrics` for, less those whose rows a resumed output (`settings.output`) holds: those are
    resumed, and counted, as `--resume` always did."""
    if judged_before is None:
        return set()
    identities = [
        (name, metric.judge_identity["model"], metric.judge_identity["rubric version"])
        for metric in metrics
        for name in metric.row_names
    ]
    judged = judged_before(identities)
    if judged and resumes(settings):
        resumed = {row.id for row in read_rows(Path(settings.output))}
        judged = {key for key in judged if key[0] not in resumed}
    return judged


def selection_of(
    chosen: SelectionOptions,
    judged: set[tuple[str, str]] | None,
    judged_as: Callable[[ConversationalEvalTestCase], ConversationalEvalTestCase] | None = None,
) -> Selection:
    """The run's `Selection` from its selection options, leaving out `judged` (the (id,
    turns_sha256) the history holds rows of; None: no history asked)."""
    return Selection(
        chosen.shard_slice,
        chosen.sample,
        chosen.sample_seed,
        chosen.min_words,
        list(chosen.only),
        list(chosen.exclude),
        chosen.limit,
        closed_after_s=chosen.closed_after_s,
        judged=judged,
        judged_as=judged_as,
    )


def scan_notices(report: ScanReport) -> list[str]:
    """What the scan found that a run tells before judging: unreadable chat dates, and the
    conversations `--closed-after` found an unreadable time in or counted as closed for want of one."""
    notices = []
    if report.unreadable_dates:
        notices.append(
            f"{report.unreadable_dates} conversation(s) have a chat date that cannot be read"
            f" (first: {report.first_unreadable_date}); their rows have chat_date null"
        )
    if report.unreadable_times:
        notices.append(
            f"--closed-after: {report.unreadable_times} conversation(s) have a time that cannot be read"
            f" (first: {report.first_unreadable_time}); their other times decided whether they are open,"
            " and with none they were counted as closed"
        )
    if report.untimed:
        notices.append(
            f"--closed-after: {report.untimed} conversation(s) have no time (metadata ended_at, chat_date,"
            " started_at or timestamp); they were counted as closed"
        )
    return notices


def tell_lost_cache_writes(cache: ResponseCache | None, listener: RunListener) -> None:
    """Tell `listener` of the replies `cache` (None: no cache) could not keep (a full disk), if any."""
    if cache is not None and cache.writes.lost_writes:
        writes = cache.writes
        listener.notice(f"{cache.path}: {writes.lost_writes} replies could not be cached ({writes.last_error})")


def begin(run: FileRun, listener: RunListener) -> tuple[dict[tuple[str, str], EvaluationRow], RunSummary]:
    """`run.judges.prepare`, then the rows a resumed output holds (`RunOutputs.done_rows`) and the new summary
    (`start`), `listener` told: how every engine begins a run. The run is closed when any fails."""
    try:
        run.judges.prepare(listener)
        return run.outputs.done_rows(run.metrics, listener), run.start(listener)
    except BaseException:
        run.close()
        raise


def tell_logprobs(run: FileRun, listener: RunListener) -> None:
    """Tell `listener`, once each, why `run`'s replies came without usable log-probabilities, if
    they did (`LogprobsLearned.notes` of each served judge; metrics may share one), and what each
    judge learned of its provider (`JudgeBackend.notes`: a parameter it refused)."""
    learned = {id(m.backend.logprobs): m.backend.logprobs for m in run.metrics if m.backend and m.backend.logprobs}
    notes = [note for logprobs in learned.values() for note in logprobs.notes()]
    notes += [note for m in run.metrics if m.backend for note in m.backend.notes()]
    for note in dict.fromkeys(notes):
        listener.notice(note)


def finish(run: FileRun, listener: RunListener, summary: RunSummary, started: float) -> RunSummary:
    """How every engine ends `run`: its gates applied to `summary`, the wall clock since `started`
    (`time.monotonic()` when the engine was called: loading the judge included, as the progress
    clock), `listener` told why its replies came without the log-probabilities asked for, if they
    did, and that the run finished. Returns `summary`."""
    tell_logprobs(run, listener)
    apply_gates(summary, run.settings.gate_settings)
    summary.wall_time_s = round(time.monotonic() - started, 3)
    listener.finished(summary)
    return summary
