"""What the judge is asked for, derived from the rubric's data: the reply's JSON schema, its one-line template, and the corrective re-ask."""

from __future__ import annotations

from typing import Any

from flowrate.rubric.model import Criterion, Rubric


# -- what is asked for -------------------------------------------------------------------
def _criterion_schema(criterion: Criterion, order: str) -> dict[str, Any]:
    scale = criterion.scale
    judged = (
        {"type": "string", "enum": list(scale.levels)}
        if scale.levels is not None
        else {"type": "integer", "enum": scale.values}
    )
    words: dict[str, Any] = {"reason": {"type": "string"}, "key_issues": {"type": "array", "items": {"type": "string"}}}
    fields: dict[str, Any] = {
        "reason-first": {**words, scale.field: judged},
        "verdict-first": {scale.field: judged, **words},
        "verdict-only": {scale.field: judged},
    }[order]
    return {"type": "object", "properties": fields, "required": list(fields), "additionalProperties": False}


def reply_schema(rubric: Rubric, order: str = "reason-first") -> dict[str, Any]:
    """The JSON schema of a reply, for providers' structured output, its fields in `order`
    ("reason-first", "verdict-first", or "verdict-only" for `--score combined`'s short first look):
    grammar-constrained servers and OpenAI's strict schemas write them so."""
    if not rubric.is_suite:
        return _criterion_schema(rubric.criteria[0], order)
    return {
        "type": "object",
        "properties": {
            "criteria": {
                "type": "object",
                "properties": {criterion.name: _criterion_schema(criterion, order) for criterion in rubric.criteria},
                "required": [criterion.name for criterion in rubric.criteria],
                "additionalProperties": False,
            }
        },
        "required": ["criteria"],
        "additionalProperties": False,
    }


def reply_template(rubric: Rubric, only: list[str] | None = None, order: str = "reason-first") -> str:
    """The reply's shape in one line, for the corrective re-ask; `only` names the criteria of a
    suite to ask for (default: all), `order` the reply schema's order of fields (`reply_schema`)."""

    def one(criterion: Criterion) -> str:
        scale = criterion.scale
        choices = "|".join(str(value) for value in reversed(scale.values))
        shown = {
            "reason": '"..."',
            "key_issues": '["..."]',
            scale.field: f'"{choices}"' if scale.levels is not None else f"1-{scale.points}",
        }
        fields = _criterion_schema(criterion, order)["properties"]  # the schema's order of fields
        return "{" + ", ".join(f'"{name}": {shown[name]}' for name in fields) + "}"

    if not rubric.is_suite:
        return one(rubric.criteria[0])
    wanted = [c for c in rubric.criteria if only is None or c.name in only]
    return '{"criteria": {' + ", ".join(f'"{c.name}": {one(c)}' for c in wanted) + "}}"


def corrective_messages(
    messages: list[dict[str, str]],
    reply: str,
    problem: str,
    rubric: Rubric,
    only: list[str] | None = None,
    order: str = "reason-first",
) -> list[dict[str, str]]:
    """The one re-ask after an unusable `reply` to `messages`, saying what was wrong (`problem`)
    and showing the shape `rubric` asks for, its fields in `order`. With `only` (some criteria of
    a suite were unusable), it asks for just those; the others are kept."""
    if only:
        ask = (
            f"Your reply could not be used for {len(only)} of the {len(rubric.criteria)} criteria: {problem}."
            " Your other ratings are kept. Reply again with only the JSON object for these criteria:"
            f" {reply_template(rubric, only, order)}."
        )
    else:
        ask = f"Your reply could not be used: {problem}. Reply again with only the JSON object {reply_template(rubric, None, order)}."
    return messages + [{"role": "assistant", "content": reply}, {"role": "user", "content": ask}]
