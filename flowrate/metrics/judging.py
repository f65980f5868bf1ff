"""Judging one conversation online: the rubric metric's `evaluate`, from a plan to its rows."""

from __future__ import annotations

from dataclasses import dataclass

from flowrate.inputs.conversation import ConversationalEvalTestCase, Source
from flowrate.judge.limits import CallGate
from flowrate.metrics.asking import Asker
from flowrate.metrics.first_look import VerdictFirstLook
from flowrate.metrics.planning import JudgePlan, Planner
from flowrate.metrics.rows import RowMaker
from flowrate.results.rows import EvaluationRow


@dataclass(eq=False)
class ConversationJudge:
    """One conversation judged online: `planner` plans it (again when the plan was fitted
    before a server named its window), `asker` asks the judge or reads the cache, `row_maker`
    settles the rows, the call's spend on the first; `first_look` (`--score combined`) asks
    the judge's verdict-first distribution after a usable judgement (None: not asked)."""

    planner: Planner
    asker: Asker
    row_maker: RowMaker
    first_look: VerdictFirstLook | None = None

    async def rows(
        self, case: ConversationalEvalTestCase, source: Source | None, plan: JudgePlan | None, gate: CallGate | None
    ) -> list[EvaluationRow]:
        """The rows of `case` (read from `source`) judged by `plan` (None: planned now), its calls
        held by `gate`: one row per row name, error rows for judge failures (`Asker.outcome`); the
        call's tokens, cost, attempts and clocks on the first row."""
        plan = plan or self.planner.plan(case)
        if (
            plan.cached_texts is None and plan.window != self.planner.budget.window
        ):  # fitted before a server named its window
            plan = self.planner.plan(case)
        outcome, spent = await self.asker.outcome(case, plan, gate)
        cached = plan.cached_texts is not None
        looked = None
        if self.first_look is not None and not isinstance(outcome, BaseException):
            looked = await self.first_look.levels(spent.plan, spent, gate)
        return self.row_maker.settle(
            self.row_maker.new_rows(case, source, spent.plan.truncated), outcome, cached=cached,
            response_format=spent.response_format, usage=spent.usage,
            cost_usd=spent.cost_usd if spent.calls or cached else None,
            attempts=spent.stats.attempts, latency_s=spent.stats.latency_s, wait_s=spent.stats.wait_s,
            first_look=looked,
        )  # fmt: skip
