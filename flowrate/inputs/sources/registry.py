"""The source readers, in the order a file's format is tried, and finding the one that reads a file."""

from __future__ import annotations

from collections.abc import Iterator
from importlib import import_module

from flowrate.inputs.sources.base import Item, Reader

# (name, module, class) in the order a file's format is tried; a module is imported when its
# reader is first needed: a file of flowrate's own format loads none of the others
READERS = (
    ("flowrate", "native", "NativeReader"),
    (
        "openinference",
        "openinference",
        "OpenInferenceReader",
    ),  # OTLP/JSON with OpenInference spans, before any OTLP/JSON
    ("mlflow", "mlflow_traces", "MlflowReader"),  # MLflow's spans, OTLP-shaped: before any OTLP/JSON
    ("otel", "otel", "OtelReader"),
    # API logs before the platforms: of equally close formats the first is named, and a
    # request/response pair is nearer these than Dialogflow CX's request and response columns
    ("openai-chat", "openai_chat", "OpenAIChatReader"),
    ("openai-responses", "openai_responses", "OpenAIResponsesReader"),
    ("anthropic", "anthropic_messages", "AnthropicReader"),
    ("langsmith", "langsmith", "LangSmithReader"),
    ("langfuse", "langfuse", "LangfuseReader"),
    ("sharegpt", "sharegpt", "ShareGPTReader"),
    ("rasa", "rasa", "RasaReader"),
    ("dialogflow-cx", "dialogflow_cx", "DialogflowCXReader"),
    ("servicenow", "servicenow", "ServiceNowReader"),
    ("zendesk", "zendesk", "ZendeskReader"),
    ("intercom", "intercom", "IntercomReader"),
)


def _made(module: str, name: str) -> Reader:
    reader: Reader = getattr(import_module(f"flowrate.inputs.sources.{module}"), name)()
    return reader


def _each() -> Iterator[Reader]:
    """A new reader of each format, in order, each module imported as it comes."""
    for _, module, name in READERS:
        yield _made(module, name)


def readers() -> list[Reader]:
    """Every reader, in the order a file's format is tried."""
    return list(_each())


def reader_named(name: str) -> Reader:
    """The reader `--format NAME` names; `ValueError` naming the formats there are otherwise."""
    for known, module, made in READERS:
        if known == name:
            return _made(module, made)
    raise ValueError(f"unknown format {name!r} (formats: {', '.join(known for known, _, _ in READERS)})")


def detect(item: Item) -> Reader | str:
    """The reader that takes `item`, the first of a file; else, when another format than
    flowrate's own is closest, a line naming the formats tried and the closest one's complaint
    (when flowrate's own is closest, its reader, which names each record's problems)."""
    tried: list[Reader] = []
    complaints: list[tuple[int, Reader, str]] = []
    for reader in _each():
        problem = reader.problem(item)
        if problem is None:
            return reader
        tried.append(reader)
        complaints.append((reader.closeness(item), reader, problem))
    closeness, closest, complaint = max(complaints, key=lambda entry: entry[0])
    if closeness == 0 or closest is tried[0]:
        return tried[0]  # flowrate's own format, whose reader names each record's problems
    names = ", ".join(reader.name for reader in tried)
    return f"{item.where}: no format reads this (tried {names}); closest, {closest.name}: {complaint}"
