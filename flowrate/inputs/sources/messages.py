"""Messages in the shapes real tools write them, read once for every source: `normalised` takes
a message, a list of messages or a request or reply holding them, in any of these shapes, and
gives the messages `calls.Call` takes (OpenAI's chat shape: `role`, `content` text,
`tool_calls` [{"id", "function": {"name", "arguments"}}] with JSON arguments, a tool result as a
`tool` message with the tool's `name`):

- OpenAI Chat Completions (`role`, `content` text or parts, `tool_calls`, `function_call`), and a
  `chat.completion`'s first choice; an assistant's or a tool message's text that is only
  `tool_calls` written as JSON is those calls (JetBrains Koog's);
- OpenAI Responses items (`message`, `function_call`, `function_call_output`, built-in tools'
  calls; `reasoning` hidden) and a `response` object's `output`;
- Anthropic Messages blocks (`text`, `tool_use`, `tool_result`; `thinking` hidden);
- Gemini and Vertex AI `contents` (`role` user or model, `parts` of `text`, `function_call`,
  `function_response`; thoughts hidden), a request's `system_instruction`, a reply's
  `candidates`, Google ADK's reply `{"content": ...}`;
- OpenTelemetry GenAI messages (`role`, `parts` of type `text`, `tool_call`,
  `tool_call_response` (with `response`, or pydantic-ai's `result`); `reasoning` hidden; blobs,
  files and URIs named), and pydantic-ai's `gen_ai.choice` event (`{"index", "message"}`);
- LangChain and LangGraph messages (serialized `{"lc", "id", "kwargs"}`, plain with a `type`, or
  LangChain.js's tool message whose role is the tool's name);
- Vercel AI SDK messages (`content` parts `text`, `tool-call` {toolCallId, toolName, input},
  `tool-result`; `reasoning` hidden), its tool calls listed alone, and a `{"prompt"}` request.
- a message written by Python (pydantic's `str()` or a `Message(...)` repr, agno's), read from
  its literal fields (`python_message`);
- Bedrock Converse messages (`content` blocks `text`, `toolUse`, `toolResult`; `reasoningContent`
  hidden) and a request's `system` blocks.

A tool result is named by its call (`ToolNames`): by the call's id, else the first call not yet
answered; one whose call is in no message given keeps the id for the chain of calls to name it
by. A BeeAI `final_answer` call is the reply it carries (`final_answers`).

A message or a field that cannot be read raises `chat.Unreadable`, naming the field by `path`."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from typing import Any

import orjson

from flowrate.inputs.formats import _type_name as type_name
from flowrate.inputs.sources.chat import Unreadable, field_of

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
# other tools' names of a role: Gemini's model, LangChain's message types, the older function role
ROLE_NAMES = {
    "model": "assistant",
    "function": "tool",
    "human": "user",
    "ai": "assistant",
    "SystemMessage": "system",
    "HumanMessage": "user",
    "AIMessage": "assistant",
    "AIMessageChunk": "assistant",
    "ToolMessage": "tool",
    "FunctionMessage": "tool",
}
# parts never shown to the judge: Anthropic's thinking, the GenAI conventions' and the Vercel AI
# SDK's reasoning (Microsoft.Extensions.AI writes its own type name, TextReasoningContent)
HIDDEN_BLOCKS = frozenset({"thinking", "redacted_thinking", "reasoning"})
ANTHROPIC_TOOL_BLOCKS = frozenset({"tool_use", "server_tool_use", "tool_result"})
VERCEL_PARTS = frozenset({"tool-call", "tool-result", "file", "image"})
MESSAGE_KEYS = frozenset({"role", "type", "kwargs", "parts", "content", "toolCallId"})  # a message has one
# Bedrock Converse's content blocks, untyped, keyed by what they hold (botocore's bedrock-runtime
# service model, `ContentBlock`): the ones that are no text mark a message as Bedrock's
BEDROCK_BLOCKS = frozenset(
    {"toolUse", "toolResult", "reasoningContent", "image", "document", "video", "audio", "guardContent", "cachePoint"}
)
FINAL_ANSWER = "final_answer"  # BeeAI's FinalAnswerTool, whose `response` is the reply
SEMCONV_RESULT_KEYS = ("response", "result")  # the conventions' key; pydantic-ai writes `result`
# a line of a "role: text" transcript that begins a message (AutoGen's chat input in Langfuse)
TRANSCRIPT_LINE = re.compile(r"^(system|developer|user|assistant|tool):(?: |$)", re.MULTILINE)
# a message written as a Python object: pydantic's str() (agno's messages in its OpenInference
# spans: `role='user' content='...' ...`) or its repr (`Message(role='user', content='...')`)
REPR_STARTS = ("role='", 'role="', "Message(role=")
REPR_FIELDS = ("role", "content", "name", "tool_name", "tool_call_id", "tool_calls")


def hidden(kind: Any) -> bool:
    """True for a part that is the model's reasoning, never shown to the judge."""
    return isinstance(kind, str) and (kind in HIDDEN_BLOCKS or kind.endswith("ReasoningContent"))


