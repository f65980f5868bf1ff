"""The labelling view: one conversation of a metric's queue, the answer buttons of its scale,
the keys, and the judge shown only once the reviewer has answered (unless `--show-judge`);
drawn by `templates/label.html`, run by `static/label.js`."""

from __future__ import annotations

from typing import Any

from flowrate.reports.escape import page_text
from flowrate.review.pages import verdict_of
from flowrate.review.runs import pinned_issues

# Keys other than the answers' own: next, previous, skip (the next item not answered yet).
NEXT_KEYS = ("j", "ArrowRight")
PREVIOUS_KEYS = ("k", "ArrowLeft")
SKIP_KEYS = ("s",)


def judge_data(row: Any, turns: int) -> dict[str, Any]:
    """What the page's script shows of the judge once the reviewer has answered, each text as
    `escape.page_text` shows it (the script sets it as text; control and bidi characters escaped)."""
    by_turn, loose = pinned_issues(row, turns)
    return {
        "verdict": page_text(verdict_of(row)),
        "reason": page_text(row.reason or ""),
        "by_turn": {turn: [page_text(issue) for issue in issues] for turn, issues in by_turn.items()},
        "loose": [page_text(issue) for issue in loose],
    }


def label_context(item: dict[str, Any]) -> dict[str, Any]:
    """The template's context for one queue item, its script's data (`data`) included. `item`
    holds the row, its case (or why it is `withheld`), the answers, the reviewer's own `current`
    answer (None: not answered) and `comment`, `show_judge`, the neighbours' addresses
    (`previous`, `next`, `skip`), the position, the run's key, the CSRF token and the secret path (`base`)."""
    row, case = item["row"], item["case"]
    turns = len(case.turns) if case is not None else 0
    visible = item["show_judge"] or item["current"] is not None
    by_turn, loose = pinned_issues(row, turns) if visible else ({}, [])
    moves = [
        (item["previous"], "previous (k, ←)"),
        (item["next"], "next (j, →)"),
        (item["skip"], "skip to the next unanswered (s)"),
    ]
    data = {
        "csrf": item["csrf"],
        "base": item["base"],
        "metric": row.metric,
        "id": row.id,
        "next": item["next"],
        "previous": item["previous"],
        "skip": item["skip"],
        "next_keys": list(NEXT_KEYS),
        "previous_keys": list(PREVIOUS_KEYS),
        "skip_keys": list(SKIP_KEYS),
    }
    mode = "the judge shown (--show-judge)" if item["show_judge"] else "blind: the judge is shown once you answer"
    keep = "row case withheld answers current comment reviewer position size run comment_limit".split()
    return {key: item[key] for key in keep} | {
        "visible": visible,
        "by_turn": by_turn,
        "loose": loose,
        "moves": moves,
        "mode": mode,
        "data": data,
        "script": "label.js",
    }
