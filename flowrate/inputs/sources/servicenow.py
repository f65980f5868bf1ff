"""ServiceNow Virtual Agent: the Conversation Message [sys_cs_message] table as the Table API
returns it (`GET /api/now/table/sys_cs_message`: `{"result": [...]}`, a whole JSON document, or
its rows as a JSON list or one a line), rows of many conversations grouped by `conversation` and
ordered by `sys_created_on`, then `sequence`.

A row's `direction` says who spoke (`inbound`: the user, `outbound`: the bot or a live agent);
its `payload` is the message as JSON text whose `value` (or `plainTextMessage`, `label`) is the
text; a payload that is not JSON is the text itself; an outbound control with no text (a topic
picker) is not shown. Rows of the Conversation [sys_cs_conversation] table in the same document
give their conversation's metadata (`state`, `consumer`, `device_type`, `topic`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from flowrate.inputs.conversation import Source
from flowrate.inputs.formats import Record
from flowrate.inputs.sources.base import Item, Reader
from flowrate.inputs.sources.calls import seconds_of
from flowrate.inputs.sources.dialogue import Groups, Message

TEXT_FIELDS = ("value", "plainTextMessage", "label", "searchText")
CONVERSATION_FIELDS = {"state": "state", "consumer": "user", "device_type": "channel", "topic": "topic"}


class ServiceNowReader(Reader):
    """ServiceNow Virtual Agent conversations (Table API), a message a row."""

    name = "servicenow"
    title = "ServiceNow Virtual Agent (Table API: sys_cs_message, sys_cs_conversation)"
    reads = "result[]: conversation, direction, payload, sys_created_on, sequence; sys_cs_conversation's sys_id, state, consumer, device_type, topic"
    marks = frozenset({"result", "direction", "payload", "conversation"})

    def problem(self, item: Item) -> str | None:
        rows = _rows(item)
        if rows is None:
            return "result: must be the Table API's list of records"
        first = rows[0].raw if rows else None
        if not isinstance(first, dict) or not (
            {"direction", "conversation"} <= first.keys() or _is_conversation(first)
        ):
            return "result[0]: a sys_cs_message record has `conversation` and `direction`"
        return None

    def read(self, items: Iterable[Item | Record]) -> Iterator[Record]:
        groups = Groups(self.name)
        passed: list[Record] = []
        known: dict[str, dict[str, Any]] = {}  # sys_cs_conversation rows' metadata, by sys_id
        for item in items:
            if isinstance(item, Record):
                passed.append(item)
                continue
            rows = _rows(item)
            for row in [item] if rows is None else rows:  # an empty `result` holds no message
                _add(groups, row, known)
        for key, metadata in known.items():
            groups.note(key, metadata)
        yield from groups.records(passed)


def _rows(item: Item) -> list[Item] | None:
    """The records `item` holds: the `result` of a whole Table API document, else the item
    itself as one record; None when it is neither."""
    raw = item.raw
    if isinstance(raw, dict) and isinstance(raw.get("result"), list):
        path = item.source.path
        return [
            Item(Source(path=path, index=number), row, f"{item.default_id}/{number}", f"{item.where}: result[{number}]")
            for number, row in enumerate(raw["result"])
        ]
    if item.whole or not isinstance(raw, dict):
        return None
    return [item]


def _add(groups: Groups, row: Item, known: dict[str, dict[str, Any]]) -> None:
    raw = row.raw if isinstance(row.raw, dict) else {}
    if _is_conversation(raw):
        known[_value(raw["sys_id"])] = {
            name: _value(raw[field]) for field, name in CONVERSATION_FIELDS.items() if _value(raw.get(field))
        }
        return
    key = _value(raw.get("conversation")) or None
    if key is None:
        groups.fail(None, row, "conversation: is missing")
        return
    direction = _value(raw.get("direction"))
    if direction not in ("inbound", "outbound"):
        groups.fail(key, row, f"direction: must be inbound or outbound, got {direction!r}")
        return
    seconds = seconds_of(_value(raw.get("sys_created_on")))
    if seconds is None:
        groups.fail(key, row, f"sys_created_on: must be a time, got {raw.get('sys_created_on')!r}")
        return
    text = _text(_value(raw.get("payload")))
    messages: list[Message] = []
    if text:
        messages.append({"role": "user" if direction == "inbound" else "assistant", "content": text})
    metadata = {"conversation": key}
    if _value(raw.get("consumer")):
        metadata["user"] = _value(raw["consumer"])
    groups.add(key, row, (seconds, _number(raw.get("sequence"))), messages, seconds, metadata)


def _is_conversation(raw: dict[str, Any]) -> bool:
    """A sys_cs_conversation record: its own `sys_id`, a `consumer`, and no message's `direction`."""
    return "direction" not in raw and bool(_value(raw.get("sys_id"))) and "consumer" in raw


def _text(payload: str) -> str:
    """The text of a message's payload: JSON whose text field is set, else the payload itself."""
    try:
        decoded = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return payload.strip()
    if not isinstance(decoded, dict):
        return payload.strip() if isinstance(decoded, str) else ""
    return next((decoded[name].strip() for name in TEXT_FIELDS if isinstance(decoded.get(name), str)), "")


def _value(field: Any) -> str:
    """A Table API field's value as text: a reference or `sysparm_display_value=all` gives an
    object with its `value`."""
    if isinstance(field, dict):
        field = field.get("value")
    return "" if field is None else str(field)


def _number(field: Any) -> float:
    try:
        return float(_value(field) or 0)
    except ValueError:
        return 0.0
