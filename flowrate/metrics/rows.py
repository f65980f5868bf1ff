"""The rubric metric's rows: one per criterion of the rubric (and `user_satisfaction`, the weighted
mean, for a suite), from judgements made online or read from a provider batch (`batch_lines`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from flowrate.inputs.conversation import ConversationalEvalTestCase, Source, chat_date, turns_sha256
from flowrate.judge.backend import Usage
from flowrate.judge.retry import error_kind, error_message
from flowrate.metrics.planning import ERROR_MESSAGE_LIMIT
from flowrate.results.rows import ErrorInfo, EvaluationRow
from flowrate.rubric.model import USER_SATISFACTION, Rubric
from flowrate.scores.reading import Judgement, majority, weighted_mean


@dataclass(eq=False)
class Scoring:
    """Judgements to scores on a conversation's rows: each criterion of `rubric` at its majority
    rating with the agreement of the `samples` (judgements asked per conversation), and for a
    suite `user_satisfaction`, the mean of the criteria's scores under `weights` (criterion name
    to weight)."""

    rubric: Rubric
    weights: dict[str, float]
    samples: int

    def fill(self, rows: list[EvaluationRow], judgements: list[Judgement]) -> None:
        """Fill a conversation's new `rows` from its `judgements`: each criterion's majority rating,
        the samples' agreement, and for a suite the weighted mean."""
        by_name = {row.metric: row for row in rows}
        scores: dict[str, float] = {}
        for criterion in self.rubric.criteria:
            row = by_name[criterion.name]
            rating, agreement, values = majority(judgements, criterion.name)
            if criterion.scale.levels is not None:
                row.verdict = str(rating.value)
            else:
                row.rating = int(rating.value)
                row.scale = criterion.scale.points
            row.score = scores[criterion.name] = rating.score
            row.success = row.score >= row.threshold
            row.reason = rating.reason
            row.key_issues = rating.key_issues
            if self.samples > 1:
                row.agreement = agreement
                row.sample_verdicts = values
        reasons = list(dict.fromkeys(judgement.reasked for judgement in judgements if judgement.reasked))
        for row in rows:
            row.samples = len(judgements)
            row.repaired = any(judgement.repaired for judgement in judgements)
            row.cut = any(judgement.cut for judgement in judgements)
            row.reasked = "; ".join(reasons) or None
        if self.rubric.user_satisfaction:
            self._fill_mean(by_name[USER_SATISFACTION], scores)

    def _fill_mean(self, row: EvaluationRow, scores: dict[str, float]) -> None:
        """A suite's `user_satisfaction` `row`: the weighted mean of its criteria's `scores`."""
        row.score = weighted_mean(scores, self.weights)
        row.success = row.score >= row.threshold
        row.weights = dict(self.weights)
        row.reason = f"weighted mean of the {len(scores)} criteria's scores"


@dataclass(eq=False)
class RowMaker:
    """A conversation's rows, new, then settled from its judgements (`scoring`) or from the error
    that stopped it. `rubric` names the rows and reads the replies; a row passes at its
    `thresholds[name]`; `weights` (criterion name to weight) make a suite's `user_satisfaction`;
    `model` and the rubric's version are the judge's identity on every row; `samples` is the
    judgements asked per conversation; `date_field` names the metadata field with the chat's date
    (None: `chat_date`, `started_at` or `timestamp`)."""

    rubric: Rubric
    thresholds: dict[str, float]
    weights: dict[str, float]
    model: str
    samples: int
    date_field: str | None = None
    scoring: Scoring = field(init=False)

    def __post_init__(self) -> None:
        self.scoring = Scoring(self.rubric, self.weights, self.samples)

    @property
    def judge_identity(self) -> dict[str, str]:
        """What makes rows comparable: a results file never mixes two judges."""
        return {"model": self.model, "rubric version": self.rubric.version}

    def new_row(
        self, case: ConversationalEvalTestCase, source: Source | None = None, name: str | None = None
    ) -> EvaluationRow:
        """A row for `case` (read from `source`) and the row name `name` (default: the first), before any judgement."""
        name = name or self.rubric.row_names[0]
        return EvaluationRow(
            id=case.id or "",
            source=source,
            metric=name,
            suite=self.rubric.name if self.rubric.is_suite else None,
            threshold=self.thresholds[name],
            model=self.model,
            rubric_version=self.rubric.version,
            evaluated_at=datetime.now(UTC),
            number_of_turns=len(case.turns),
            turns_sha256=turns_sha256(case),
            chat_date=chat_date(case, self.date_field),
            redactions=case.redactions,
            redacted_by=case.redacted_by,
        )

    def new_rows(self, case: ConversationalEvalTestCase, source: Source | None, truncated: bool) -> list[EvaluationRow]:
        """A row per row name of the rubric for `case` (read from `source`), before any judgement
        (`truncated`: the prompt left turns out)."""
        rows = [self.new_row(case, source, name) for name in self.rubric.row_names]
        for row in rows:
            row.truncated = truncated
            row.samples = self.samples
        return rows

    def settle(
        self,
        rows: list[EvaluationRow],
        outcome: list[Judgement] | BaseException,
        *,
        cached: bool,
        response_format: str | None,
        usage: Usage,
        cost_usd: float | None = 0.0,
        attempts: int = 0,
        latency_s: float = 0.0,
        wait_s: float = 0.0,
    ) -> list[EvaluationRow]:
        """Fill a conversation's new `rows` (`new_rows`) from its judgements, or from the error that
        stopped it (`outcome`); `cached`: the replies came from the cache, sent in `response_format`.
        The call's `usage`, `cost_usd`, `attempts` and clocks (`latency_s`, `wait_s`) go on the first
        row, the others carry cost 0 (null when the price is unknown), so totals add up."""
        if isinstance(outcome, BaseException):
            message = error_message(outcome, ERROR_MESSAGE_LIMIT)
            reply = getattr(outcome, "reply", None)
            for row in rows:
                row.error = ErrorInfo(type=error_kind(outcome), message=message)
                row.raw_reply = reply
        else:
            self.scoring.fill(rows, outcome)
        now = datetime.now(UTC)  # when the verdict (or the error) arrived
        for row in rows:
            row.evaluated_at = now
            row.cached = cached
            row.response_format = response_format
        first = charge(rows, usage, cost_usd)
        first.attempts = attempts
        first.latency_s = round(latency_s, 3)
        first.wait_s = round(wait_s, 3)
        return rows


def charge(rows: list[EvaluationRow], usage: Usage, cost_usd: float | None) -> EvaluationRow:
    """A call's tokens and cost go on its first row; the others carry cost 0, or null when the
    price is unknown, so totals add up. Returns the first row."""
    for row in rows:
        row.cost_usd = None if cost_usd is None else 0.0
    rows[0].usage = usage
    rows[0].cost_usd = cost_usd
    return rows[0]
