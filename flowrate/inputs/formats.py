"""Input formats: JSONL, JSON and YAML files of conversations in the turn or the OpenAI-messages shape, each record validated into a conversation or a list of problems naming file, line and field."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError
from pydantic_core import ErrorDetails

from flowrate.inputs.conversation import ConversationalEvalTestCase, EvalTestCase, Source

TOOL_TEXT_LIMIT = 300


# -- raw record shapes, validated by pydantic ------------------------------------
class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: StrictStr | StrictInt | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    labels: dict[str, StrictFloat | StrictInt | None] = Field(default_factory=dict)
    log_cut: StrictBool | None = None


class _Turn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    input: StrictStr
    actual_output: StrictStr


class _TurnRecord(_Record):
    turns: list[_Turn] = Field(min_length=1)
    chatbot_role: StrictStr | None = None
    trailing_user_utterance: StrictStr | None = None


class _TextPart(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: StrictStr
    text: StrictStr | None = None


class _ToolFunction(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: StrictStr
    arguments: StrictStr | dict[str, Any] = ""


class _ToolCall(BaseModel):
    model_config = ConfigDict(extra="ignore")

    function: _ToolFunction


class _Message(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Role
    content: StrictStr | list[_TextPart] | None = None
    tool_calls: list[_ToolCall] | None = None
    name: StrictStr | None = None


class _ChatRecord(_Record):
    messages: list[_Message] = Field(min_length=1)


# -- what the reader yields ------------------------------------------------------
@dataclass
class Record:
    """One input record: a valid conversation, or the problems that make it invalid."""

    source: Source
    format: str  # "turns", "messages" or "unknown"
    case: ConversationalEvalTestCase | None = None
    labels: dict[str, float | None] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    given_id: str | None = None  # the id an invalid record gives, for reports to name it by

    @property
    def name(self) -> str:
        """How reports name the record: its id (an invalid one's own, when it gives one), else its place."""
        return (self.case.id if self.case is not None else None) or self.given_id or str(self.source)


# -- one record ------------------------------------------------------------------
def parse_record(raw: Any, source: Source, default_id: str, where: str | None = None) -> Record:
    """Validate one decoded record and turn it into a conversation; its problems start with
    `where` (default: the file and line or index of `source`)."""
    where = where or where_of(source)
    if not isinstance(raw, dict):
        return Record(
            source=source,
            format="unknown",
            problems=[f"{where}: a conversation must be an object, got {_type_name(raw)}"],
        )
    model: type[_TurnRecord] | type[_ChatRecord]
    if "turns" in raw:
        model, fmt = _TurnRecord, "turns"
    elif "messages" in raw:
        model, fmt = _ChatRecord, "messages"
    else:
        return Record(
            source=source,
            format="unknown",
            problems=[f"{where}: has neither `turns` nor `messages`"],
            given_id=_given_id(raw),
        )
    try:
        parsed = model.model_validate(raw)
    except ValidationError as error:
        return Record(
            source=source,
            format=fmt,
            problems=[f"{where}: {line}" for line in _explain_all(error.errors())],
            given_id=_given_id(raw),
        )
    identity = str(parsed.id) if parsed.id is not None and str(parsed.id) != "" else default_id
    if isinstance(parsed, _TurnRecord):
        # the turns as dicts, validated into the case in one call: a third of the CPU of making
        # each turn's model first (2,000 USS-SGD dialogues: 0.04 s against 0.14 s)
        turns: list[Any] = [{"input": t.input, "actual_output": t.actual_output} for t in parsed.turns]
        if parsed.trailing_user_utterance is not None:
            turns.append({"input": parsed.trailing_user_utterance, "actual_output": None})
        system = parsed.chatbot_role
    else:
        turns, system = _chat_to_turns(parsed.messages)
        if not turns:
            return Record(
                source=source,
                format=fmt,
                problems=[f"{where}: messages: has no user or assistant message"],
                given_id=_given_id(raw),
            )
    case = ConversationalEvalTestCase.model_validate(
        {"id": identity, "turns": turns, "chatbot_role": system, "metadata": parsed.metadata, "log_cut": parsed.log_cut}
    )
    return Record(source=source, format=fmt, case=case, labels=dict(parsed.labels))


def _given_id(raw: dict) -> str | None:
    """The id an invalid record gives, when it is a non-empty string or a number."""
    value = raw.get("id")
    if isinstance(value, str | int | float) and not isinstance(value, bool) and str(value) != "":
        return str(value)
    return None


def _chat_to_turns(messages: list[_Message]) -> tuple[list[EvalTestCase], str | None]:
    """Merge consecutive messages of one side into turns; tools stay in the assistant's turn. The
    system and developer messages before the first turn are the system prompt; one that comes
    later is shown where it came, in the activity of the turn it came in (`system: TEXT`)."""
    system_parts: list[str] = []
    turns: list[EvalTestCase] = []
    user_parts: list[str] | None = None
    reply_parts: list[str] | None = None
    activity: list[str] = []

    def close_turn() -> None:
        nonlocal user_parts, reply_parts, activity
        if user_parts is None and reply_parts is None:
            return
        reply = "\n".join(reply_parts) if reply_parts is not None else None
        turns.append(EvalTestCase(input="\n".join(user_parts or [""]), actual_output=reply, tool_activity=activity))
        user_parts, reply_parts, activity = None, None, []

    for message in messages:
        text = _content_text(message.content)
        if message.role in ("system", "developer") and (turns or user_parts is not None or reply_parts is not None):
            if text:  # an instruction given mid-conversation stays where it was, beside the turn it came in
                activity.append(f"{message.role}: {text}")
        elif message.role in ("system", "developer"):
            if text:
                system_parts.append(text)
        elif message.role == "user":
            if reply_parts is not None:
                close_turn()
            user_parts = (user_parts or []) + [text]
        else:
            reply_parts = reply_parts if reply_parts is not None else []
            if message.role == "tool":
                activity.append(_clip(f"result {message.name or 'tool'}: {text}"))
                continue
            for call in message.tool_calls or []:
                arguments = call.function.arguments
                if not isinstance(arguments, str):
                    arguments = orjson.dumps(arguments).decode()
                activity.append(_clip(f"call {call.function.name}({arguments})"))
            if message.content is not None:
                reply_parts.append(text)
    close_turn()
    return turns, ("\n\n".join(system_parts) or None)


def _content_text(content: str | list[_TextPart] | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(
        part.text if part.type == "text" and part.text is not None else f"[{part.type}]" for part in content
    )


def _clip(text: str) -> str:
    return text if len(text) <= TOOL_TEXT_LIMIT else text[: TOOL_TEXT_LIMIT - 1] + "…"


def where_of(source: Source) -> str:
    """How problems name the record at `source`: its file and line, or index (and line)."""
    if source.line is not None and source.index is not None:
        return f"{source.path}#{source.index} (line {source.line})"
    return str(source)


def _explain_all(errors: list[ErrorDetails]) -> list[str]:
    """Plain words for each field, one line a field.

    A union (`content` may be a string, a list of parts or null) reports one error
    per branch: keep the deepest, and merge the branches' expectations at one field.
    """
    by_field: dict[str, list[ErrorDetails]] = {}
    for error in errors:
        by_field.setdefault(_field_path(error["loc"]), []).append(error)
    lines = []
    for location, group in by_field.items():
        if any(other.startswith((location + ".", location + "[")) for other in by_field):
            continue
        expected = [_EXPECTED[e["type"]] for e in group if e["type"] in _EXPECTED]
        if len(group) > 1 and len(expected) == len(group):
            options = " or ".join(dict.fromkeys(expected))
            lines.append(f"{location}: must be {options}, got {_type_name(group[0].get('input'))}")
        else:
            lines.append(_explain(group[0]))
    return lines


_EXPECTED = {
    "string_type": "a string",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "list_type": "a list",
    "dict_type": "an object",
    "int_type": "a whole number",
    "float_type": "a number",
}


def _explain(error: ErrorDetails) -> str:
    """A pydantic error in plain words, with the field path first."""
    location = _field_path(error["loc"])
    kind = error["type"]
    value = error.get("input")
    if kind == "missing":
        return f"{location}: is missing"
    if kind == "too_short":
        return f"{location}: must not be empty"
    if kind == "literal_error":
        return f"{location}: unknown role {value!r} (expected system, developer, user, assistant or tool)"
    if kind in _EXPECTED:
        return f"{location}: must be {_EXPECTED[kind]}, got {_type_name(value)}"
    return f"{location}: {error['msg']}"


def _field_path(loc: tuple[Any, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts[-1:] = [f"{parts[-1]}[{item}]"] if parts else [f"[{item}]"]
        elif item in ("str", "int", "float", "list[_TextPart]", "dict[str,any]", "function-after") or "[" in str(item):
            continue  # pydantic's union branch names, not fields
        else:
            parts.append(str(item))
    return ".".join(parts) or "record"


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, float):
        return f"the decimal number {value!r}"
    if isinstance(value, int):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


Role = Literal["system", "developer", "user", "assistant", "tool"]


BOM = b"\xef\xbb\xbf"  # editors on Windows start UTF-8 files with it
