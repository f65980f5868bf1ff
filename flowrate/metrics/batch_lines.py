"""A rubric metric's side of a provider batch (`flowrate eval --batch`): each conversation's plan
as a line of the batch's input file, and the replies in its output read back into rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from flowrate.inputs.conversation import ConversationalEvalTestCase, Source
from flowrate.metrics.planning import JudgePlan, Planner
from flowrate.metrics.replies import parsed_judgements
from flowrate.metrics.rows import RowMaker, charge
from flowrate.results.rows import EvaluationRow

if TYPE_CHECKING:
    from flowrate.judge.batch_api import BatchReplies


@dataclass(eq=False)
class BatchLines:
    """The request lines and the rows of a provider batch. `planner` gives the backend, the
    messages, the reply schema, the samples, the temperature, the reply limit and the cache the
    replies go to; `row_maker` makes the rows and scores them."""

    planner: Planner
    row_maker: RowMaker

    def request(self, cid: str, plan: JudgePlan) -> bytes:
        """`plan` as one line of an OpenAI batch input file, with custom id `cid`."""
        from flowrate.judge.batch_api import request_line

        planner, backend = self.planner, self.planner.backend
        n = planner.samples if planner.samples > 1 and backend.supports_n() else 1
        model: str = getattr(backend, "batch_model", backend.model_name)
        limit = planner.budget.reply_limit
        top = backend.top_logprobs()
        shape = backend.provider_body
        return request_line(
            cid, model, plan.messages, n, planner.response_format, planner.temperature, limit, top, shape
        )

    def rows(
        self, case: ConversationalEvalTestCase, source: Source | None, plan: JudgePlan, replies: BatchReplies,
        batch_id: str,
    ) -> list[EvaluationRow]:  # fmt: skip
        """Rows for `case` (read from `source`) from the `replies` a provider batch `batch_id`
        returned for `plan`: parsed as online, with the distributions their tokens hold (those
        without usable ones counted by the judge, as online), put in the cache, priced at the
        batch price (null when unknown). Raises `UnparsableReply` when a
        reply holds no judgement."""
        form = "json_schema" if self.planner.response_format else None  # a batch line carries OpenAI's form
        price = getattr(self.planner.backend, "batch_price", lambda usage: None)
        tokens = replies.usage
        cost = price(tokens)
        backend = self.planner.backend
        if backend.logprobs is not None:  # told once, at the run's end, as online
            backend.logprobs.heard(backend.top_logprobs(), replies.texts, replies.logprobs)
        judgements = parsed_judgements(self.planner.rubric, replies.texts, replies.logprobs)
        rows = self.row_maker.new_rows(case, source, plan.truncated)
        self.row_maker.scoring.fill(rows, judgements)
        for row in rows:
            row.batch = True
            row.batch_id = batch_id
            row.response_format = form
        charge(rows, tokens, cost).attempts = 1
        self.planner.replies.remember(plan, replies.texts, form, replies.logprobs)
        return rows
