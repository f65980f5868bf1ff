"""A key issue as the judge is asked for it and as a row keeps it. The reply's schema asks for
each issue as an object, `{"turn": N, "issue": "..."}`, N the transcript's `"turn"` number of the
turn whose assistant reply has the lapse, so the turn is an integer the grammar makes the judge
write rather than words it may leave out or put anywhere; a row keeps each issue as one line,
`turn N: ...`, the form the rubric's worked examples are written in. This module is the one place
that turns one form into the other."""

from __future__ import annotations

import re
from typing import Any

# "turn 3: ...", "Turn 3 - ...", "(turn 3) ...": a turn the issue starts with, and the rest
_LEADING_TURN = re.compile(r"^\s*\(?turn\s+(\d+)\)?\s*[:\-–.,]?\s*(.*)$", re.IGNORECASE | re.DOTALL)
ISSUE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"turn": {"type": "integer"}, "issue": {"type": "string"}},
    "required": ["turn", "issue"],
    "additionalProperties": False,
}


def issue_line(issue: Any) -> str:
    """A key issue of a reply as a row keeps it: an object's `turn` and `issue` as `turn N: ...`,
    a string as it is (a judge not held to the schema may write either), stripped."""
    if isinstance(issue, dict):
        text = " ".join(str(issue.get("issue") or "").split())
        turn = issue.get("turn")
        if isinstance(turn, bool) or turn is None:
            return text
        try:
            number = int(str(turn).strip())
        except ValueError:
            return text
        return f"turn {number}: {text}" if text else f"turn {number}"
    return str(issue).strip()


def issue_object(line: str) -> dict[str, Any] | str:
    """A row's or an example's `turn N: ...` as the object the schema asks for; a line that names
    no turn first stays a string."""
    match = _LEADING_TURN.match(line)
    if not match:
        return line
    return {"turn": int(match.group(1)), "issue": match.group(2).strip()}


def structured_reply(reply: dict[str, Any]) -> dict[str, Any]:
    """A worked example's reply with its key issues as objects (at the top, or in each criterion of
    a suite's `criteria`), the shape the judge is asked to write; everything else as it is."""

    def part(value: dict[str, Any]) -> dict[str, Any]:
        issues = value.get("key_issues")
        if not isinstance(issues, list):
            return value
        return {**value, "key_issues": [issue_object(issue) if isinstance(issue, str) else issue for issue in issues]}

    criteria = reply.get("criteria")
    if isinstance(criteria, dict):
        return {**reply, "criteria": {name: part(v) if isinstance(v, dict) else v for name, v in criteria.items()}}
    return part(reply)
