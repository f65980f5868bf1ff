"""ShareGPT: a conversation a record, `conversations: [{from, value}]`, as ShareGPT dumps and the
datasets LLaMA-Factory reads have it (`human`, `gpt`, `system`, `function_call`, `observation`),
with an optional top-level `system` prompt; JSON, JSONL, YAML or Parquet."""

from __future__ import annotations

from typing import Any

import orjson

from flowrate.inputs.formats import Record
from flowrate.inputs.sources.base import Item, RecordReader
from flowrate.inputs.sources.dialogue import Message, dialogue_record, problem_record, tool_call, tool_result

ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system"}


class ShareGPTReader(RecordReader):
    """ShareGPT and LLaMA-Factory's sharegpt format, one conversation a record."""

    name = "sharegpt"
    title = "ShareGPT (also LLaMA-Factory's sharegpt datasets)"
    reads = "id, system, conversations[].from (human, gpt, system, function_call, observation), conversations[].value"
    marks = frozenset({"conversations"})

    def problem(self, item: Item) -> str | None:
        raw = item.raw
        if item.whole or not isinstance(raw, dict):
            return "a conversation must be an object with a `conversations` list"
        turns = raw.get("conversations")
        if not isinstance(turns, list) or not turns:
            return "conversations: must be a list of {from, value}"
        if not isinstance(turns[0], dict) or "from" not in turns[0]:
            return "conversations[0].from: is missing"
        return None

    def record(self, item: Item) -> Record:
        problem = self.problem(item)
        key = _identity(item)
        given = key if key != item.default_id else None  # the id the record gives, to name it by
        if problem is not None:
            return problem_record(item, self.name, problem, given)
        try:
            messages = _messages(item.raw)
        except ValueError as error:
            return problem_record(item, self.name, str(error), given)
        return dialogue_record(item, self.name, key, messages, _metadata(item.raw), ())


def _identity(item: Item) -> str:
    given = item.raw.get("id") if isinstance(item.raw, dict) else None
    return str(given) if isinstance(given, str | int) and str(given) else item.default_id


def _messages(raw: dict[str, Any]) -> list[Message]:
    """The dialogue; `ValueError` naming the field that is not ShareGPT."""
    messages: list[Message] = []
    if isinstance(raw.get("system"), str) and raw["system"]:
        messages.append({"role": "system", "content": raw["system"]})
    called = "tool"
    for number, turn in enumerate(raw["conversations"]):
        field = f"conversations[{number}]"
        if not isinstance(turn, dict):
            raise ValueError(f"{field}: must be an object with `from` and `value`")
        speaker, value = turn.get("from"), turn.get("value")
        if not isinstance(value, str):
            raise ValueError(f"{field}.value: must be text")
        if speaker == "function_call":
            calls = _calls(value, f"{field}.value")
            messages.extend(tool_call(name, arguments) for name, arguments in calls)
            called = calls[-1][0]
        elif speaker == "observation":
            messages.append(tool_result(called, value))
        elif isinstance(speaker, str) and speaker in ROLES:
            messages.append({"role": ROLES[speaker], "content": value})
        else:
            expected = ", ".join([*ROLES, "function_call", "observation"])
            raise ValueError(f"{field}.from: unknown speaker {speaker!r} (expected {expected})")
    return messages


def _calls(value: str, field: str) -> list[tuple[str, Any]]:
    """The calls a `function_call` turn holds: `{"name", "arguments"}` or a list of them."""
    try:
        decoded = orjson.loads(value)
    except orjson.JSONDecodeError:
        raise ValueError(f'{field}: a function_call must be JSON {{"name", "arguments"}}') from None
    calls = decoded if isinstance(decoded, list) else [decoded]
    if not calls or not all(isinstance(call, dict) and isinstance(call.get("name"), str) for call in calls):
        raise ValueError(f"{field}: a function_call must name its function (`name`)")
    return [(call["name"], call.get("arguments", "")) for call in calls]


def _metadata(raw: dict[str, Any]) -> dict[str, Any]:
    """What the record carries beside the dialogue: a `metadata` object, and plain top-level
    fields (a dataset's `source`, `language`, `category`)."""
    metadata = dict(raw["metadata"]) if isinstance(raw.get("metadata"), dict) else {}
    for key, value in raw.items():
        if key not in ("id", "conversations", "system", "tools", "metadata") and isinstance(value, str | int | float):
            metadata.setdefault(key, value)
    return metadata
