"""Results: a run's summary built row by row, and results files (reading rows back,
repairing a killed run's last line, rewriting them for a resume)."""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from flowrate.exit_codes import ConfigError, ExitCode, InputError, exit_code_for_outcome
from flowrate.models import EvaluationRow
from flowrate.settings import plain_validation_message

FAILURES_KEPT = 50


def read_rows(path: Path) -> Iterator[EvaluationRow]:
    """The rows of a results file. A partial last line (a run killed mid-write) is passed over;
    a bad line anywhere else is an input error."""
    try:
        handle = open(path, "rb")
    except OSError as error:
        raise ConfigError(f"{path}: cannot read results: {error.strerror}") from None
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = EvaluationRow.model_validate_json(line)
            except ValidationError as error:
                if not line.endswith(b"\n"):  # the last line, cut short
                    return
                first = error.errors()[0]
                field = ".".join(str(part) for part in first["loc"])
                problem = f"field {field!r}: {plain_validation_message(first)}" if field else first["msg"]
            else:
                if row.score is not None or row.error is not None:
                    yield row
                    continue
                problem = "a row has a score or an error, this one has neither"
            raise InputError(
                [f"{path}:{number}: not a flowrate result row: {problem}"],
                headline="problem(s) in a results file",
                hint=None,
            )


def repair_partial_tail(path: Path) -> bool:
    """Cut a last line that has no newline (the run was killed while writing it)."""
    with open(path, "rb+") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return False
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return False
        position = size - 1
        while position > 0:
            step = min(65536, position)
            handle.seek(position - step)
            chunk = handle.read(step)
            found = chunk.rfind(b"\n")
            if found != -1:
                position = position - step + found + 1
                break
            position -= step
        handle.truncate(position)
    return True


def rewrite_rows(path: Path, rows: Iterable[EvaluationRow]) -> None:
    """Replace the file's rows with `rows`, atomically: a kill leaves the old file or the new one."""
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as out:
        for row in rows:
            out.write(row.model_dump_json().encode() + b"\n")
    os.replace(temporary, path)


class FailureNote(BaseModel):
    id: str
    metric: str
    detail: str
    order: int = 0  #: the conversation's place in the input: notes are listed in input order


class Totals(BaseModel):
    """Counts over rows: judged (with a score), passed, failed, errors, and the scores' sum."""

    judged: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    score_sum: float = 0.0

    def count(self, row: EvaluationRow) -> None:
        if row.error is not None:
            self.errors += 1
            return
        self.judged += 1
        self.score_sum += row.score or 0.0
        if row.success:
            self.passed += 1
        else:
            self.failed += 1

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.judged if self.judged else None

    @property
    def mean_score(self) -> float | None:
        return self.score_sum / self.judged if self.judged else None


class MetricStats(Totals):
    """One metric's totals, its scale and the distribution of its values."""

    rows: int = 0
    scale: int | None = None  #: the points of its rating scale, for rated criteria
    distribution: dict[str, int] = Field(default_factory=dict)  #: verdict, rating or score -> rows
    value_scores: dict[str, float] = Field(default_factory=dict)  #: each value's score, to order them


def mean4(values: list[float]) -> float | None:
    """The mean rounded to 4 places, as reports give scores; None for no values."""
    return round(sum(values) / len(values), 4) if values else None


def format_score(score: float, threshold: float | None = None, digits: int = 2) -> str:
    """`score` for the screen with `digits` decimals, or more where fewer would put it on the
    other side of `threshold`: a failing 2/3 at threshold 0.7 shows as 0.67, never 0.7, and a
    failing 0.6999 as 0.6999. Rows keep the exact score."""
    text = f"{score:.{digits}f}"
    if threshold is not None:
        while (float(text) >= threshold) != (score >= threshold) and digits < 17:
            digits += 1
            text = f"{score:.{digits}f}"
    return text


