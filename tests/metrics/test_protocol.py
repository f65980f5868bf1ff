"""The declared metric protocol is the whole of what the engine uses of a metric: every metric in
the catalog, seen by the engine through the protocol's members alone, judges a conversation."""

from flowrate.evaluation.engine import evaluate_conversations
from flowrate.metrics.catalog import NAMES, build_metrics
from flowrate.metrics.protocol import Metric
from flowrate.settings.options import EvalSettings
from tests.helpers import conversation

MEMBERS = {
    *Metric.__annotations__,
    *(name for name, value in vars(Metric).items() if callable(value) and not name.startswith("_")),
}


class OnlyTheProtocol:
    """A metric with every member the protocol does not declare out of reach."""

    def __init__(self, metric):
        object.__setattr__(self, "_metric", metric)

    def __getattr__(self, name):
        if name not in MEMBERS:
            raise AssertionError(f"the engine used {name!r}, which the Metric protocol does not declare")
        return getattr(self._metric, name)

    def __setattr__(self, name, value):
        if name not in MEMBERS:
            raise AssertionError(f"the engine set {name!r}, which the Metric protocol does not declare")
        setattr(self._metric, name, value)


async def test_every_catalog_metric_judges_through_the_declared_protocol_alone(judge_server):
    judge_server.reset()
    settings = EvalSettings(metric=NAMES, api_base=judge_server.base_url, max_retries=0)
    metrics = build_metrics(settings.judge_settings, None)
    assert [metric.name for metric in metrics] == NAMES and all(isinstance(metric, Metric) for metric in metrics)
    seen = [OnlyTheProtocol(metric) for metric in metrics]
    [result] = await evaluate_conversations([conversation("hello", "hi, how can I help?", id="c")], seen)
    rows = {data.name: data for data in result.metrics_data}
    assert set(rows) == {name for metric in metrics for name in metric.row_names}
    assert not [data.error for data in rows.values() if data.error is not None and "protocol" in data.error.message]
    assert judge_server.requests >= sum(1 for metric in metrics if metric.calls_per_conversation)
