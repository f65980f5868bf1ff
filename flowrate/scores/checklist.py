"""A checklist reply (`flowrate.rubric.checklist`) read: its JSON schema, one "yes"/"no" answer
per question of the rubric, and the reader that gives each question's P(yes) and the checklist's
score; a turn's look likewise, one answer.

P(yes) is read at the token where the answer's value begins, as a verdict's distribution is
(`scores.distribution`: "yes" and "no" are a scale of two levels, the mass of other tokens left
out and the two renormalised); without log-probabilities, or where they do not spell the reply,
it is 1 or 0 from the answer's text. The checklist's score is the weighted mean, over the
questions answered, of P(the good answer): P(yes) for a question whose good answer is "yes",
1 - P(yes) for one about a lapse."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from flowrate.judge.logprobs import Tokens, tokens_fault
from flowrate.rubric.checklist import TURN_KEY, checklist_keys
from flowrate.rubric.model import Rubric, Scale
from flowrate.scores.distribution import distribution_at, value_offsets

ANSWERS = ("yes", "no")
YES_NO = Scale(levels={"yes": 1.0, "no": 0.0})


def checklist_schema(rubric: Rubric) -> dict[str, Any]:
    """The JSON schema of a checklist reply: every question's number (`checklist_keys`), in the
    rubric's order, with "yes" or "no"."""
    return yes_no_schema(checklist_keys(rubric))


def turn_schema() -> dict[str, Any]:
    """The JSON schema of one turn's look (`rubric.checklist.turn_window_messages`): "yes" or "no"
    under `TURN_KEY`, "no" when the reply breaks the flow."""
    return yes_no_schema([TURN_KEY])


def yes_no_schema(keys: list[str]) -> dict[str, Any]:
    properties = {key: {"type": "string", "enum": list(ANSWERS)} for key in keys}
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


@dataclass
class ChecklistReading:
    """A checklist reply read: each answered question's text answer (`answers`) and P(yes)
    (`p_yes`), where each P(yes) came from (`p_yes_from`: "logprobs" or "text"), the weighted
    `score` in [0, 1] (None when no question was answered), and the questions left unanswered or
    answered off the two answers (`problems`, by id)."""

    answers: dict[str, str] = field(default_factory=dict)
    p_yes: dict[str, float] = field(default_factory=dict)
    p_yes_from: dict[str, str] = field(default_factory=dict)
    score: float | None = None
    problems: dict[str, str] = field(default_factory=dict)


def checklist_reading(rubric: Rubric, text: str, tokens: Tokens | None) -> ChecklistReading:
    """The checklist reply `text` of `rubric`'s questions read, each P(yes) from `tokens` (the
    reply's log-probabilities in OpenAI's `logprobs.content` shape) where they give it; each
    answer, P(yes) and problem under its question's id."""
    ids = {key: item.id for key, item in zip(checklist_keys(rubric), rubric.checklist)}
    reading = yes_no_reading(ids, text, tokens, named=lambda key: f"question {key}")
    reading.score = checklist_score(rubric, reading.p_yes)
    return reading


def turn_reading(text: str, tokens: Tokens | None) -> float | None:
    """One turn's look `text` read: P(the reply breaks the flow), 1 - P(yes) under `TURN_KEY`,
    from `tokens` where they give it; None for a reply without the answer."""
    reading = yes_no_reading({TURN_KEY: TURN_KEY}, text, tokens)
    return 1.0 - reading.p_yes[TURN_KEY] if TURN_KEY in reading.p_yes else None


def yes_no_reading(
    keys: dict[str, str], text: str, tokens: Tokens | None, named: Callable[[str], str] = str
) -> ChecklistReading:
    """The "yes" or "no" under each key of `keys` in the reply `text`, kept under the name `keys`
    gives it, each P(yes) read at its value's token where `tokens` spell the reply, else 1 or 0
    from the text; a problem names its key as `named` says."""
    reading = ChecklistReading()
    found = _reply_object(text)
    if found is None:
        reading.problems = dict.fromkeys(keys.values(), "the reply holds no JSON object of answers")
        return reading
    spelled = tokens is not None and tokens_fault(text, tokens) is None
    starts = {path[0]: offset for path, offset in value_offsets(text) if len(path) == 1}
    for key, name in keys.items():
        answer = str(found.get(key, "")).strip().lower()
        if answer not in ANSWERS:
            shown = "no answer" if key not in found else f"the answer {found[key]!r}"
            reading.problems[name] = f'{shown} to {named(key)} (expected "yes" or "no")'
            continue
        reading.answers[name] = answer
        probs = None
        if spelled and tokens is not None and key in starts:
            probs = distribution_at(text, tokens, starts[key], YES_NO)
        if probs is not None:
            reading.p_yes[name], reading.p_yes_from[name] = probs.probs["yes"], "logprobs"
        else:
            reading.p_yes[name], reading.p_yes_from[name] = float(answer == "yes"), "text"
    return reading


def checklist_score(rubric: Rubric, p_yes: dict[str, float]) -> float | None:
    """The weighted mean of P(the good answer) over the questions in `p_yes` (None: none)."""
    answered = [item for item in rubric.checklist if item.id in p_yes]
    total = sum(item.weight for item in answered)
    if not answered:
        return None
    good = (p_yes[item.id] if item.good == "yes" else 1.0 - p_yes[item.id] for item in answered)
    return sum(item.weight * p for item, p in zip(answered, good)) / total


def _reply_object(text: str) -> dict[str, Any] | None:
    """The first JSON object of the reply (its first `{` to its last `}`), or None."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return None
    try:
        value = orjson.loads(text[start : end + 1])
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
