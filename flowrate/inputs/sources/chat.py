"""Chat messages as API logs hold them, made into the messages `calls.Call` takes (OpenAI's chat
shape: `role`, `content` text, `tool_calls` [{"function": {"name", "arguments"}}], `name` of a
tool's result), and what the call-log readers share: a record's field, its conversation key,
its list of records.

A message or a field that cannot be read raises `Unreadable`, naming the field."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from flowrate.inputs.conversation import Source
from flowrate.inputs.formats import Record
from flowrate.inputs.formats import _type_name as type_name
from flowrate.inputs.sources.base import Item
from flowrate.inputs.sources.calls import Conversations

# The metadata keys a call log groups its calls into conversations by, in this order (a user's
# id is no such key: one user has many conversations, which would read as forks of one).
CONVERSATION_KEYS = ("conversation_id", "session_id", "thread_id")
HIDDEN_BLOCKS = frozenset({"thinking", "redacted_thinking"})  # Anthropic's: never shown to the judge
ANTHROPIC_TOOL_BLOCKS = frozenset({"tool_use", "server_tool_use", "tool_result"})


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


def text_of(content: Any, path: str) -> str:
    """The text of `content` (at `path`): text, or a list of parts (`text`, `input_text`,
    `output_text` parts give their text; thinking and tool_use blocks none; any other part is
    named, as `[image_url]`)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise Unreadable(path, f"expected text or a list of parts, got {type_name(content)}")
    texts = []
    for number, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(part, dict) and part.get("type") in HIDDEN_BLOCKS | {"tool_use"}:
            continue  # never shown; a tool's use is shown from the message's tool calls
        elif isinstance(part, dict) and isinstance(part.get("type"), str):
            texts.append(f"[{part['type']}]")
        else:
            raise Unreadable(f"{path}[{number}]", "expected a part with a `type`")
    return "\n".join(texts)


def arguments_text(arguments: Any) -> str:
    """A tool call's arguments as the text the judge reads (JSON text kept as it is)."""
    if isinstance(arguments, str):
        return arguments
    return orjson.dumps(arguments).decode() if arguments is not None else ""


def tool_call(name: str, arguments: Any, call_id: Any = None) -> dict[str, Any]:
    """One tool call of an assistant message, with its `id` (to name its result by)."""
    return {"id": call_id, "function": {"name": name, "arguments": arguments_text(arguments)}}


class ToolNames:
    """The names of the tools called so far in one record, by call id, to name their results by."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}

    def called(self, message: dict[str, Any]) -> dict[str, Any]:
        """`message` (an assistant message), its tool calls' names noted."""
        for call in message.get("tool_calls") or []:
            if call.get("id") is not None:
                self._names[str(call["id"])] = call["function"]["name"]
        return message

    def name(self, call_id: Any, given: Any = None) -> str:
        """The name of the tool whose call had `call_id` (`given` when the log names it)."""
        if isinstance(given, str) and given:
            return given
        return self._names.get(str(call_id), "tool")


def openai_messages(messages: Any, path: str, tools: ToolNames | None = None) -> list[dict[str, Any]]:
    """OpenAI Chat Completions messages (`role`, `content` text or parts, `tool_calls`, a tool
    result's `tool_call_id`, the older `function_call`) as `calls.Call` messages."""
    if not isinstance(messages, list):
        raise Unreadable(path, f"expected a list of messages, got {type_name(messages)}")
    tools = tools or ToolNames()
    return [openai_message(message, f"{path}[{number}]", tools) for number, message in enumerate(messages)]


def openai_message(message: Any, path: str, tools: ToolNames) -> dict[str, Any]:
    """One OpenAI chat message (see `openai_messages`)."""
    role = field_of(message, "role", str, f"{path}.role")
    content = text_of(message.get("content"), f"{path}.content")
    if role in ("tool", "function"):
        return {
            "role": "tool",
            "content": content,
            "name": tools.name(message.get("tool_call_id"), message.get("name")),
        }
    if role not in ("system", "developer", "user", "assistant"):
        raise Unreadable(f"{path}.role", f"unknown role {role!r}")
    calls = []
    for number, call in enumerate(field_of(message, "tool_calls", list, f"{path}.tool_calls", required=False) or []):
        function = field_of(call, "function", dict, f"{path}.tool_calls[{number}].function")
        name = field_of(function, "name", str, f"{path}.tool_calls[{number}].function.name")
        calls.append(tool_call(name, function.get("arguments"), call.get("id")))
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        calls.append(tool_call(field_of(legacy, "name", str, f"{path}.function_call.name"), legacy.get("arguments")))
    given = message.get("content") is not None and (content != "" or not calls)  # "" beside a call is no reply
    out: dict[str, Any] = {"role": role, "content": content if given else None}
    if calls:
        out["tool_calls"] = calls
    return tools.called(out)


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


