"""Logs of OpenAI's Chat Completions API: a call as a `{"request": ..., "response": ...}` pair
(the request body and the `chat.completion` returned), or as a stored completion
(`GET /v1/chat/completions`, a `chat.completion` object) carrying its request's `messages`
(`GET /v1/chat/completions/{id}/messages`, a list or that list response). A file may be such a
list response (`{"object": "list", "data": [...]}`). Calls are grouped by a conversation key
of the request's `metadata`; each call repeats the history (`calls.Conversations`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from flowrate.inputs.formats import Record
from flowrate.inputs.sources.base import Item, Reader
from flowrate.inputs.sources.calls import Call, Conversations, failed_reply, seconds_of
from flowrate.inputs.sources.chat import (
    CONVERSATION_KEYS,
    Unreadable,
    conversation_key,
    field_of,
    first_record,
    keyless_notice,
    records_of,
)
from flowrate.inputs.sources.messages import ToolNames, message_list


class OpenAIChatReader(Reader):
    """Chat Completions calls, grouped into conversations."""

    name = "openai-chat"
    title = "OpenAI Chat Completions logs: request/response pairs, stored completions"
    reads = "request.messages/metadata/user, response.choices[0].message/created/model; or a chat.completion with its messages"
    marks = frozenset({"request", "response", "choices"})

    def problem(self, item: Item) -> str | None:
        raw = first_record(item)
        if not isinstance(raw, dict):
            return "a call must be an object"
        if raw.get("object") == "chat.completion":
            return None if "messages" in raw else "a chat.completion without its request's `messages`"
        request, response = raw.get("request"), raw.get("response")
        if not isinstance(request, dict) or "messages" not in request:
            return "has no `request` with `messages`"
        if not isinstance(response, dict) or not ("choices" in response or isinstance(response.get("error"), dict)):
            return "has no `response` with `choices` (or the `error` of a failed call)"
        return None

    def read(self, items: Iterable[Item | Record]) -> Iterator[Record]:
        conversations = Conversations(self.name)
        shown = None
        for item in records_of(items):
            if isinstance(item, Record):
                yield item
                continue
            shown = item.source.path
            try:
                call = self._call(item)
            except Unreadable as error:
                conversations.problem(item, str(error))
                continue
            conversations.add(call, fallback_key=call.metadata.get("completion_id") or item.default_id)
        yield from conversations.records()
        self.notices.extend(conversations.notices)
        if shown is not None:
            self.notices.extend(keyless_notice(conversations, shown, f"request.metadata {'/'.join(CONVERSATION_KEYS)}"))

    def _call(self, item: Item) -> Call:
        raw = item.raw
        if not isinstance(raw, dict):
            raise Unreadable("record", "a call must be an object")
        if raw.get("object") == "chat.completion":
            request, response, prefix = raw, raw, ""
            given = raw.get("messages")
            messages = given.get("data") if isinstance(given, dict) else given
        else:
            request = field_of(raw, "request", dict, "request")
            response = field_of(raw, "response", dict, "response")
            messages, prefix = request.get("messages"), "response."
        tools = ToolNames()
        history = message_list(_refusals_as_text(messages), "request.messages" if prefix else "messages", tools)
        key = conversation_key(request.get("metadata"), given=self.given_keys)
        metadata = _metadata(request, response)
        created_s = seconds_of(response.get("created"))
        error = response.get("error")
        if "choices" not in response and isinstance(error, dict):  # the API's error object: the user got nothing
            why = str(error.get("message") or error.get("code") or error.get("type") or "an error")
            return Call(key, history, [failed_reply(why)], item, created_s, created_s, metadata, failed=True)
        choices = field_of(response, "choices", list, f"{prefix}choices")
        if not choices:
            raise Unreadable(f"{prefix}choices", "is empty")
        message = field_of(choices[0], "message", dict, f"{prefix}choices[0].message")
        output = message_list(_refusals_as_text([message]), f"{prefix}choices[0]", tools, "assistant")
        return Call(key, history, output, item, created_s, created_s, metadata)


def _refusals_as_text(messages: Any) -> Any:
    """The messages with an assistant's `refusal` (the model declined, `content` null) as its
    content: the refusal is what the user read, the reply to judge."""
    if not isinstance(messages, list):
        return messages
    return [
        {**message, "content": message["refusal"]}
        if isinstance(message, dict) and message.get("content") is None and isinstance(message.get("refusal"), str)
        else message
        for message in messages
    ]


def _metadata(request: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    given = request.get("metadata")
    metadata: dict[str, Any] = dict(given) if isinstance(given, dict) else {}
    for name, value in (
        ("model", response.get("model") or request.get("model")),
        ("user", request.get("user")),
        ("completion_id", response.get("id")),
    ):
        if isinstance(value, str) and value:
            metadata.setdefault(name, value)
    return metadata
