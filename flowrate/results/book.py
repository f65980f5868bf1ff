"""What reports need of a run: each conversation's rows in input order, and the conversations not judged."""

from __future__ import annotations

from pydantic import BaseModel, Field

from flowrate.inputs.conversation import Source
from flowrate.results.events import RunListener
from flowrate.results.rows import EvaluationRow
from flowrate.results.summary import shown_value


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


class ReportBook(RunListener):
    """What reports (JUnit, GitHub, HTML) need of a run, in bounded memory: every row of a
    metric up to `full_limit` of them; past that, only the `worst` worst and the counts.
    As a run's listener it keeps every row, resumed ones included, and every skipped conversation."""

    def __init__(self, full_limit: int = 10_000, worst: int = 1000):
        self.full_limit = full_limit
        self.worst = worst
        self.cases: dict[str, list[CaseResult]] = {}
        self.counts: dict[str, int] = {}
        self.skipped_cases: list[SkippedCase] = []

    def add(self, row: EvaluationRow) -> None:
        cases = self.cases.setdefault(row.metric, [])
        self.counts[row.metric] = self.counts.get(row.metric, 0) + 1
        cases.append(CaseResult.from_row(row))
        if len(cases) > self.full_limit * 2:  # sort now and then, not on every row
            self.cases[row.metric] = self.worst_of(row.metric)

    def skip(self, case_id: str, path: str | None, line: int | None, reason: str) -> None:
        self.skipped_cases.append(SkippedCase(id=case_id, path=path, line=line, reason=reason))

    def row(self, row: EvaluationRow) -> None:
        self.add(row)

    def resumed(self, row: EvaluationRow) -> None:
        self.add(row)

    def skipped(self, conversation_id: str, source: Source | None, reason: str) -> None:
        if reason != "shard":  # another shard's conversation is that shard's, not this run's
            self.skip(conversation_id, source.path if source else None, source.line if source else None, reason)

    def truncated(self, metric: str) -> bool:
        """True when the metric has more rows than reports list one by one."""
        return self.counts.get(metric, 0) > self.full_limit

    def worst_of(self, metric: str) -> list[CaseResult]:
        return sorted(self.cases.get(metric, []), key=lambda case: case.badness)[: self.worst]

    def listed(self, metric: str) -> list[CaseResult]:
        """The rows reports list: all of them, or the worst when there are too many."""
        return self.worst_of(metric) if self.truncated(metric) else self.cases.get(metric, [])
