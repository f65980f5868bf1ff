"""The top-issues page: the failure modes of the rows the queues are built from
(`flowrate.analysis.top_issues`), each example linking to its row."""

from __future__ import annotations

from typing import Any

SHOWN_MODES = 20


def top_issues_context(state: Any) -> dict[str, Any]:
    """The page's context (`templates/top_issues.html`): the modes, each with its examples and
    the metric of the row each links to, as (mode, [(example, metric)])."""
    from flowrate.analysis.top_issues import top_issues

    modes = top_issues(state.queue_rows)[:SHOWN_MODES]
    return {
        "modes": [(mode, [(e, _metric_of(state, e.id, mode.metrics)) for e in mode.examples]) for mode in modes],
    }


def _metric_of(state: Any, conversation_id: str, metrics: list[str]) -> str:
    """The first of the mode's metrics with a row for this conversation (the example's row)."""
    for metric in metrics:
        if state.find_row(conversation_id, metric) is not None:
            return metric
    return metrics[0] if metrics else ""
