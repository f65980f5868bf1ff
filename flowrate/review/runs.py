"""The runs `flowrate review` shows: each results file given, and each run in the history whose
results file can still be read, with its rows as written (reasons, key issues, sources), its
totals per metric, the conversations' transcripts, and each row's exact judge request from the
response cache."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flowrate.errors import FlowrateError
from flowrate.inputs.conversation import ConversationalEvalTestCase
from flowrate.results.rows import EvaluationRow

if TYPE_CHECKING:
    from flowrate.inputs.redaction.redactor import Redactor

# "turn 3: ...", "turns 2 and 4: ...", "Turn 5-6 ...": the turns a key issue names (as the HTML report reads them)
_TURNS = re.compile(r"^\s*turns?\s+((?:\d+\s*(?:,|and|to|-|&)?\s*)+)", re.IGNORECASE)


@dataclass
class MetricTotals:
    """One metric's rows in a run: how many, passed, failed, errors, and the mean score."""

    rows: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    score_sum: float = 0.0

    @property
    def mean_score(self) -> float | None:
        scored = self.passed + self.failed
        return self.score_sum / scored if scored else None


@dataclass
class Run:
    """A results file as a run: `key` names it in the app's addresses; `history_id` is its
    `run_id` in the history, when the history holds it."""

    key: str
    path: Path
    rows: list[EvaluationRow]
    started_at: datetime | None = None
    history_id: str | None = None
    totals: dict[str, MetricTotals] = field(default_factory=dict)
    _index: dict[tuple[str, str], EvaluationRow] | None = field(default=None, repr=False)

    def row(self, conversation_id: str, metric: str) -> EvaluationRow | None:
        """The run's row of `conversation_id` and `metric` (the last one written, as everywhere)."""
        if self._index is None:
            self._index = {(row.id, row.metric): row for row in self.rows}
        return self._index.get((conversation_id, metric))


def run_key(path: Path) -> str:
    """A short name for a results file in the app's addresses, the same for the same file."""
    return hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]


def totals_of(rows: list[EvaluationRow]) -> dict[str, MetricTotals]:
    """Totals per metric, metrics in the order first met."""
    totals: dict[str, MetricTotals] = {}
    for row in rows:
        entry = totals.setdefault(row.metric, MetricTotals())
        entry.rows += 1
        if row.error is not None or row.success is None:
            entry.errors += 1
            continue
        entry.passed += row.success
        entry.failed += not row.success
        entry.score_sum += row.score or 0.0
    return totals


def load_run(path: Path, history_id: str | None = None, started_at: datetime | None = None) -> Run:
    """The run in results file `path` (read whole: a bad line is an error naming it)."""
    from flowrate.results.files import read_rows

    rows = list(read_rows(path))
    return Run(run_key(path), path, rows, started_at or _first(rows), history_id, totals_of(rows))


def _first(rows: list[EvaluationRow]) -> datetime | None:
    return min((row.evaluated_at for row in rows), default=None)


def load_runs(paths: list[Path], history_runs: list[tuple[str, str, datetime | None]]) -> tuple[list[Run], list[str]]:
    """The runs of the results files `paths`, then of the history's runs (`(run_id, source,
    started_at)`) whose files are not among them, newest first; and a note for each history run
    whose file cannot be read (it is left out). A results file given that cannot be read is an error."""
    runs: dict[Path, Run] = {}
    for path in paths:
        runs[path.resolve()] = load_run(path)
    notes = []
    for run_id, source, started_at in history_runs:
        resolved = Path(source).expanduser().resolve()
        if resolved in runs:
            runs[resolved].history_id = runs[resolved].history_id or run_id
            continue
        try:
            runs[resolved] = load_run(Path(source), run_id, started_at)
        except FlowrateError as error:
            notes.append(f"history run {run_id} left out: {error}")
    ordered = sorted(runs.values(), key=lambda run: (run.started_at is not None, run.started_at), reverse=True)
    return ordered, notes


