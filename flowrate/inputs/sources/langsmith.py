"""LangSmith run exports: runs (the Run data format, docs.langchain.com/langsmith/run-data-format)
as JSONL or JSON, or the bulk export's Parquet rows (its nested fields may be JSON text).

The calls are the `llm` (and `chat`) runs: `inputs.messages` (LangChain's serialized messages,
a list of them per prompt, or OpenAI's shape) and `outputs` (`generations`, `choices`, a
`message` or `messages`). A thread is the runs whose `extra.metadata` (or their trace's root
run's) has the same `session_id`, `thread_id` or `conversation_id`, as LangSmith's threads are;
without one, each trace is one conversation. Runs are held until the file is read (a trace's
root may come after its calls), then taken in the order they started."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from flowrate.inputs.formats import Record
from flowrate.inputs.sources.base import Item, Reader
from flowrate.inputs.sources.calls import Call, Conversations, seconds_of
from flowrate.inputs.sources.chat import (
    CONVERSATION_KEYS,
    Unreadable,
    conversation_key,
    field_of,
    keyless_notice,
    records_of,
)
from flowrate.inputs.sources.messages import ToolNames, message_list

CALL_RUN_TYPES = frozenset({"llm", "chat"})
NESTED_FIELDS = ("inputs", "outputs", "extra")  # JSON text in the bulk export's Parquet


class LangSmithReader(Reader):
    """LangSmith runs, their llm runs grouped into threads."""

    name = "langsmith"
    title = "LangSmith run exports (JSONL, JSON, bulk-export Parquet), grouped into threads"
    reads = (
        "llm runs: inputs.messages, outputs (generations, choices or messages), extra.metadata session_id/thread_id/"
        "conversation_id, trace_id, start_time, end_time, tags"
    )
    marks = frozenset({"run_type", "inputs", "outputs", "trace_id", "dotted_order"})

    def problem(self, item: Item) -> str | None:
        raw = item.raw
        if not isinstance(raw, dict):
            return "a run must be an object"
        if not isinstance(raw.get("run_type"), str):
            return "has no `run_type`"
        if "inputs" not in raw:
            return "has no `inputs`"
        return None

    def read(self, items: Iterable[Item | Record]) -> Iterator[Record]:
        conversations = Conversations(self.name)
        runs: list[tuple[Item, dict[str, Any]]] = []
        root_keys: dict[str, str | None] = {}  # trace id: the thread key of its root run
        for item in records_of(items):
            if isinstance(item, Record):
                yield item
                continue
            try:
                run = _decoded(item.raw)
            except Unreadable as error:
                conversations.problem(item, str(error))
                continue
            if run.get("parent_run_id") is None and run.get("id") is not None:
                root_keys[str(run["id"])] = conversation_key(_metadata_of(run), given=self.given_keys)
            if run["run_type"] in CALL_RUN_TYPES:
                runs.append((item, run))
        runs.sort(key=lambda entry: seconds_of(entry[1].get("start_time")) or 0.0)
        for item, run in runs:
            trace = str(run.get("trace_id") or run.get("id") or item.default_id)
            try:
                call = _call(item, run, root_keys.get(trace), self.given_keys)
            except Unreadable as error:
                conversations.problem(item, str(error))
                continue
            conversations.add(call, fallback_key=trace)
        yield from conversations.records()
        self.notices.extend(conversations.notices)
        if runs:
            keys = f"extra.metadata {'/'.join(CONVERSATION_KEYS)}"
            self.notices.extend(keyless_notice(conversations, runs[0][0].source.path, keys, "llm run", "trace"))


def thread_last_runs(items: Iterable[Item | Record]) -> dict[str, dict[str, str]]:
    """Each thread's last root run (the latest `start_time`), by the thread's key as the reader
    groups it (`extra.metadata` session_id, thread_id or conversation_id; without one, the trace):
    its `run_id`, `trace_id` and, where the export has it, `session_id` (the tracing project),
    which is where `--write-back` puts a thread's feedback."""
    last: dict[str, tuple[float, dict[str, str]]] = {}
    for item in records_of(items):
        if isinstance(item, Record):
            continue
        try:
            run = _decoded(item.raw)
        except Unreadable:
            continue
        if run.get("parent_run_id") is not None or run.get("id") is None:
            continue
        key = conversation_key(_metadata_of(run)) or str(run.get("trace_id") or run["id"])
        at_s = seconds_of(run.get("start_time")) or 0.0
        if key not in last or at_s >= last[key][0]:
            found = {"run_id": str(run["id"]), "trace_id": str(run.get("trace_id") or run["id"])}
            if run.get("session_id"):
                found["session_id"] = str(run["session_id"])
            last[key] = (at_s, found)
    return {key: found for key, (_, found) in last.items()}


