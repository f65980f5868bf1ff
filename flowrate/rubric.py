"""The judge's rubric: a data file with instructions and few-shot examples.

`build_messages` lays the prompt out for provider prompt caching: the rubric and
its examples come first and are identical for every conversation; the conversation
comes last.
"""

from __future__ import annotations

import hashlib
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import orjson
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from flowrate.exit_codes import ConfigError
from flowrate.models import ConversationalEvalTestCase, EvalTestCase, Verdict

DEFAULT_RUBRIC = "conversational_flow.yaml"


class ExampleReply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str
    key_issues: list[str]
    verdict: Verdict


class RubricExample(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = ""
    chatbot_role: str | None = None
    turns: list[EvalTestCase] = Field(min_length=1)
    reply: ExampleReply


class Rubric(BaseModel):
    """Instructions and examples, with `version` the hash of the file they came from."""

    model_config = ConfigDict(extra="forbid")

    name: str
    instructions: str
    examples: list[RubricExample] = Field(default_factory=list)
    version: str = ""

    @cached_property
    def prefix_messages(self) -> list[dict[str, str]]:
        """The rubric and its worked examples: the same for every conversation, so providers can cache it."""
        messages = [{"role": "system", "content": self.instructions}]
        for example in self.examples:
            shown = ConversationalEvalTestCase(turns=example.turns, chatbot_role=example.chatbot_role)
            messages.append({"role": "user", "content": grading_request(shown, "English")})
            messages.append({"role": "assistant", "content": example.reply.model_dump_json()})
        return messages

    def build_messages(
        self, case: ConversationalEvalTestCase, language: str = "English", elided: tuple[int, int] | None = None
    ) -> list[dict[str, str]]:
        """The chat messages for one judge call: rubric, examples, then the conversation.

        `elided` is the (first, last) 1-based turn numbers left out of a long conversation.
        """
        return [*self.prefix_messages, {"role": "user", "content": grading_request(case, language, elided)}]


def grading_request(case: ConversationalEvalTestCase, language: str, elided: tuple[int, int] | None = None) -> str:
    """The conversation, fenced by a tag derived from its own text.

    Each turn is one JSON object, so quotes and newlines inside the conversation are
    escaped and no text in it can reproduce the closing marker.
    """
    body = render_transcript(case, elided)
    tag = hashlib.sha256(body.encode()).hexdigest()[:12]
    return (
        f'Grade the conversational flow of this conversation. Write "reason" and "key_issues" in {language}.\n'
        f"<<<TRANSCRIPT {tag}>>>\n{body}\n<<<END TRANSCRIPT {tag}>>>\n"
        "Reply with the JSON object only."
    )


def render_transcript(case: ConversationalEvalTestCase, elided: tuple[int, int] | None = None) -> str:
    """One JSON line per turn. With `elided`, `case.turns` holds the kept turns only and
    a marker line stands where the middle was, so turn numbers stay the original ones."""
    lines = []
    if case.chatbot_role:
        lines.append(orjson.dumps({"context": case.chatbot_role}).decode())
    numbers = list(range(1, len(case.turns) + 1))
    if elided:
        first, last = elided
        numbers = [n if n < first else n + (last - first + 1) for n in numbers]
    for number, turn in zip(numbers, case.turns):
        if elided and number == elided[1] + 1:
            lines.append(elision_line(elided))
        lines.append(turn_line(number, turn))
    return "\n".join(lines)


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


def load_rubric(path: str | Path | None = None) -> Rubric:
    """The packaged rubric, or a user's own file in the same format."""
    if path is None:
        return _packaged_rubric()
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ConfigError(f"{path}: cannot read rubric: {error.strerror}") from None
    return _parse_rubric(data, str(path))


@lru_cache(maxsize=1)
def _packaged_rubric() -> Rubric:
    data = resources.files("flowrate.rubrics").joinpath(DEFAULT_RUBRIC).read_bytes()
    return _parse_rubric(data, DEFAULT_RUBRIC)


def _parse_rubric(data: bytes, shown: str) -> Rubric:
    try:
        raw = yaml.safe_load(data)
    except yaml.YAMLError as error:
        raise ConfigError(f"{shown}: invalid YAML in rubric: {error}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{shown}: a rubric must be a mapping with `name`, `instructions` and `examples`")
    try:
        rubric = Rubric.model_validate(raw)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        raise ConfigError(f"{shown}: rubric field {field}: {first['msg']}") from None
    rubric.version = "sha256:" + hashlib.sha256(data).hexdigest()[:16]
    return rubric
