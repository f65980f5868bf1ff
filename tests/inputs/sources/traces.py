"""Spans written by the real tools: the `openai` client, instrumented by
opentelemetry-instrumentation-openai-v2 or openinference-instrumentation-openai, talks to the
scripted judge on 127.0.0.1 over one conversation of three turns with one tool call; the
OpenTelemetry SDK's in-memory exporters keep the spans (and log records), and the OTLP
exporter's own encoder turns them into the OTLP/JSON the Collector's file exporter writes."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Iterator
from typing import Any

SYSTEM = "You are Harbor Bank's assistant."
USER_TURNS = ("Hi there", "What is my checking balance?", "Thanks, bye")
TOOL_RESULT = '{"balance": 120}'
#: each turn of `chat` as a reader must give it back: the user's message and the bot's reply
EXCHANGES = [
    ("Hi there", "Hello! How can I help?"),
    ("What is my checking balance?", "Your checking balance is $120."),
    ("Thanks, bye", "Goodbye!"),
]
REPLIES = (
    {"content": "Hello! How can I help?"},
    {"tool_calls": [{"name": "get_balance", "arguments": '{"account": "checking"}'}]},
    {"content": "Your checking balance is $120."},
    {"content": "Goodbye!"},
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_balance",
            "parameters": {"type": "object", "properties": {"account": {"type": "string"}}},
        },
    }
]


def otlp_json(request: Any) -> dict[str, Any]:
    """An encoded `ExportTraceServiceRequest` or `ExportLogsServiceRequest` as OTLP/JSON.

    Protobuf's JSON mapping writes bytes as base64 and enums by name; the OTLP/JSON encoding
    (opentelemetry-proto, docs/specification.md, "JSON Protobuf Encoding") writes trace and
    span ids as hex and enums as integers, so the ids are turned to hex here."""
    from google.protobuf.json_format import MessageToDict

    document = MessageToDict(request, use_integers_for_enums=True)
    for record in _with_ids(document):
        for key in ("traceId", "spanId", "parentSpanId"):
            if record.get(key):
                record[key] = base64.b64decode(record[key]).hex()
    return document


def _with_ids(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for resource in document.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                yield span
                yield from span.get("links", [])
    for resource in document.get("resourceLogs", []):
        for scope in resource.get("scopeLogs", []):
            yield from scope.get("logRecords", [])


class Recorder:
    """A tracer provider (and a logger provider) keeping what is recorded in memory."""

    def __init__(self, service_name: str = "harbor-bot"):
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        resource = Resource.create({"service.name": service_name})
        self.spans = InMemorySpanExporter()
        self.tracer_provider = TracerProvider(resource=resource)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.logs = InMemoryLogRecordExporter()
        self.logger_provider = LoggerProvider(resource=resource)
        self.logger_provider.add_log_record_processor(SimpleLogRecordProcessor(self.logs))

    def traces_json(self) -> dict[str, Any]:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        return otlp_json(encode_spans(self.spans.get_finished_spans()))

    def logs_json(self) -> dict[str, Any]:
        from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs

        return otlp_json(encode_logs(self.logs.get_finished_logs()))


def chat(judge: Any, turn: Any = contextlib.nullcontext, tool: Any = None) -> None:
    """The conversation: three user turns through the real `openai` client, the second answered
    by a tool call, the tool's result and the answer. `turn(number)` is the context each turn
    runs in (the application's span, the session); `tool(call)` the context the tool runs in."""
    import openai

    judge.script(SYSTEM, *REPLIES)
    client = openai.OpenAI(base_url=judge.base_url, api_key="sk-test", max_retries=0)
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for number, text in enumerate(USER_TURNS, start=1):
        with turn(number):
            messages.append({"role": "user", "content": text})
            reply = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS).choices[0].message
            messages.append(reply.model_dump(exclude_none=True))
            for call in reply.tool_calls or []:
                with tool(call) if tool else contextlib.nullcontext():
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": TOOL_RESULT})
            if reply.tool_calls:
                reply = (
                    client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS).choices[0].message
                )
                messages.append(reply.model_dump(exclude_none=True))
    judge.reset()
