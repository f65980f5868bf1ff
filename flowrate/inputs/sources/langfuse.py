"""Langfuse exports: traces and observations (the public API's objects, fern/apis/server/definition/
commons.yml `Trace` and `Observation`) as JSON or JSONL, a list response of them
(`{"data": [...], "meta": ...}`), a trace with its observations (`GET /api/public/traces/{id}`,
or the UI's `{"trace": ..., "observations": [...]}`) or a session with its traces.

The calls are the GENERATION observations: `input` and `output`, messages of any shape
`messages.normalised` reads (a request or reply holding them, a message, messages or text); an
input or output given as JSON text (as the UI exports it) is decoded. A trace with no generation in the file is a call of its own `input`
and `output` when they hold messages. Calls are grouped by `sessionId` (the observation's, else
its trace's); without one, each trace is one conversation. Everything is held until the file is
read (a trace may come after its observations), then taken in the order the calls started.

What some frameworks write is read first (docs/input.md, Langfuse): an input of "role: text"
lines is its messages (AutoGen's), and such a copy of calls also given as messages is set aside
(agno's, `_copies`); BeeAI's chat events are joined into calls (`_events_joined`); a turn whose
input is the word `role` is given the history it continued (the Claude Agent SDK's through
LangSmith, `_histories_given`). A conversation one of whose calls cannot be read is named, not
judged in part."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from flowrate.inputs.formats import Record
from flowrate.inputs.formats import _type_name as type_name
from flowrate.inputs.sources.base import Item, Reader
from flowrate.inputs.sources.calls import Call, Conversations, seconds_of
from flowrate.inputs.sources.chat import Unreadable, field_of, keyless_notice, records_of
from flowrate.inputs.sources.messages import (
    ToolNames,
    arguments_text,
    instructions,
    normalised,
    tool_result,
    transcript,
)

# a trace's own fields beside `id` and `timestamp` (fern/apis/server/definition/commons.yml `Trace`
# and `TraceWithDetails`), one of which tells a trace: the SDK's models dump without their null
# fields (langfuse 3.0 `Trace.dict`: exclude_none), so a trace of no session has no `sessionId`
TRACE_FIELDS = frozenset(
    {"sessionId", "observations", "userId", "release", "version", "public", "environment", "htmlPath", "latency"}
)
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
# the id of the call a TOOL observation answers: the GenAI conventions' and the Vercel AI SDK's
PROMPTS = "llm.prompts"  # OpenInference's prompts of a completion call
TOOL_CALL_IDS = ("gen_ai.tool.call.id", "ai.toolCall.id")
# the input LangSmith's Claude Agent SDK tracing gives each turn after the first: the word, no message
ROLE_ONLY = {"content": "role"}
# OpenInference's output messages as span attributes; BeeAI writes each streamed token as one
STREAMED = re.compile(r"^llm\.output_messages\.(\d+)\.message\.content$")


@dataclass
class _Trace:
    item: Item
    raw: dict[str, Any]
    generations: list[tuple[Item, dict[str, Any]]] = field(default_factory=list)
    #: each observation's parent, and the system prompts observations carry as attributes
    parents: dict[str, Any] = field(default_factory=dict)
    instructions: dict[str, Any] = field(default_factory=dict)
    #: the output of each TOOL observation that names the call it answers, by the call's id
    tool_outputs: dict[str, Any] = field(default_factory=dict)
    #: every TOOL observation: (when it started, its name, its output), for turns logged without their input
    tools: list[tuple[float, str, Any]] = field(default_factory=list)

    def observed(self, observation: dict[str, Any]) -> None:
        """Note `observation`'s parent and the system prompt it carries."""
        if observation.get("id") is None:
            return
        key = str(observation["id"])
        self.parents[key] = observation.get("parentObservationId")
        given = system_instructions(observation.get("metadata"))
        if given is not None:
            self.instructions[key] = given
        elif _prompted(observation.get("input")):  # the Claude Agent SDK's conversation, as LangSmith logs it
            self.instructions[key] = [{"type": "text", "content": _decoded(observation["input"])["system"]}]
        if observation.get("type") == "TOOL" and observation.get("output") not in (None, "null"):  # the UI's null
            call_id = _attribute(observation.get("metadata"), TOOL_CALL_IDS)
            if call_id is not None:
                self.tool_outputs[str(call_id)] = observation["output"]
            started_s = seconds_of(observation.get("startTime"))
            self.tools.append((started_s or 0.0, str(observation.get("name") or "tool"), observation["output"]))

    def answered(self, output: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """`output`, each tool call in it followed by its result when a TOOL observation holds
        it: for the trace's last calls, whose results no later call's input repeats (the Vercel
        AI SDK's example stopped once its tool had run)."""
        if not self.tool_outputs:
            return output
        answered = list(output)
        for message in output:
            for call in message.get("tool_calls") or []:
                if call.get("id") is not None and str(call["id"]) in self.tool_outputs:
                    result = arguments_text(_decoded(self.tool_outputs[str(call["id"])]))
                    answered.append(tool_result(result, call["function"]["name"]))
        return answered

    def system_of(self, observation_id: Any) -> Any:
        """The system prompt of the observation `observation_id`: its own `gen_ai.system_instructions`,
        else its nearest ancestor's (Microsoft Agent Framework sets it on its `invoke_agent` span,
        not on the chat spans beneath it); None when no one carries it."""
        seen: set[str] = set()
        key = None if observation_id is None else str(observation_id)
        while key is not None and key not in seen:
            if key in self.instructions:
                return self.instructions[key]
            seen.add(key)
            parent = self.parents.get(key)
            key = None if parent is None else str(parent)
        return None


def system_instructions(metadata: Any) -> Any:
    """The `gen_ai.system_instructions` an observation's metadata holds, None when it holds none."""
    return _attribute(metadata, (SYSTEM_INSTRUCTIONS,))


def _attribute(metadata: Any, names: tuple[str, ...]) -> Any:
    """The first of the span attributes `names` an observation's metadata holds (Langfuse keeps
    an OpenTelemetry span's attributes under `attributes`; the UI exports the metadata as JSON
    text), None when it holds none."""
    if isinstance(metadata, str):
        if not any(name in metadata for name in names):  # read only where it is: most observations carry none
            return None
        try:
            metadata = orjson.loads(metadata)
        except orjson.JSONDecodeError:
            return None
    if not isinstance(metadata, dict):
        return None
    attributes = metadata.get("attributes")
    for holder in (attributes if isinstance(attributes, dict) else {}, metadata):
        for name in names:
            if holder.get(name):
                return holder[name]
    return None


class LangfuseReader(Reader):
    """Langfuse traces and observations, their generations grouped into sessions."""

    name = "langfuse"
    title = "Langfuse exports: traces and observations (JSON, JSONL, API list responses)"
    reads = (
        "GENERATION observations: traceId, input, output (messages of any shape in docs/input.md, Message shapes),"
        " startTime, endTime, model, sessionId, metadata.attributes.gen_ai.system_instructions (or a parent"
        " observation's), metadata.attributes.llm.prompts (a completion's), metadata.attributes.llm.output_messages.N"
        " (a reply streamed a token each, BeeAI's), a parent's input {prompt, system} (its system prompt);"
        " TOOL observations: output, metadata.attributes.gen_ai.tool.call.id or ai.toolCall.id;"
        " traces: id, sessionId, userId, tags, input, output, timestamp"
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
        texts: set[int] = set()  # the calls whose input was a "role: text" transcript, by id()
        broken: set[str] = set()  # the conversations a call of which cannot be read: named, never judged in part
        empty = 0  # generations of neither input nor output, passed over
        for trace_id, trace in traces.items():
            made = []
            _histories_given(trace)
            try:
                empty += _events_joined(trace)
            except Unreadable as error:  # the trace's conversation is named by its broken reply alone
                conversations.problem(trace.item, str(error))
                broken.add(str(trace.raw.get("sessionId") or trace_id))
                trace.generations.clear()
            for item, raw, session, started_s, ended_s, metadata in _calls(trace_id, trace):
                system = trace.system_of(raw.get("id")) if "traceId" in raw else None
                try:
                    made.append(_call(item, raw, session, started_s, ended_s, metadata, system))
                except Unreadable as error:
                    conversations.problem(item, str(error))
                    broken.add(str(session) if isinstance(session, str | int) and str(session) else trace_id)
                    continue
                if _written_as_text(raw.get("input")):
                    texts.add(id(made[-1]))
            latest_s = max((call.started_s for call in made if call.started_s is not None), default=None)
            for call in made:  # the last calls: no call of the trace began after they ended
                if latest_s is not None and call.ended_s is not None and call.ended_s >= latest_s:
                    call.output = trace.answered(call.output)
            calls.extend(made)
        calls.sort(key=lambda call: call.started_s if call.started_s is not None else float("inf"))
        aside = _copies(calls, texts)
        for call in calls:
            if id(call) not in aside and (call.key or call.metadata["trace_id"]) not in broken:
                conversations.add(call, fallback_key=call.metadata["trace_id"])
        yield from conversations.records()
        self.notices.extend(conversations.notices)
        if empty:
            shown = next(iter(traces.values())).item.source.path
            self.notices.append(
                f"{shown}: {empty} generation(s) held neither input nor output (BeeAI's chat `finish` events) and"
                " were passed over"
            )
        if aside:
            shown = calls[0].item.source.path
            self.notices.append(
                f"{shown}: {len(aside)} call(s) of {len(set(aside.values()))} conversation(s) given as 'role: text'"
                " transcript text were set aside: the same conversation's calls are given as messages (agno's,"
                " with a copy of each call beneath it)"
            )
        if calls:
            shown = calls[0].item.source.path
            self.notices.extend(keyless_notice(conversations, shown, "sessionId", "generation", "trace"))


def _events_joined(trace: _Trace) -> int:
    """Take the generations of `trace` that are events of a call rather than calls (BeeAI 0.1's
    through OpenInference: a chat is a `start` generation of its input, output null; a `success`
    one of neither, its reply streamed into the span attributes `llm.output_messages.N`, a token
    each; a `finish` one of nothing): each stream becomes the output of the latest call before it
    that had none, a call of no output that a later call follows is given an empty one (the later
    input holds its reply), and a generation of nothing is passed over. How many were passed over."""
    ordered = sorted(
        range(len(trace.generations)), key=lambda n: seconds_of(trace.generations[n][1].get("startTime")) or 0.0
    )
    kept: list[int] = []
    passed = 0
    for number in ordered:
        item, observation = trace.generations[number]
        if not _null(observation.get("input")) or not _null(observation.get("output")):
            kept.append(number)
            continue
        streamed = _streamed(observation)
        if streamed is None:
            passed += 1
            continue
        waiting = [n for n in kept if _null(trace.generations[n][1].get("output"))]
        if not waiting:
            passed += 1
            continue
        call_item, call = trace.generations[waiting[-1]]
        reply = _whole(streamed, trace.raw.get("output"), observation)
        trace.generations[waiting[-1]] = (call_item, {**call, "output": reply})
    for later, number in enumerate(kept):
        item, observation = trace.generations[number]
        if _null(observation.get("output")) and not _null(observation.get("input")) and later + 1 < len(kept):
            trace.generations[number] = (item, {**observation, "output": []})
    trace.generations[:] = [trace.generations[number] for number in sorted(kept)]  # as the file lists them
    return passed


def _prompted(given: Any) -> bool:
    """True for an observation's input that is a prompt with its system prompt, `{"prompt", "system"}`
    (LangSmith's `claude.conversation` span of a Claude Agent SDK query)."""
    if not isinstance(given, str) or '"system"' not in given or '"prompt"' not in given:
        return False  # read only where it may be: most observations' inputs are messages
    given = _decoded(given)
    return isinstance(given, dict) and isinstance(given.get("system"), str) and "prompt" in given


def _histories_given(trace: _Trace) -> None:
    """Give each generation of `trace` whose input is the word `role` alone (`ROLE_ONLY`: LangSmith's
    Claude Agent SDK tracing logs every turn after the first so) the history it continued: the
    trace's turn before it, its input and output, then the results of the TOOL observations that
    began since (the Claude Agent SDK runs the tools between turns; each result is named by its
    tool and answers the first call not yet answered). A first turn of that input is left as it
    is: nothing says what it continued, and it is named."""
    if not any(_role_only(observation.get("input")) for _, observation in trace.generations):
        return
    ordered = sorted(
        range(len(trace.generations)), key=lambda n: seconds_of(trace.generations[n][1].get("startTime")) or 0.0
    )
    history: list[Any] | None = None
    since_s = float("-inf")
    for number in ordered:
        item, observation = trace.generations[number]
        given = _decoded(observation.get("input"))
        started_s = seconds_of(observation.get("startTime")) or 0.0
        if given == ROLE_ONLY:
            if history is None:
                continue
            results = [
                {"role": "tool", "name": name, "content": _tool_content(_decoded(output))}
                for at_s, name, output in sorted(trace.tools, key=lambda tool: tool[0])
                if since_s <= at_s < started_s
            ]
            given = [*history, *results]
            trace.generations[number] = (item, {**observation, "input": given})
        output = _decoded(observation.get("output"))
        history = [*(given if isinstance(given, list) else [given]), *([] if _null(output) else [output])]
        since_s = started_s


def _role_only(given: Any) -> bool:
    """True for an input that is `ROLE_ONLY`, decoded only when short (every generation is asked)."""
    return (len(given) < 40 and _decoded(given) == ROLE_ONLY) if isinstance(given, str) else given == ROLE_ONLY


def _tool_content(output: Any) -> Any:
    """A TOOL observation's output as a tool message's content: an MCP result's `content` parts, or the output."""
    if isinstance(output, dict) and isinstance(output.get("content"), list):
        return output["content"]
    return arguments_text(output)


def _null(value: Any) -> bool:
    return value is None or value == "null"  # the UI exports a null input as JSON text


def _streamed(observation: dict[str, Any]) -> tuple[int, str] | None:
    """The output messages OpenInference wrote as span attributes in `observation`'s metadata,
    joined (BeeAI streams a reply a token an attribute), with the index of the first kept; None
    when it holds none."""
    metadata = observation.get("metadata")
    if isinstance(metadata, str):
        if "llm.output_messages." not in metadata:
            return None
        try:
            metadata = orjson.loads(metadata)
        except orjson.JSONDecodeError:
            return None
    attributes = metadata.get("attributes") if isinstance(metadata, dict) else None
    if not isinstance(attributes, dict):
        return None
    tokens = {}
    for key, value in attributes.items():
        found = STREAMED.match(key)
        if found is not None and isinstance(value, str):
            tokens[int(found.group(1))] = value
    if not tokens:
        return None
    return min(tokens), "".join(tokens[index] for index in sorted(tokens))


def _whole(streamed: tuple[int, str], final: Any, observation: dict[str, Any]) -> str:
    """The reply a stream gives: its tokens joined when they are all there; else (OpenTelemetry
    keeps a span's last 128 attributes, and dropped the first 233 tokens of BeeAI's 295) the
    trace's output, the agent's answer, when it ends as the stream does; else `Unreadable`."""
    first, text = streamed
    if first == 0:
        return text
    answer = _answer_text(final)
    if answer is not None and text and answer.endswith(text):
        return answer
    raise Unreadable(
        f"observation {observation.get('id')!r}: metadata.attributes.llm.output_messages",
        f"the streamed reply lost its first {first} token(s) (OpenTelemetry keeps a span's last 128 attributes),"
        " and the trace's output does not end as it does",
    )


def _answer_text(value: Any) -> str | None:
    """The text of a trace's output: text, an object's `text` or `content` text, or such an
    object written as a Python dict (BeeAI's `{'role': 'assistant', 'text': "..."}`, read as a
    literal, nothing run)."""
    value = _decoded(value)
    if isinstance(value, str) and value.startswith("{'"):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return None
    if isinstance(value, dict):
        value = value.get("text", value.get("content"))
    return value if isinstance(value, str) else None


def _written_as_text(given: Any) -> bool:
    """True for a generation's input that is its messages written as "role: text" transcript text."""
    if not isinstance(given, str) or given.lstrip().startswith(("{", "[")):
        return False  # messages, not decoded again
    given = _decoded(given)
    return isinstance(given, str) and transcript(given) is not None


def _copies(calls: list[Call], texts: set[int]) -> dict[int, str]:
    """The calls of `texts` (given as transcript text) whose conversation has calls given as
    messages, by id(), with their conversation: the same calls again, as agno's traces hold
    them (each OpenInference generation of agno's messages has beneath it a generation of the
    Langfuse SDK's holding that call as text, a tool call written `assistant: None`), set aside."""
    if not texts:
        return {}
    given = {call.key or call.metadata["trace_id"] for call in calls if id(call) not in texts}
    return {
        id(call): key for call in calls if id(call) in texts and (key := call.key or call.metadata["trace_id"]) in given
    }


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
        trace_id = str(field_of(raw, "traceId", str, "traceId"))
        trace = traces.setdefault(trace_id, _Trace(item, {}))
        trace.observed(raw)
        if raw.get("type") == "GENERATION":
            trace.generations.append((item, raw))
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
    item: Item,
    raw: dict[str, Any],
    session: Any,
    started_s: float | None,
    ended_s: float | None,
    metadata: dict,
    system: Any = None,
) -> Call:
    given, path = raw.get("input"), "input"
    prompts = _prompts(raw) if "traceId" in raw else None
    if prompts is not None:
        given, path = prompts, f"metadata.attributes.{PROMPTS}"
    try:
        messages, output = generation_messages(given, raw.get("output"), path, "output", system)
    except Unreadable as error:
        if "traceId" not in raw or not raw.get("id"):
            raise
        raise Unreadable(f"observation {raw['id']!r}: {error.field}", error.why) from None
    key = str(session) if isinstance(session, str | int) and str(session) else None
    return Call(key, messages, output, item, started_s, ended_s, metadata)


def _prompts(observation: dict[str, Any]) -> list[Any] | None:
    """The prompts of a completion call (not a chat) as OpenInference records them, the span
    attribute `llm.prompts` (JSON text of a list) in the observation's metadata: LlamaIndex's
    `complete`, whose `input` is the call's arguments (`{"args": [...]}`). None for an observation
    without it (a chat's: OpenInference writes its messages, not prompts)."""
    given = _attribute(observation.get("metadata"), (PROMPTS,))
    if isinstance(given, str):
        try:
            given = orjson.loads(given)
        except orjson.JSONDecodeError:
            return None
    if not isinstance(given, list) or not given or not all(isinstance(prompt, str) for prompt in given):
        return None
    return given


def generation_messages(
    given: Any, reply: Any, input_path: str, output_path: str, system: Any = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A generation's input and output messages, from its `input` and `output` as Langfuse keeps
    them (in its API, its exports and the SDK's `langfuse.observation.input` / `output` span
    attributes); `Unreadable` naming `input_path` or `output_path`. `system` is the
    `gen_ai.system_instructions` its observation or an ancestor carries, the system prompt when
    the input holds none."""
    tools = ToolNames()
    given, reply = _decoded(given), _decoded(reply)
    if given == ROLE_ONLY:  # a first turn's (`_histories_given` gave each later one its history)
        raise Unreadable(
            input_path,
            'holds no message, only the word \'role\' where its text should be ({"content": "role"}, as'
            " LangSmith's Claude Agent SDK tracing writes a turn's input), and no earlier turn to continue",
        )
    written = transcript(given) if isinstance(given, str) else None
    messages = written if written is not None else normalised(_present(given, input_path), input_path, tools)
    output = normalised(_present(reply, output_path), output_path, tools, "assistant")
    if any(message["role"] == "system" for message in messages):
        return messages, output
    prompt = instructions(reply)
    if prompt is not None:
        messages.insert(0, {"role": "system", "content": prompt})
    elif system is not None:
        path = f"metadata.attributes.{SYSTEM_INSTRUCTIONS}"
        messages[:0] = normalised({"role": "system", "parts": system}, path, tools)
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
