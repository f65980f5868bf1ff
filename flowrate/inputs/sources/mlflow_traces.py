"""MLflow's traces (MLflow 3, its tracking server's REST API or `Trace.to_dict()`'s spans), as
OTLP-shaped spans whose messages are MLflow's own attributes: a call is a span of
`mlflow.spanType` CHAT_MODEL or LLM (what `mlflow.openai.autolog()` and the other autologgers
record), its request in `mlflow.spanInputs` and its reply in `mlflow.spanOutputs` (as the
client library took and gave them: an OpenAI request's `messages`, a `chat.completion`), read by
the same normaliser as every other source (`messages.normalised`). Its conversation is the
trace's session, `session.id` on the trace's root span (`platform_api` sets it from the trace's
metadata `mlflow.trace.session`), else its trace."""

from __future__ import annotations

from typing import Any

import orjson

from flowrate.inputs.sources.base import Item
from flowrate.inputs.sources.chat import Unreadable
from flowrate.inputs.sources.messages import ToolNames, normalised
from flowrate.inputs.sources.otlp import SESSION_KEYS, Broken, Span, SpanReader, marked_problem

SPAN_TYPE = "mlflow.spanType"
CALL_TYPES = frozenset({"CHAT_MODEL", "LLM"})
INPUTS, OUTPUTS = "mlflow.spanInputs", "mlflow.spanOutputs"


class MlflowReader(SpanReader):
    """MLflow's CHAT_MODEL and LLM spans, grouped by a session (`otlp.SESSION_KEYS`)."""

    name = "mlflow"
    title = "MLflow traces (mlflow.openai.autolog and the other autologgers), OTLP-shaped spans"
    reads = (
        "mlflow.spanType (CHAT_MODEL, LLM), mlflow.spanInputs (the request's messages),"
        " mlflow.spanOutputs (the reply); session.id (the trace's mlflow.trace.session), mlflow.llm.model"
    )
    keys = SESSION_KEYS
    fields = (("session_id", SESSION_KEYS), ("model", ("mlflow.llm.model", "model")))

    def problem(self, item: Item) -> str | None:
        return marked_problem(item, SPAN_TYPE)

    def complete(self, span: Span) -> bool:
        return True  # its messages are its attributes alone

    def messages(self, span: Span) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
        if span.attributes.get(SPAN_TYPE) not in CALL_TYPES:
            return None
        tools = ToolNames()
        try:
            inputs = normalised(_decoded(span.attributes.get(INPUTS)), f"attribute {INPUTS}", tools)
            outputs = normalised(_decoded(span.attributes.get(OUTPUTS)), f"attribute {OUTPUTS}", tools, "assistant")
        except Unreadable as error:
            raise Broken(str(error)) from None
        if not inputs:
            raise Broken(f"attribute {INPUTS}: holds no messages")
        return inputs, outputs


def _decoded(value: Any) -> Any:
    """An attribute's value: MLflow writes a span's inputs and outputs as a structure (3.x's
    tracking store) or as its JSON text (a trace's `to_dict()`, MLflow 2)."""
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value
