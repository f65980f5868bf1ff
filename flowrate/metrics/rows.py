"""The rubric metric's rows: one per criterion of the rubric (and `user_satisfaction`, the weighted
mean, for a suite), from judgements made online or read from a provider batch (`batch_lines`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from flowrate.inputs.conversation import ConversationalEvalTestCase, Source, chat_date, turns_sha256
from flowrate.judge.backend import Usage
from flowrate.judge.retry import error_kind, error_message
from flowrate.metrics.planning import ERROR_MESSAGE_LIMIT
from flowrate.results.rows import ErrorInfo, EvaluationRow, looks
from flowrate.rubric.combination import problem_turns, turn_threshold
from flowrate.rubric.model import USER_SATISFACTION, Criterion, Rubric
from flowrate.scores.checklist import ChecklistReading
from flowrate.scores.distribution import LevelProbs, from_samples, mean_of, most_likely
from flowrate.scores.reading import Judgement, majority, weighted_mean
from flowrate.settings.groups import ScoreChoice


@dataclass(eq=False)
class Scoring:
    """Judgements to scores on a conversation's rows: each criterion of `rubric` at its majority
    rating with the agreement of the `samples` (judgements asked per conversation), its score the
    value `choice` names (`--score`; its reply order tells whether the reply's own distribution is
    a first look), marked uncertain below its bound, and for a suite `user_satisfaction`,
    the mean of the criteria's scores under `weights` (criterion name to weight)."""

    rubric: Rubric
    weights: dict[str, float]
    samples: int
    choice: ScoreChoice = ScoreChoice()

    def fill(
        self, rows: list[EvaluationRow], judgements: list[Judgement], first_look: dict[str, LevelProbs] | None = None,
        checklist: ChecklistReading | None = None, turns: ChecklistReading | None = None,
    ) -> None:  # fmt: skip
        """Fill a conversation's new `rows` from its `judgements` (and the distributions of a
        verdict-first look, `first_look`, the reading of the rubric's `checklist` and of the per-turn
        look, `turns`): each
        criterion's majority rating, the samples' agreement, the distributions, the score `score`
        names, and for a suite the weighted mean."""
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
            row.verdict_score = rating.score
            row.reason = rating.reason
            row.key_issues = rating.key_issues
            if self.samples > 1:
                row.agreement = agreement
                row.sample_verdicts = values
            set_distribution(row, criterion, judgements, values)
            if checklist is not None:
                row.checklist_p_yes = {item: round(p, 6) for item, p in checklist.p_yes.items()}
                row.checklist_score = checklist.score
            if turns is not None:
                row.turn_p_problem = {turn: round(p, 6) for turn, p in turns.p_yes.items()}
                row.problem_turns = problem_turns(turns.p_yes, turn_threshold(self.rubric.combination))
            self._score(row, criterion, (first_look or {}).get(criterion.name))
            scores[criterion.name] = row.score or 0.0
        reasons = list(dict.fromkeys(judgement.reasked for judgement in judgements if judgement.reasked))
        for row in rows:
            row.samples = len(judgements)
            row.repaired = any(judgement.repaired for judgement in judgements)
            row.cut = any(judgement.cut for judgement in judgements)
            row.reasked = "; ".join(reasons) or None
        if self.rubric.user_satisfaction:
            criteria = {c.name: by_name[c.name] for c in self.rubric.criteria}
            self._fill_mean(by_name[USER_SATISFACTION], scores, criteria)

    def _score(self, row: EvaluationRow, criterion: Criterion, first: LevelProbs | None) -> None:
        """`row`'s score by `score` (the verdict's where the row has no distribution to take it
        from, `score_from` saying which), its pass, and its uncertainty mark."""
        if first is not None:
            row.verdict_first_probs = {value: round(p, 6) for value, p in first.probs.items()}
            row.verdict_first_score = first.expected_score(criterion.scale)
        elif self.choice.reply_order == "verdict-first" and row.level_probs_from == "logprobs":
            row.verdict_first_score = row.expected_score  # the reply's own distribution is its first look
        if row.verdict_first_score is not None and row.verdict_score is not None:
            row.combined_score = (row.verdict_score + row.verdict_first_score) / 2
        if self.rubric.combination is not None and self.choice.score == "fitted":
            row.fitted_score = self.rubric.combination.score(looks(row))
        chosen = {
            "verdict": row.verdict_score, "expected": row.expected_score, "combined": row.combined_score,
            "checklist": row.checklist_score, "fitted": row.fitted_score,
        }  # fmt: skip
        score = self.choice.score
        row.score_from = score if chosen[score] is not None else "verdict"
        row.score = chosen[row.score_from]
        row.success = row.score is not None and row.score >= row.threshold
        bound = self.choice.uncertain_below
        if bound is not None and row.level_probs:
            row.uncertain = most_likely(row.level_probs, row.outside_prob).unsure_at(bound)

    def _fill_mean(self, row: EvaluationRow, scores: dict[str, float], criteria: dict[str, EvaluationRow]) -> None:
        """A suite's `user_satisfaction` `row`: the weighted mean of its criteria's `scores`, and of
        their expected scores where every criterion's row (`criteria`) has one."""
        row.score = weighted_mean(scores, self.weights)
        row.success = row.score >= row.threshold
        verdicts = {name: row.verdict_score for name, row in criteria.items() if row.verdict_score is not None}
        row.verdict_score = weighted_mean(verdicts, self.weights) if len(verdicts) == len(scores) else None
        row.score_from = "verdict" if all(r.score_from == "verdict" for r in criteria.values()) else self.choice.score
        expected = {name: row.expected_score for name, row in criteria.items() if row.expected_score is not None}
        if len(expected) == len(scores):
            row.expected_score = weighted_mean(expected, self.weights)
        row.weights = dict(self.weights)
        row.reason = f"weighted mean of the {len(scores)} criteria's scores"


