"""Conversations from calls: a trace or an API log holds one record per call to a model, and each
call's input repeats the history. The calls of one conversation (by its key) become one dialogue:
the longest history, that is the last call's input and its output, with every other call's
history checked to be a part of it, message by message by meaning (`_same`: whitespace and the
JSON of tool-call arguments as tools re-serialize them do not count; the copy read first is kept).
A system prompt that changed between calls (one that carries the time) is noted, not fatal: the
conversation is read with its first call's. A call of a system prompt of its own whose history
goes elsewhere (a router's, a guardrail's, another agent's) begins another chain of the session;
the conversation is the chain with the most user messages (`_conversational`) and the calls of
the others are counted in a notice. A call given only the messages new since the last
(Microsoft Agent Framework's: the user's next message or the tools' results) continues its
chain (`_continuation`), its tool results named by the chain's calls (`_named`). A run of tool calls and results is compared as the calls and the
results, in any order (`_tools_ahead`: Koog's calls, then each result after its call). A history that was edited or forked under the same system
prompt is a problem naming both calls, never merged. Only the longest history of each chain is
held, not its calls.

Messages are in OpenAI's chat shape, as `formats.parse_record` reads them: `role`, `content`
(text), `tool_calls` ([{"function": {"name", "arguments"}}]) and `name` (of a tool's result).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from flowrate.inputs.conversation import Source
from flowrate.inputs.formats import Record, parse_record
from flowrate.inputs.sources.base import Item


@dataclass
class Call:
    """One call to the model: its conversation's `key` (None: the source has none, and the call
    is a conversation of its own), when it started and ended (Unix seconds, None: not given),
    its input `messages` and `output` messages, the `item` it was read from, and metadata for
    the conversation's row (source ids, user, channel, model, tags, language)."""

    key: str | None
    messages: list[dict[str, Any]]
    output: list[dict[str, Any]]
    item: Item
    started_s: float | None = None
    ended_s: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: the call failed: `output` is the one message saying so (`failed_reply`), the bot's reply to
    #: the input's last user message unless a later call shows that message answered
    failed: bool = False


def failed_reply(why: str) -> dict[str, Any]:
    """The assistant message that stands for a failed call's reply: what the user got was nothing."""
    return {"role": "assistant", "content": f"[no reply: the call failed: {why}]"}


@dataclass(slots=True)
class _Chain:
    """One chain of calls in a conversation: its longest history, where the call it ends with was
    read, and how many calls it holds."""

    history: list[dict[str, Any]]
    longest: str
    calls: int = 1


@dataclass(slots=True)
class _Dialogue:
    chains: list[_Chain]  # the first is the first call's; another begins at a call of its own system prompt
    source: Source  # where the first call was read, which names the conversation's place
    first: str
    started_s: float | None
    ended_s: float | None
    metadata: dict[str, Any]
    problem: str | None = None
    system_changed: bool = False