def shown_value(row: EvaluationRow) -> str:
    """A row's judgement as people read it: the verdict, the rating on its scale, or the score
    (`format_score` against the row's threshold)."""
    if row.verdict is not None:
        return row.verdict
    if row.rating is not None:
        return f"{row.rating}/{row.scale}"
    return format_score(row.score, row.threshold)


class GateResult(BaseModel):
    metric: str
    gate: str
    limit: float
    actual: float | None  # None: nothing judged
    passed: bool

    def describe(self) -> str:
        """One line: the gate, what it needs, what the run had, and by how much it missed."""
        if self.actual is None:
            return f"{self.metric}: {self.gate} {self.limit:g}: nothing judged"
        if self.gate == "max_failures":
            shown = f"{self.actual:g} failure{'' if self.actual == 1 else 's'}, at most {self.limit:g} allowed"
            miss = self.actual - self.limit
            return f"{self.metric}: max_failures: {shown}" + ("" if self.passed else f" ({miss:g} too many)")
        shown = f"{self.actual:.4f}, at least {self.limit:g} needed"
        return f"{self.metric}: {self.gate}: {shown}" + (
            "" if self.passed else f" (short by {self.limit - self.actual:.4f})"
        )


class RunSummary(Totals):
    """Totals of a run, built row by row: over all rows, and per metric in `metrics`."""

    skipped: int = 0
    budget_skipped: int = 0
    unreachable_skipped: int = 0  #: not judged: the run stopped because the judge could not be reached
    unreachable: str | None = None  #: the endpoint that could not be reached
    expected_rows: int | None = None  #: rows this run should end with (selected conversations x metrics)
    pipe_closed: bool = False  #: the reader of stdout went away (`... -o - | head`)
    unstable: int = 0
    truncated: int = 0
    cached: int = 0
    resumed: int = 0
    resumed_elsewhere: int = 0  #: rows in a resumed output for conversations not in this run's input
    metrics: dict[str, MetricStats] = Field(default_factory=dict)
    left_out: dict[str, int] = Field(default_factory=dict)  #: conversations the selection left out, by reason
    batches: list[str] = Field(default_factory=list)  #: provider batches this run submitted or collected
    batch_online: int = 0  #: batch lines that went the online way (failed, expired, unparsable)
    still_running: list[str] = Field(default_factory=list)  #: batches not finished when collection stopped
    gates: list[GateResult] = Field(default_factory=list)  #: set by `apply_gates`; empty: no gate checked yet
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    rows_without_cost: int = 0
    #: of the totals above, what rows resumed from the output file had spent in earlier runs
    resumed_prompt_tokens: int = 0
    resumed_completion_tokens: int = 0
    resumed_cost_usd: float = 0.0
    wall_time_s: float = 0.0
    interrupted: bool = False
    terminated: bool = False  #: the interruption was SIGTERM (a CI runner's or Kubernetes' stop), not Ctrl-C
    output_error: str | None = None  #: a write of the results file failed part-way (disk full): what the system said
    failures: list[FailureNote] = Field(default_factory=list)
    error_notes: list[FailureNote] = Field(default_factory=list)
    skipped_notes: list[str] = Field(default_factory=list)
    unstable_notes: list[FailureNote] = Field(default_factory=list)

    def add(self, row: EvaluationRow, order: int = 0, resumed: bool = False) -> None:
        """Count one row; `order` is its conversation's place in the input, `resumed` says it
        was in the output file already (its tokens and cost were spent by an earlier run)."""
        if resumed:
            self.resumed += 1
            self.resumed_prompt_tokens += row.usage.prompt_tokens
            self.resumed_completion_tokens += row.usage.completion_tokens
            self.resumed_cost_usd += row.cost_usd or 0.0
        stats = self.metrics.setdefault(row.metric, MetricStats())
        stats.rows += 1
        self.count(row)
        stats.count(row)
        self.prompt_tokens += row.usage.prompt_tokens
        self.completion_tokens += row.usage.completion_tokens
        self.cached += row.cached
        if row.cost_usd is None:
            self.rows_without_cost += 1
        else:
            self.cost_usd += row.cost_usd
        if row.error is not None:
            detail = f"{row.error.type}: {row.error.message}"
            _keep(self.error_notes, FailureNote(id=row.id, metric=row.metric, detail=detail, order=order))
            return
        self.truncated += row.truncated
        if row.agreement is not None and row.agreement < 1.0:
            self.unstable += 1
            split = ", ".join(str(value) for value in row.sample_verdicts)
            detail = f"{shown_value(row)} with {row.agreement:.0%} agreement ({split})"
            _keep(self.unstable_notes, FailureNote(id=row.id, metric=row.metric, detail=detail, order=order))
        stats.scale = row.scale
        value = row.verdict or (str(row.rating) if row.rating is not None else f"{row.score:.1f}")
        stats.distribution[value] = stats.distribution.get(value, 0) + 1
        stats.value_scores[value] = row.score or 0.0
        if not row.success:
            first = row.key_issues[0] if row.key_issues else (row.reason or "")
            detail = f"{shown_value(row)}: {first}"
            _keep(self.failures, FailureNote(id=row.id, metric=row.metric, detail=detail, order=order))

    @property
    def run_prompt_tokens(self) -> int:
        """Prompt tokens this run spent (resumed rows left out)."""
        return self.prompt_tokens - self.resumed_prompt_tokens

    @property
    def run_completion_tokens(self) -> int:
        """Completion tokens this run spent (resumed rows left out)."""
        return self.completion_tokens - self.resumed_completion_tokens

    @property
    def run_cost_usd(self) -> float:
        """USD this run spent by the price list (resumed rows left out)."""
        return self.cost_usd - self.resumed_cost_usd

    def skip_for_budget(self, conversation_id: str | None, rows: int = 1) -> None:
        """A judge call not made because the --max-cost budget is spent; `rows` it would have made."""
        self.skipped += rows
        self.budget_skipped += rows
        _keep(self.skipped_notes, f"{conversation_id}: not judged, the --max-cost budget is spent")

    def skip_unreachable(self, conversation_id: str | None, rows: int = 1) -> None:
        """A judge call not made because the judge could not be reached; `rows` it would have made."""
        self.skipped += rows
        self.unreachable_skipped += rows
        _keep(self.skipped_notes, f"{conversation_id}: not judged, the judge could not be reached")

    @property
    def rows_written(self) -> int:
        return self.judged + self.errors

    @property
    def not_judged(self) -> int:
        """Rows still missing: conversations an interruption left unjudged."""
        if self.expected_rows is None:
            return 0
        return max(self.expected_rows - self.rows_written - self.budget_skipped - self.unreachable_skipped, 0)

    def skip_invalid(self, records: int, problems: list[str]) -> None:
        """Invalid records left out by --skip-invalid: counted once each, every problem noted."""
        self.skipped += records
        for problem in problems:
            _keep(self.skipped_notes, problem)

    def apply_gates(self, default: dict[str, float], per_metric: dict[str, dict[str, float]]) -> None:
        """Check every metric's gates; the exit code then follows them instead of every row."""
        from flowrate.gates import check_gates

        self.gates = check_gates(self.metrics, default, per_metric)

    @property
    def gates_failed(self) -> int:
        return sum(not gate.passed for gate in self.gates)

    @property
    def exit_code(self) -> ExitCode:
        return exit_code_for_outcome(
            errors=self.errors,
            failed=self.gates_failed if self.gates else self.failed,
            interrupted=self.interrupted,
            terminated=self.terminated,
            incomplete=self.budget_skipped + self.unreachable_skipped > 0,
            pipe_closed=self.pipe_closed,
            output_failed=self.output_error is not None,
        )