def text_of(content: Any, path: str) -> str:
    """The text of `content` (at `path`): text, or a list of parts (`text`, `input_text`,
    `output_text` parts give their text; reasoning and tool_use blocks none; any other part is
    named, as `[image_url]`)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise Unreadable(path, f"expected text or a list of parts, got {type_name(content)}")
    texts = []
    for number, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and (hidden(part.get("type")) or part.get("thought")):
            continue  # never shown
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(part, dict) and part.get("type") in ("tool_use", "tool-call"):
            continue  # a tool's use is shown from the message's tool calls
        elif isinstance(part, dict) and isinstance(part.get("type"), str):
            texts.append(f"[{part['type']}]")
        else:
            raise Unreadable(f"{path}[{number}]", "expected a part with a `type`")
    return "\n".join(texts)


def transcript(text: str) -> list[dict[str, Any]] | None:
    """The messages of `text` when it is a call's messages written as a "role: text" transcript
    (AutoGen's chat input in Langfuse: `system: You are ...\nuser: Say 'Hello World!'`): a message
    begins at each line that starts with a known role and a colon and runs to the next such
    line, its own lines kept. None unless the text begins with such a line and holds two or
    more: any other text is one message, as it was written."""
    starts = list(TRANSCRIPT_LINE.finditer(text))
    if len(starts) < 2 or starts[0].start() != 0:
        return None
    ends = [following.start() - 1 for following in starts[1:]] + [len(text)]  # the newline before the next
    return [{"role": start.group(1), "content": text[start.end() : end]} for start, end in zip(starts, ends)]


def python_message(text: str) -> dict[str, Any] | None:
    """The message `text` holds when it is a message object written by Python (`REPR_STARTS`):
    its role, content, name (agno's `tool_name`), tool call id and tool calls. Each field's value
    is read only when it is a Python literal (`ast.literal_eval` of its own text, so nothing is
    run); the others (`metrics=MessageMetrics(...)`, `timer=<... object at 0x...>`) are passed
    over. None when `text` is no such message."""
    body = text[len("Message(") : -1] if text.startswith("Message(") and text.endswith(")") else text
    try:
        tokens = [token for token in tokenize.generate_tokens(io.StringIO(body).readline) if token.string.strip()]
    except (tokenize.TokenError, SyntaxError):
        return None
    if any(token.type == tokenize.ERRORTOKEN for token in tokens):  # an unclosed quote: no object's text
        return None
    lines = [0]
    for line in body.splitlines(keepends=True):
        lines.append(lines[-1] + len(line))

    def at(position: tuple[int, int]) -> int:
        return lines[position[0] - 1] + position[1]

    fields: dict[str, tuple[int, int]] = {}  # each field's value, as its place in `body`
    depth, name, begins = 0, None, 0
    for number, token in enumerate(tokens):
        following = tokens[number + 1] if number + 1 < len(tokens) else None
        starts_field = depth == 0 and token.type == tokenize.NAME and following is not None
        if starts_field and following is not None and following.string == "=":
            if name is not None:
                fields[name] = (begins, at(token.start))
            name, begins = token.string, at(following.end)
        elif token.string in "([{" and token.type == tokenize.OP:
            depth += 1
        elif token.string in ")]}" and token.type == tokenize.OP:
            depth -= 1
    if name is not None:
        fields[name] = (begins, len(body))
    message: dict[str, Any] = {}
    for key in REPR_FIELDS:
        if key in fields:
            source = body[slice(*fields[key])].strip().removesuffix(",")
            try:
                message[key] = ast.literal_eval(source)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue  # not a literal: an object's repr
    if not isinstance(message.get("role"), str):
        return None
    if message.get("name") is None and message.get("tool_name") is not None:
        message["name"] = message["tool_name"]
    message.pop("tool_name", None)
    return message


def arguments_text(arguments: Any) -> str:
    """A tool call's arguments (or a tool's result) as the text the judge reads: JSON text kept
    as it is, anything else as JSON."""
    if isinstance(arguments, str):
        return arguments
    return orjson.dumps(arguments, option=orjson.OPT_NON_STR_KEYS).decode() if arguments is not None else ""


def tool_call(name: str, arguments: Any, call_id: Any = None) -> dict[str, Any]:
    """One tool call of an assistant message, with its `id` (to name its result by)."""
    return {"id": call_id, "function": {"name": name, "arguments": arguments_text(arguments)}}


def tool_result(content: str, name: str) -> dict[str, Any]:
    """A tool's result as a `tool` message."""
    return {"role": "tool", "content": content, "name": name}


class ToolNames:
    """The names of the tools called so far in one call's messages, by call id, to name their
    results by (and to know a LangChain.js tool message, whose role is its tool's name)."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}
        self._called: set[str] = set()
        self._unanswered: list[tuple[Any, str]] = []  # (id, name) of the calls no result has answered yet

    def called(self, message: dict[str, Any]) -> dict[str, Any]:
        """`message` (an assistant message), its tool calls' names noted."""
        for call in message.get("tool_calls") or []:
            name = call["function"]["name"]
            self._called.add(name)
            self._unanswered.append((call.get("id"), name))
            if call.get("id") is not None:
                self._names[str(call["id"])] = name
        return message

    def name(self, call_id: Any, given: Any = None) -> str:
        """The name of the tool whose call had `call_id` (`given` when the log names it); a
        result that names neither is the answer to the first call not yet answered (JetBrains
        Koog 0.3 writes each result, without the call's id, right after its call)."""
        if call_id is not None:
            self._unanswered = [pending for pending in self._unanswered if str(pending[0]) != str(call_id)]
        elif not (isinstance(given, str) and given) and self._unanswered:
            return self._unanswered.pop(0)[1]
        if isinstance(given, str) and given:
            return given
        return self._names.get(str(call_id), "tool")

    def result(self, content: str, call_id: Any, given: Any = None) -> dict[str, Any]:
        """The `tool` message of `content`, the result of the call `call_id` (of the tool `given`
        when the log names it). A result whose call is not among these messages keeps the call's
        id as `tool_call_id`, so that a chain of calls can name it by its own earlier call (a call
        given only its new messages, as Microsoft Agent Framework's: `calls.Conversations`)."""
        name = self.name(call_id, given)
        message = tool_result(content, name)
        if call_id is not None and not (isinstance(given, str) and given) and str(call_id) not in self._names:
            message["tool_call_id"] = str(call_id)
        return message

    def knows(self, name: str) -> bool:
        """True when a tool of this name was called."""
        return name in self._called


def assistant(texts: list[str], calls: list[dict[str, Any]], role: str, tools: ToolNames) -> list[dict[str, Any]]:
    """The message of `texts` and tool `calls` (none when both are empty)."""
    if not texts and not calls:
        return []
    message: dict[str, Any] = {"role": role, "content": "\n".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    return [tools.called(message)]


def normalised(
    value: Any, path: str, tools: ToolNames | None = None, default_role: str = "user"
) -> list[dict[str, Any]]:
    """The messages of `value` at `path`: text (a message of `default_role`), a message, a list
    of messages, or a request or reply holding them (`held`), in any shape this module reads.
    `tools` are the calls made so far (the input's, when `value` is an output)."""
    tools = tools if tools is not None else ToolNames()
    if value is None:
        return []
    if isinstance(value, str):
        return [{"role": default_role, "content": value}]
    if isinstance(value, dict):
        found = held(value, path, tools, default_role)
        if found is not None:
            return found
        if not MESSAGE_KEYS & value.keys():
            raise Unreadable(path, "holds no chat messages (got an object)")
        if "content" in value and not {"role", "type", "kwargs", "parts"} & value.keys():
            value = {"role": default_role, **value}  # a reply given as its content alone
        value = [value]
    if not isinstance(value, list):
        raise Unreadable(path, f"holds no chat messages (got {type_name(value)})")
    messages: list[dict[str, Any]] = []
    for number, message in enumerate(value):
        messages.extend(message_of(message, f"{path}[{number}]", tools, default_role))
    return final_answers(messages)


def final_answers(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages`, each `final_answer` tool call whose arguments hold a `response` text made
    the assistant's text and its result (BeeAI's "Message has been sent") left out: BeeAI's
    agents keep the reply they gave the user as a call of their `FinalAnswerTool`, so that the
    next call's history holds the call where the previous call's reply held the text."""
    if not any(call["function"]["name"] == FINAL_ANSWER for m in messages for call in m.get("tool_calls") or []):
        return messages
    answered = 0  # final answers made text whose result is still to come
    kept: list[dict[str, Any]] = []
    for message in messages:
        if answered and message.get("role") == "tool" and message.get("name") == FINAL_ANSWER:
            answered -= 1
            continue
        calls, texts = [], [message["content"]] if message.get("content") else []
        for call in message.get("tool_calls") or []:
            response = _final_response(call)
            if response is None:
                calls.append(call)
            else:
                texts.append(response)
                answered += 1
        if len(calls) == len(message.get("tool_calls") or []):
            kept.append(message)
            continue
        changed = {**message, "content": "\n".join(texts) if texts else None}
        changed.pop("tool_calls", None)
        kept.append({**changed, "tool_calls": calls} if calls else changed)
    return kept


def _final_response(call: dict[str, Any]) -> str | None:
    """The `response` text of a BeeAI `final_answer` call, None for any other call."""
    if call["function"]["name"] != FINAL_ANSWER:
        return None
    try:
        arguments = orjson.loads(call["function"]["arguments"] or "null")
    except orjson.JSONDecodeError:
        return None
    response = arguments.get("response") if isinstance(arguments, dict) else None
    return response if isinstance(response, str) else None


def message_list(
    value: Any, path: str, tools: ToolNames | None = None, default_role: str = "user"
) -> list[dict[str, Any]]:
    """The messages of `value`, which must be a list of messages (see `normalised`)."""
    if not isinstance(value, list):
        raise Unreadable(path, f"expected a list of messages, got {type_name(value)}")
    return normalised(value, path, tools, default_role)


def held(value: dict[str, Any], path: str, tools: ToolNames, default_role: str) -> list[dict[str, Any]] | None:
    """The messages of a request or reply object that holds them; None when `value` is a message."""
    if value.get("object") == "response" and isinstance(value.get("output"), list):  # OpenAI Responses
        return normalised(value["output"], f"{path}.output", tools, "assistant")
    if isinstance(value.get("messages"), list) or isinstance(value.get("prompt"), str | list):
        system = (
            [{"role": "system", "content": text_of(value["system"], f"{path}.system")}] if value.get("system") else []
        )
        prompt = normalised(value.get("prompt"), f"{path}.prompt", tools, default_role)  # the Vercel AI SDK's
        return [*system, *prompt, *normalised(value.get("messages"), f"{path}.messages", tools, default_role)]
    if "contents" in value:  # a Gemini request
        return [*gemini_system(value, path), *normalised(value["contents"], f"{path}.contents", tools, default_role)]
    if isinstance(value.get("candidates"), list):  # a Gemini reply: its first candidate
        first = value["candidates"][0] if value["candidates"] else {}
        return normalised(field_of(first, "content", dict, f"{path}.candidates[0].content"), path, tools, "assistant")
    if isinstance(value.get("content"), dict) and "role" not in value:  # Google ADK's LlmResponse
        return normalised(value["content"], f"{path}.content", tools, "assistant")
    if isinstance(value.get("choices"), list) and value["choices"]:  # a chat.completion
        return normalised(value["choices"][0].get("message"), f"{path}.choices[0].message", tools, "assistant")
    if isinstance(value.get("message"), dict) and "index" in value:  # gen_ai.choice, pydantic-ai's v1 event
        return normalised(value["message"], f"{path}.message", tools, "assistant")
    return None


def instructions(value: Any) -> str | None:
    """The system prompt a reply carries: an OpenAI Responses `response`'s `instructions` (the
    OpenAI Agents SDK logs the items it sent as the input, the instructions only in the reply)."""
    if isinstance(value, dict) and value.get("object") == "response" and isinstance(value.get("instructions"), str):
        return value["instructions"]
    return None


def gemini_system(request: dict[str, Any], path: str) -> list[dict[str, Any]]:
    """The system prompt of a Gemini request: `system_instruction` on the request or its `config`
    (text, a `Content`, or parts)."""
    config = request.get("config")
    for where, holder in ((path, request), (f"{path}.config", config if isinstance(config, dict) else {})):
        for key in ("system_instruction", "systemInstruction"):
            given = holder.get(key)
            if given:
                parts = given.get("parts") if isinstance(given, dict) else given
                text = parts if isinstance(parts, str) else text_of(parts, f"{where}.{key}")
                return [{"role": "system", "content": text}]
    return []


def message_of(message: Any, path: str, tools: ToolNames, default_role: str = "user") -> list[dict[str, Any]]:
    """One message, in whichever shape it is, as `calls.Call` messages (a message holding tool
    results gives a `tool` message each)."""
    if isinstance(message, str):
        written = python_message(message) if message.startswith(REPR_STARTS) else None
        if written is None:
            return [{"role": default_role, "content": message}]
        message = written
    if not isinstance(message, dict):
        raise Unreadable(path, f"expected a message object, got {type_name(message)}")
    content = message.get("content")
    if isinstance(content, dict) and "function" in content:
        return []  # a tool's definition, which LangChain's callback logs as a tool message
    if "toolCallId" in message and "toolName" in message:  # the Vercel AI SDK's tool call, listed alone
        return assistant([], [vercel_call(message, path)], "assistant", tools)
    kind = message.get("type")
    serialized = isinstance(message.get("kwargs"), dict) and isinstance(message.get("id"), list)  # LangChain's
    if isinstance(content, list) and _blocks(content, ANTHROPIC_TOOL_BLOCKS):  # also an Anthropic `message`
        return anthropic_message(message, path, tools)
    if not serialized and (kind == "message" or kind is not None and "role" not in message and _item(kind)):
        return responses_item(message, path, tools)
    if isinstance(message.get("parts"), list) or "parts" in message and "role" in message:
        return parts_message(message, path, tools)
    if isinstance(content, list) and _blocks(content, VERCEL_PARTS):
        return vercel_message(message, path, tools)
    if isinstance(content, list) and any(
        isinstance(block, dict) and BEDROCK_BLOCKS & block.keys() for block in content
    ):
        return bedrock_message(message, path, tools)
    return [openai_message(langchain_shaped(message, path, tools), path, tools)]


def _item(kind: Any) -> bool:
    """True for the type of an OpenAI Responses item (not a LangChain message's type)."""
    return isinstance(kind, str) and kind not in ROLE_NAMES and kind not in ROLES


def _blocks(content: list[Any], kinds: frozenset[str]) -> bool:
    return any(isinstance(block, dict) and block.get("type") in kinds for block in content)


def openai_message(message: Any, path: str, tools: ToolNames) -> dict[str, Any]:
    """One OpenAI chat message (`role`, `content` text or parts, `tool_calls`, a tool result's
    `tool_call_id`, the older `function_call`)."""
    role = field_of(message, "role", str, f"{path}.role")
    content = text_of(message.get("content"), f"{path}.content")
    role = ROLE_NAMES.get(role, role)
    written = written_calls(content) if role in ("assistant", "tool") else None
    if written is not None:  # JetBrains Koog: a reply's tool calls as its text, then as a tool message
        return assistant([], written, "assistant", tools)[0]
    if role not in ROLES and tools.knows(role):  # LangChain.js: a tool message's role is its tool's name
        return tool_result(content, role)
    if role == "tool":
        return tools.result(content, message.get("tool_call_id"), message.get("name"))
    if role not in ROLES:
        raise Unreadable(f"{path}.role", f"unknown role {role!r}")
    calls = []
    for number, call in enumerate(field_of(message, "tool_calls", list, f"{path}.tool_calls", required=False) or []):
        function = field_of(call, "function", dict, f"{path}.tool_calls[{number}].function")
        name = field_of(function, "name", str, f"{path}.tool_calls[{number}].function.name")
        calls.append(tool_call(name, function.get("arguments"), call.get("id")))
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        calls.append(tool_call(field_of(legacy, "name", str, f"{path}.function_call.name"), legacy.get("arguments")))
    given = message.get("content") is not None and (content != "" or not calls)  # "" beside a call is no reply
    out: dict[str, Any] = {"role": role, "content": content if given else None}
    if calls:
        out["tool_calls"] = calls
    return tools.called(out)


def written_calls(text: str) -> list[dict[str, Any]] | None:
    """The tool calls a message's text holds when it is nothing else than OpenAI's `tool_calls`
    written as JSON ([{"function": {"name", "arguments"}, "id", "type": "function"}], as JetBrains
    Koog 0.3 writes its replies' calls), else None."""
    if not text.startswith("[{") or '"function"' not in text[:40]:
        return None
    try:
        given = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    calls = []
    for call in given:
        function = call.get("function") if isinstance(call, dict) else None
        if (
            call.get("type") != "function"
            or not isinstance(function, dict)
            or not isinstance(function.get("name"), str)
        ):
            return None
        calls.append(tool_call(function["name"], function.get("arguments"), call.get("id")))
    return calls or None


def langchain_shaped(message: dict[str, Any], path: str, tools: ToolNames) -> dict[str, Any]:
    """A LangChain message (serialized `{"lc": 1, "id": [..., "HumanMessage"], "kwargs": {...}}`,
    or plain with a `type` such as `human`, or with a `role`) in OpenAI's shape, with the tool
    calls LangChain keeps in `tool_calls` ({name, args, id}) or `additional_kwargs`."""
    if isinstance(message.get("kwargs"), dict) and isinstance(message.get("id"), list):
        fields, kind = message["kwargs"], message["kwargs"].get("type") or message["id"][-1]
    elif "role" in message:
        fields, kind = message, None
    else:
        fields, kind = message, message.get("type")
    role = fields.get("role") if kind is None else ROLE_NAMES.get(str(kind), str(kind))
    if role is None and kind is None:
        raise Unreadable(f"{path}.role", "expected text, missing")
    if kind is not None and role not in ROLES:
        raise Unreadable(f"{path}.type", f"unknown message type {kind!r}")
    shaped = {"role": role, "content": fields.get("content"), "name": fields.get("name")}
    shaped["tool_call_id"] = fields.get("tool_call_id") or fields.get("id")  # the GenAI tool event's `id`
    extra = fields.get("additional_kwargs") if isinstance(fields.get("additional_kwargs"), dict) else {}
    calls = fields.get("tool_calls") or extra.get("tool_calls") or []
    if not isinstance(calls, list):
        raise Unreadable(f"{path}.tool_calls", f"expected a list, got {type_name(calls)}")
    shaped["tool_calls"] = [
        call
        if "function" in call
        else {"id": call.get("id"), "function": {"name": call.get("name"), "arguments": call.get("args")}}
        for call in calls
        if isinstance(call, dict)
    ]
    if fields.get("function_call") is not None:
        shaped["function_call"] = fields["function_call"]
    return shaped


def anthropic_message(message: Any, path: str, tools: ToolNames) -> list[dict[str, Any]]:
    """One Anthropic message (`role`, `content` text or blocks): its `tool_result` blocks as tool
    messages, then its `text` and `tool_use` blocks as one message of its role; `thinking`
    blocks are never shown to the judge, other blocks are named."""
    role = field_of(message, "role", str, f"{path}.role")
    if role not in ("user", "assistant"):
        raise Unreadable(f"{path}.role", f"unknown role {role!r}")
    content = message.get("content")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise Unreadable(f"{path}.content", f"expected text or a list of blocks, got {type_name(content)}")
    results, texts, calls = [], [], []
    for number, block in enumerate(content):
        where = f"{path}.content[{number}]"
        kind = field_of(block, "type", str, f"{where}.type")
        if kind == "text":
            texts.append(field_of(block, "text", str, f"{where}.text"))
        elif kind in ("tool_use", "server_tool_use"):
            calls.append(tool_call(field_of(block, "name", str, f"{where}.name"), block.get("input"), block.get("id")))
        elif kind == "tool_result":
            text = text_of(block.get("content"), f"{where}.content")
            text = f"error: {text}" if block.get("is_error") else text
            results.append(tools.result(text, block.get("tool_use_id")))
        elif not hidden(kind):
            texts.append(f"[{kind}]")
    return [*results, *assistant(texts, calls, role, tools)]


def responses_item(item: dict[str, Any], path: str, tools: ToolNames) -> list[dict[str, Any]]:
    """One OpenAI Responses item: a `message` (`input_text`/`output_text` parts), a function or
    custom tool's call and output, a built-in tool's (`web_search_call`, ...); `reasoning` and
    an `item_reference` (which repeats an item) give none."""
    kind = item.get("type", "message")
    if not isinstance(kind, str):
        raise Unreadable(f"{path}.type", f"expected text, got {type_name(kind)}")
    if kind == "message":
        role = field_of(item, "role", str, f"{path}.role")
        if role not in ("system", "developer", "user", "assistant"):
            raise Unreadable(f"{path}.role", f"unknown role {role!r}")
        return [{"role": role, "content": text_of(item.get("content"), f"{path}.content")}]
    if kind in ("function_call", "custom_tool_call"):
        name = field_of(item, "name", str, f"{path}.name")
        arguments = item.get("arguments", item.get("input"))
        return assistant([], [tool_call(name, arguments, item.get("call_id"))], "assistant", tools)
    if kind in ("function_call_output", "custom_tool_call_output"):
        output = item.get("output")
        text = text_of(output, f"{path}.output") if isinstance(output, list) else arguments_text(output)
        return [tools.result(text, item.get("call_id"))]
    if kind in ("reasoning", "item_reference"):
        return []
    if kind.endswith("_call"):  # a built-in tool (web_search_call, file_search_call, ...)
        return assistant([], [tool_call(kind, item.get("action") or "")], "assistant", tools)
    if kind.endswith("_call_output"):
        return [tool_result(arguments_text(item.get("output")), kind.removesuffix("_output"))]
    raise Unreadable(f"{path}.type", f"unknown item type {kind!r}")


def parts_message(message: dict[str, Any], path: str, tools: ToolNames) -> list[dict[str, Any]]:
    """A message of `parts`: the OpenTelemetry GenAI conventions' (typed parts) or Gemini's
    (untyped, keyed by what they hold); its tool results first, each a `tool` message.

    Text parts are read here without a call of their own: a trace repeats each call's history,
    so a span file holds ten or more of them a span (bench/sources.py, docs/benchmarks.md row 15)."""
    role = message.get("role") or "user"
    if role not in ROLES:
        role = ROLE_NAMES.get(role, role) if isinstance(role, str) else role
        if role not in ROLES:
            raise Unreadable(f"{path}.role", f"unknown role {role!r}")
    parts = message.get("parts")
    if isinstance(parts, str):  # gen_ai.system_instructions as JSON text
        try:
            parts = orjson.loads(parts)
        except orjson.JSONDecodeError as error:
            raise Unreadable(f"{path}.parts", f"not JSON ({error})") from None
    if parts is None:
        return []
    if not isinstance(parts, list):
        raise Unreadable(f"{path}.parts", f"expected a list of parts, got {type_name(parts)}")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for number, part in enumerate(parts):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part["content"], str):
            texts.append(part["content"])
        elif not isinstance(part, dict):
            raise Unreadable(f"{path}.parts[{number}]", f"expected a part object, got {type_name(part)}")
        else:
            read = gemini_part if kind is None else semconv_part
            read(part, f"{path}.parts[{number}]", tools, texts, calls, results)
    if role == "tool":  # a tool's result given as text
        return [*results, *[tools.result(text, message.get("id"), message.get("name")) for text in texts]]
    if calls or results:
        return [*results, *assistant(texts, calls, role, tools)]
    return [{"role": role, "content": "\n".join(texts)}] if texts else []


def semconv_part(part: dict[str, Any], where: str, tools: ToolNames, texts: list, calls: list, results: list) -> None:
    """One part of an OpenTelemetry GenAI message, added to the message's texts, calls or results."""
    kind = part["type"]
    if kind == "text":
        texts.append(arguments_text(part.get("content")))
    elif kind == "tool_call":
        calls.append(tool_call(str(part.get("name") or "tool"), part.get("arguments"), part.get("id")))
    elif kind == "tool_call_response":
        given = next((part[key] for key in SEMCONV_RESULT_KEYS if key in part), None)
        results.append(tools.result(arguments_text(_function_result(given)), part.get("id"), part.get("name")))
    elif not hidden(kind):
        texts.append(f"[{kind}]")


def _function_result(given: Any) -> Any:
    """A tool's result as Microsoft Agent Framework 1.0.0b251216 wrote it in a `tool_call_response`
    part: its whole `FunctionResultContent` as JSON text (`{"type": "function_result", "call_id",
    "result"}`) whose `result` is the tool's; later versions write the result alone. Anything
    else as it is."""
    if not isinstance(given, str) or not given.startswith('{"type": "function_result"'):
        return given
    try:
        content = orjson.loads(given)
    except orjson.JSONDecodeError:
        return given
    return content["result"] if isinstance(content, dict) and "result" in content else given


def gemini_part(part: dict[str, Any], where: str, tools: ToolNames, texts: list, calls: list, results: list) -> None:
    """One part of a Gemini `Content` (snake_case as the Python SDK writes it, camelCase as the
    REST API does), added to the message's texts, calls or results; thoughts are hidden."""
    call = part.get("function_call", part.get("functionCall"))
    response = part.get("function_response", part.get("functionResponse"))
    if part.get("thought"):
        return
    if isinstance(part.get("text"), str):
        texts.append(part["text"])
    elif isinstance(call, dict):
        name = field_of(call, "name", str, f"{where}.function_call.name")
        calls.append(tool_call(name, call.get("args") or {}, call.get("id")))
    elif isinstance(response, dict):
        results.append(tools.result(arguments_text(response.get("response")), response.get("id"), response.get("name")))
    else:
        named = [key for key, value in part.items() if value is not None]
        texts.append(f"[{named[0]}]" if named else "[part]")


def vercel_call(call: dict[str, Any], path: str) -> dict[str, Any]:
    """A Vercel AI SDK tool call ({toolCallId, toolName, input}; `args` before AI SDK 5)."""
    name = field_of(call, "toolName", str, f"{path}.toolName")
    return tool_call(name, call.get("input", call.get("args")), call.get("toolCallId"))


def vercel_message(message: dict[str, Any], path: str, tools: ToolNames) -> list[dict[str, Any]]:
    """A Vercel AI SDK message of content parts (`text`, `tool-call`, `tool-result`; `reasoning`
    hidden, files and images named)."""
    role = field_of(message, "role", str, f"{path}.role")
    if role not in ROLES:
        raise Unreadable(f"{path}.role", f"unknown role {role!r}")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for number, part in enumerate(message["content"]):
        where = f"{path}.content[{number}]"
        kind = field_of(part, "type", str, f"{where}.type")
        if kind == "text":
            texts.append(field_of(part, "text", str, f"{where}.text"))
        elif kind == "tool-call":
            calls.append(vercel_call(part, where))
        elif kind == "tool-result":
            output = part.get("output", part.get("result"))  # AI SDK 5: {type, value}; before: the result
            if isinstance(output, dict) and "value" in output and "type" in output:
                output = output["value"]
            results.append(tools.result(arguments_text(output), part.get("toolCallId"), part.get("toolName")))
        elif not hidden(kind):
            texts.append(f"[{kind}]")
    return [*results, *assistant(texts, calls, "assistant" if role == "tool" else role, tools)]


def bedrock_message(message: dict[str, Any], path: str, tools: ToolNames) -> list[dict[str, Any]]:
    """A Bedrock Converse message (`role`, `content` blocks keyed by what they hold: `text`,
    `toolUse` {toolUseId, name, input}, `toolResult` {toolUseId, content of `text` or `json`,
    status}; `reasoningContent` hidden, media named, `cachePoint` none)."""
    role = field_of(message, "role", str, f"{path}.role")
    if role not in ("user", "assistant"):
        raise Unreadable(f"{path}.role", f"unknown role {role!r}")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for number, block in enumerate(message["content"]):
        where = f"{path}.content[{number}]"
        if not isinstance(block, dict):
            raise Unreadable(where, f"expected a content block, got {type_name(block)}")
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif isinstance(block.get("toolUse"), dict):
            use = block["toolUse"]
            calls.append(
                tool_call(field_of(use, "name", str, f"{where}.toolUse.name"), use.get("input"), use.get("toolUseId"))
            )
        elif isinstance(block.get("toolResult"), dict):
            result = block["toolResult"]
            given = field_of(result, "content", list, f"{where}.toolResult.content")
            text = "\n".join(
                part["text"] if isinstance(part.get("text"), str) else arguments_text(part.get("json", part))
                for part in given
                if isinstance(part, dict)
            )
            text = f"error: {text}" if result.get("status") == "error" else text
            results.append(tools.result(text, result.get("toolUseId")))
        elif not {"reasoningContent", "cachePoint"} & block.keys():
            texts.append(f"[{next(iter(block), 'block')}]")
    return [*results, *assistant(texts, calls, role, tools)]
