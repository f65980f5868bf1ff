"""Dialogflow CX: the interaction logging export to BigQuery, one row a turn (`conversation_name`,
`turn_position`, `request_time`, `language_code`, and the DetectIntent `request` and `response`
as JSON), exported as CSV, Parquet or JSON; the rows of many conversations are grouped by
`conversation_name` and ordered by `turn_position`.

A turn is the end user's text (`request.queryInput.text.text`, else the transcript of speech),
the tools a playbook called (`response.queryResult.generativeInfo.actionTracingInfo.actions[]
.toolUse`) and the agent's text replies (`response.queryResult.responseMessages[].text.text[]`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from flowrate.inputs.formats import Record
from flowrate.inputs.sources.base import Item, Reader
from flowrate.inputs.sources.calls import seconds_of
from flowrate.inputs.sources.dialogue import Groups, Message, json_field, tool_call, tool_result

COLUMNS = frozenset({"conversation_name", "turn_position", "request", "response"})


class DialogflowCXReader(Reader):
    """Dialogflow CX's BigQuery export, a turn a row."""

    name = "dialogflow-cx"
    title = "Dialogflow CX interaction logs exported to BigQuery"
    reads = "conversation_name, turn_position, request_time, language_code, request.queryInput.text.text, response.queryResult.responseMessages[].text.text[], toolUse"
    marks = COLUMNS

    def problem(self, item: Item) -> str | None:
        raw = item.raw
        if not isinstance(raw, dict):
            return "a row must be an object"
        missing = sorted(COLUMNS - raw.keys())
        return f"{missing[0]}: is missing" if missing else None

    def read(self, items: Iterable[Item | Record]) -> Iterator[Record]:
        groups = Groups(self.name)
        passed: list[Record] = []
        for item in items:
            if isinstance(item, Record):
                passed.append(item)
            else:
                self._add(groups, item)
        yield from groups.records(passed)

    def _add(self, groups: Groups, item: Item) -> None:
        raw = item.raw if isinstance(item.raw, dict) else {}
        key = raw.get("conversation_name")
        if not isinstance(key, str) or not key:
            groups.fail(None, item, "conversation_name: is missing")
            return
        try:
            position = int(raw["turn_position"])
        except (KeyError, TypeError, ValueError):
            groups.fail(key, item, f"turn_position: must be a whole number, got {raw.get('turn_position')!r}")
            return
        try:
            messages = _turn(raw)
        except ValueError as error:
            groups.fail(key, item, str(error))
            return
        groups.add(key, item, position, messages, _seconds(raw.get("request_time")), _metadata(raw, key))


def _turn(raw: dict[str, Any]) -> list[Message]:
    """The messages of one turn; `ValueError` naming the column that cannot be read."""
    decoded = {}
    for column in ("request", "response"):
        try:
            decoded[column] = json_field(raw.get(column)) or {}
        except ValueError as error:
            raise ValueError(f"{column}: {error}") from None
        if not isinstance(decoded[column], dict):
            raise ValueError(f"{column}: must be a JSON object")
    result = _path(decoded["response"], "queryResult")
    result = result if isinstance(result, dict) else {}
    messages: list[Message] = []
    said = _said(decoded["request"], result)
    if said:
        messages.append({"role": "user", "content": said})
    for action in _list(_path(result, "generativeInfo", "actionTracingInfo", "actions")):
        use = action.get("toolUse") if isinstance(action, dict) else None
        if isinstance(use, dict):
            name = str(use.get("displayName") or use.get("action") or use.get("tool") or "tool")
            messages.append(tool_call(name, use.get("inputActionParameters") or {}))
            messages.append(tool_result(name, use.get("outputActionParameters") or {}))
    replies = [
        line
        for message in _list(result.get("responseMessages"))
        for line in _list(_path(message, "text", "text"))
        if isinstance(line, str)
    ]
    if replies:
        messages.append({"role": "assistant", "content": "\n".join(replies)})
    return messages


def _said(request: dict[str, Any], result: dict[str, Any]) -> str | None:
    """What the end user said: the request's text, else the query result's text or transcript
    (a turn started by an event, as the welcome, has none)."""
    text = _path(request, "queryInput", "text", "text")
    if isinstance(text, str) and text:
        return text
    for field in ("text", "transcript"):
        if isinstance(result.get(field), str) and result[field]:
            return result[field]
    return None


def _seconds(value: Any) -> float | None:
    """A `request_time` as Unix seconds: BigQuery writes a TIMESTAMP as text ending in ` UTC`
    in CSV and JSON exports (`2026-03-02 10:15:30.000000 UTC`), and as a time in Parquet."""
    return seconds_of(value.removesuffix(" UTC") if isinstance(value, str) else value)


def _path(value: Any, *names: str) -> Any:
    """`value[names[0]][names[1]]...`, None where an object or a field is not there."""
    for name in names:
        value = value.get(name) if isinstance(value, dict) else None
    return value


def _list(value: Any) -> list[Any]:
    """`value` when it is a list, else no items."""
    return value if isinstance(value, list) else []


def _metadata(raw: dict[str, Any], key: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"session_id": key.rsplit("/", 1)[-1]}
    for column, name in (("language_code", "language"), ("agent_id", "agent_id"), ("project_id", "project_id")):
        if isinstance(raw.get(column), str) and raw[column]:
            metadata[name] = raw[column]
    return metadata
