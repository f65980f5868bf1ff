"""Resuming into a results file: the rows it holds, made to agree with this run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from flowrate.errors import ConfigError, InputError
from flowrate.metrics.protocol import Metric
from flowrate.results.files import read_rows, repair_partial_tail, rewrite_rows
from flowrate.results.rows import EvaluationRow


def resumed_rows(
    output: str, metrics: list[Metric], retry_errors: bool, notice: Callable[[str], None]
) -> dict[tuple[str, str], EvaluationRow]:
    """The rows `output` already holds, by (id, metric), made to agree with this run.

    Rows from another model or rubric version are refused: one file never mixes judges.
    `success` is derived again from the stored score under this run's threshold (no call
    needed), and with `retry_errors` error rows are dropped; the file is rewritten atomically
    when anything changed. `notice` hears what was repaired or dropped."""
    path = Path(output)
    if repair_partial_tail(path):
        notice(f"{path}: cut a partial last line left by a killed run")
    by_name = {name: metric for metric in metrics for name in metric.row_names}
    done: dict[tuple[str, str], EvaluationRow] = {}
    changed = dropped = 0
    for row in read_rows(path):
        metric = by_name.get(row.metric)
        if metric is not None:
            _same_judge(path, row, metric)
        key = (row.id, row.metric)
        if key in done:
            raise InputError(
                [f"{path}: more than one row for id {row.id!r} ({row.metric})"],
                headline="problem(s) in the output file; nothing was judged",
                hint="fix the file before resuming",
            )
        if row.error is not None and retry_errors:
            dropped += 1
            changed += 1
            continue
        threshold = metric.thresholds.get(row.metric, metric.threshold) if metric is not None else None
        if threshold is not None and row.score is not None and row.threshold != threshold:
            row.threshold = threshold
            row.success = row.score >= threshold
            changed += 1
        done[key] = row
    if retry_errors:
        notice(f"{path}: {dropped} error row(s) to judge again")
    if changed:
        rewrite_rows(path, done.values())
    return done


def _same_judge(path: Path, row: EvaluationRow, metric: Metric) -> None:
    """Refuse to resume into a file judged by another model or rubric version."""
    theirs = {"model": row.model, "rubric version": row.rubric_version}
    for what, ours in metric.judge_identity.items():
        if theirs[what] != ours:
            raise ConfigError(
                f"{path}: its rows were judged with {what} {theirs[what]!r}, this run uses {ours!r};"
                " resume with the same judge, or write to another --output"
            )