def issue_turns(issue: str) -> list[int]:
    """The turns a key issue names ("turn 3: ..." -> [3]); none when it names none."""
    found = _TURNS.match(issue)
    return [int(number) for number in re.findall(r"\d+", found.group(1))] if found else []


def pinned_issues(row: EvaluationRow, turns: int) -> tuple[dict[int, list[str]], list[str]]:
    """A row's key issues by the turn each names (1-based, within `turns`), and those naming none."""
    by_turn: dict[int, list[str]] = {}
    loose = []
    for issue in row.key_issues:
        numbers = [n for n in issue_turns(issue) if 1 <= n <= turns]
        for number in numbers:
            by_turn.setdefault(number, []).append(issue)
        if not numbers:
            loose.append(issue)
    return by_turn, loose


@dataclass
class Transcripts:
    """The conversations the app shows, by id (`cases`), and those of redacted rows it does not
    show, each with the reason a page says in its place (`withheld`)."""

    cases: dict[str, ConversationalEvalTestCase] = field(default_factory=dict)
    withheld: dict[str, str] = field(default_factory=dict)

    def get(self, conversation_id: str) -> ConversationalEvalTestCase | None:
        return self.cases.get(conversation_id)

    def note(self) -> str | None:
        """What the app says at start when it withholds transcripts; None when it withholds none."""
        if not self.withheld:
            return None
        return (
            f"{len(self.withheld)} transcript(s) of redacted rows not shown: the run replaced identifiers in them that"
            " this app does not replace without the run's redaction rules: start flowrate review with the run's"
            " --config (its redact_rules), or with --keep-originals to show the original text"
        )


def load_transcripts(
    runs: list[Run], inputs: list[str], redactor: Redactor | None = None, originals: bool = False
) -> Transcripts:
    """The conversations the runs' rows were judged from: the files their `source` names (where
    they still exist, relative to the current directory as when judged) and `inputs`; those
    whose rows were redacted (`redactions`) found by the ids `redactor` gave them and redacted
    again as the judge saw them, or shown as read with `originals` (`--keep-originals`), and
    withheld where `redactor` replaces fewer identifiers of a type than the rows record
    (`redactor.shown_as_judged`)."""
    from flowrate.inputs.files import load_transcripts as read

    ids = {row.id for run in runs for row in run.rows}
    sources = {row.source.path for run in runs for row in run.rows if row.source is not None}
    paths = [path for path in sorted(sources) if path != "-" and Path(path).is_file()]
    found: dict[str, ConversationalEvalTestCase] = {}
    judged_id = redactor.redact_id if redactor is not None else None
    for path in [*paths, *inputs]:
        found.update(read([path], ids - set(found), judged_id))
    from flowrate.inputs.redaction.redactor import shown_as_judged

    recorded = {
        row.id: (row.redactions, row.redacted_by) for run in runs for row in run.rows if row.redactions is not None
    }
    return Transcripts(*shown_as_judged(found, recorded, redactor, originals))


def request_of(cache: Any, row: EvaluationRow) -> Any:
    """The response cache's record of what judging `row` sent and the judge's raw replies, or
    None when the cache holds none (a cut or unusable reply is never cached; `--no-cache` keeps
    nothing). Of the conversation's entries for the row's model and rubric version, the one
    whose replies hold the row's reason, else the newest written before the row."""
    if cache is None:
        return None
    records = [r for r in cache.records_for(row.id, row.model) if r.rubric_version == row.rubric_version]
    if row.reason:
        quoted = _json_string(row.reason)
        for record in records:
            if any(quoted in text or row.reason in text for text in record.texts):
                return record
    before = [r for r in records if r.created_at <= row.evaluated_at.timestamp() + 1]
    return (before or records or [None])[0]


def _json_string(text: str) -> str:
    import orjson

    return orjson.dumps(text).decode()[1:-1]