def _keep(notes: list, note: object) -> None:
    """Keep the first `FAILURES_KEPT` notes; `FailureNote`s by input order, whatever order they came in."""
    if isinstance(note, FailureNote):
        bisect.insort(notes, note, key=lambda kept: kept.order)
        del notes[FAILURES_KEPT:]
    elif len(notes) < FAILURES_KEPT:
        notes.append(note)


class DryRunEstimate(BaseModel):
    """What a run would send and cost, with no call made."""

    conversations: int = 0
    cached: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None


class CaseResult(BaseModel):
    """One row as reports show it: where it came from, the judgement, its reason and issues."""

    id: str
    metric: str
    path: str | None = None
    line: int | None = None
    index: int | None = None  #: the place in a JSON or YAML list, where the source has no line
    value: str | None = None  # the verdict, the rating on its scale, or the score
    score: float | None = None
    threshold: float | None = None
    success: bool | None = None
    reason: str | None = None
    key_issues: list[str] = Field(default_factory=list)
    error: str | None = None
    error_type: str | None = None
    latency_s: float = 0.0
    cost_usd: float | None = None

    @classmethod
    def from_row(cls, row: EvaluationRow) -> CaseResult:
        source = row.source
        return cls(
            id=row.id,
            metric=row.metric,
            path=source.path if source else None,
            line=source.line if source else None,
            index=source.index if source else None,
            value=shown_value(row) if row.score is not None else None,
            score=row.score,
            threshold=row.threshold,
            success=row.success,
            reason=row.reason,
            key_issues=row.key_issues,
            error=row.error.message if row.error else None,
            error_type=row.error.type if row.error else None,
            latency_s=row.latency_s,
            cost_usd=row.cost_usd,
        )

    @property
    def badness(self) -> tuple[int, float]:
        """Sorts the worst first: errors, then failures, then by score."""
        rank = 0 if self.error else (1 if self.success is False else 2)
        return rank, self.score if self.score is not None else 0.0

    @property
    def place(self) -> tuple[str, int, int]:
        """Sorts in input order: by source file, then line (or place in a JSON or YAML list)."""
        return self.path or "", self.line if self.line is not None else -1, self.index or 0


