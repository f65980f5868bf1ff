"""The prompt built from a rubric: the grading request around a conversation's transcript."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from flowrate.inputs.conversation import ConversationalEvalTestCase, EvalTestCase


def grading_request(
    case: ConversationalEvalTestCase, language: str, task: str, elided: tuple[int, int] | None = None
) -> str:
    """The conversation, fenced by a tag derived from its own text.

    Each turn is one JSON object, so quotes and newlines inside the conversation are
    escaped and no text in it can reproduce the closing marker.
    """
    body = render_transcript(case, elided)
    tag = hashlib.sha256(body.encode()).hexdigest()[:12]
    return (
        f'{task} Write "reason" and "key_issues" in {language}.\n'
        f"<<<TRANSCRIPT {tag}>>>\n{body}\n<<<END TRANSCRIPT {tag}>>>\n"
        "Reply with the JSON object only."
    )


def render_transcript(case: ConversationalEvalTestCase, elided: tuple[int, int] | None = None) -> str:
    """One JSON line per turn. With `elided`, `case.turns` holds the kept turns only and
    a marker line stands where the middle was, so turn numbers stay the original ones."""
    lines = []
    if case.chatbot_role:
        lines.append(orjson.dumps({"context": case.chatbot_role}).decode())
    numbers = turn_numbers(len(case.turns), elided)
    for number, turn in zip(numbers, case.turns):
        if elided and number == elided[1] + 1:
            lines.append(elision_line(elided))
        lines.append(turn_line(number, turn))
    return "\n".join(lines)


def turn_numbers(kept: int, elided: tuple[int, int] | None = None) -> list[int]:
    """The numbers the transcript shows for `kept` turns, the original ones around an `elided` gap."""
    numbers = list(range(1, kept + 1))
    if elided:
        first, last = elided
        numbers = [n if n < first else n + (last - first + 1) for n in numbers]
    return numbers


def elision_line(elided: tuple[int, int]) -> str:
    first, last = elided
    note = f"turns {first} to {last} are left out to fit the judge's context; judge the flow around the gap"
    return orjson.dumps({"elided_turns": [first, last], "note": note}).decode()


def turn_line(number: int, turn: EvalTestCase) -> str:
    item: dict[str, Any] = {"turn": number, "user": turn.input}
    if turn.tool_activity:
        item["tools"] = turn.tool_activity
    item["assistant"] = turn.actual_output
    return orjson.dumps(item).decode()
