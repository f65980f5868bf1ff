"""OpenTelemetry GenAI spans in OTLP/JSON (the semantic conventions' gen-ai spans and events:
https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/ and gen-ai-events/).

A call is a span whose `gen_ai.operation.name` is chat, text_completion or generate_content.
Its messages come from, in this order: the current `gen_ai.input.messages`,
`gen_ai.output.messages` and `gen_ai.system_instructions` (JSON text of messages with typed
`parts`), on the span or on its `gen_ai.client.inference.operation.details` event; the older
flattened `gen_ai.prompt.N.*` and `gen_ai.completion.N.*` attributes; or the per-message events `gen_ai.{system,user,assistant,tool}.message` and `gen_ai.choice`, which
opentelemetry-instrumentation-openai-v2 writes as log records naming the span.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from flowrate.inputs.sources.base import Item
from flowrate.inputs.sources.otlp import ROLES, SESSION_KEYS, Broken, Span, SpanReader, otlp_problem, text_of

INFERENCE = frozenset({"chat", "text_completion", "generate_content"})
EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
# the event util-genai writes with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=event_only,
# holding the messages as attributes of its own (a list, not JSON text) instead of the span's
DETAILS = "gen_ai.client.inference.operation.details"
_SEMCONV = frozenset({"gen_ai.input.messages", "gen_ai.output.messages"})
NOT_CAPTURED = (
    "the instrumentation did not capture the messages (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT turns it on)"
)
_FLAT = re.compile(r"gen_ai\.(prompt|completion)\.(\d+)\.(.+)")
_FLAT_CALL = re.compile(r"tool_calls\.(\d+)\.(name|arguments|id)")


class OtelReader(SpanReader):
    """OpenTelemetry GenAI spans, grouped by `gen_ai.conversation.id`, else a session (`otlp.SESSION_KEYS`)."""

    name = "otel"
    title = "OpenTelemetry GenAI spans, OTLP/JSON (whole export or one per line)"
    reads = (
        "gen_ai.input.messages, gen_ai.output.messages, gen_ai.system_instructions | gen_ai.prompt.N.*,"
        " gen_ai.completion.N.* | gen_ai.*.message and gen_ai.choice log records; gen_ai.conversation.id,"
        " session.id, traceloop.association.properties.session_id, ai.telemetry.metadata.sessionId,"
        " metadata.sessionId, gen_ai.request/response.model, user.id, enduser.id, service.name"
    )
    keys = ("gen_ai.conversation.id", *SESSION_KEYS)
    fields = (
        ("conversation_id", ("gen_ai.conversation.id",)),
        ("session_id", SESSION_KEYS),
        ("model", ("gen_ai.response.model", "gen_ai.request.model")),
        ("user", ("user.id", "enduser.id")),
    )

    def problem(self, item: Item) -> str | None:
        return otlp_problem(item)

    def complete(self, span: Span) -> bool:
        attributes = span.attributes
        operation = attributes.get("gen_ai.operation.name")
        if operation is not None and operation not in INFERENCE:
            return True  # no call
        return bool(_SEMCONV & attributes.keys()) or any(_FLAT.fullmatch(name) for name in attributes)

    def messages(self, span: Span) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
        attributes = span.attributes
        operation = attributes.get("gen_ai.operation.name")
        details = next((event.attributes for event in span.events if event.name == DETAILS), {})
        semconv = next((found for found in (attributes, details) if _SEMCONV & found.keys()), None)
        flat = any(_FLAT.fullmatch(name) for name in attributes)
        events = any(event.name in EVENT_ROLES or event.name == "gen_ai.choice" for event in span.events)
        if operation not in INFERENCE and not (operation is None and (semconv or flat or events)):
            return None
        if semconv is not None:
            instructions = semconv.get("gen_ai.system_instructions")
            system = _parts_message("system", instructions, "attribute gen_ai.system_instructions")
            inputs = _semconv_messages(semconv.get("gen_ai.input.messages"), "gen_ai.input.messages")
            return [*system, *inputs], _semconv_messages(
                semconv.get("gen_ai.output.messages"), "gen_ai.output.messages"
            )
        if flat:
            return _flat_messages(attributes, "prompt"), _flat_messages(attributes, "completion")
        if events:
            return _event_messages(span)
        raise Broken(f"no message content: {NOT_CAPTURED}")


def _semconv_messages(value: Any, attribute: str) -> list[dict[str, Any]]:
    """The messages of a `gen_ai.input.messages` / `gen_ai.output.messages` attribute."""
    if value is None:
        return []
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError as error:
            raise Broken(f"attribute {attribute}: not JSON ({error})") from None
    if not isinstance(value, list):
        raise Broken(f"attribute {attribute}: must be a list of messages")
    messages: list[dict[str, Any]] = []
    for number, message in enumerate(value, start=1):
        where = f"attribute {attribute}: message {number}"
        if not isinstance(message, dict):
            raise Broken(f"{where}: must be an object")
        role = message.get("role")
        if not role:
            raise Broken(f"{where}: has no role")
        if role not in ROLES:
            raise Broken(f"{where}: unknown role {role!r} (expected {', '.join(ROLES)})")
        messages.extend(_parts_message(role, message.get("parts"), where))
    return messages


def _parts_message(role: str, parts: Any, where: str) -> list[dict[str, Any]]:
    """One message of `parts` (text, tool_call, tool_call_response; others, such as reasoning or
    blobs, are not shown to the judge): tool call responses are each a `tool` message."""
    if parts is None:
        return []
    if isinstance(parts, str):  # gen_ai.system_instructions is JSON text
        try:
            parts = orjson.loads(parts)
        except orjson.JSONDecodeError as error:
            raise Broken(f"{where}: not JSON ({error})") from None
    if not isinstance(parts, list):
        raise Broken(f"{where}: parts must be a list")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            texts.append(text_of(part.get("content")))
        elif kind == "tool_call":
            function = {"name": str(part.get("name") or "tool"), "arguments": text_of(part.get("arguments"))}
            calls.append({"id": part.get("id"), "function": function})
        elif kind == "tool_call_response":
            results.append({"role": "tool", "tool_call_id": part.get("id"), "content": text_of(part.get("response"))})
    if results:
        return results
    if not texts and not calls:
        return []
    message: dict[str, Any] = {"role": role, "content": "\n".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    return [message]


def _flat_messages(attributes: dict[str, Any], side: str) -> list[dict[str, Any]]:
    """The messages of the flattened `gen_ai.prompt.N.*` or `gen_ai.completion.N.*` attributes."""
    found: dict[int, dict[str, Any]] = {}
    for name, value in attributes.items():
        match = _FLAT.fullmatch(name)
        if match is None or match[1] != side:
            continue
        fields = found.setdefault(int(match[2]), {})
        call = _FLAT_CALL.fullmatch(match[3])
        if call is not None:
            fields.setdefault("calls", {}).setdefault(int(call[1]), {})[call[2]] = value
        else:
            fields[match[3]] = value
    messages = []
    for number in sorted(found):
        fields = found[number]
        role = fields.get("role") or ("assistant" if side == "completion" else None)
        where = f"attribute gen_ai.{side}.{number}.role"
        if not role:
            raise Broken(f"{where}: is missing")
        if role not in ROLES:
            raise Broken(f"{where}: unknown role {role!r} (expected {', '.join(ROLES)})")
        content = fields.get("content")
        message: dict[str, Any] = {"role": role, "content": None if content is None else text_of(content)}
        calls = fields.get("calls") or {}
        if calls:
            message["tool_calls"] = [
                {
                    "id": call.get("id"),
                    "function": {"name": str(call.get("name") or "tool"), "arguments": text_of(call.get("arguments"))},
                }
                for _, call in sorted(calls.items())
            ]
        if fields.get("tool_call_id") is not None:
            message["tool_call_id"] = fields["tool_call_id"]
        messages.append(message)
    return messages


def _event_messages(span: Span) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The input and output messages of a span's `gen_ai.*.message` and `gen_ai.choice` events
    (the first choice only); an event without content was not captured."""
    inputs: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    for event in span.events:
        body: dict[str, Any] = event.body if isinstance(event.body, dict) else {}
        if event.name == "gen_ai.choice":
            if body.get("index") not in (None, 0):
                continue
            body = body["message"] if isinstance(body.get("message"), dict) else {}
            role = body.get("role") or "assistant"
        elif event.name in EVENT_ROLES:
            role = body.get("role") or EVENT_ROLES[event.name]
        else:
            continue
        content = body.get("content")
        calls = body["tool_calls"] if isinstance(body.get("tool_calls"), list) else None
        if content is None and not calls:
            raise Broken(f"event {event.name}: no content: {NOT_CAPTURED}")
        message: dict[str, Any] = {"role": role, "content": None if content is None else text_of(content)}
        if calls:
            message["tool_calls"] = [_event_call(call) for call in calls if isinstance(call, dict)]
        if role == "tool" and body.get("id") is not None:
            message["tool_call_id"] = body["id"]
        (outputs if event.name == "gen_ai.choice" else inputs).append(message)
    return inputs, outputs


def _event_call(call: dict[str, Any]) -> dict[str, Any]:
    function: dict[str, Any] = call["function"] if isinstance(call.get("function"), dict) else {}
    return {
        "id": call.get("id"),
        "function": {"name": str(function.get("name") or "tool"), "arguments": text_of(function.get("arguments"))},
    }
