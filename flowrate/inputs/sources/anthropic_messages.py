"""Logs of Anthropic's Messages API: a call as a `{"request": ..., "response": ...}` pair, the
request body (top-level `system`, `messages` of content blocks `text`, `tool_use`,
`tool_result`) and the `message` returned (its `content` blocks); `thinking` and
`redacted_thinking` blocks are never shown to the judge. The API returns no time: the pair's
own `timestamp` (or `created_at`) is the call's. Calls are grouped by a conversation key of
the pair's or the request's `metadata`; each call repeats the history (`calls.Conversations`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from flowrate.inputs.formats import Record
from flowrate.inputs.sources.base import Item, Reader
from flowrate.inputs.sources.calls import Call, Conversations, seconds_of
from flowrate.inputs.sources.chat import CONVERSATION_KEYS, Unreadable, conversation_key, field_of, keyless_notice
from flowrate.inputs.sources.messages import ToolNames, anthropic_message, text_of


class AnthropicReader(Reader):
    """Messages API calls, grouped into conversations."""

    name = "anthropic"
    title = "Anthropic Messages API logs: request/response pairs"
    reads = (
        "request.system/messages (text, tool_use, tool_result blocks)/metadata.user_id, response.content/model,"
        " timestamp, metadata"
    )
    marks = frozenset({"request", "response"})

    def problem(self, item: Item) -> str | None:
        raw = item.raw
        if not isinstance(raw, dict):
            return "a call must be an object"
        request, response = raw.get("request"), raw.get("response")
        if not isinstance(request, dict) or "messages" not in request:
            return "has no `request` with `messages`"
        if not isinstance(response, dict) or response.get("type") != "message":
            return "has no `response` of type `message`"
        return None

    def read(self, items: Iterable[Item | Record]) -> Iterator[Record]:
        conversations = Conversations(self.name)
        shown = None
        for item in items:
            if isinstance(item, Record):
                yield item
                continue
            shown = item.source.path
            try:
                call = _call(item, self.given_keys)
            except Unreadable as error:
                conversations.problem(item, str(error))
                continue
            conversations.add(call, fallback_key=call.metadata.get("message_id") or item.default_id)
        yield from conversations.records()
        self.notices.extend(conversations.notices)
        if shown is not None:
            keys = f"metadata {'/'.join(CONVERSATION_KEYS)}"
            self.notices.extend(keyless_notice(conversations, shown, keys))


def _call(item: Item, given_keys: tuple[str, ...]) -> Call:
    raw = item.raw
    if not isinstance(raw, dict):
        raise Unreadable("record", "a call must be an object")
    request = field_of(raw, "request", dict, "request")
    response = field_of(raw, "response", dict, "response")
    tools = ToolNames()
    system = request.get("system")
    history = [{"role": "system", "content": text_of(system, "request.system")}] if system else []
    for number, message in enumerate(field_of(request, "messages", list, "request.messages")):
        history.extend(anthropic_message(message, f"request.messages[{number}]", tools))
    output = anthropic_message({"role": "assistant", "content": response.get("content")}, "response", tools)
    given = request.get("metadata")
    metadata: dict[str, Any] = dict(raw["metadata"]) if isinstance(raw.get("metadata"), dict) else {}
    for name, value in (
        ("model", response.get("model") or request.get("model")),
        ("user", given.get("user_id") if isinstance(given, dict) else None),
        ("message_id", response.get("id")),
    ):
        if isinstance(value, str) and value:
            metadata.setdefault(name, value)
    at_s = seconds_of(raw.get("timestamp", raw.get("created_at")))
    return Call(
        conversation_key(raw.get("metadata"), given, given=given_keys), history, output, item, at_s, at_s, metadata
    )
