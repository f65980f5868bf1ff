"""Spans in OTLP/JSON, as the OpenTelemetry Collector's file exporter writes them: an
`ExportTraceServiceRequest` (`resourceSpans`) or `ExportLogsServiceRequest` (`resourceLogs`)
document, whole or one a line. Ids are hex and 64-bit numbers are strings, as the OTLP/JSON
encoding says (opentelemetry-proto, docs/specification.md, "JSON Protobuf Encoding").

`SpanReader` is the frame of a reader of such spans: it reads the spans of a file as they come (with the
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
# The span attributes that name a session, as the tools write them: `session.id` (OpenInference's
# `using_session`, the Langfuse SDK's TRACE_SESSION_ID), OpenLLMetry's association property
# (traceloop-sdk `set_association_properties({"session_id": ...})`), the Vercel AI SDK's telemetry
# metadata (`experimental_telemetry: {metadata: {sessionId}}`), and that metadata as
# @arizeai/openinference-vercel 2.8 copies it (`metadata.<key>`, its getMetadataAttributes)
SESSION_KEYS = (
    "session.id",
    "traceloop.association.properties.session_id",
    "ai.telemetry.metadata.sessionId",
    "metadata.sessionId",
)
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


def marked_problem(item: Item, attribute: str) -> str | None:
    """None when `item` is an OTLP/JSON export with a span carrying `attribute` (the mark of
    one instrumentation's calls); else what it lacks."""
    problem = otlp_problem(item)
    if problem is not None:
        return problem
    if any(attribute in attributes_of(span.get("attributes")) for _, span in raw_spans(item.raw)):
        return None
    return f"no span has `{attribute}`"


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
        """The call's input messages and output messages, as `messages` reads them (OpenAI's chat
        shape, each tool result named after its call); None: the span
        is no call to a model. Raises `Broken` naming the attribute that cannot be read."""
        raise NotImplementedError

    def complete(self, span: Span) -> bool:
        """True when `span` alone says all `messages` needs (its content is in its attributes, or
        it is no call): it is read at once; else it waits for the log records naming it, which
        may come later in the file."""
        return False

    def read(self, items: Iterable[Item | Record]) -> Iterator[Record]:
        spans = _SpanStream(self)
        for item in items:
            if isinstance(item, Record):
                yield item
                continue
            problem = otlp_problem(item)
            if problem is not None:
                yield Record(source=item.source, format=self.name, problems=[f"{item.where}: {problem}"])
                continue
            spans.take(item)
        yield from spans.records()


class SpanTree:
    """Each span's parent and the attributes of `read_from` it sets (the conversation keys and
    the metadata fields), for finding what a span's ancestors set without keeping the spans."""

    def __init__(self, read_from: set[str]):
        self.read_from = read_from
        self.links: dict[tuple[str, str], tuple[str | None, dict[str, Any] | None]] = {}

    def add(self, span: Span) -> None:
        """Keep `span`'s parent and what it sets of `read_from`."""
        read = {name: span.attributes[name] for name in self.read_from if name in span.attributes}
        self.links[(span.trace_id, span.span_id)] = (span.parent_id, read or None)

    def found(self, span: Span, attributes: tuple[str, ...]) -> Any:
        """The first of `attributes` set on `span`, else on its parent, and so up its trace."""
        return self._walk(span, attributes)[0]

    def known(self, span: Span, keys: tuple[str, ...]) -> bool:
        """The span's ancestors are known up to the first that sets one of `keys`, or to the root."""
        return self._walk(span, keys)[1]

    def _walk(self, span: Span, attributes: tuple[str, ...]) -> tuple[Any, bool]:
        """What `found` finds, and whether the walk ended at a span that sets it or at the root
        (False: at a parent not read yet)."""
        parent: str | None = span.parent_id
        read: dict[str, Any] | None = span.attributes
        seen: set[str] = set()
        while True:
            for attribute in attributes:
                value = (read or {}).get(attribute)
                if value is not None and value != "":
                    return value, True
            if parent is None or parent in seen:
                return None, True
            seen.add(parent)
            link = self.links.get((span.trace_id, parent))
            if link is None:
                return None, False
            parent, read = link


class _SpanStream:
    """The spans of one file as they are read, turned into calls of `calls.Conversations` at once
    when a span says all it needs and its ancestors up to the conversation key are known, else
    when the file has been read. What is held besides the conversations' longest histories is
    each span's parent and the attributes the keys and fields are read from, the log records,
    and the spans that wait. On bench/sources.py's 100,000 spans (one a call, the key on it) the
    reader held every span of the file before: 1,265 MB peak RSS against 54 MB for the same
    conversations as flowrate's JSONL."""

    def __init__(self, reader: SpanReader):
        self.reader = reader
        self.keys = (*reader.given_keys, *reader.keys)  # `--conversation-key` first
        self.tree = SpanTree({*self.keys, *(name for _, names in reader.fields for name in names)})
        self.logs: dict[tuple[str, str], list[Event]] = {}
        self.waiting: list[Span] = []
        self.conversations = Conversations(reader.name)
        self.broken: dict[str, tuple[Item, Broken, int]] = {}  # by conversation: its first broken span, how many
        self.ids: dict[str, dict[str, list[str]]] = {}  # by conversation: its trace and span ids
        self.keyless: Item | None = None

    def take(self, item: Item) -> None:
        """The spans and log records of one OTLP/JSON document."""
        for key, event in _log_events(item.raw):
            self.logs.setdefault(key, []).append(event)
        spans = list(_spans(item))
        for span in spans:
            self.tree.add(span)
        for span in spans:
            if self.reader.complete(span) and self.tree.known(span, self.keys):
                self._call(span)
            else:
                self.waiting.append(span)

    def records(self) -> Iterator[Record]:
        """The conversations, once every span of the file has been taken."""
        for span in sorted(self.waiting, key=lambda span: span.start_s or 0.0):
            span.events.extend(self.logs.get((span.trace_id, span.span_id), ()))
            self._call(span)
        for key, (item, error, count) in self.broken.items():
            self.conversations.drop(key)
            more = f" (and {count - 1} more span(s) of conversation {key!r})" if count > 1 else ""
            self.conversations.problem(item, f"{error}{more}")
        if self.keyless is not None:
            self.reader.notices.append(
                f"{self.keyless.source.path}: some spans name no conversation ({' or '.join(self.keys)});"
                " each of their traces is taken as one conversation"
            )
        yield from self.conversations.records()
        self.reader.notices.extend(self.conversations.notices)

    def _call(self, span: Span) -> None:
        call: Any
        try:
            call = self.reader.messages(span)
        except Broken as error:
            call = error
        if call is None:
            return
        key = self.tree.found(span, self.keys)
        if key is None and self.keyless is None:
            self.keyless = span.item
        group = str(key or span.trace_id)
        if isinstance(call, Broken):
            first = self.broken.get(group)
            self.broken[group] = (first[0], first[1], first[2] + 1) if first else (span.item, call, 1)
            return
        if group in self.broken:
            return
        ids = self.ids.setdefault(group, {"trace_ids": [], "span_ids": []})
        if span.trace_id not in ids["trace_ids"]:
            ids["trace_ids"].append(span.trace_id)
        ids["span_ids"].append(span.span_id)
        # the id lists are shared by every call of the conversation: `Conversations` keeps the
        # first call's metadata (copied, not deeply), so they grow with the calls that follow
        metadata: dict[str, Any] = {"trace_id": ids["trace_ids"][0], **ids}
        for name, attributes in self.reader.fields:
            value = self.tree.found(span, attributes)
            if value is not None:
                metadata[name] = value
        if span.resource.get("service.name") is not None:
            metadata["service_name"] = span.resource["service.name"]
        messages, output = call
        made = Call(None if key is None else group, messages, output, span.item, span.start_s, span.end_s, metadata)
        self.conversations.add(made, fallback_key=span.trace_id)
