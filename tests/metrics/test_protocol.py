"""The declared metric protocol, implemented whole by every metric in the catalog."""


def test_every_metric_in_the_catalog_implements_the_whole_declared_protocol():
    from flowrate.metrics.catalog import NAMES, build_metrics
    from flowrate.metrics.protocol import Metric
    from flowrate.settings.options import EvalSettings

    settings = EvalSettings(metric=NAMES, api_base="http://127.0.0.1:9/v1")
    metrics = build_metrics(settings.judge_settings, None)
    assert [metric.name for metric in metrics] == NAMES
    methods = [name for name, value in vars(Metric).items() if callable(value) and not name.startswith("_")]
    members = [*Metric.__annotations__, *methods]  # every member the engine may use
    assert len(members) >= 18
    for metric in metrics:
        missing = [name for name in members if not hasattr(metric, name)]
        assert not missing, f"{metric.name} lacks {missing}"
        assert isinstance(metric, Metric)
