"""The source readers, in the order a file's format is tried, and finding the one that reads a file."""

from __future__ import annotations

from flowrate.inputs.sources.anthropic_messages import AnthropicReader
from flowrate.inputs.sources.base import Item, Reader
from flowrate.inputs.sources.dialogflow_cx import DialogflowCXReader
from flowrate.inputs.sources.intercom import IntercomReader
from flowrate.inputs.sources.langfuse import LangfuseReader
from flowrate.inputs.sources.langsmith import LangSmithReader
from flowrate.inputs.sources.native import NativeReader
from flowrate.inputs.sources.openai_chat import OpenAIChatReader
from flowrate.inputs.sources.openai_responses import OpenAIResponsesReader
from flowrate.inputs.sources.openinference import OpenInferenceReader
from flowrate.inputs.sources.otel import OtelReader
from flowrate.inputs.sources.rasa import RasaReader
from flowrate.inputs.sources.servicenow import ServiceNowReader
from flowrate.inputs.sources.sharegpt import ShareGPTReader
from flowrate.inputs.sources.zendesk import ZendeskReader


def readers() -> list[Reader]:
    """Every reader, in the order a file's format is tried."""
    return [
        NativeReader(),
        OpenInferenceReader(),  # OTLP/JSON with OpenInference spans, before any OTLP/JSON
        OtelReader(),
        # API logs before the platforms: of equally close formats the first is named, and a
        # request/response pair is nearer these than Dialogflow CX's request and response columns
        OpenAIChatReader(),
        OpenAIResponsesReader(),
        AnthropicReader(),
        LangSmithReader(),
        LangfuseReader(),
        ShareGPTReader(),
        RasaReader(),
        DialogflowCXReader(),
        ServiceNowReader(),
        ZendeskReader(),
        IntercomReader(),
    ]


def reader_named(name: str) -> Reader:
    """The reader `--format NAME` names; `ValueError` naming the formats there are otherwise."""
    for reader in readers():
        if reader.name == name:
            return reader
    raise ValueError(f"unknown format {name!r} (formats: {', '.join(reader.name for reader in readers())})")


def detect(item: Item) -> Reader | str:
    """The reader that takes `item`, the first of a file; else, when another format than
    flowrate's own is closest, a line naming the formats tried and the closest one's complaint
    (when flowrate's own is closest, its reader, which names each record's problems)."""
    tried = readers()
    complaints: list[tuple[int, Reader, str]] = []
    for reader in tried:
        problem = reader.problem(item)
        if problem is None:
            return reader
        complaints.append((reader.closeness(item), reader, problem))
    closeness, closest, complaint = max(complaints, key=lambda entry: entry[0])
    if closeness == 0 or closest is tried[0]:
        return tried[0]  # flowrate's own format, whose reader names each record's problems
    names = ", ".join(reader.name for reader in tried)
    return f"{item.where}: no format reads this (tried {names}); closest, {closest.name}: {complaint}"
