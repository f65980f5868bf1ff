"""Where an analysis's rows and labels come from and go: results files, a labels file (JSONL or
CSV) and the history file, opened here so that the commands never open DuckDB themselves."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from flowrate.analysis.history import (
    connect,
    import_labels,
    import_results,
    label_count,
    replace_labels,
    stored_labels,
    stored_rows,
)
from flowrate.analysis.labels import Label, Scales, read_labels
from flowrate.analysis.trends import TrendPoint, trends, undated_rows
from flowrate.errors import ConfigError
from flowrate.results.files import read_rows
from flowrate.results.rows import EvaluationRow

if TYPE_CHECKING:
    from flowrate.analysis.calibration import Calibration
    from flowrate.analysis.judge_report import JudgeReport


def rows_of(paths: Iterable[str]) -> list[EvaluationRow]:
    """Every row of the results files `paths`, in order."""
    return [row for path in paths for row in read_rows(Path(path))]


def need_history(history: str | None) -> str:
    """`history`, the path of the history file; a `ConfigError` (exit 2) when none is named."""
    if not history:
        raise ConfigError("--history PATH (or FLOWRATE_HISTORY) names the history file")
    return history


def rows_and_labels(
    paths: list[str] | None, history: str | None, labels_file: Path | None
) -> tuple[list[EvaluationRow], list[Label] | None]:
    """Rows from the results files `paths`, or else from the `history` file; labels from
    `labels_file`, or else the history's whenever it is given (None: no labels anywhere). The
    history is opened read-only: it must exist. Neither `paths` nor `history`: a `ConfigError`."""
    connection = connect(history, read_only=True) if history else None
    try:
        if paths:
            rows = rows_of(paths)
        elif connection is not None:
            rows = stored_rows(connection)
        else:
            raise ConfigError("give results files, or --history PATH")
        if labels_file is not None:
            return rows, read_labels(labels_file, Scales(rows))
        return rows, stored_labels(connection) if connection is not None else None
    finally:
        if connection is not None:
            connection.close()


def import_label_file(history: str | None, path: Path) -> int:
    """`flowrate labels import`: add the labels of `path` to the `history` file (created when
    new), each distinct label once; returns how many were new."""
    connection = connect(need_history(history))
    try:
        return import_labels(connection, read_labels(path, Scales(stored_rows(connection))))
    finally:
        connection.close()


def import_results_files(history: str | None, paths: list[str]) -> int:
    """`flowrate history import`: add the results files `paths` to the `history` file (created
    when new), a row already there not again; returns how many rows were new."""
    connection = connect(need_history(history))
    try:
        return sum(import_results(connection, path) for path in paths)
    finally:
        connection.close()


def review_comments(history: str, metric: str) -> dict[str, list[str]]:
    """Each conversation's current review comments for `metric` in the `history` file (opened
    read-only), oldest first, by conversation id."""
    from flowrate.analysis.reviews import current_reviews

    connection = connect(history, read_only=True)
    try:
        found: dict[str, list[str]] = {}
        for review in current_reviews(connection, metric):
            if review.comment:
                found.setdefault(review.conversation_id, []).append(review.comment)
        return found
    finally:
        connection.close()


def trends_of(
    paths: list[str] | None,
    history: str | None,
    labels_file: Path | None,
    by: str,
    date_kind: str,
    metric: str | None,
) -> tuple[list[TrendPoint], int]:
    """`flowrate trends`: the points per `by` period of `date_kind` (evaluated or chat) and
    metric (only `metric` when given) of the results files `paths` (with the `history`'s labels,
    when it is named), or else of the `history` file; the labels of `labels_file` replace the
    history's. Also the rows without a chat date (0 unless `date_kind` is chat)."""
    if paths:
        connection = connect(None)
        for path in paths:
            import_results(connection, path)
        if history and labels_file is None:  # results files, with the history's labels
            source = connect(history, read_only=True)
            try:
                import_labels(connection, stored_labels(source))
            finally:
                source.close()
    elif history:
        connection = connect(history, read_only=True)
    else:
        raise ConfigError("give results files, or --history PATH")
    try:
        if labels_file is not None:
            replace_labels(connection, read_labels(labels_file, Scales(stored_rows(connection))))
        points = trends(connection, by, date_kind, metric, label_count(connection) > 0)
        return points, undated_rows(connection, metric) if date_kind == "chat" else 0
    finally:
        connection.close()


def calibrate_files(
    paths: list[str] | None,
    history: str | None,
    labels_file: Path | None,
    as_of: str | None,
    window: str,
    adjusted_output: str | None = None,
) -> Calibration:
    """`flowrate calibrate`: the judge's rows (of `paths`, else the `history`) against people's
    labels (of `labels_file`, else the history's) dated in `window` before `as_of` (YYYY-MM-DD;
    None: today), with each metric's error band; with `adjusted_output`, the rows with
    `adjusted_score` added are written there as JSONL. Bad options and an unwritable output are
    `ConfigError`s naming the option."""
    from datetime import date

    import orjson

    from flowrate.analysis.calibration import adjusted_rows, calibrate
    from flowrate.inputs.files import check_apart

    try:
        inputs: list[str | Path] = [
            *(paths or []),
            *([labels_file] if labels_file else []),
            *([history] if history else []),
        ]
        check_apart([("--adjusted-output", adjusted_output)], inputs, of="calibrate")
        rows, found = rows_and_labels(paths, history, labels_file)
        if found is None:
            raise ConfigError("--labels FILE names the human labels (or --history with labels imported)")
        try:
            day = date.fromisoformat(as_of) if as_of else date.today()
        except ValueError:
            raise ConfigError(f"option as-of: {as_of!r} is not a date (YYYY-MM-DD)") from None
        report = calibrate(rows, found, day, window)
        if adjusted_output:
            with open(adjusted_output, "wb") as handle:
                for item in adjusted_rows(rows, report.bands):
                    handle.write(orjson.dumps(item) + b"\n")
    except OSError as error:
        raise ConfigError(f"--adjusted-output {adjusted_output}: cannot be written: {error.strerror}") from None
    return report


def judge_report_of(
    results: Path,
    history: str | None,
    labels_file: Path | None,
    metric: str | None = None,
    conversations: list[str] | None = None,
    rubric: str | None = None,
) -> JudgeReport:
    """`flowrate agreement --results RESULTS (--history FILE | --labels FILE)`: the judge report
    of the rows of `results` on people's labels (of `labels_file`, else the `history`'s), of
    `metric` only when given, the languages read from `conversations` and the scales of `rubric`
    when given (`judge_report.report_of`). No labelled conversation with a usable row: a `ConfigError`."""
    from flowrate.analysis.judge_report import report_of

    rows, found = rows_and_labels([str(results)], history, labels_file)
    if metric is not None:
        found = [item for item in found or [] if item.metric == metric]
    report = report_of(rows, found or [], conversations or None, rubric)
    if not report.metrics:
        where = f"--history {history}" if history is not None else f"--labels {labels_file}"
        raise ConfigError(
            f"no labelled conversation in {where} has a usable row in {results}"
            + (f" of metric {metric!r}" if metric else "")
        )
    return report
