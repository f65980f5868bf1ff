"""Spans in OTLP/JSON, as the OpenTelemetry Collector's file exporter writes them: an
`ExportTraceServiceRequest` (`resourceSpans`) or `ExportLogsServiceRequest` (`resourceLogs`)
document, whole or one a line. Ids are hex and 64-bit numbers are strings, as the OTLP/JSON
encoding says (opentelemetry-proto, docs/specification.md, "JSON Protobuf Encoding").

`SpanReader` is the frame of a reader of such spans: it reads every span of a file (with the
log records that name a span, which may come before or after it), finds each call's
conversation key on the span or an ancestor, and builds the conversations with
`calls.Conversations`, one problem a conversation when a span of it is broken.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, get_args

import orjson

from flowrate.inputs.formats import Record, Role
from flowrate.inputs.sources.base import Item, Reader
from flowrate.inputs.sources.calls import Call, Conversations, seconds_of

OTLP_MARKS = frozenset({"resourceSpans", "resourceLogs"})
ROLES: tuple[str, ...] = get_args(Role)


@dataclass
class Event:
    """A log record that names a span: its `name` (`eventName`), `body` and `attributes`, decoded."""

    name: str
    body: Any
    attributes: dict[str, Any]


@dataclass
class Span:
    """One span, decoded: `item` is the line it was read from, its `where` naming the span;
    `events` the log records that name it, in the order read."""

    trace_id: str
    span_id: str
    parent_id: str | None
    start_s: float | None
    end_s: float | None
    attributes: dict[str, Any]
    resource: dict[str, Any]
    item: Item
    events: list[Event] = field(default_factory=list)


class Broken(Exception):
    """A span that is a call but cannot be read: the message names the attribute or event."""


def value_of(value: Any) -> Any:
    """An OTLP `AnyValue` ({"stringValue": …}, {"intValue": "7"}, {"arrayValue": {"values": […]}},
    {"kvlistValue": {"values": [{key, value}]}}, …) as plain Python; None when empty."""
    if not isinstance(value, dict):
        return None
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        try:
            return int(value["intValue"])
        except (TypeError, ValueError):
            return None
    if "doubleValue" in value:
        return value["doubleValue"]
    if "boolValue" in value:
        return value["boolValue"]
    if "arrayValue" in value:
        return [value_of(entry) for entry in _dict(value["arrayValue"]).get("values") or [] if isinstance(entry, dict)]
    if "kvlistValue" in value:
        return attributes_of(_dict(value["kvlistValue"]).get("values"))
    return value.get("bytesValue")


def attributes_of(pairs: Any) -> dict[str, Any]:
    """OTLP attributes ([{key, value}]) as a mapping of key to plain value."""
    if not isinstance(pairs, list):
        return {}
    return {pair["key"]: value_of(pair.get("value")) for pair in pairs if isinstance(pair, dict) and "key" in pair}


def hex_id(value: Any) -> str:
    """A trace or span id as lowercase hex: OTLP/JSON writes hex; protobuf's own JSON mapping
    (`MessageToJson` on the message) writes base64, which is read too."""
    text = str(value or "")
    try:
        bytes.fromhex(text)
        return text.lower()
    except ValueError:
        pass
    try:
        return base64.b64decode(text, validate=True).hex()
    except (binascii.Error, ValueError):
        return text


def otlp_problem(item: Item) -> str | None:
    """None when `item` is an OTLP/JSON export document; else what it lacks."""
    raw = item.raw
    if not isinstance(raw, dict) or not any(isinstance(raw.get(mark), list) for mark in OTLP_MARKS):
        return "has no `resourceSpans` list (an OTLP/JSON trace export)"
    return None


def spans_of(items: Iterable[Item | Record], format: str) -> Iterator[Span | Record]:
    """Every span of the items, each with the log records naming it; an
    item that is no OTLP document is a problem `Record` (named with `format`)."""
    spans: list[Span] = []
    logs: dict[tuple[str, str], list[Event]] = {}
    for item in items:
        if isinstance(item, Record):
            yield item
            continue
        problem = otlp_problem(item)
        if problem is not None:
            yield Record(source=item.source, format=format, problems=[f"{item.where}: {problem}"])
            continue
        spans.extend(_spans(item))
        for key, event in _log_events(item.raw):
            logs.setdefault(key, []).append(event)
    for span in spans:
        span.events.extend(logs.get((span.trace_id, span.span_id), ()))
        yield span


def raw_spans(document: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Each span object of an OTLP/JSON trace export, with its resource object."""
    for resource_spans in _dicts(document.get("resourceSpans")):
        resource = _dict(resource_spans.get("resource"))
        for scope_spans in _dicts(resource_spans.get("scopeSpans")):
            for raw in _dicts(scope_spans.get("spans")):
                yield resource, raw


def _spans(item: Item) -> Iterator[Span]:
    resources: dict[int, dict[str, Any]] = {}
    for resource, raw in raw_spans(item.raw):
        if id(resource) not in resources:
            resources[id(resource)] = attributes_of(resource.get("attributes"))
        span_id = hex_id(raw.get("spanId"))
        yield Span(
            trace_id=hex_id(raw.get("traceId")),
            span_id=span_id,
            parent_id=hex_id(raw["parentSpanId"]) if raw.get("parentSpanId") else None,
            start_s=seconds_of(raw.get("startTimeUnixNano")),
            end_s=seconds_of(raw.get("endTimeUnixNano")),
            attributes=attributes_of(raw.get("attributes")),
            resource=resources[id(resource)],
            item=Item(item.source, raw, item.default_id, f"{item.where}: span {span_id or '(no spanId)'}"),
        )


