"""Reading a judge's reply into scores, with everything derived from the rubric's data:
the JSON schema asked for, the parser, the corrective re-ask and the majority of samples.

A rubric with one criterion asks for a flat object, `{"reason", "key_issues", FIELD}`,
where FIELD is `verdict` (a named level) or `rating` (1..S). A suite asks for
`{"criteria": {NAME: {"reason", "key_issues", "rating" | "verdict"}, ...}}`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

import orjson

from flowrate.rubric import Criterion, Rubric


class UnparsableReply(ValueError):
    """The judge's reply holds no usable judgement."""


@dataclass
class Rating:
    """One criterion's judgement: the value on its scale, its score in [0, 1], reason and key issues."""

    value: str | int
    score: float
    reason: str
    key_issues: list[str]


@dataclass
class Judgement:
    ratings: dict[str, Rating]  # by criterion name, in the rubric's order
    text: str  # the reply as the judge wrote it


# -- what is asked for -------------------------------------------------------------------
def _criterion_schema(criterion: Criterion) -> dict[str, Any]:
    scale = criterion.scale
    judged = (
        {"type": "string", "enum": list(scale.levels)}
        if scale.levels is not None
        else {"type": "integer", "enum": scale.values}
    )
    return {
        "type": "object",
        "properties": {
            "reason": {"type": "string"},
            "key_issues": {"type": "array", "items": {"type": "string"}},
            scale.field: judged,
        },
        "required": ["reason", "key_issues", scale.field],
        "additionalProperties": False,
    }


def reply_schema(rubric: Rubric) -> dict[str, Any]:
    """The JSON schema of a reply, for providers' structured output."""
    if not rubric.is_suite:
        return _criterion_schema(rubric.criteria[0])
    return {
        "type": "object",
        "properties": {
            "criteria": {
                "type": "object",
                "properties": {criterion.name: _criterion_schema(criterion) for criterion in rubric.criteria},
                "required": [criterion.name for criterion in rubric.criteria],
                "additionalProperties": False,
            }
        },
        "required": ["criteria"],
        "additionalProperties": False,
    }


def reply_template(rubric: Rubric) -> str:
    """The reply's shape in one line, for the corrective re-ask."""

    def one(criterion: Criterion) -> str:
        scale = criterion.scale
        choices = "|".join(str(value) for value in reversed(scale.values))
        judged = f'"{choices}"' if scale.levels is not None else f"1-{scale.points}"
        return f'{{"reason": "...", "key_issues": ["..."], "{scale.field}": {judged}}}'

    if not rubric.is_suite:
        return one(rubric.criteria[0])
    return '{"criteria": {' + ", ".join(f'"{c.name}": {one(c)}' for c in rubric.criteria) + "}}"


def corrective_messages(
    messages: list[dict[str, str]], reply: str, problem: str, rubric: Rubric
) -> list[dict[str, str]]:
    """The one re-ask after an unusable reply."""
    return messages + [
        {"role": "assistant", "content": reply},
        {
            "role": "user",
            "content": f"Your reply could not be used: {problem}. Reply again with only the JSON object {reply_template(rubric)}.",
        },
    ]


# -- reading the reply --------------------------------------------------------------------------
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


def parse_reply(text: str, rubric: Rubric) -> Judgement:
    """Find the judgement in a reply (bare JSON, fenced JSON, or JSON inside prose) and check
    every value against its scale. An unknown level or a rating off the scale is unparsable."""
    if rubric.is_suite:
        found = _find_object(text, lambda value: isinstance(value.get("criteria"), dict))
        if found is None:
            raise UnparsableReply('the reply holds no JSON object with a "criteria" object')
        ratings = {}
        for criterion in rubric.criteria:
            part = found["criteria"].get(criterion.name)
            if not isinstance(part, dict):
                raise UnparsableReply(f"criterion {criterion.name!r} is missing from the reply")
            ratings[criterion.name] = _rating(part, criterion)
        return Judgement(ratings=ratings, text=text)
    criterion = rubric.criteria[0]
    found = _find_object(text, lambda value: criterion.scale.field in value)
    if found is None:
        raise UnparsableReply(f'the reply holds no JSON object with a "{criterion.scale.field}" field')
    return Judgement(ratings={criterion.name: _rating(found, criterion)}, text=text)


def _rating(part: dict[str, Any], criterion: Criterion) -> Rating:
    scale = criterion.scale
    raw = part.get(scale.field)
    expected = ", ".join(str(value) for value in reversed(scale.values))
    if scale.levels is not None:
        value: str | int = str(raw).strip().lower()
        if value not in scale.levels:
            raise UnparsableReply(f"unknown {scale.field} {raw!r} for {criterion.name} (expected {expected})")
    else:
        try:
            number = float(str(raw).strip())
        except ValueError:
            number = float("nan")
        if not number.is_integer() or not 1 <= number <= scale.points:  # type: ignore[operator]
            raise UnparsableReply(f"rating {raw!r} for {criterion.name} is not on its scale 1..{scale.points}")
        value = int(number)
    issues = part.get("key_issues") or []
    if isinstance(issues, str):
        issues = [issues]
    return Rating(
        value=value,
        score=scale.score(value),
        reason=str(part.get("reason") or "").strip(),
        key_issues=[str(issue).strip() for issue in issues if str(issue).strip()],
    )


def _find_object(text: str, wanted) -> dict[str, Any] | None:
    for chunk in [text.strip(), *_FENCE.findall(text)]:
        try:
            value = orjson.loads(chunk)
        except orjson.JSONDecodeError:
            continue
        if isinstance(value, dict) and wanted(value):
            return value
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(value, dict) and wanted(value):
            return value
    return None


# -- several samples, and the derived mean ---------------------------------------------------------
def majority(judgements: list[Judgement], name: str) -> tuple[Rating, float, list[str | int]]:
    """For one criterion: the most common value (a tie goes to the lower score, the cautious
    side for a gate), the first rating that gave it, the share that agrees, and every value."""
    ratings = [judgement.ratings[name] for judgement in judgements]
    counts = Counter(rating.value for rating in ratings)
    scores = {rating.value: rating.score for rating in ratings}
    winner = max(counts, key=lambda value: (counts[value], -scores[value]))
    chosen = next(rating for rating in ratings if rating.value == winner)
    return chosen, round(counts[winner] / len(ratings), 4), [rating.value for rating in ratings]


def weighted_mean(scores: dict[str, float], weights: dict[str, float]) -> float:
    """SUM(score x weight) / SUM(weight); a criterion the weights do not name has weight 1."""
    total = sum(weights.get(name, 1.0) for name in scores)
    return round(sum(score * weights.get(name, 1.0) for name, score in scores.items()) / total, 4) if total else 0.0
