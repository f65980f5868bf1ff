"""Gates: what makes a run fail (exit 1), per metric, computed from the run's results.

Without a gate, a metric fails the run when any of its rows fails. `min_pass_rate`,
`min_mean_score` and `max_failures`, given for all metrics or per metric, replace that.
A metric with no judged row fails every gate it has: a gate never passes on nothing.
"""

from __future__ import annotations

from flowrate.results.summary import GateResult, MetricStats, RunSummary
from flowrate.settings.groups import GateOptions

DEFAULT_GATE = {"max_failures": 0}  # every row passes


def check_gates(
    metrics: dict[str, MetricStats], default: dict[str, float], per_metric: dict[str, dict[str, float]]
) -> list[GateResult]:
    """Every gate of every metric: `per_metric` over `default`, and `DEFAULT_GATE` when neither names one."""
    results = []
    for name, stats in metrics.items():
        gates = {**default, **per_metric.get(name, {})} or DEFAULT_GATE
        for gate, limit in gates.items():
            if gate == "max_failures":
                actual = float(stats.failed) if stats.judged else None
                passed = actual is not None and actual <= limit
            else:
                actual = stats.pass_rate if gate == "min_pass_rate" else stats.mean_score
                passed = actual is not None and actual >= limit
            results.append(GateResult(metric=name, gate=gate, limit=limit, actual=actual, passed=passed))
    return results


def apply_gates(summary: RunSummary, gates: GateOptions) -> None:
    """Check every metric's gates on `summary` (`gates.default_gates` for all metrics, `gates.gates`
    over it); the run's exit code then follows the gates instead of every row."""
    summary.gates = check_gates(summary.metrics, gates.default_gates, gates.gates)
