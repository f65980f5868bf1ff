"""Human labels: read from JSONL or CSV, one label a line, converted to row scores.

A line has `conversation_id`, `metric`, the label, `labeled_at` (an ISO date or time) and
an optional `labeler`. The label is a `rating` on the metric's own scale, a `verdict` for a
metric on named levels, or a `score` in [0, 1]; it becomes the same score a row would have.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path

import orjson

from flowrate.errors import InputError
from flowrate.inputs.formats import BOM
from flowrate.inputs.selection import stable_hash
from flowrate.results.csv_file import csv_uncell, write_csv
from flowrate.results.summary import EvaluationRow

#: the columns of `write_template`'s CSV: the judge's, then the label's to fill in
TEMPLATE_COLUMNS = [
    "conversation_id",
    "metric",
    "judge_score",
    "judge_value",
    "judge_reason",
    "rating",
    "verdict",
    "score",
    "labeled_at",
    "labeler",
]


@dataclass(frozen=True)
class Label:
    conversation_id: str
    metric: str
    score: float
    labeled_at: date
    labeler: str | None = None


class Scales:
    """How a metric's ratings and verdicts become scores: from the packaged rubrics, and from
    the rows at hand (a row carries its scale's points, and each verdict's score)."""

    def __init__(self, rows: list[EvaluationRow] | None = None):
        self.points: dict[str, int] = {}
        self.levels: dict[str, dict[str, float]] = {}
        for row in rows or []:
            if row.scale is not None:
                self.points[row.metric] = row.scale
            if row.verdict is not None and row.score is not None:
                self.levels.setdefault(row.metric, {})[row.verdict] = row.score

    def score(self, metric: str, rating: object, verdict: object) -> float:
        from flowrate.metrics.catalog import find_scale

        scale = find_scale(metric)
        if rating not in (None, ""):
            points = self.points.get(metric) or (scale.points if scale is not None else None)
            if points is None:
                raise ValueError(f"metric {metric!r} has no rating scale; give a verdict or a score")
            number = float(str(rating))
            if not number.is_integer() or not 1 <= number <= points:
                raise ValueError(f"rating {rating!r} is not on {metric}'s scale 1..{points}")
            return number / points  # exact, as row scores are: rounded only on screen
        levels = dict((scale.levels if scale is not None else None) or {}) | self.levels.get(metric, {})
        name = str(verdict).strip().lower()
        if name not in levels:
            raise ValueError(f"verdict {verdict!r} is not a level of {metric} ({', '.join(levels) or 'none known'})")
        return levels[name]


def read_labels(path: str | Path, scales: Scales) -> list[Label]:
    """Every label of a JSONL or CSV file. Raises `InputError` naming file, line and field
    for every bad line; nothing is computed then."""
    path = Path(path)
    try:
        text = path.read_bytes().removeprefix(BOM).decode()
    except OSError as error:
        raise InputError(
            [f"{path}: cannot read labels: {error.strerror}"], headline="problem(s) in the labels"
        ) from None
    except UnicodeDecodeError as error:
        raise InputError(
            [f"{path}: not UTF-8 text (byte {error.start})"], headline="problem(s) in the labels"
        ) from None
    labels: list[Label] = []
    problems: list[str] = []
    for number, raw in _records(path, text, problems):
        try:
            labels.append(_label(raw, scales))
        except _Bad as bad:
            problems.append(f"{path}:{number}: {bad.field}: {bad}")
    if problems:
        raise InputError(problems, headline="problem(s) in the labels; nothing was computed")
    return labels


def _records(path: Path, text: str, problems: list[str]):
    if path.suffix.lower() == ".csv":  # cells as `write_template` wrote them: `csv_cell` is undone
        for number, row in enumerate(csv.DictReader(io.StringIO(text)), start=2):
            yield number, {key: csv_uncell(value) for key, value in row.items() if key and value is not None}
        return
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as error:
            problems.append(f"{path}:{number}: invalid JSON: {error}")
            continue
        if not isinstance(value, dict):
            problems.append(f"{path}:{number}: a label must be an object")
            continue
        yield number, value


class _Bad(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def _label(raw: dict, scales: Scales) -> Label:
    for field in ("conversation_id", "metric", "labeled_at"):
        if raw.get(field) in (None, ""):
            raise _Bad(field, "is missing")
    given = [field for field in ("rating", "verdict", "score") if raw.get(field) not in (None, "")]
    if len(given) != 1:
        raise _Bad("label", "give exactly one of rating, verdict or score")
    metric = str(raw["metric"])
    try:
        if given == ["score"]:
            score = float(raw["score"])
            if not 0.0 <= score <= 1.0:
                raise ValueError("must lie in [0, 1]")
        else:
            score = scales.score(metric, raw.get("rating"), raw.get("verdict"))
    except ValueError as error:
        raise _Bad(given[0], str(error)) from None
    try:
        labeled_at = _date(str(raw["labeled_at"]))
    except ValueError:
        raise _Bad("labeled_at", f"{raw['labeled_at']!r} is not an ISO date or time") from None
    return Label(str(raw["conversation_id"]), metric, score, labeled_at, raw.get("labeler") or None)


def _date(text: str) -> date:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).date()


def write_template(rows: list[EvaluationRow], path: str | Path, sample: float | None = None, seed: int = 0) -> int:
    """Write to `path` the CSV a person fills in for `rows`: id, metric, the judge's score and
    reason, and empty label columns. Each conversation and metric is listed once, with the
    judgement given last (rows of several files may repeat one); `sample` keeps that fraction of
    conversations, by a hash of the id seeded with `seed`. A cell that a spreadsheet would read
    as a formula is quoted (`csv_file.csv_cell`; `read_labels` undoes it). Returns the number
    of lines written."""
    latest = {(row.id, row.metric): row for row in rows if row.score is not None}
    chosen = [row for row in latest.values() if sample is None or stable_hash(f"{seed}:{row.id}") / 16**16 < sample]
    with open(path, "w", newline="", encoding="utf-8") as handle:
        return write_csv(handle, TEMPLATE_COLUMNS, (_template_line(row) for row in chosen))


def _template_line(row: EvaluationRow) -> list[object]:
    """A line of the template: the judgement of `row`, and the label's cells left empty."""
    value = row.verdict or ("" if row.rating is None else str(row.rating))
    return [row.id, row.metric, str(row.score), value, row.reason or "", *[""] * (len(TEMPLATE_COLUMNS) - 5)]
