"""What the review app serves from: the runs, transcripts, response cache, queues and the
history file its answers go to. The history is opened for each read or answer and closed at
once, so `flowrate calibrate` or `agreement` can read it while the app runs, and each answer
is in the file the moment its request returns (a killed server loses nothing)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowrate.analysis.reviews import Review, current_reviews, record_review
from flowrate.results.rows import EvaluationRow
from flowrate.review.guard import Secrets
from flowrate.review.queue import Answer, QueueRule, answers_for, build_queue, queue_metrics
from flowrate.review.runs import Run, Transcripts

BUSY_WAIT_S = 5.0  # how long an answer waits for the history while another process has it open


@dataclass(eq=False)
class LabellingQueues:
    """The labelling queues of a server, each built once from `rows` by `rule` (`rubric`: the
    rubric file of the user's own some runs used): which metrics have one, each metric's rows in
    order, and whether a conversation is queued. Under `rule.recent`, what the history already
    labels or reviews is left out, read through `history` (the history open for one read)."""

    rows: list[EvaluationRow]
    rule: QueueRule
    rubric: str | None
    history: Callable[[], AbstractContextManager[Any]]
    _queues: dict[str, list[EvaluationRow]] = field(default_factory=dict)
    _queued: dict[str, dict[str, EvaluationRow]] = field(default_factory=dict)
    _metrics: list[str] | None = None

    def metrics(self) -> list[str]:
        """The metrics with a queue (worked out once: it reads every row)."""
        if self._metrics is None:
            self._metrics = queue_metrics(self.rows, self.rule, self.rubric)
        return self._metrics

    def queued(self, metric: str, conversation_id: str) -> EvaluationRow | None:
        """The row of `conversation_id` in `metric`'s queue, or None when it is not queued."""
        if metric not in self.metrics():
            return None
        if metric not in self._queued:
            self._queued[metric] = {row.id: row for row in self.queue(metric)}
        return self._queued[metric].get(conversation_id)

    def queue(self, metric: str) -> list[EvaluationRow]:
        """The queue of `metric`, built once per server (it does not shrink as answers come in)."""
        if metric not in self._queues:
            labelled: set[str] = set()
            if self.rule.recent is not None:
                with self.history() as connection:
                    labelled = {key for (key,) in connection.execute(
                        "SELECT conversation_id FROM labels WHERE metric = ?", [metric]
                    ).fetchall()}  # fmt: skip
                    labelled |= {review.conversation_id for review in current_reviews(connection, metric)}
            self._queues[metric] = build_queue(self.rows, metric, self.rule, labelled, rubric=self.rubric)
        return self._queues[metric]


@dataclass
class ReviewState:
    """The app's data; `queue_rows` are the rows the queues (`queues`) are built from (the
    results files given, else every run's), by `rule` and `rubric`."""

    runs: list[Run]
    queue_rows: list[EvaluationRow]
    transcripts: Transcripts
    history_path: Path
    keys: Secrets
    rule: QueueRule = field(default_factory=QueueRule)
    show_judge: bool = False
    reviewer: str | None = None  # fixed by --reviewer; else each browser names its reviewer
    cache: Any = None
    notes: list[str] = field(default_factory=list)
    rubric: str | None = None  # --rubric: the rubric file of the user's own some runs used
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _cache_lock: threading.Lock = field(default_factory=threading.Lock)
    queues: LabellingQueues = field(init=False)

    def __post_init__(self) -> None:
        self.queues = LabellingQueues(self.queue_rows, self.rule, self.rubric, self.history)

    @contextmanager
    def history(self) -> Iterator[Any]:
        """The history, open (writable) for one read or write, one request at a time. While
        another process has the file (DuckDB locks it: `calibrate` reading it, say), opening is
        tried again for up to `BUSY_WAIT_S`; then the `ConfigError` says why."""
        from flowrate.analysis.history import connect_waiting

        with self._lock:
            connection = connect_waiting(self.history_path, BUSY_WAIT_S)
            try:
                yield connection
            finally:
                connection.close()

    def request_of(self, row: EvaluationRow) -> Any:
        """The cache's record of what judging `row` sent and the judge's raw replies
        (`runs.request_of`), one page at a time on the cache's one connection."""
        from flowrate.review.runs import request_of

        with self._cache_lock:
            return request_of(self.cache, row)

    def run(self, key: str | None) -> Run | None:
        return next((run for run in self.runs if run.key == key), None)

    def find_row(self, conversation_id: str, metric: str, key: str | None = None) -> tuple[Run, EvaluationRow] | None:
        """The row of `conversation_id` and `metric` in run `key`, or in the newest run holding it."""
        for run in [self.run(key)] if key else self.runs:
            row = run.row(conversation_id, metric) if run is not None else None
            if run is not None and row is not None:
                return run, row
        return None

    def answers(self, row: EvaluationRow) -> list[Answer]:
        """The answer buttons of `row`'s metric (`queue.answers_for`, with `--rubric`)."""
        return answers_for(row, self.rubric) or []

    def own_answers(self, metric: str, reviewer: str) -> dict[str, Review]:
        """`reviewer`'s current answers for `metric`, by conversation: never anyone else's."""
        with self.history() as connection:
            return {r.conversation_id: r for r in current_reviews(connection, metric) if r.reviewer == reviewer}

    def record(self, row: EvaluationRow, reviewer: str, value: str, comment: str | None, run: Run | None) -> Review:
        """Store one answer at once; raises ValueError for a value not on the row's scale. The
        judge counts as shown when `--show-judge` is on or the reviewer had answered before
        (the answer revealed it)."""
        answers = {answer.value: answer for answer in self.answers(row)}
        if value not in answers:
            raise ValueError(f"{value!r} is not on {row.metric}'s scale ({', '.join(answers)})")
        with self.history() as connection:
            before = any(
                r.conversation_id == row.id and r.reviewer == reviewer for r in current_reviews(connection, row.metric)
            )
            review = Review(
                conversation_id=row.id,
                metric=row.metric,
                reviewer=reviewer,
                value=value,
                score=answers[value].score,
                comment=comment or None,
                run_id=run.history_id if run is not None else None,
                judge_shown=self.show_judge or before,
            )
            record_review(connection, review)
        return review
