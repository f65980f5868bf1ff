"""The rubric metric's rows: one per criterion of the rubric (and `user_satisfaction`, the weighted mean,
for a suite), from judgements made online or read from a provider batch, put in the cache.

`RowMaking` is a part of `RubricMetric`; it reads the metric's rubric, thresholds and weights."""

from __future__ import annotations

from datetime import UTC, datetime

from flowrate.inputs.conversation import ConversationalEvalTestCase, Source, chat_date
from flowrate.judge.backend import Usage
from flowrate.metrics.planning import JudgePlan
from flowrate.results.rows import EvaluationRow
from flowrate.rubric.model import USER_SATISFACTION
from flowrate.scores.reading import (
    Judgement,
    majority,
    parse_reply,
    weighted_mean,
)


class RowMaking:
    """Making a conversation's rows from its judgements; see the module."""

    # -- the call ------------------------------------------------------------------
    def new_row(
        self, case: ConversationalEvalTestCase, source: Source | None = None, name: str | None = None
    ) -> EvaluationRow:
        """A row for `case` and the row name `name` (default: the first), before any judgement."""
        name = name or self.row_names[0]
        return EvaluationRow(
            id=case.id or "",
            source=source,
            metric=name,
            suite=self.name if self.rubric.is_suite else None,
            threshold=self.thresholds[name],
            model=self.model,
            rubric_version=self.rubric.version,
            evaluated_at=datetime.now(UTC),
            number_of_turns=len(case.turns),
            chat_date=chat_date(case, self.date_field),
        )

    def _new_rows(
        self, case: ConversationalEvalTestCase, source: Source | None, truncated: bool
    ) -> list[EvaluationRow]:
        """A row per name in `row_names`, before any judgement (`truncated`: the prompt left turns out)."""
        rows = [self.new_row(case, source, name) for name in self.row_names]
        for row in rows:
            row.truncated = truncated
            row.samples = self.samples
        return rows

    def _remember(self, plan: JudgePlan, texts: list[str], form: str | None) -> None:
        """Put a judge's usable replies in the cache, under the form the schema was sent in, with
        the messages they answer (`flowrate review` shows a row's exact request)."""
        if self.cache is not None:
            key = next((key for key, planned in plan.keys if planned == form), None)
            key = key or self._cache_key(plan.messages, form)
            self.cache.put(key, self.model, self.rubric.version, texts, plan.messages, plan.case.id)

    def rows_from_replies(
        self,
        case: ConversationalEvalTestCase,
        source: Source | None,
        plan: JudgePlan,
        texts: list[str],
        usage: dict[str, int],
        batch_id: str,
    ) -> list[EvaluationRow]:
        """Rows from the replies a provider batch returned for `plan`: parsed as online, put in the
        cache, priced at the batch price (null when unknown). Raises `UnparsableReply` when a reply
        holds no judgement, for the caller to send the conversation online."""
        judgements = [parse_reply(text, self.rubric) for text in texts]
        form = "json_schema" if self._response_format else None  # a batch line carries OpenAI's form
        self._remember(plan, texts, form)
        rows = self._new_rows(case, source, plan.truncated)
        self._fill(rows, judgements)
        for row in rows:
            row.batch = True
            row.batch_id = batch_id
            row.response_format = form
        price = getattr(self.backend, "batch_price", lambda prompt, completion: None)
        cost = price(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0))
        charge(rows, Usage(**usage), cost).attempts = 1
        return rows

    def _fill(self, rows: list[EvaluationRow], judgements: list[Judgement]) -> None:
        by_name = {row.metric: row for row in rows}
        for criterion in self.rubric.criteria:
            row = by_name[criterion.name]
            rating, agreement, values = majority(judgements, criterion.name)
            if criterion.scale.levels is not None:
                row.verdict = str(rating.value)
            else:
                row.rating = int(rating.value)
                row.scale = criterion.scale.points
            row.score = rating.score
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
            row = by_name[USER_SATISFACTION]
            scores = {c.name: by_name[c.name].score for c in self.rubric.criteria}
            row.score = weighted_mean(scores, self.weights)  # type: ignore[arg-type]
            row.success = row.score >= row.threshold
            row.weights = dict(self.weights)
            row.reason = f"weighted mean of the {len(scores)} criteria's scores"


def charge(rows: list[EvaluationRow], usage: Usage, cost_usd: float | None) -> EvaluationRow:
    """A call's tokens and cost go on its first row; the others carry cost 0, or null when the
    price is unknown, so totals add up. Returns the first row."""
    for row in rows:
        row.cost_usd = None if cost_usd is None else 0.0
    rows[0].usage = usage
    rows[0].cost_usd = cost_usd
    return rows[0]
