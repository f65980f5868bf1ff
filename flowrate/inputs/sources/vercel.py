"""The Vercel AI SDK's own spans (`experimental_telemetry`: https://ai-sdk.dev/docs/ai-sdk-core/telemetry),
read by the span readers wherever they appear: as the SDK writes them, and kept beside the
OpenInference attributes `@arizeai/openinference-vercel`'s span processor adds.

A call is a span of `ai.operationId` `ai.generateText.doGenerate`, `ai.streamText.doStream`,
`ai.generateObject.doGenerate` or `ai.streamObject.doStream` (one call to the model; the outer
`ai.generateText` span repeats its first input and last output, and `ai.toolCall` spans repeat
what the next call's input holds). Its input is `ai.prompt.messages` (the SDK's messages), its
output `ai.response.text` (or `ai.response.object`) with the calls of `ai.response.toolCalls`.
The metadata given to `experimental_telemetry` is on every span as `ai.telemetry.metadata.*`:
`sessionId` is the conversation's key, as the Langfuse and Braintrust guides to the SDK name it.
"""

from __future__ import annotations

from typing import Any

import orjson

from flowrate.inputs.sources.chat import Unreadable
from flowrate.inputs.sources.messages import ToolNames, normalised

OPERATION = "ai.operationId"
CALLS = frozenset(
    {
        "ai.generateText.doGenerate",
        "ai.streamText.doStream",
        "ai.generateObject.doGenerate",
        "ai.streamObject.doStream",
    }
)
USER = "ai.telemetry.metadata.userId"


def is_vercel_call(attributes: dict[str, Any]) -> bool:
    """The span is one of the AI SDK's calls to a model."""
    return attributes.get(OPERATION) in CALLS


def vercel_messages(attributes: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The input and output messages of an AI SDK call span; `Unreadable` naming the attribute."""
    prompt = attributes.get("ai.prompt.messages")
    if prompt is None:
        raise Unreadable("attribute ai.prompt.messages", "is missing: the SDK records it unless recordInputs is false")
    tools = ToolNames()
    inputs = normalised(_json(prompt, "ai.prompt.messages"), "attribute ai.prompt.messages", tools)
    text = attributes.get("ai.response.text", attributes.get("ai.response.object"))
    calls = attributes.get("ai.response.toolCalls")
    listed = (
        normalised(_json(calls, "ai.response.toolCalls"), "attribute ai.response.toolCalls", tools, "assistant")
        if calls is not None
        else []
    )
    if text is None and not listed:
        if "ai.response.finishReason" not in attributes:
            return inputs, []  # the call did not end (an error): its input is kept, it has no reply
        raise Unreadable("attribute ai.response.text", "is missing: the SDK records it unless recordOutputs is false")
    reply: dict[str, Any] = {"role": "assistant", "content": text if text else None}
    found = [call for message in listed for call in message.get("tool_calls") or ()]
    if found:
        reply["tool_calls"] = found
    return inputs, [reply]


def _json(value: Any, attribute: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError as error:
        raise Unreadable(f"attribute {attribute}", f"not JSON ({error})") from None