class SkippedCase(BaseModel):
    id: str
    path: str | None = None
    line: int | None = None
    reason: str


class ReportBook:
    """What reports (JUnit, GitHub, HTML) need of a run, in bounded memory: every row of a
    metric up to `full_limit` of them; past that, only the `worst` worst and the counts."""

    def __init__(self, full_limit: int = 10_000, worst: int = 1000):
        self.full_limit = full_limit
        self.worst = worst
        self.cases: dict[str, list[CaseResult]] = {}
        self.counts: dict[str, int] = {}
        self.skipped: list[SkippedCase] = []

    def add(self, row: EvaluationRow) -> None:
        cases = self.cases.setdefault(row.metric, [])
        self.counts[row.metric] = self.counts.get(row.metric, 0) + 1
        cases.append(CaseResult.from_row(row))
        if len(cases) > self.full_limit * 2:  # sort now and then, not on every row
            self.cases[row.metric] = self.worst_of(row.metric)

    def skip(self, case_id: str, path: str | None, line: int | None, reason: str) -> None:
        self.skipped.append(SkippedCase(id=case_id, path=path, line=line, reason=reason))

    def truncated(self, metric: str) -> bool:
        """True when the metric has more rows than reports list one by one."""
        return self.counts.get(metric, 0) > self.full_limit

    def worst_of(self, metric: str) -> list[CaseResult]:
        return sorted(self.cases.get(metric, []), key=lambda case: case.badness)[: self.worst]

    def listed(self, metric: str) -> list[CaseResult]:
        """The rows reports list: all of them, or the worst when there are too many."""
        return self.worst_of(metric) if self.truncated(metric) else self.cases.get(metric, [])
