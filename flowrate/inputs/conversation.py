"""A conversation to grade, as every input format becomes it (the class names follow eval_lib, so code written for it switches with one import), where it came from, and when the chat happened."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field


class EvalTestCase(BaseModel):
    """One turn: what the user said and what the assistant answered.

    `actual_output` is None only for a final user message nobody answered.
    `tool_activity` holds the assistant's tool calls and their results, in order,
    as short lines shown to the judge inside this turn.
    """

    model_config = ConfigDict(extra="ignore")

    input: str
    actual_output: str | None
    tool_activity: list[str] = Field(default_factory=list)


class ConversationalEvalTestCase(BaseModel):
    """A whole conversation to grade.

    `log_cut` says the log was cut after its last message, so a final user message nobody
    answered was never due a reply here (a research set rated at that point, an export cut at a
    time): the rubric metrics leave it out instead of judging a user left hanging. None: as the
    run says (`cut_logs`)."""

    model_config = ConfigDict(extra="ignore")

    turns: list[EvalTestCase] = Field(min_length=1)
    id: str | None = None
    chatbot_role: str | None = None  #: the system prompt, shown to the judge as context
    metadata: dict[str, Any] = Field(default_factory=dict)
    log_cut: bool | None = None
    #: `--redact`: the identifiers replaced in this conversation, by type (`redaction.redactor`)
    redactions: dict[str, int] | None = None
    redacted_by: str | None = None  #: the detectors that replaced them, with their versions

    def judged_turns(self, cut_logs: bool = False) -> ConversationalEvalTestCase:
        """The conversation as the judge sees it: without its final unanswered user message
        when the log was cut there (`log_cut`, else the run's `cut_logs`); itself otherwise."""
        cut = self.log_cut if self.log_cut is not None else cut_logs
        if not cut or len(self.turns) < 2 or self.turns[-1].actual_output is not None:
            return self
        return self.model_copy(update={"turns": self.turns[:-1]})


def turns_sha256(case: ConversationalEvalTestCase) -> str:
    """The fingerprint of what a judge reads of `case`: the SHA-256 (hex) of its system prompt
    and turns (each side and the tool activity) as read; a conversation that grew or was
    edited has another."""
    content = [case.chatbot_role, [[turn.input, turn.actual_output, turn.tool_activity] for turn in case.turns]]
    return hashlib.sha256(orjson.dumps(content)).hexdigest()


DATE_FIELDS = ("chat_date", "started_at", "timestamp")


def chat_date(
    case: ConversationalEvalTestCase, field: str | None = None, problems: list[str] | None = None
) -> str | None:
    """When the chat happened, as YYYY-MM-DD: metadata `field`, else the first of `chat_date`,
    `started_at` or `timestamp` that is there. The value is read as an ISO 8601 date or time
    (its date as written), else as Unix time, a number or a numeric string: seconds, or
    milliseconds when above 1e11. None when no field is there or its value cannot be read;
    then, if `problems` is given, a line naming the field and its value is appended to it."""
    milliseconds_above = 1e11  # 1e11 s is the year 5138; 1e11 ms is 1973-03-03
    for name in (field,) if field else DATE_FIELDS:
        value = case.metadata.get(name)
        if value is None:
            continue
        try:
            if isinstance(value, bool):
                raise ValueError(value)
            if isinstance(value, int | float):
                seconds = float(value)
            else:
                text = str(value).strip()
                try:
                    return datetime.fromisoformat(text.replace("Z", "+00:00")).date().isoformat()
                except ValueError:
                    seconds = float(text)
            if abs(seconds) > milliseconds_above:
                seconds /= 1000
            return datetime.fromtimestamp(seconds, UTC).date().isoformat()
        except (ValueError, OverflowError, OSError):
            if problems is not None:
                shown = repr(value)
                problems.append(f"metadata.{name}: {shown if len(shown) <= 60 else shown[:59] + '…'} is not a date")
            return None
    return None


class Source(BaseModel):
    """Where a conversation came from: a JSONL line, or an index in a JSON/YAML list."""

    path: str
    line: int | None = None
    index: int | None = None

    def __str__(self) -> str:
        if self.line is not None:
            return f"{self.path}:{self.line}"
        return f"{self.path}#{self.index}"


def missing_side(case: ConversationalEvalTestCase) -> str | None:
    """Which side of `case` said nothing: "user" when no turn has user text, "assistant" when no
    turn has a reply with text or a tool call (an assistant that only called a tool did act);
    None when both sides said something."""
    if not any(turn.input.strip() for turn in case.turns):
        return "user"
    if not any((turn.actual_output or "").strip() or turn.tool_activity for turn in case.turns):
        return "assistant"
    return None
