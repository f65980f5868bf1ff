"""What the call-log readers share: a record's field, its conversation key, its list of records
(the messages themselves are read by `messages`).

A field that cannot be read raises `Unreadable`, naming the field."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from flowrate.inputs.conversation import Source
from flowrate.inputs.formats import Record
from flowrate.inputs.formats import _type_name as type_name
from flowrate.inputs.sources.base import Item
from flowrate.inputs.sources.calls import Conversations

# The metadata keys a call log groups its calls into conversations by, in this order (a user's
# id is no such key: one user has many conversations, which would read as forks of one).
CONVERSATION_KEYS = ("conversation_id", "session_id", "thread_id")


class Unreadable(Exception):
    """A field of a record that cannot be read: `field` is its path, `why` what is wrong."""

    def __init__(self, field: str, why: str):
        super().__init__(f"{field}: {why}")
        self.field = field
        self.why = why


def field_of(raw: Any, field: str, kind: type | tuple[type, ...], path: str, required: bool = True) -> Any:
    """`raw[field]` when it is of `kind`; None when it is absent (or null) and not `required`;
    else `Unreadable` naming `path` (the field's place in the record)."""
    value = raw.get(field) if isinstance(raw, dict) else None
    if value is None and not required:
        return None
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        got = "missing" if value is None else f"got {type_name(value)}"
        raise Unreadable(path, f"expected {_json_name(names)}, {got}")
    return value


def _json_name(names: str) -> str:
    return names.replace("dict", "an object").replace("list", "a list").replace("str", "text")


def conversation_key(*metadata: Any, given: tuple[str, ...] = ()) -> str | None:
    """The first conversation key (the `given` ones, `--conversation-key`, then `CONVERSATION_KEYS`)
    that one of the `metadata` mappings gives."""
    for name in (*given, *CONVERSATION_KEYS):
        for mapping in metadata:
            value = mapping.get(name) if isinstance(mapping, dict) else None
            if isinstance(value, str | int) and not isinstance(value, bool) and str(value) != "":
                return str(value)
    return None


def listed(item: Item) -> list[Any] | None:
    """The records of a whole JSON document that is an API's list response (`{"data": [...]}`);
    None when it is not one."""
    raw = item.raw
    if item.whole and isinstance(raw, dict) and isinstance(raw.get("data"), list):
        return raw["data"]
    return None


def first_record(item: Item) -> Any:
    """The record a reader's `problem` looks at: the item, or the first of its list response."""
    records = listed(item)
    if records is None:
        return item.raw
    return records[0] if records else None


def records_of(items: Iterable[Item | Record]) -> Iterator[Item | Record]:
    """The items of a file, each record of a list response (`{"data": [...]}`, a whole JSON
    document) as an item of its own, named by its place in `data`."""
    for item in items:
        records = None if isinstance(item, Record) else listed(item)
        if isinstance(item, Record) or records is None:
            yield item
            continue
        shown = item.source.path
        for index, raw in enumerate(records):
            yield Item(Source(path=shown, index=index), raw, f"{item.default_id}/{index}", f"{shown} data[{index}]")


def keyless_notice(
    conversations: Conversations, shown: str, keys: str, unit: str = "call", whole: str = "call"
) -> list[str]:
    """The notice of a file read into `conversations` when calls had no conversation key: `keys`
    names where the source keeps one, `unit` what was counted, `whole` what is then one conversation."""
    count = conversations.keyless
    if not count:
        return []
    return [f"{shown}: {count} {unit}(s) with no conversation key ({keys}); each {whole} is one conversation"]
