"""Langfuse exports: traces and observations (the public API's objects, fern/apis/server/definition/
commons.yml `Trace` and `Observation`) as JSON or JSONL, a list response of them
(`{"data": [...], "meta": ...}`), a trace with its observations (`GET /api/public/traces/{id}`,
or the UI's `{"trace": ..., "observations": [...]}`) or a session with its traces.

The calls are the GENERATION observations: `input` and `output`, messages of any shape
`messages.normalised` reads (a request or reply holding them, a message, messages or text); an
input or output given as JSON text (as the UI exports it) is decoded. A trace with no generation in the file is a call of its own `input`
and `output` when they hold messages. Calls are grouped by `sessionId` (the observation's, else
its trace's); without one, each trace is one conversation. Everything is held until the file is
read (a trace may come after its observations), then taken in the order the calls started."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from flowrate.inputs.formats import Record
from flowrate.inputs.formats import _type_name as type_name
from flowrate.inputs.sources.base import Item, Reader
from flowrate.inputs.sources.calls import Call, Conversations, seconds_of
from flowrate.inputs.sources.chat import Unreadable, field_of, keyless_notice, records_of
from flowrate.inputs.sources.messages import ToolNames, instructions, normalised

# a trace's own fields beside `id` and `timestamp` (fern/apis/server/definition/commons.yml `Trace`
# and `TraceWithDetails`), one of which tells a trace: the SDK's models dump without their null
# fields (langfuse 3.0 `Trace.dict`: exclude_none), so a trace of no session has no `sessionId`
TRACE_FIELDS = frozenset(
    {"sessionId", "observations", "userId", "release", "version", "public", "environment", "htmlPath", "latency"}
)


@dataclass
class _Trace:
    item: Item
    raw: dict[str, Any]
    generations: list[tuple[Item, dict[str, Any]]] = field(default_factory=list)


class LangfuseReader(Reader):
    """Langfuse traces and observations, their generations grouped into sessions."""

    name = "langfuse"
    title = "Langfuse exports: traces and observations (JSON, JSONL, API list responses)"
    reads = (
        "GENERATION observations: traceId, input, output (messages of any shape in docs/input.md, Message shapes),"
        " startTime, endTime, model, sessionId; traces: id,"
        " sessionId, userId, tags, input, output, timestamp"
    )
    marks = frozenset({"traceId", "sessionId", "startTime", "observations", "trace"})

    def problem(self, item: Item) -> str | None:
        raw = item.raw
        if isinstance(raw, dict) and isinstance(raw.get("data"), list) and raw["data"]:
            raw = raw["data"][0]
        if not isinstance(raw, dict):
            return "a trace or an observation must be an object"
        if isinstance(raw.get("trace"), dict) or isinstance(raw.get("traces"), list):
            return None
        if "traceId" in raw and "startTime" in raw:
            return None
        if "id" in raw and "timestamp" in raw and TRACE_FIELDS & raw.keys():
            return None
        return "is neither a trace (id, timestamp, sessionId) nor an observation (traceId, startTime)"

    def read(self, items: Iterable[Item | Record]) -> Iterator[Record]:
        conversations = Conversations(self.name)
        traces: dict[str, _Trace] = {}
        for item in records_of(items):
            if isinstance(item, Record):
                yield item
                continue
            try:
                _take(item, item.raw, traces)
            except Unreadable as error:
                conversations.problem(item, str(error))
        calls: list[Call] = []
        for trace_id, trace in traces.items():
            for item, raw, session, started_s, ended_s, metadata in _calls(trace_id, trace):
                try:
                    calls.append(_call(item, raw, session, started_s, ended_s, metadata))
                except Unreadable as error:
                    conversations.problem(item, str(error))
        calls.sort(key=lambda call: call.started_s if call.started_s is not None else float("inf"))
        for call in calls:
            conversations.add(call, fallback_key=call.metadata["trace_id"])
        yield from conversations.records()
        self.notices.extend(conversations.notices)
        if calls:
            shown = calls[0].item.source.path
            self.notices.extend(keyless_notice(conversations, shown, "sessionId", "generation", "trace"))


def _take(item: Item, raw: Any, traces: dict[str, _Trace]) -> None:
    """Note the trace or observation `raw` (or each of a bundle's) in `traces`."""
    if not isinstance(raw, dict):
        raise Unreadable("record", "a trace or an observation must be an object")
    if isinstance(raw.get("trace"), dict):  # the UI's trace with its observations
        _take(item, {key: value for key, value in raw["trace"].items() if key != "observations"}, traces)
        for observation in field_of(raw, "observations", list, "observations", required=False) or []:
            _take(item, observation, traces)
    elif isinstance(raw.get("traces"), list):  # a session with its traces
        for number, trace in enumerate(raw["traces"]):
            if not isinstance(trace, dict):
                raise Unreadable(f"traces[{number}]", f"expected a trace object, got {type_name(trace)}")
            _take(item, {**trace, "sessionId": trace.get("sessionId") or raw.get("id")}, traces)
    elif "traceId" in raw:
        if raw.get("type") == "GENERATION":
            trace_id = str(field_of(raw, "traceId", str, "traceId"))
            traces.setdefault(trace_id, _Trace(item, {})).generations.append((item, raw))
    else:
        trace_id = str(field_of(raw, "id", str, "id"))
        known = traces.setdefault(trace_id, _Trace(item, {}))
        known.item, known.raw = item, raw
        for observation in field_of(raw, "observations", list, "observations", required=False) or []:
            if isinstance(observation, dict):  # GET /traces lists the observations' ids
                _take(item, observation, traces)


def _calls(trace_id: str, trace: _Trace) -> Iterator[tuple[Item, dict[str, Any], Any, Any, Any, dict[str, Any]]]:
    """What each call of a trace is made from (`_call`'s arguments): its generations, else the trace itself."""
    raw = trace.raw
    metadata: dict[str, Any] = {"trace_id": trace_id}
    for name, given in (("session_id", "sessionId"), ("user", "userId"), ("tags", "tags"), ("trace_name", "name")):
        if raw.get(given):
            metadata[name] = raw[given]
    if not trace.generations:
        if _holds_messages(raw.get("input")):
            at_s = seconds_of(raw.get("timestamp"))
            yield trace.item, raw, raw.get("sessionId"), at_s, at_s, metadata
        return
    for item, observation in trace.generations:
        session = observation.get("sessionId") or raw.get("sessionId")
        row = {**metadata, **({"model": observation["model"]} if observation.get("model") else {})}
        if observation.get("userId") and "user" not in row:
            row["user"] = observation["userId"]
        started_s, ended_s = seconds_of(observation.get("startTime")), seconds_of(observation.get("endTime"))
        yield item, observation, session, started_s, ended_s or started_s, row


def _call(
    item: Item, raw: dict[str, Any], session: Any, started_s: float | None, ended_s: float | None, metadata: dict
) -> Call:
    try:
        messages, output = generation_messages(raw.get("input"), raw.get("output"), "input", "output")
    except Unreadable as error:
        if "traceId" not in raw or not raw.get("id"):
            raise
        raise Unreadable(f"observation {raw['id']!r}: {error.field}", error.why) from None
    key = str(session) if isinstance(session, str | int) and str(session) else None
    return Call(key, messages, output, item, started_s, ended_s, metadata)


def generation_messages(
    given: Any, reply: Any, input_path: str, output_path: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A generation's input and output messages, from its `input` and `output` as Langfuse keeps
    them (in its API, its exports and the SDK's `langfuse.observation.input` / `output` span
    attributes); `Unreadable` naming `input_path` or `output_path`."""
    tools = ToolNames()
    given, reply = _decoded(given), _decoded(reply)
    messages = normalised(_present(given, input_path), input_path, tools)
    output = normalised(_present(reply, output_path), output_path, tools, "assistant")
    system = instructions(reply)
    if system is not None and not any(message["role"] == "system" for message in messages):
        messages.insert(0, {"role": "system", "content": system})
    return messages, output


def _decoded(value: Any) -> Any:
    """`value`, with JSON text decoded (the UI exports input and output as JSON text, at times twice)."""
    for _ in range(2):
        if not isinstance(value, str) or not value.lstrip().startswith(("{", "[", '"')):
            return value
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def _holds_messages(value: Any) -> bool:
    value = _decoded(value)
    if isinstance(value, dict):
        value = value.get("messages")
    return isinstance(value, list) and bool(value) and all(isinstance(m, dict) for m in value)


def _present(value: Any, path: str) -> Any:
    """`value`, which must be given (a generation without its input or output is no call)."""
    if value is None:
        raise Unreadable(path, "holds no chat messages (got null)")
    return value


def session_ids(items: Iterable[Item | Record]) -> set[str]:
    """The `sessionId`s of an export's traces and observations (nested ones too): a conversation
    whose id is one is a session, another is a trace (where `--write-back` puts its score)."""
    found: set[str] = set()

    def walk(value: Any, depth: int) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("sessionId"), str):
                found.add(value["sessionId"])
            if depth < 3:
                for entry in value.values():
                    walk(entry, depth + 1)
        elif isinstance(value, list) and depth < 3:
            for entry in value:
                walk(entry, depth + 1)

    for item in records_of(items):
        if not isinstance(item, Record):
            walk(item.raw, 0)
    return found