def set_distribution(
    row: EvaluationRow, criterion: Criterion, judgements: list[Judgement], values: list[str | int]
) -> None:
    """`row`'s distribution over `criterion`'s scale: the mean of the `judgements`' own, when every
    one has it; else the frequencies of the samples' `values`, when there are several; else none."""
    found = [judgement.levels[criterion.name] for judgement in judgements if criterion.name in judgement.levels]
    levels: LevelProbs | None = None
    if found and len(found) == len(judgements):
        levels, row.level_probs_from = mean_of(found), "logprobs"
    elif len(values) > 1:
        levels, row.level_probs_from = from_samples(values, criterion), "samples"
    if levels is not None:
        row.level_probs = {value: round(p, 6) for value, p in levels.probs.items()}
        row.outside_prob = round(levels.outside, 6)
        row.expected_score = levels.expected_score(criterion.scale)


@dataclass(eq=False)
class RowMaker:
    """A conversation's rows, new, then settled from its judgements (`scoring`) or from the error
    that stopped it. `rubric` names the rows and reads the replies; a row passes at its
    `thresholds[name]`; `weights` (criterion name to weight) make a suite's `user_satisfaction`;
    `model` and the rubric's version are the judge's identity on every row; `samples` is the
    judgements asked per conversation; `date_field` names the metadata field with the chat's date
    (None: `chat_date`, `started_at` or `timestamp`); `choice` is `Scoring`'s."""

    rubric: Rubric
    thresholds: dict[str, float]
    weights: dict[str, float]
    model: str
    samples: int
    date_field: str | None = None
    choice: ScoreChoice = ScoreChoice()
    scoring: Scoring = field(init=False)

    def __post_init__(self) -> None:
        self.scoring = Scoring(self.rubric, self.weights, self.samples, self.choice)

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
        first_look: dict[str, LevelProbs] | None = None,
        checklist: ChecklistReading | None = None,
        turns: ChecklistReading | None = None,
    ) -> list[EvaluationRow]:
        """Fill a conversation's new `rows` (`new_rows`) from its judgements, or from the error that
        stopped it (`outcome`); `cached`: the replies came from the cache, sent in `response_format`.
        The call's `usage`, `cost_usd`, `attempts` and clocks (`latency_s`, `wait_s`) go on the first
        row, the others carry cost 0 (null when the price is unknown), so totals add up; `first_look`
        holds the distributions of a verdict-first look (`--score combined`), `checklist` the
        reading of the rubric's checklist (`--score checklist`), `turns` the per-turn look's."""
        if isinstance(outcome, BaseException):
            message = error_message(outcome, ERROR_MESSAGE_LIMIT)
            reply = getattr(outcome, "reply", None)
            for row in rows:
                row.error = ErrorInfo(type=error_kind(outcome), message=message)
                row.raw_reply = reply
        else:
            self.scoring.fill(rows, outcome, first_look, checklist, turns)
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
