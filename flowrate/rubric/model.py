"""A metric's rubric: data that declares the judge's instructions, its criteria with their
scales, and few-shot examples. Everything about a reply (its JSON schema, how it is read,
the re-ask text) is derived from this data in `flowrate.scores`.

`build_messages` lays the prompt out for provider prompt caching: the rubric and its
examples come first and are identical for every conversation; the conversation comes last.
"""

from __future__ import annotations

import hashlib
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import orjson
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from flowrate.errors import ConfigError
from flowrate.inputs.conversation import ConversationalEvalTestCase, EvalTestCase
from flowrate.rubric.combination import SUFFIX, Combination, read_combination
from flowrate.rubric.prompt import grading_request
from flowrate.settings.groups import DEFAULT_LANGUAGE

# The language the worked examples are shown in, whatever --language asks: their replies are written in it
EXAMPLES_LANGUAGE = "English"

PACKAGED = {
    "conversational_flow_rate": "conversational_flow.yaml",
    "virtual_agent": "virtual_agent.yaml",
    "repetitive_pattern_detection": "repetitive_pattern_detection.yaml",
}
USER_SATISFACTION = "user_satisfaction"


class Scale(BaseModel):
    """Named levels with their scores (`levels: {fully: 1.0, ...}`, best first), or points 1..S."""

    model_config = ConfigDict(extra="forbid")

    levels: dict[str, float] | None = None
    points: int | None = Field(None, ge=2, le=10)

    @model_validator(mode="after")
    def _one_kind(self) -> Scale:
        if (self.levels is None) == (self.points is None):
            raise ValueError("a scale has either `levels` (name: score) or `points` (S, for ratings 1..S)")
        if self.levels is not None and not all(0.0 <= score <= 1.0 for score in self.levels.values()):
            raise ValueError("level scores must lie in [0, 1]")
        return self

    @property
    def field(self) -> str:
        """The reply field that carries the judgement: `verdict` for levels, `rating` for points."""
        return "verdict" if self.levels is not None else "rating"

    @property
    def values(self) -> list[str] | list[int]:
        """Every value the judge may give, lowest score first."""
        levels = self.levels
        if levels is not None:
            return sorted(levels, key=levels.__getitem__)
        return list(range(1, self.top_rating + 1))

    def score(self, value: str | int) -> float:
        """The row score in [0, 1]: the level's score, or rating / S, exact (rounding is for the screen)."""
        if self.levels is not None:
            return self.levels[str(value)]
        return int(value) / self.top_rating

    @property
    def top_rating(self) -> int:
        """S, the highest rating of a scale on points; `ValueError` for a scale on levels."""
        if self.points is None:
            raise ValueError("a scale on named levels has no ratings")
        return self.points

    def describe(self) -> str:
        if self.levels is not None:
            return ", ".join(f"{name} {score:g}" for name, score in self.levels.items())
        return f"1..{self.points} (score = rating / {self.points})"


class ChecklistItem(BaseModel):
    """One yes/no question of a rubric's checklist: its `id` (the reply's key), the `question`,
    which answer is good (`good: yes`, or `no` for a question about a lapse), and its `weight` in
    the checklist's score."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    question: str = Field(min_length=1)
    good: Literal["yes", "no"]
    weight: float = Field(1.0, gt=0)


class Criterion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    description: str = ""
    scale: Scale


class Rubric(BaseModel):
    """Instructions, criteria and examples, with `version` the hash of the file they came from.

    `name` names the judge call (the metric, or the suite of criteria); with
    `user_satisfaction`, a weighted mean of the criteria is derived with no call.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    title: str = ""
    task: str = "Grade this conversation."
    instructions: str
    criteria: list[Criterion] = Field(min_length=1)
    user_satisfaction: bool = False
    examples: list[RubricExample] = Field(default_factory=list)
    checklist: list[ChecklistItem] = Field(default_factory=list)
    #: what makes one assistant reply break the flow, asked of every turn by `--turn-look`
    #: (`flowrate.rubric.checklist.turn_window_messages`; None: `TURN_QUESTION`)
    turn_question: str | None = Field(None, min_length=1)
    version: str = ""
    #: the weights of `--score fitted`, read from `<rubric>.combination.json` beside the rubric's file
    #: (`flowrate.rubric.combination`): scoring, not judging, so not part of `version`
    combination: Combination | None = Field(None, exclude=True)

    @model_validator(mode="after")
    def _unique(self) -> Rubric:
        names = [criterion.name for criterion in self.criteria]
        if len(set(names)) != len(names):
            raise ValueError("criterion names must be unique")
        if self.user_satisfaction and USER_SATISFACTION in names:
            raise ValueError(f"{USER_SATISFACTION} is derived; it cannot also be a criterion")
        return self

    @field_validator("checklist")
    @classmethod
    def _unique_ids(cls, checklist: list[ChecklistItem]) -> list[ChecklistItem]:
        ids = [item.id for item in checklist]
        if len(set(ids)) != len(ids):
            raise ValueError(
                f"checklist ids must be unique ({', '.join(sorted({i for i in ids if ids.count(i) > 1}))} repeat)"
            )
        return checklist

    @property
    def is_suite(self) -> bool:
        """Several criteria rated in one call (the reply nests them under `criteria`)."""
        return len(self.criteria) > 1

    @property
    def row_names(self) -> list[str]:
        """The metric names of the rows one call makes: each criterion, then user_satisfaction."""
        return [criterion.name for criterion in self.criteria] + ([USER_SATISFACTION] if self.user_satisfaction else [])

    @cached_property
    def prefix_messages(self) -> list[dict[str, str]]:
        """The rubric and its worked examples: the same for every conversation, so providers can cache it."""
        messages = [{"role": "system", "content": self.instructions}]
        for example in self.examples:
            shown = ConversationalEvalTestCase(turns=example.turns, chatbot_role=example.chatbot_role)
            messages.append({"role": "user", "content": grading_request(shown, EXAMPLES_LANGUAGE, self.task)})
            messages.append({"role": "assistant", "content": orjson.dumps(example.reply).decode()})
        return messages

    def build_messages(
        self, case: ConversationalEvalTestCase, language: str = DEFAULT_LANGUAGE, elided: tuple[int, int] | None = None
    ) -> list[dict[str, str]]:
        """The chat messages for one judge call: rubric, examples, then the conversation.

        `elided` is the (first, last) 1-based turn numbers left out of a long conversation.
        """
        return [*self.prefix_messages, {"role": "user", "content": grading_request(case, language, self.task, elided)}]