def _decoded(raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise Unreadable("record", "a run must be an object")
    field_of(raw, "run_type", str, "run_type")
    run = dict(raw)
    for name in NESTED_FIELDS:
        if isinstance(run.get(name), str):
            try:
                run[name] = orjson.loads(run[name])
            except orjson.JSONDecodeError as error:
                raise Unreadable(name, f"not JSON: {error}") from None
    return run


def _metadata_of(run: dict[str, Any]) -> dict[str, Any]:
    extra = run.get("extra")
    metadata = extra.get("metadata") if isinstance(extra, dict) else None
    return metadata if isinstance(metadata, dict) else {}


def _call(item: Item, run: dict[str, Any], root_key: str | None, given_keys: tuple[str, ...] = ()) -> Call:
    tools = ToolNames()
    inputs = field_of(run, "inputs", dict, "inputs")
    given = field_of(inputs, "messages", list, "inputs.messages")
    if given and all(isinstance(prompt, list) for prompt in given):  # one list per prompt of the batch
        given = given[0]
    messages = message_list(given, "inputs.messages", tools)
    output = message_list(_output_messages(run.get("outputs")), "outputs", tools, "assistant")
    metadata = _metadata_of(run)
    row = {name: value for name, value in metadata.items() if name in CONVERSATION_KEYS}
    model = metadata.get("ls_model_name") or inputs.get("model")
    for name, value in (("trace_id", run.get("trace_id")), ("model", model), ("tags", run.get("tags") or None)):
        if value is not None:
            row[name] = str(value) if name == "trace_id" else value
    key = conversation_key(metadata, given=given_keys) or root_key
    return Call(key, messages, output, item, seconds_of(run.get("start_time")), seconds_of(run.get("end_time")), row)


def _output_messages(outputs: Any) -> list[Any]:
    """The reply messages of an llm run's outputs: LangChain's `generations` (the first
    generation of the first prompt), OpenAI's `choices`, a `message` or `messages`."""
    if not isinstance(outputs, dict):
        raise Unreadable("outputs", "expected an object of the run's outputs")
    generations = outputs.get("generations")
    if isinstance(generations, list) and generations:
        first = generations[0][0] if isinstance(generations[0], list) and generations[0] else generations[0]
        if isinstance(first, dict) and isinstance(first.get("message"), dict):
            return [first["message"]]
        if isinstance(first, dict) and isinstance(first.get("text"), str):
            return [{"role": "assistant", "content": first["text"]}]
        raise Unreadable("outputs.generations[0][0]", "has neither `message` nor `text`")
    choices = outputs.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        return [field_of(choices[0], "message", dict, "outputs.choices[0].message")]
    if isinstance(outputs.get("message"), dict):
        return [outputs["message"]]
    if isinstance(outputs.get("messages"), list):
        return outputs["messages"]
    if "role" in outputs or "type" in outputs:
        return [outputs]
    raise Unreadable("outputs", "has none of `generations`, `choices`, `message`, `messages`")