def _told(history: list[dict[str, Any]], failures: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    """`history` with each failed call's reply (after the messages before it) where no reply came after its input."""
    if not failures:
        return history
    history = list(history)
    for at, reply in sorted(failures, key=lambda failure: -failure[0]):
        if at <= len(history) and (at == len(history) or history[at].get("role") != "assistant"):
            history.insert(at, reply)
    return history


class Conversations:
    """The calls of one file, grouped by key into dialogues (`add`), then read out (`records`).

    `format` names the source on each record; `keyless` counts the calls that had no
    conversation key (each grouped by its fallback key)."""

    def __init__(self, format: str):
        self.format = format
        self.keyless = 0
        self._dialogues: dict[str, _Dialogue] = {}
        self._problems: list[Record] = []
        # by key: (the chain, the messages of the chain before it, the reply)
        self._failures: dict[str, list[tuple[int, int, dict[str, Any]]]] = {}
        self._keyless: list[str] = []  # the conversations grouped by their fallback key, in order
        #: what the file's conversations were read past, told once `records` has yielded them all
        self.notices: list[str] = []

    def add(self, call: Call, fallback_key: str) -> None:
        """Take `call` into its conversation; `fallback_key` (the trace, the response) groups
        it when the source gives no conversation key."""
        self.keyless += call.key is None
        key = call.key or fallback_key
        history = [*call.messages, *([] if call.failed else call.output)]
        known = self._dialogues.get(key)
        if known is None and call.key is None:
            self._keyless.append(key)
        if known is None:
            # where the calls were, not their items: an item holds its whole decoded line (100
            # spans a line in bench/sources.py), which kept 249 MB against 117 MB for 100,000 spans
            item = call.item
            chain = _Chain(history, item.where)
            self._dialogues[key] = _Dialogue(
                [chain], item.source, item.where, call.started_s, call.ended_s, dict(call.metadata)
            )
        if known is None:
            self._failed(key, call, 0, len(call.messages))
            return
        known.started_s = _earliest(known.started_s, call.started_s)
        known.ended_s = _latest(known.ended_s, call.ended_s)
        known.metadata = {**call.metadata, **known.metadata}
        if known.problem is not None:
            return
        forked: tuple[_Chain, int] | None = None
        for number, chain in enumerate(known.chains):
            differs, system, own = _divergence(chain.history, history)
            offset = _system_count(history) - _system_count(chain.history)
            if differs is None:  # the same chain: a system prompt changed between calls is noted, not fatal
                known.system_changed |= system
                chain.calls += 1
                self._failed(key, call, number, len(call.messages) - offset)
                if len(history) - offset > len(chain.history):  # the messages read first kept, as the model wrote them
                    chain.history.extend(history[len(chain.history) + offset :])
                    chain.longest = call.item.where
                return
            ahead = None if own else _tools_ahead(chain.history, history)
            if ahead is not None:  # the same tool calls, their results between them in one of the calls
                if ahead:
                    chain.history[_system_count(chain.history) :] = history[_system_count(history) :]
                    chain.longest = call.item.where
                chain.calls += 1
                self._failed(key, call, number, len(call.messages) - offset)
                return
            new = _continuation(chain.history, history)
            if new is not None:  # a call given only its new messages (Microsoft Agent Framework's)
                chain.history.extend(_named(new, chain.history))
                chain.calls += 1
                chain.longest = call.item.where
                self._failed(key, call, number, len(chain.history))
                return
            if not own and forked is None:
                forked = chain, differs
        if forked is not None:
            chain, differs = forked
            known.problem = (
                f"the history of the call at {call.item.where} differs from the call at {chain.longest}"
                f" at message {differs + 1}: edited or forked, not merged"
            )
        else:  # a call of a system prompt of its own that is no chain's: a router's, a guardrail's, another agent's
            self._failed(key, call, len(known.chains), len(call.messages))
            known.chains.append(_Chain(history, call.item.where))

    def _beginnings(self, shown: str) -> list[str]:
        """The notice of the conversations with no key whose history is the beginning of a longer
        one's of the file (the same system prompt): a framework that names no conversation
        writes each run of one conversation as a trace of its own (Microsoft Agent Framework's
        local sessions). Each is still read as it is: two users may well open alike."""
        histories: dict[tuple, list[tuple[str, list[dict[str, Any]]]]] = {}
        for key in self._keyless if len(self._keyless) > 1 else []:
            dialogue = self._dialogues.get(key)
            if dialogue is None or dialogue.problem is not None:
                continue
            history = _chain_of(dialogue).history
            opening = tuple(_comparable(message, _meaning) for message in history[: _system_count(history) + 1])
            histories.setdefault(opening, []).append((key, history))
        beginnings: list[tuple[str, str]] = []
        for alike in histories.values():
            longest_key, longest = max(alike, key=lambda pair: len(pair[1]))
            for key, history in alike:
                if len(history) >= len(longest):
                    continue
                differs, system, _ = _divergence(history, longest)
                if differs is None and not system:
                    beginnings.append((key, longest_key))
        if not beginnings:
            return []
        first, longer = beginnings[0]
        return [
            f"{shown}: {len(beginnings)} conversation(s) with no conversation key begin as a longer one of the file"
            f" does (the first: {first!r}, the beginning of {longer!r}): when they are the runs of one conversation,"
            " each is judged as a conversation of its own; a conversation key on their calls, or"
            " --conversation-key, makes them one"
        ]

    def _failed(self, key: str, call: Call, chain: int, at: int) -> None:
        """Note a failed `call`'s reply after the first `at` messages of the chain `chain` of `key`
        (kept beside the dialogues, not in each: one more field took 5 MB of 10,000 dialogues)."""
        if call.failed:
            self._failures.setdefault(key, []).extend((chain, at, reply) for reply in call.output)

    def drop(self, key: str) -> None:
        """Forget the conversation `key` (its problem is told instead: a call of it is broken)."""
        self._dialogues.pop(key, None)

    def problem(self, item: Item, text: str) -> None:
        """A record of the file that is no call: `text` names its field."""
        self._problems.append(Record(source=item.source, format=self.format, problems=[f"{item.where}: {text}"]))

    def records(self) -> Iterator[Record]:
        """The problems, then every conversation in the order its first call was read."""
        yield from self._problems
        changed: list[str] = []
        set_aside = [0, 0]  # calls, conversations
        for key, dialogue in self._dialogues.items():
            where = f"{dialogue.first}: conversation {key!r}"
            if dialogue.problem is not None:
                problems = [f"{where}: {dialogue.problem}"]
                yield Record(source=dialogue.source, format=self.format, problems=problems, given_id=key)
                continue
            changed += [key] if dialogue.system_changed else []
            chain = dialogue.chains[0] if len(dialogue.chains) == 1 else _conversational(dialogue.chains)
            failures = [
                (at, reply) for index, at, reply in self._failures.get(key, []) if dialogue.chains[index] is chain
            ]
            if len(dialogue.chains) > 1:
                set_aside[0] += sum(other.calls for other in dialogue.chains) - chain.calls
                set_aside[1] += 1
            history = chain.history
            metadata = dict(dialogue.metadata)
            for name, seconds in (("started_at", dialogue.started_s), ("ended_at", dialogue.ended_s)):
                if seconds is not None:
                    metadata.setdefault(name, iso_time(seconds))
            raw = {"id": key, "messages": _told(history, failures), "metadata": metadata}
            record = parse_record(raw, dialogue.source, default_id=key, where=where)
            record.format = self.format
            yield record
        shown = next(iter(self._dialogues.values())).source.path if self._dialogues else ""
        if changed:
            self.notices.append(
                f"{shown}: the system prompt changed between the calls of {len(changed)} conversation(s)"
                f" (the first: {changed[0]!r}); each is read with the system prompt of its first call"
            )
        self.notices.extend(self._beginnings(shown))
        if set_aside[0]:
            self.notices.append(
                f"{shown}: {set_aside[0]} call(s) of {set_aside[1]} conversation(s) were left out: each had a"
                " system prompt and a history of its own (a router's, a guardrail's or another agent's call);"
                " a conversation is its chain of calls with the most user messages"
            )


def _chain_of(dialogue: _Dialogue) -> _Chain:
    """The chain a dialogue is read as."""
    return dialogue.chains[0] if len(dialogue.chains) == 1 else _conversational(dialogue.chains)


def _conversational(chains: list[_Chain]) -> _Chain:
    """The conversation's chain among a session's: the one with the most user messages (the one
    the user answers), then the longest, then the first."""
    return max(chains, key=lambda chain: (sum(m.get("role") == "user" for m in chain.history), len(chain.history)))


def _continuation(chain: list[dict[str, Any]], history: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The messages of `history` after its system prompt when they only continue `chain`: a call
    given the new messages alone (the user's next message or the tools' results, after the
    chain's reply), with no system prompt or the chain's. A call that repeats the history
    repeats the reply it follows, so a history holding the chain's last reply, or beginning as
    the chain does after its system prompt, is no continuation (an edit or a fork)."""
    system = _system_count(history)
    new = history[system:]
    if not new or not chain or chain[-1].get("role") != "assistant" or new[0].get("role") not in ("user", "tool"):
        return None
    if system and not (system < len(chain) and all(_same(a, b) for a, b in zip(history[:system], chain))):
        return None
    begins = next((message for message in chain if message.get("role") != "system"), None)
    if (begins is not None and _same(begins, new[0])) or any(_same(chain[-1], message) for message in new):
        return None
    return new


def _named(new: list[dict[str, Any]], chain: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`new`, each tool result that its own call could not name (it kept its call's
    `tool_call_id`: `messages.ToolNames.result`) named by the tool whose call in `chain` had that id."""
    unnamed = [message for message in new if message.get("role") == "tool" and "tool_call_id" in message]
    if unnamed:
        names = {
            str(call.get("id")): call["function"]["name"]
            for message in chain
            for call in message.get("tool_calls") or []
            if call.get("id") is not None
        }
        for message in unnamed:
            message["name"] = names.get(message["tool_call_id"], message["name"])
    return new


def _tools_ahead(chain: list[dict[str, Any]], history: list[dict[str, Any]]) -> bool | None:
    """Whether `history` goes further than `chain` when the two agree once each run of tool calls
    and tool results is taken as the calls it made and the results it got, in any order (JetBrains
    Koog logs a reply of two calls as two messages, and the next call's input with each result
    after its call); only the last run of the one behind may lack results (or calls). None when
    they disagree."""
    one, other = _units(chain[_system_count(chain) :]), _units(history[_system_count(history) :])
    for number, (a, b) in enumerate(zip(one, other)):
        if a == b:
            continue
        if not (isinstance(a, _Run) and isinstance(b, _Run)):
            return None
        if number == len(one) - 1 and a.within(b):
            return True
        if number == len(other) - 1 and b.within(a):
            return False
        return None
    return len(other) > len(one)


@dataclass(frozen=True, slots=True)
class _Run:
    """A run of tool calls and results: the calls (name, arguments' JSON) and the results' texts."""

    calls: tuple[tuple[str, str], ...]
    results: tuple[str, ...]

    def within(self, other: _Run) -> bool:
        return set(self.calls) <= set(other.calls) and set(self.results) <= set(other.results)


def _units(history: list[dict[str, Any]]) -> list[Any]:
    """`history` as `_comparable` messages, each run of tool calls (an assistant message of calls
    alone) and tool results as one `_Run`."""
    units: list[Any] = []
    calls: list[tuple[str, str]] = []
    results: list[str] = []
    for message in [*history, None]:
        in_run = message is not None and (
            message.get("role") == "tool" or (message.get("tool_calls") and not message.get("content"))
        )
        if in_run and message is not None:
            if message.get("role") == "tool":
                results.append(" ".join(str(message.get("content") or "").split()))
            else:
                calls.extend(_comparable(message, _meaning)[2])
            continue
        if calls or results:
            units.append(_Run(tuple(sorted(calls)), tuple(sorted(results))))
            calls, results = [], []
        if message is not None:
            units.append(_comparable(message, _meaning))
    return units


def _divergence(one: list[dict[str, Any]], other: list[dict[str, Any]]) -> tuple[int | None, bool, bool]:
    """Where two calls' histories first differ after their system prompts (counted in `one`),
    None when one begins the other; whether their system prompts differ (one carries the time,
    or one has none); and whether each has a system prompt of its own (a call of another chain)."""
    skip_one, skip_other = _system_count(one), _system_count(other)
    # as nearly every call: no slice copied (the slices took 0.6 s of CPU over bench/sources.py's 100,000 calls)
    if skip_one == skip_other:
        system = False
        for number, (a, b) in enumerate(zip(one, other)):
            if not _same(a, b):
                if number >= skip_one:
                    return number, system, system and skip_one > 0
                system = True
        return None, system, False
    prompts = one[:skip_one], other[:skip_other]
    system = len(prompts[0]) != len(prompts[1]) or not all(_same(a, b) for a, b in zip(*prompts))
    for number, (a, b) in enumerate(zip(one[skip_one:], other[skip_other:])):
        if not _same(a, b):
            return skip_one + number, system, system and bool(skip_one and skip_other)
    return None, system, False


def _system_count(history: list[dict[str, Any]]) -> int:
    """How many system messages begin `history`."""
    count = 0
    while count < len(history) and history[count].get("role") == "system":
        count += 1
    return count


def iso_time(seconds: float) -> str:
    """Unix seconds as ISO 8601 UTC text, as rows and `--closed-after` read it."""
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def seconds_of(value: Any) -> float | None:
    """A time as Unix seconds: ISO 8601 text, or a number (or numeric text) of seconds,
    milliseconds (above 1e11) or nanoseconds (above 1e14, as OTLP's `startTimeUnixNano`)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            try:
                moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            except ValueError:
                return None
            return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
    if not isinstance(value, int | float):
        return None
    number = float(value)
    if number > 1e14:
        return number / 1e9
    if number > 1e11:
        return number / 1e3
    return number


def _same(one: dict[str, Any], other: dict[str, Any]) -> bool:
    """Whether two calls' copies of a message say the same: the text as written first (the cheap
    test most pairs pass), else by meaning: the text's runs of whitespace as one space, and
    tool-call arguments as the JSON they hold, as tools re-serialize them with other spacing or
    key order, or encode them twice (a JSON string of the JSON)."""
    return _comparable(one) == _comparable(other) or _comparable(one, _meaning) == _comparable(other, _meaning)


def _comparable(message: dict[str, Any], arguments: Callable[[Any], str] = str) -> tuple:
    calls = tuple(
        (str((call.get("function") or {}).get("name")), arguments((call.get("function") or {}).get("arguments")))
        for call in message.get("tool_calls") or []
    )
    text = str(message.get("content") or "")
    return message.get("role"), (text.strip() if arguments is str else " ".join(text.split())), calls


def _meaning(arguments: Any) -> str:
    """Tool-call arguments as one text: the JSON they hold (decoded up to twice), written compact
    with its keys sorted; text that holds no JSON as it is."""
    for _ in range(2):
        if not isinstance(arguments, str):
            break
        try:
            arguments = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            break
    if isinstance(arguments, str):
        return arguments
    try:
        return orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return str(arguments)


def _earliest(one: float | None, other: float | None) -> float | None:
    return min((t for t in (one, other) if t is not None), default=None)


def _latest(one: float | None, other: float | None) -> float | None:
    return max((t for t in (one, other) if t is not None), default=None)
