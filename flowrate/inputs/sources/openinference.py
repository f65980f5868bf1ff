"""OpenInference spans (Arize Phoenix and the openinference-instrumentation-* libraries) in
OTLP/JSON, following the OpenInference semantic conventions
(https://github.com/Arize-ai/openinference/blob/main/spec/semantic_conventions.md).

A call is a span of `openinference.span.kind` LLM; its messages are the flattened
`llm.input_messages.N.message.*` and `llm.output_messages.N.message.*` attributes (an LLM span
with no messages whose output is a request is no call: LlamaIndex's step preparing one); its
conversation is `session.id` (`using_session`). A span `@arizeai/openinference-vercel` made of the
Vercel AI SDK's keeps the SDK's attributes, which are read instead (`vercel`: its OpenInference
messages lose the reply's text and wrap a tool's result), its conversation
`ai.telemetry.metadata.sessionId`.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from flowrate.inputs.sources.base import Item
from flowrate.inputs.sources.chat import Unreadable
from flowrate.inputs.sources.messages import ToolNames, final_answers, openai_message
from flowrate.inputs.sources.otlp import (
    ROLES,
    SESSION_KEYS,
    Broken,
    Span,
    SpanReader,
    marked_problem,
    text_of,
)
from flowrate.inputs.sources.vercel import USER, is_vercel_call, vercel_messages

KIND = "openinference.span.kind"
REDACTED = "__REDACTED__"  # what OPENINFERENCE_HIDE_INPUT_TEXT and its kin write instead of the text
# a message's attributes; AutoGen's tool results are `llm.input_messages.N.function.M`, beside `.message.role`
_MESSAGE = re.compile(r"llm\.(input|output)_messages\.(\d+)\.(?:message\.(.+)|(function\.\d+))")
_CALL = re.compile(r"tool_calls\.(\d+)\.tool_call\.(id|function\.name|function\.arguments)")
_CONTENTS = re.compile(r"contents\.(\d+)\.message_content\.(type|text)")
_RESULT = re.compile(r"function\.(\d+)")  # AutoGen's results, one a `function.N` attribute


class OpenInferenceReader(SpanReader):
    """OpenInference LLM spans, grouped by a session (`otlp.SESSION_KEYS`: `session.id` first)."""

    name = "openinference"
    title = (
        "OpenInference spans (Arize Phoenix; the OpenAI Agents SDK's, agno's, LlamaIndex's, AutoGen's and BeeAI's"
        " through their openinference instrumentations; the Vercel AI SDK's through openinference-vercel), OTLP/JSON"
    )
    reads = (
        "llm.input_messages.N.message.role/content/contents.M.message_content.text/tool_calls.K.tool_call.function.*,"
        " llm.input_messages.N.function.M (AutoGen's tool results), llm.output_messages.N.message.*,"
        " openinference.span.kind | the Vercel AI SDK's attributes"
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
        return marked_problem(item, KIND)

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
        if not inputs and not outputs and _prepares_request(span.attributes):
            return None
        if not inputs:
            raise Broken(
                "no llm.input_messages: the instrumentation hid them"
                " (OPENINFERENCE_HIDE_INPUT_MESSAGES, OPENINFERENCE_HIDE_INPUTS)"
            )
        return inputs, outputs


def _prepares_request(attributes: dict[str, Any]) -> bool:
    """True for an LLM span that calls no model but builds the request another span sends: its
    `output.value` is a request holding `messages` (LlamaIndex's `OpenAI._prepare_chat_with_tools`,
    beside the `achat` that sends it, its messages Python reprs), not a reply."""
    output = attributes.get("output.value")
    if not isinstance(output, str) or not output.startswith('{"messages"'):
        return False
    try:
        request = orjson.loads(output)
    except orjson.JSONDecodeError:
        return False
    return isinstance(request, dict) and isinstance(request.get("messages"), list)


def _messages(attributes: dict[str, Any], side: str, tools: ToolNames) -> list[dict[str, Any]]:
    """The messages of `llm.{side}_messages.N.message.*`, in the order of N."""
    found: dict[int, dict[str, Any]] = {}
    for name, value in attributes.items():
        match = _MESSAGE.fullmatch(name)
        if match is None or match[1] != side:
            continue
        fields = found.setdefault(int(match[2]), {"calls": {}, "contents": {}})
        if match[4] is not None:
            fields[match[4]] = value
        elif call := _CALL.fullmatch(match[3]):
            fields["calls"].setdefault(int(call[1]), {})[call[2].removeprefix("function.")] = value
        elif content := _CONTENTS.fullmatch(match[3]):
            fields["contents"].setdefault(int(content[1]), {})[content[2]] = value
        else:
            fields[match[3]] = value
    where = f"attribute llm.{side}_messages"
    messages: list[dict[str, Any]] = []
    for number in sorted(found):
        fields, path = found[number], f"{where}.{number}.message"
        if fields.get("role") == "function" and any(_RESULT.fullmatch(name) for name in fields):
            messages.extend(_function_results(fields, path, tools))
        else:
            messages.append(_message(fields, path, tools))
    return final_answers(messages)


def _function_results(fields: dict[str, Any], where: str, tools: ToolNames) -> list[dict[str, Any]]:
    """The tool results of an AutoGen `FunctionExecutionResultMessage` as
    openinference-instrumentation-autogen-agentchat writes it: role `function`, each result the
    JSON text of `{"name", "content", "call_id", "is_error"}` in `function.N`."""
    results = []
    for name in sorted((name for name in fields if _RESULT.fullmatch(name)), key=lambda name: int(name[9:])):
        try:
            result = orjson.loads(fields[name]) if isinstance(fields[name], str) else fields[name]
        except orjson.JSONDecodeError as error:
            raise Broken(f"{where}.{name}: not JSON ({error})") from None
        if not isinstance(result, dict):
            raise Broken(f"{where}.{name}: expected a function result object")
        text = text_of(result.get("content"))
        text = f"error: {text}" if result.get("is_error") else text
        results.append(tools.result(text, result.get("call_id"), result.get("name")))
    return results


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
