"""People's answers from `flowrate review`, kept in the history's `reviews` table.

Each answer is one line, written the moment it is given and never updated: a label changed
later is a newer line, so the earlier value stays in the history. A reviewer's current label
for a conversation and metric is their latest line. Current reviews count as labels wherever
labels are read (`calibrate`, `trends`, `agreement --history`), the reviewer as the labeler.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from flowrate.analysis.labels import Label


@dataclass(frozen=True)
class Review:
    """One answer. `value` is the answer on the metric's own scale as shown on its button (a
    flow level such as "fully", or a point "1".."S"); `score` is the same answer as a row's
    score in [0, 1] (`flowrate.analysis.labels.Scales`). `judge_shown` says whether the judge's
    verdict was visible when the reviewer answered (False in blind mode)."""

    conversation_id: str
    metric: str
    reviewer: str
    value: str
    score: float
    comment: str | None = None
    run_id: str | None = None
    judge_shown: bool = False
    answered_at: datetime = field(default_factory=lambda: datetime.now(UTC).replace(tzinfo=None))
    review_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def label(self) -> Label:
        """This answer as a label, the reviewer its labeler."""
        return Label(self.conversation_id, self.metric, self.score, self.answered_at.date(), self.reviewer)


_COLUMNS = "review_id, conversation_id, metric, reviewer, value, score, comment, answered_at, run_id, judge_shown"


def record_review(connection: Any, review: Review) -> None:
    """Write `review` to the history on `connection` (writable) at once, in its own transaction."""
    connection.execute(
        f"INSERT INTO reviews ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            review.review_id,
            review.conversation_id,
            review.metric,
            review.reviewer,
            review.value,
            review.score,
            review.comment,
            review.answered_at,
            review.run_id,
            review.judge_shown,
        ],
    )


def _reviews(connection: Any, where: str = "", parameters: list | None = None) -> list[Review]:
    query = f"SELECT {_COLUMNS} FROM reviews {where} ORDER BY answered_at, review_id"
    return [
        Review(
            conversation_id=key,
            metric=metric,
            reviewer=reviewer,
            value=value,
            score=score,
            comment=comment,
            run_id=run_id,
            judge_shown=shown,
            answered_at=at,
            review_id=review_id,
        )
        for review_id, key, metric, reviewer, value, score, comment, at, run_id, shown in connection.execute(
            query, parameters or []
        ).fetchall()
    ]


def current_reviews(connection: Any, metric: str | None = None) -> list[Review]:
    """Each reviewer's latest answer per conversation and metric (of `metric` only, when given),
    oldest first."""
    latest: dict[tuple[str, str, str], Review] = {}
    where, parameters = ("WHERE metric = ?", [metric]) if metric is not None else ("", [])
    for review in _reviews(connection, where, parameters):
        latest[(review.conversation_id, review.metric, review.reviewer)] = review
    return list(latest.values())
