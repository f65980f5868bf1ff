"""OpenTelemetry GenAI spans in OTLP/JSON (the semantic conventions' gen-ai spans and events:
https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/ and gen-ai-events/).

A call is a span whose `gen_ai.operation.name` is chat, text_completion or generate_content.
Its messages come from, in this order: the current `gen_ai.input.messages`,
`gen_ai.output.messages` and `gen_ai.system_instructions` (JSON text of messages with typed
`parts`), on the span or on its `gen_ai.client.inference.operation.details` event; the older
flattened `gen_ai.prompt.N.*` and `gen_ai.completion.N.*` attributes; or the per-message events `gen_ai.{system,user,assistant,tool}.message` and `gen_ai.choice`, which
opentelemetry-instrumentation-openai-v2 writes as log records naming the span. The Vercel AI
SDK's own spans (`ai.prompt.messages`, `ai.response.*`) are read by `vercel`; the Langfuse SDK's
own spans (v3 and later are OpenTelemetry spans) are calls when `langfuse.observation.type` is
`generation`, their `langfuse.observation.input` and `output` read as a Langfuse export's are.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from flowrate.inputs.sources.base import Item
from flowrate.inputs.sources.chat import Unreadable
from flowrate.inputs.sources.langfuse import generation_messages
from flowrate.inputs.sources.messages import ToolNames, normalised, parts_message
from flowrate.inputs.sources.otlp import ROLES, SESSION_KEYS, Broken, Span, SpanReader, otlp_problem, text_of
from flowrate.inputs.sources.vercel import OPERATION, USER, is_vercel_call, vercel_messages

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
LANGFUSE_TYPE = "langfuse.observation.type"
_SEMCONV = frozenset({"gen_ai.input.messages", "gen_ai.output.messages"})
NOT_CAPTURED = (
    "the instrumentation did not capture the messages (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT turns it"
    " on; Microsoft Agent Framework's ENABLE_SENSITIVE_DATA)"
)
_FLAT = re.compile(r"gen_ai\.(prompt|completion)\.(\d+)\.(.+)")
_FLAT_CALL = re.compile(r"tool_calls\.(\d+)\.(name|arguments|id)")


class OtelReader(SpanReader):
    """OpenTelemetry GenAI spans, the Vercel AI SDK's and the Langfuse SDK's, grouped by
    `gen_ai.conversation.id`, else a session (`otlp.SESSION_KEYS`, then `langfuse.session.id`)."""

    name = "otel"
    title = (
        "OpenTelemetry GenAI spans (also Microsoft Agent Framework's and Google ADK's own), the Vercel AI SDK's and"
        " the Langfuse SDK's, OTLP/JSON (whole export or one per line)"
    )
    reads = (
        "gen_ai.input.messages, gen_ai.output.messages, gen_ai.system_instructions | gen_ai.prompt.N.*,"
        " gen_ai.completion.N.* | gen_ai.*.message and gen_ai.choice log records | the Vercel AI SDK's"
        " ai.prompt.messages, ai.response.text/object/toolCalls | the Langfuse SDK's langfuse.observation.input,"
        " langfuse.observation.output of a generation; gen_ai.conversation.id, session.id,"
        " traceloop.association.properties.session_id, ai.telemetry.metadata.sessionId, metadata.sessionId,"
        " langfuse.session.id, gen_ai.request/response.model, user.id, enduser.id, ai.telemetry.metadata.userId,"
        " langfuse.user.id, langfuse.trace.tags, service.name"
    )
    # langfuse.session.id and langfuse.user.id: what Langfuse's guide has an app set on its own span
    keys = ("gen_ai.conversation.id", *SESSION_KEYS, "langfuse.session.id")
    fields = (
        ("conversation_id", ("gen_ai.conversation.id",)),
        ("session_id", (*SESSION_KEYS, "langfuse.session.id")),
        ("model", ("gen_ai.response.model", "gen_ai.request.model", "langfuse.observation.model.name")),
        ("user", ("user.id", "enduser.id", USER, "langfuse.user.id")),
        ("tags", ("langfuse.trace.tags",)),
    )

    def problem(self, item: Item) -> str | None:
        return otlp_problem(item)

    def complete(self, span: Span) -> bool:
        attributes = span.attributes
        operation = attributes.get("gen_ai.operation.name")
        if (operation is not None and operation not in INFERENCE) or {OPERATION, LANGFUSE_TYPE} & attributes.keys():
            return True  # no call, or the AI SDK's or Langfuse's, whose messages are its attributes
        return bool(_SEMCONV & attributes.keys()) or any(_FLAT.fullmatch(name) for name in attributes)

    def messages(self, span: Span) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
        attributes = span.attributes
        try:
            if is_vercel_call(attributes):
                return vercel_messages(attributes)
            if attributes.get(LANGFUSE_TYPE) == "generation":
                return generation_messages(
                    attributes.get("langfuse.observation.input"),
                    attributes.get("langfuse.observation.output"),
                    "attribute langfuse.observation.input",
                    "attribute langfuse.observation.output",
                )
        except Unreadable as error:
            raise Broken(str(error)) from None
        operation = attributes.get("gen_ai.operation.name")
        details = next((event.attributes for event in span.events if event.name == DETAILS), {})
        semconv = next((found for found in (attributes, details) if _SEMCONV & found.keys()), None)
        flat = any(_FLAT.fullmatch(name) for name in attributes)
        events = any(event.name in EVENT_ROLES or event.name == "gen_ai.choice" for event in span.events)
        if operation not in INFERENCE and not (operation is None and (semconv or flat or events)):
            return None
        if semconv is not None:
            tools = ToolNames()
            instructions = semconv.get("gen_ai.system_instructions")  # most spans carry none
            system = (
                _read({"role": "system", "parts": instructions}, "attribute gen_ai.system_instructions", tools)
                if instructions is not None
                else []
            )
            inputs = _semconv_messages(semconv.get("gen_ai.input.messages"), "gen_ai.input.messages", tools)
            return [*system, *inputs], _semconv_messages(
                semconv.get("gen_ai.output.messages"), "gen_ai.output.messages", tools
            )
        if flat:
            tools = ToolNames()
            return _flat_messages(attributes, "prompt", tools), _flat_messages(attributes, "completion", tools)
        if events:
            return _event_messages(span)
        raise Broken(f"no message content: {NOT_CAPTURED}")


def _semconv_messages(value: Any, attribute: str, tools: ToolNames) -> list[dict[str, Any]]:
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
        try:  # the conventions' shape, read without `normalised` finding it: most of reading a span file
            messages.extend(parts_message(message, attribute, tools))
        except Unreadable as error:  # its place in the list written only now, as it is seldom needed
            raise Broken(
                f"attribute {attribute}[{number - 1}]{error.field.removeprefix(attribute)}: {error.why}"
            ) from None
    return messages


def _read(message: Any, path: str, tools: ToolNames) -> list[dict[str, Any]]:
    """`messages.normalised`, a message that cannot be read `Broken` naming its attribute or event."""
    try:
        return normalised(message, path, tools)
    except Unreadable as error:
        raise Broken(str(error)) from None


def _flat_messages(attributes: dict[str, Any], side: str, tools: ToolNames) -> list[dict[str, Any]]:
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
        messages.extend(_read(message, f"attribute gen_ai.{side}.{number}", tools))
    return messages


def _event_messages(span: Span) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The input and output messages of a span's `gen_ai.*.message` and `gen_ai.choice` events
    (the first choice only); an event without content was not captured."""
    inputs: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    tools = ToolNames()
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
        if body.get("content") is None and not isinstance(body.get("tool_calls"), list):
            raise Broken(f"event {event.name}: no content: {NOT_CAPTURED}")
        message = {**body, "role": role, "content": _content(body.get("content"))}
        (outputs if event.name == "gen_ai.choice" else inputs).extend(_read(message, f"event {event.name}", tools))
    return inputs, outputs


def _content(content: Any) -> Any:
    """An event's content: text or parts as they are, anything else (a tool's result as an
    object) as its JSON text."""
    return content if content is None or isinstance(content, str | list) else text_of(content)