class RubricExample(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str = ""
    chatbot_role: str | None = None
    turns: list[EvalTestCase] = Field(min_length=1)
    reply: dict[str, Any]


Rubric.model_rebuild()


def load_rubric(path: str | Path | None = None) -> Rubric:
    """A rubric by file path, or a packaged one by metric name (`None`: Conversational Flow Rate).

    Raises `ConfigError` naming the file and field when the file is not a valid rubric."""
    if path is None or str(path) in PACKAGED:
        return _packaged_rubric(PACKAGED[str(path or "conversational_flow_rate")])
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise ConfigError(f"{path}: cannot read rubric: {error.strerror}") from None
    rubric = _parse_rubric(data, str(path))
    weights = path.with_name(path.stem + SUFFIX)
    if rubric.combination is None and weights.is_file():
        rubric.combination = read_combination(weights)
    return rubric


@lru_cache(maxsize=8)
def _packaged_rubric(file_name: str) -> Rubric:
    packaged = resources.files("flowrate.rubrics")
    data = packaged.joinpath(file_name).read_bytes()
    # libyaml, where PyYAML has it, for the packaged files: 1 ms against 16 ms for the flow
    # rubric; a user's file keeps the pure-Python loader, whose error messages quote the line
    rubric = _parse_rubric(data, file_name, getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    weights = packaged.joinpath(Path(file_name).stem + SUFFIX)
    if rubric.combination is None and weights.is_file():
        rubric.combination = Combination.model_validate_json(weights.read_bytes())
    return rubric


def _parse_rubric(data: bytes, shown: str, loader: type = yaml.SafeLoader) -> Rubric:
    try:
        raw = yaml.load(data, Loader=loader)  # a safe loader: SafeLoader or CSafeLoader
    except yaml.YAMLError as error:
        raise ConfigError(f"{shown}: invalid YAML in rubric: {error}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{shown}: a rubric must be a mapping with `name`, `instructions`, `criteria` and `examples`")
    if "criteria" not in raw:
        raise ConfigError(
            f"{shown}: rubric field criteria: is missing; a rubric declares its criteria and their scales"
            " (see configs/rubric.example.yaml)"
        )
    try:
        rubric = Rubric.model_validate(raw)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        raise ConfigError(f"{shown}: rubric field {field}: {first['msg']}") from None
    for number, example in enumerate(rubric.examples):
        problem = _example_problem(example.reply, rubric)
        if problem:
            raise ConfigError(f"{shown}: rubric field examples.{number}.reply: {problem}")
    rubric.version = "sha256:" + hashlib.sha256(data).hexdigest()[:16]
    return rubric


def _example_problem(reply: Any, rubric: Rubric) -> str | None:
    """What is wrong with a worked example's reply, or None: each criterion's judgement must be
    there and on its scale (the parser holds the judge's replies to the same rule)."""
    if not isinstance(reply, dict):
        return "must be a mapping, as the judge's reply is"
    parts = reply.get("criteria") if rubric.is_suite else {rubric.criteria[0].name: reply}
    if not isinstance(parts, dict):
        return 'a suite\'s example reply holds a "criteria" mapping'
    for criterion in rubric.criteria:
        part = parts.get(criterion.name)
        if not isinstance(part, dict):
            return f"criterion {criterion.name!r} is missing from the reply"
        value, scale = part.get(criterion.scale.field), criterion.scale
        if value not in scale.values and str(value).strip().lower() not in [str(v) for v in scale.values]:
            expected = ", ".join(str(v) for v in reversed(scale.values))
            return f"{scale.field} {value!r} for {criterion.name} is not on its scale ({expected})"
    return None