def _log_events(document: dict[str, Any]) -> Iterator[tuple[tuple[str, str], Event]]:
    for resource_logs in _dicts(document.get("resourceLogs")):
        for scope_logs in _dicts(resource_logs.get("scopeLogs")):
            for raw in _dicts(scope_logs.get("logRecords")):
                attributes = attributes_of(raw.get("attributes"))
                name = raw.get("eventName") or attributes.get("event.name") or ""
                key = (hex_id(raw.get("traceId")), hex_id(raw.get("spanId")))
                yield key, Event(str(name), value_of(raw.get("body")), attributes)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [entry for entry in value if isinstance(entry, dict)] if isinstance(value, list) else []


def name_tool_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with each tool result (role `tool`, `tool_call_id`) named after the tool
    call of that id, when it gives no name of its own."""
    names: dict[str, str] = {}
    for message in messages:
        for call in message.get("tool_calls") or []:
            if call.get("id"):
                names[str(call["id"])] = str((call.get("function") or {}).get("name"))
        if message.get("role") == "tool" and not message.get("name") and message.get("tool_call_id") in names:
            message["name"] = names[message["tool_call_id"]]
    return messages


def text_of(value: Any) -> str:
    """A message's content, a tool's arguments or result as text: text as it is, a list of
    OpenAI content parts as their text, anything else as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(part, dict) and "text" in part for part in value):
        return "\n".join(str(part["text"]) for part in value)
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


class SpanReader(Reader):
    """Calls to a model read from spans, grouped into conversations by `keys` (the first span
    attribute of these found on the call's span or an ancestor); without one, a trace is a
    conversation and the run is told so once. `fields` are the metadata read the same way,
    (metadata name, attribute names in order of preference)."""

    marks = OTLP_MARKS
    keys: ClassVar[tuple[str, ...]]
    fields: ClassVar[tuple[tuple[str, tuple[str, ...]], ...]]

    def messages(self, span: Span) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
        """The call's input messages and output messages, in OpenAI's chat shape; None: the span
        is no call to a model. Raises `Broken` naming the attribute that cannot be read."""
        raise NotImplementedError

    def read(self, items: Iterable[Item | Record]) -> Iterator[Record]:
        spans: list[Span] = []
        for read in spans_of(items, self.name):
            if isinstance(read, Record):
                yield read
            else:
                spans.append(read)
        by_id = {(span.trace_id, span.span_id): span for span in spans}
        groups: dict[str, list[tuple[Span, Any]]] = {}
        keyless: Item | None = None
        for span in sorted(spans, key=lambda span: span.start_s or 0.0):
            call: Any
            try:
                call = self.messages(span)
            except Broken as error:
                call = error
            if call is None:
                continue
            key = self._found(span, by_id, self.keys)
            if key is None and keyless is None:
                keyless = span.item
            groups.setdefault(str(key or span.trace_id), []).append((span, call))
        if keyless is not None:
            self.notices.append(
                f"{keyless.source.path}: some spans name no conversation ({' or '.join(self.keys)});"
                " each of their traces is taken as one conversation"
            )
        conversations = Conversations(self.name)
        for key, members in groups.items():
            self._add(conversations, key, members, by_id)
        yield from conversations.records()

    def _add(
        self,
        conversations: Conversations,
        key: str,
        members: list[tuple[Span, Any]],
        by_id: dict[tuple[str, str], Span],
    ) -> None:
        broken = [(span, call) for span, call in members if isinstance(call, Broken)]
        if broken:
            span, error = broken[0]
            more = f" (and {len(broken) - 1} more span(s) of conversation {key!r})" if len(broken) > 1 else ""
            conversations.problem(span.item, f"{error}{more}")
            return
        first = members[0][0]
        metadata: dict[str, Any] = {
            "trace_id": first.trace_id,
            "trace_ids": list(dict.fromkeys(span.trace_id for span, _ in members)),
            "span_ids": [span.span_id for span, _ in members],
        }
        for name, attributes in self.fields:
            found = (self._found(span, by_id, attributes) for span, _ in members)
            value = next((value for value in found if value is not None), None)
            if value is not None:
                metadata[name] = value
        if first.resource.get("service.name") is not None:
            metadata["service_name"] = first.resource["service.name"]
        for span, (messages, output) in members:
            call = Call(key, name_tool_results(messages), output, span.item, span.start_s, span.end_s, metadata)
            conversations.add(call, fallback_key=span.trace_id)

    @staticmethod
    def _found(span: Span, by_id: dict[tuple[str, str], Span], attributes: tuple[str, ...]) -> Any:
        """The first of `attributes` set on `span`, else on its parent, and so up its trace."""
        seen: set[str] = set()
        current: Span | None = span
        while current is not None and current.span_id not in seen:
            seen.add(current.span_id)
            for attribute in attributes:
                value = current.attributes.get(attribute)
                if value is not None and value != "":
                    return value
            current = by_id.get((current.trace_id, current.parent_id)) if current.parent_id else None
        return None
