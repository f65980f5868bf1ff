"""OpenInference spans (Arize Phoenix and the openinference-instrumentation-* libraries) in
OTLP/JSON, following the OpenInference semantic conventions
(https://github.com/Arize-ai/openinference/blob/main/spec/semantic_conventions.md).

A call is a span of `openinference.span.kind` LLM; its messages are the flattened
`llm.input_messages.N.message.*` and `llm.output_messages.N.message.*` attributes; its
conversation is `session.id` (`using_session`). A span `@arizeai/openinference-vercel` made of the
Vercel AI SDK's keeps the SDK's attributes, which are read instead (`vercel`: its OpenInference
messages lose the reply's text and wrap a tool's result), its conversation
`ai.telemetry.metadata.sessionId`.
"""

from __future__ import annotations

import re
from typing import Any

from flowrate.inputs.sources.base import Item
from flowrate.inputs.sources.chat import Unreadable
from flowrate.inputs.sources.messages import ToolNames, openai_message
from flowrate.inputs.sources.otlp import (
    ROLES,
    SESSION_KEYS,
    Broken,
    Span,
    SpanReader,
    attributes_of,
    otlp_problem,
    raw_spans,
    text_of,
)
from flowrate.inputs.sources.vercel import USER, is_vercel_call, vercel_messages

KIND = "openinference.span.kind"
REDACTED = "__REDACTED__"  # what OPENINFERENCE_HIDE_INPUT_TEXT and its kin write instead of the text
_MESSAGE = re.compile(r"llm\.(input|output)_messages\.(\d+)\.message\.(.+)")
_CALL = re.compile(r"tool_calls\.(\d+)\.tool_call\.(id|function\.name|function\.arguments)")
_CONTENTS = re.compile(r"contents\.(\d+)\.message_content\.(type|text)")


class OpenInferenceReader(SpanReader):
    """OpenInference LLM spans, grouped by a session (`otlp.SESSION_KEYS`: `session.id` first)."""

    name = "openinference"
    title = "OpenInference spans (Arize Phoenix; the Vercel AI SDK's through openinference-vercel), OTLP/JSON"
    reads = (
        "llm.input_messages.N.message.role/content/contents.M.message_content.text/tool_calls.K.tool_call.function.*,"
        " llm.output_messages.N.message.*, openinference.span.kind | the Vercel AI SDK's attributes"
        " (openinference-vercel); session.id (or metadata.sessionId, ai.telemetry.metadata.sessionId,"
        " traceloop.association.properties.session_id), user.id, ai.telemetry.metadata.userId, llm.model_name,"
        " tag.tags"
    )
    keys = SESSION_KEYS
    fields = (
        ("session_id", SESSION_KEYS),
        ("model", ("llm.model_name",)),
        ("user", ("user.id", USER)),
        ("tags", ("tag.tags",)),
    )

    def problem(self, item: Item) -> str | None:
        problem = otlp_problem(item)
        if problem is not None:
            return problem
        if any(KIND in attributes_of(span.get("attributes")) for _, span in raw_spans(item.raw)):
            return None
        return f"no span has `{KIND}`"

    def complete(self, span: Span) -> bool:
        return True  # its messages are its attributes alone

    def messages(self, span: Span) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
        if span.attributes.get(KIND) != "LLM":
            return None
        if is_vercel_call(span.attributes):
            try:
                return vercel_messages(span.attributes)
            except Unreadable as error:
                raise Broken(str(error)) from None
        tools = ToolNames()
        inputs, outputs = _messages(span.attributes, "input", tools), _messages(span.attributes, "output", tools)
        if not inputs:
            raise Broken(
                "no llm.input_messages: the instrumentation hid them"
                " (OPENINFERENCE_HIDE_INPUT_MESSAGES, OPENINFERENCE_HIDE_INPUTS)"
            )
        return inputs, outputs


def _messages(attributes: dict[str, Any], side: str, tools: ToolNames) -> list[dict[str, Any]]:
    """The messages of `llm.{side}_messages.N.message.*`, in the order of N."""
    found: dict[int, dict[str, Any]] = {}
    for name, value in attributes.items():
        match = _MESSAGE.fullmatch(name)
        if match is None or match[1] != side:
            continue
        fields = found.setdefault(int(match[2]), {"calls": {}, "contents": {}})
        if call := _CALL.fullmatch(match[3]):
            fields["calls"].setdefault(int(call[1]), {})[call[2].removeprefix("function.")] = value
        elif content := _CONTENTS.fullmatch(match[3]):
            fields["contents"].setdefault(int(content[1]), {})[content[2]] = value
        else:
            fields[match[3]] = value
    where = f"attribute llm.{side}_messages"
    return [_message(found[number], f"{where}.{number}.message", tools) for number in sorted(found)]


def _message(fields: dict[str, Any], where: str, tools: ToolNames) -> dict[str, Any]:
    role = fields.get("role")
    if not role:
        raise Broken(f"{where}.role: is missing")
    if role not in ROLES:
        raise Broken(f"{where}.role: unknown role {role!r} (expected {', '.join(ROLES)})")
    content = fields.get("content")
    if content is None and fields["contents"]:
        texts = [
            part.get("text") for _, part in sorted(fields["contents"].items()) if part.get("type", "text") == "text"
        ]
        content = "\n".join(str(text) for text in texts if text is not None)
    if content == REDACTED:
        raise Broken(f"{where}.content: hidden by the instrumentation ({REDACTED})")
    message: dict[str, Any] = {"role": role, "content": None if content is None else text_of(content)}
    if fields["calls"]:
        message["tool_calls"] = [
            {
                "id": call.get("id"),
                "function": {"name": str(call.get("name") or "tool"), "arguments": text_of(call.get("arguments"))},
            }
            for _, call in sorted(fields["calls"].items())
        ]
    for name in ("name", "tool_call_id"):
        if fields.get(name) is not None:
            message[name] = str(fields[name])
    try:  # the attributes made into OpenAI's chat shape, read as every source's messages are
        return openai_message(message, where, tools)
    except Unreadable as error:
        raise Broken(str(error)) from None
