"""Logs of OpenAI's Responses API: a call as a `{"request": ..., "response": ...}` pair (the
request body with its `input`, and the `response` object returned), or as a `response` object
carrying its `input` (text, the items, or the `GET /v1/responses/{id}/input_items` list
response). Items: `message` (`input_text`/`output_text` parts), `function_call`,
`function_call_output`; `reasoning` is never shown to the judge.

A response's `previous_response_id` (or its `conversation`) continues a conversation without
repeating it: the history is the previous response's, then this input and output. Responses
are taken in the order they were created, each after the one it continues (`created_at` ties
are common); one whose previous response is not in the file is
a problem (its conversation's start is missing). Without a chain, calls are grouped by a
conversation key of `metadata`, each repeating the history (`calls.Conversations`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from flowrate.inputs.formats import Record
from flowrate.inputs.formats import _type_name as type_name
from flowrate.inputs.sources.base import Item, Reader
from flowrate.inputs.sources.calls import Call, Conversations, seconds_of
from flowrate.inputs.sources.chat import (
    CONVERSATION_KEYS,
    Unreadable,
    conversation_key,
    field_of,
    first_record,
    keyless_notice,
    records_of,
)
from flowrate.inputs.sources.messages import ToolNames, normalised


@dataclass
class _Response:
    item: Item
    request: dict[str, Any]
    response: dict[str, Any]
    created_s: float | None


class OpenAIResponsesReader(Reader):
    """Responses API calls, chained and grouped into conversations."""

    name = "openai-responses"
    title = "OpenAI Responses API logs, chained by previous_response_id"
    reads = (
        "request.input/instructions/previous_response_id/metadata, response.output (message, function_call; reasoning"
        " hidden)/created_at/model/conversation"
    )
    marks = frozenset({"request", "response", "output", "previous_response_id"})

    def problem(self, item: Item) -> str | None:
        raw = first_record(item)
        if not isinstance(raw, dict):
            return "a call must be an object"
        if raw.get("object") == "response":
            return None if "input" in raw else "a response without its request's `input`"
        request, response = raw.get("request"), raw.get("response")
        if not isinstance(request, dict) or "input" not in request:
            return "has no `request` with `input`"
        if not isinstance(response, dict) or response.get("object") != "response":
            return "has no `response` of object `response`"
        return None

    def read(self, items: Iterable[Item | Record]) -> Iterator[Record]:
        conversations = Conversations(self.name)
        responses: list[_Response] = []
        for item in records_of(items):
            if isinstance(item, Record):
                yield item
                continue
            try:
                responses.append(_unpacked(item))
            except Unreadable as error:
                conversations.problem(item, str(error))
        chains = _Chains(self.given_keys)
        for entry in _chained(responses):
            try:
                conversations.add(
                    chains.call(entry), fallback_key=str(entry.response.get("id") or entry.item.default_id)
                )
            except Unreadable as error:
                conversations.problem(entry.item, str(error))
        yield from conversations.records()
        self.notices.extend(conversations.notices)
        if responses:
            keys = f"previous_response_id, conversation, metadata {'/'.join(CONVERSATION_KEYS)}"
            self.notices.extend(
                keyless_notice(conversations, responses[0].item.source.path, keys, "response", "chain of responses")
            )


def _chained(responses: list[_Response]) -> list[_Response]:
    """`responses` in the order they were created, each after the response it continues: `created_at`
    is whole seconds, and a tool's round trip and the reply after it often share one, written to
    the log in any order."""
    responses = sorted(responses, key=lambda entry: entry.created_s if entry.created_s is not None else float("inf"))
    by_id = {entry.response.get("id"): entry for entry in responses if isinstance(entry.response.get("id"), str)}
    ordered: list[_Response] = []
    taken: set[int] = set()
    for entry in responses:
        before: list[_Response] = []  # its earlier responses not taken yet, latest first
        step: _Response | None = entry
        while step is not None and id(step) not in taken:
            before.append(step)
            taken.add(id(step))
            previous = _previous(step)
            step = by_id.get(previous) if isinstance(previous, str) else None
        ordered.extend(reversed(before))
    return ordered


def _previous(entry: _Response) -> Any:
    return entry.request.get("previous_response_id") or entry.response.get("previous_response_id")


def _unpacked(item: Item) -> _Response:
    raw = item.raw
    if not isinstance(raw, dict):
        raise Unreadable("record", "a call must be an object")
    if raw.get("object") == "response":
        request = response = raw
    else:
        request = field_of(raw, "request", dict, "request")
        response = field_of(raw, "response", dict, "response")
    return _Response(item, request, response, seconds_of(response.get("created_at")))


class _Chains:
    """The history after each response read, by id (and by `conversation` id), so a response
    that continues one starts from it."""

    def __init__(self, given_keys: tuple[str, ...] = ()) -> None:
        self._after: dict[str, tuple[str, list[dict[str, Any]]]] = {}  # id: (conversation key, history)
        self._given_keys = given_keys  # `--conversation-key`

    def call(self, entry: _Response) -> Call:
        request, response = entry.request, entry.response
        previous = _previous(entry)
        thread = response.get("conversation") or request.get("conversation")
        thread_id = thread.get("id") if isinstance(thread, dict) else thread
        key = conversation_key(request.get("metadata"), response.get("metadata"), given=self._given_keys)
        base: list[dict[str, Any]] = []
        if previous is not None and not isinstance(previous, str):
            raise Unreadable("previous_response_id", f"expected text, got {type_name(previous)}")
        if previous:
            if previous not in self._after:
                raise Unreadable(
                    "previous_response_id", f"response {previous!r} is not in the file (the start is missing)"
                )
            key, base = self._after[previous]
        elif isinstance(thread_id, str) and thread_id in self._after:
            key, base = self._after[thread_id]
        elif isinstance(thread_id, str):
            key = thread_id
        tools = ToolNames()
        for message in base:
            tools.called(message)
        instructions = request.get("instructions") or response.get("instructions")
        system = [{"role": "system", "content": instructions}] if isinstance(instructions, str) and not base else []
        given = request.get("input")
        given = given.get("data") if isinstance(given, dict) else given
        messages = [*base, *system, *_items(given, "input", tools)]
        output = _items(field_of(response, "output", list, "response.output"), "response.output", tools, "assistant")
        response_id = str(response.get("id") or entry.item.default_id)
        after = (key or response_id, [*messages, *output])
        self._after[response_id] = after
        if isinstance(thread_id, str):
            self._after[thread_id] = after
        metadata = _metadata(request, response, thread_id)
        return Call(key, messages, output, entry.item, entry.created_s, entry.created_s, metadata)


def _items(given: Any, path: str, tools: ToolNames, default_role: str = "user") -> list[dict[str, Any]]:
    """Input or output items as `calls.Call` messages (text input is one user message)."""
    if not isinstance(given, str | list):
        raise Unreadable(path, f"expected text or a list of items, got {type_name(given)}")
    return normalised(given, path, tools, default_role)


def _metadata(request: dict[str, Any], response: dict[str, Any], thread_id: Any) -> dict[str, Any]:
    given = response.get("metadata") or request.get("metadata")
    metadata: dict[str, Any] = dict(given) if isinstance(given, dict) else {}
    user = response.get("user") or response.get("safety_identifier") or request.get("user")
    for name, value in (("model", response.get("model")), ("user", user), ("conversation", thread_id)):
        if isinstance(value, str) and value:
            metadata.setdefault(name, value)
    return metadata
