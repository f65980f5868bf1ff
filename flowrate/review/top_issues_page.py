"""The top-issues page: the failure modes of the rows the queues are built from
(`flowrate.analysis.top_issues`), each example linking to its row."""

from __future__ import annotations

from typing import Any

from flowrate.review.pages import link, text

SHOWN_MODES = 20


def top_issues_body(state: Any) -> str:
    """The page's body: per mode its label, conversations, share, severity and metrics, and its
    examples, each a link to the row that raised it."""
    from flowrate.analysis.top_issues import top_issues

    modes = top_issues(state.queue_rows)[:SHOWN_MODES]
    if not modes:
        return "<p>No key issues in these rows.</p>"
    parts = []
    for mode in modes:
        examples = "".join(
            "<li>"
            + link("/row", example.id, id=example.id, metric=_metric_of(state, example.id, mode.metrics))
            + f" {text(example.text)}</li>"
            for example in mode.examples
        )
        parts.append(
            f'<section class="mode"><h2>{text(mode.label)}</h2><p>{mode.conversations} conversations'
            f" ({mode.share:.0%}), severity {mode.severity:.1f}, in {text(', '.join(mode.metrics))}</p>"
            f"<ul>{examples}</ul></section>"
        )
    return "".join(parts)


def _metric_of(state: Any, conversation_id: str, metrics: list[str]) -> str:
    """The first of the mode's metrics with a row for this conversation (the example's row)."""
    for metric in metrics:
        if state.find_row(conversation_id, metric) is not None:
            return metric
    return metrics[0] if metrics else ""
