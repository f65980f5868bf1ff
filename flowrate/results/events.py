"""What a run tells as it goes: listeners instead of callbacks.

A run (online, provider batches, an import of batch results) reports its stages, notices, rows,
resumed rows and skipped conversations to its listeners, in order: the results file first, then
the report book, the console, the history. Data flows down and out; a listener that can no
longer take rows (a closed pipe, a full disk) raises `OutputStopped`, and the run stops.
"""

from __future__ import annotations

from flowrate.inputs.conversation import Source
from flowrate.results.rows import EvaluationRow
from flowrate.results.summary import RunSummary


class OutputStopped(Exception):
    """A listener can take no more rows: `pipe_closed` (the reader of stdout went away) or a
    failed write (`message` says what the system said)."""

    def __init__(self, message: str, pipe_closed: bool = False):
        super().__init__(message)
        self.pipe_closed = pipe_closed


class RunListener:
    """Override the events a listener needs; each one does nothing by default."""

    def started(self, total_rows: int) -> None:
        """The run begins; `total_rows` is what it should end with (conversations x rows per metric)."""

    def stage(self, text: str) -> None:
        """What the run is doing before rows come: `loading the judge (gpt-4o)…`, `judging`."""

    def notice(self, text: str) -> None:
        """Something a person should know that is not an error (a partial last line cut, ...)."""

    def row(self, row: EvaluationRow) -> None:
        """A row this run made: judged, an error, or from the cache."""

    def resumed(self, row: EvaluationRow) -> None:
        """A row the output file held already (`--resume`), counted again in this run's summary."""

    def skipped(self, conversation_id: str, source: Source | None, reason: str) -> None:
        """A conversation left out: by the selection (`sample`, `limit`, ...), `invalid`, or not
        judged (`budget`, `unreachable`)."""

    def finished(self, summary: RunSummary) -> None:
        """The run is over (gates applied); the last event."""


class Listeners(RunListener):
    """Several listeners as one, told in the order given."""

    def __init__(self, listeners: list[RunListener]):
        self.listeners = list(listeners)

    def started(self, total_rows: int) -> None:
        for listener in self.listeners:
            listener.started(total_rows)

    def stage(self, text: str) -> None:
        for listener in self.listeners:
            listener.stage(text)

    def notice(self, text: str) -> None:
        for listener in self.listeners:
            listener.notice(text)

    def row(self, row: EvaluationRow) -> None:
        for listener in self.listeners:
            listener.row(row)

    def resumed(self, row: EvaluationRow) -> None:
        for listener in self.listeners:
            listener.resumed(row)

    def skipped(self, conversation_id: str, source: Source | None, reason: str) -> None:
        for listener in self.listeners:
            listener.skipped(conversation_id, source, reason)

    def finished(self, summary: RunSummary) -> None:
        for listener in self.listeners:
            listener.finished(summary)


class KeepRows(RunListener):
    """Every row of a run in `rows`, resumed ones included, in the order they came."""

    def __init__(self) -> None:
        self.rows: list[EvaluationRow] = []

    def row(self, row: EvaluationRow) -> None:
        self.rows.append(row)

    def resumed(self, row: EvaluationRow) -> None:
        self.rows.append(row)
