"""The metric protocol: the whole of what the engines, file runs and resume use of a metric."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from flowrate.inputs.conversation import ConversationalEvalTestCase, Source
from flowrate.judge.backend import JudgeBackend
from flowrate.judge.cache import ResponseCache
from flowrate.judge.limits import CallGate
from flowrate.metrics.planning import CallEstimate, JudgePlan
from flowrate.results.rows import EvaluationRow


@runtime_checkable
class Metric(Protocol):
    """The whole of what the engine, the file run, resume and provider batches use of a metric.

    `RubricMetric` (a judge call per conversation) and `RepetitionCheck` (no judge) both
    implement all of it; `tests/metrics/test_protocol.py` checks every metric in the catalog.
    A metric with `calls_per_conversation` above 0 is judged: an engine drives it through the
    judging step (`step.Judging`), sending its requests.
    """

    name: str  #: the metric's name, as `--metric` takes it
    row_names: list[str]  #: the rows one conversation gives, in order (a suite: each criterion, then its mean)
    model: str  #: the judge's model name, "offline" for none
    samples: int  #: judgements asked per conversation
    threshold: float  #: the default pass mark
    thresholds: dict[str, float]  #: the pass mark of each row name
    judge_identity: dict[str, str]  #: what makes rows comparable: a results file never mixes two judges
    calls_per_conversation: int  #: judge calls one conversation takes; 0 for an offline metric
    cache: ResponseCache | None

    backend: JudgeBackend | None  #: the judge its calls go to, its keys, access and prices (None: no judge)

    def warm_up(self) -> None: ...

    def plan(self, case: ConversationalEvalTestCase, lookup: bool = True) -> JudgePlan: ...

    def fill_from_cache(self, plans: list[JudgePlan]) -> None: ...

    def estimate(self, plan: JudgePlan, exact: bool = False) -> CallEstimate: ...

    def new_row(
        self, case: ConversationalEvalTestCase, source: Source | None = None, name: str | None = None
    ) -> EvaluationRow: ...

    async def evaluate(
        self,
        case: ConversationalEvalTestCase,
        source: Source | None = None,
        *,
        plan: JudgePlan | None = None,
        gate: CallGate | None = None,
    ) -> list[EvaluationRow]: ...