# LangChain's message types (a serialized message's class, or its `type`) and their roles.
LANGCHAIN_ROLES = {
    "system": "system",
    "human": "user",
    "ai": "assistant",
    "tool": "tool",
    "function": "tool",
    "developer": "developer",
    "SystemMessage": "system",
    "HumanMessage": "user",
    "AIMessage": "assistant",
    "AIMessageChunk": "assistant",
    "ToolMessage": "tool",
    "FunctionMessage": "tool",
}


def langchain_messages(messages: Any, path: str, tools: ToolNames) -> list[dict[str, Any]]:
    """Messages as LangChain logs them (serialized, `{"lc": 1, "id": [..., "HumanMessage"],
    "kwargs": {...}}`; or plain, with a `type` such as `human`), or OpenAI's shape (with the
    tool calls LangChain keeps in `additional_kwargs`), or Anthropic's (tool_use and tool_result
    blocks), as `calls.Call` messages; `path` names the list, `tools` the calls made so far."""
    if not isinstance(messages, list):
        raise Unreadable(path, f"expected a list of messages, got {type_name(messages)}")
    read: list[dict[str, Any]] = []
    for number, message in enumerate(messages):
        where = f"{path}[{number}]"
        if _anthropic_shaped(message):
            read.extend(anthropic_message(message, where, tools))
        else:
            read.append(openai_message(_openai_shaped(message, where), where, tools))
    return read


def _anthropic_shaped(message: Any) -> bool:
    """True for a message in Anthropic's shape: a `role` and content blocks with a tool's use or result."""
    content = message.get("content") if isinstance(message, dict) and "role" in message else None
    return isinstance(content, list) and any(
        isinstance(block, dict) and block.get("type") in ANTHROPIC_TOOL_BLOCKS for block in content
    )


def _openai_shaped(message: Any, path: str) -> dict[str, Any]:
    if not isinstance(message, dict):
        raise Unreadable(path, f"expected a message object, got {type_name(message)}")
    if isinstance(message.get("kwargs"), dict) and isinstance(message.get("id"), list):
        fields, kind = message["kwargs"], message["kwargs"].get("type") or message["id"][-1]
    elif "role" in message:
        fields, kind = message, None
    else:
        fields, kind = message, message.get("type")
    role = fields.get("role") if kind is None else LANGCHAIN_ROLES.get(str(kind))
    if role is None:
        raise Unreadable(f"{path}.type", f"unknown message type {kind!r}")
    shaped = {"role": role, "content": fields.get("content"), "name": fields.get("name")}
    shaped["tool_call_id"] = fields.get("tool_call_id")
    extra = fields.get("additional_kwargs") if isinstance(fields.get("additional_kwargs"), dict) else {}
    calls = fields.get("tool_calls") or extra.get("tool_calls") or []
    if not isinstance(calls, list):
        raise Unreadable(f"{path}.tool_calls", f"expected a list, got {type_name(calls)}")
    shaped["tool_calls"] = [
        call
        if "function" in call
        else {"id": call.get("id"), "function": {"name": call.get("name"), "arguments": call.get("args")}}
        for call in calls
        if isinstance(call, dict)
    ]
    return shaped


def anthropic_message(message: Any, path: str, tools: ToolNames) -> list[dict[str, Any]]:
    """One Anthropic message (`role`, `content` text or blocks) as `calls.Call` messages: its
    `tool_result` blocks as tool messages, then its `text` and `tool_use` blocks as one message
    of its role; `thinking` blocks are never shown to the judge, other blocks are named."""
    role = field_of(message, "role", str, f"{path}.role")
    if role not in ("user", "assistant"):
        raise Unreadable(f"{path}.role", f"unknown role {role!r}")
    content = message.get("content")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise Unreadable(f"{path}.content", f"expected text or a list of blocks, got {type_name(content)}")
    results, texts, calls = [], [], []
    for number, block in enumerate(content):
        where = f"{path}.content[{number}]"
        kind = field_of(block, "type", str, f"{where}.type")
        if kind == "text":
            texts.append(field_of(block, "text", str, f"{where}.text"))
        elif kind in ("tool_use", "server_tool_use"):
            calls.append(tool_call(field_of(block, "name", str, f"{where}.name"), block.get("input"), block.get("id")))
        elif kind == "tool_result":
            name = tools.name(block.get("tool_use_id"))
            text = text_of(block.get("content"), f"{where}.content")
            results.append(
                {"role": "tool", "content": f"error: {text}" if block.get("is_error") else text, "name": name}
            )
        elif kind not in HIDDEN_BLOCKS:
            texts.append(f"[{kind}]")
    messages = list(results)
    if texts or calls:
        out: dict[str, Any] = {"role": role, "content": "\n".join(texts) if texts else None}
        if calls:
            out["tool_calls"] = calls
        messages.append(tools.called(out))
    return messages
