"""Conversations from a platform's messages: a dialogue built as OpenAI chat messages (`role`,
`content` text, `tool_calls`, `name` of a tool's result) becomes a record through
`formats.parse_record`, as the OpenAI-messages reader makes it; the rows of a table that holds
many conversations are grouped by conversation (`Groups`), holding only each row's messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

import orjson

from flowrate.inputs.formats import Record, parse_record
from flowrate.inputs.sources.base import Item
from flowrate.inputs.sources.calls import iso_time

Message = dict[str, Any]


def dialogue_record(
    item: Item,
    format: str,
    key: str,
    messages: list[Message],
    metadata: dict[str, Any],
    times_s: Iterable[float | None],
) -> Record:
    """The record of one conversation: `key` its id, `messages` its dialogue, `metadata` its row's
    metadata, `times_s` the Unix seconds of its messages (the first and last become
    `started_at` / `ended_at`), `item` the place its problems are named by, `format` the reader."""
    known = [seconds for seconds in times_s if seconds is not None]
    metadata = dict(metadata)
    if known:
        metadata.setdefault("started_at", iso_time(min(known)))
        metadata.setdefault("ended_at", iso_time(max(known)))
    where = item.where if key == item.default_id else f"{item.where}: conversation {key!r}"
    raw = {"id": key, "messages": messages, "metadata": metadata}
    record = parse_record(raw, item.source, default_id=key, where=where)
    record.format = format
    return record


def problem_record(item: Item, format: str, text: str, key: str | None = None) -> Record:
    """A record no conversation can be made of: `text` names the field at `item`; `key` the
    conversation it was of, when known."""
    where = item.where if key is None else f"{item.where}: conversation {key!r}"
    return Record(source=item.source, format=format, problems=[f"{where}: {text}"], given_id=key)


def tool_call(name: str, arguments: Any) -> Message:
    """The assistant's call of tool `name` with `arguments` (text, or JSON-like, written as JSON)."""
    text = arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()
    return {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": name, "arguments": text}}]}


def tool_result(name: str, output: Any) -> Message:
    """What tool `name` returned (text, or JSON-like, written as JSON)."""
    text = output if isinstance(output, str) else orjson.dumps(output).decode()
    return {"role": "tool", "name": name, "content": text}


def json_field(value: Any) -> Any:
    """A JSON column as a warehouse exports it: text holding JSON (CSV, BigQuery's JSON type), or
    already decoded (JSONL, Parquet structs); `ValueError` when text is not JSON."""
    if isinstance(value, str | bytes):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError as error:
            raise ValueError(f"is not JSON: {error}") from None
    return value


def html_text(html: str) -> str:
    """The text a reader sees of an HTML message body: tags dropped, a paragraph, a line break or
    a list item a new line, entities decoded."""
    parser = _TextParser()
    parser.feed(html)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).split("\n"))
    return "\n".join(line for line in lines if line)


class _TextParser(HTMLParser):
    BREAKS = frozenset({"br", "p", "div", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, _attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._hidden += 1
        elif tag in self.BREAKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._hidden = max(0, self._hidden - 1)
        elif tag in self.BREAKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.parts.append(data)


@dataclass
class _Group:
    first: Item
    entries: list[tuple[Any, int, list[Message]]] = field(default_factory=list)
    times_s: list[float] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None


class Groups:
    """The rows of one file, grouped by conversation (`add`), then read out (`records`): each
    conversation's messages in the order of its rows' `order` (ties in file order). A row that
    cannot be read makes its conversation a problem naming that row (`fail`), never a dialogue
    missing a turn. Only each row's messages are held, not the row.

    `format` names the source on each record."""

    def __init__(self, format: str):
        self.format = format
        self._groups: dict[str, _Group] = {}
        self._problems: list[Record] = []
        self._rows = 0

    def _group(self, key: str, item: Item) -> _Group:
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group(item)
        return group

    def add(
        self,
        key: str,
        item: Item,
        order: Any,
        messages: list[Message],
        seconds: float | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Row `item` of conversation `key`: its `messages`, its place `order` among the
        conversation's rows, its time (Unix `seconds`) and `metadata` for the conversation (a
        later row's value of a key replaces an earlier one's; objects are merged key by key)."""
        group = self._group(key, item)
        self._rows += 1
        group.entries.append((order, self._rows, messages))
        if seconds is not None:
            group.times_s.append(seconds)
        for name, value in (metadata or {}).items():
            known = group.metadata.get(name)
            group.metadata[name] = {**known, **value} if isinstance(known, dict) and isinstance(value, dict) else value

    def has(self, key: str) -> bool:
        """Whether conversation `key` has a row yet."""
        return key in self._groups

    def note(self, key: str, metadata: dict[str, Any]) -> None:
        """More `metadata` for conversation `key`, when it has rows (its own values are kept)."""
        group = self._groups.get(key)
        if group is not None:
            group.metadata = {**metadata, **group.metadata}

    def fail(self, key: str | None, item: Item, text: str) -> None:
        """Row `item` cannot be read (`text` names its field): its conversation `key` becomes a
        problem (None: the row names no conversation, and is a problem of its own)."""
        if key is None:
            self._problems.append(problem_record(item, self.format, text))
            return
        group = self._group(key, item)
        if group.problem is None:
            group.problem = f"{item.where}: {text}"

    def records(self, passed: Iterable[Record] = ()) -> Iterator[Record]:
        """The decode problems `passed`, the rows' problems, then each conversation in the order
        its first row was read."""
        yield from passed
        yield from self._problems
        for key, group in self._groups.items():
            if group.problem is not None:
                yield Record(
                    source=group.first.source,
                    format=self.format,
                    problems=[f"conversation {key!r}: {group.problem}"],
                    given_id=key,
                )
                continue
            group.entries.sort(key=lambda entry: (entry[0], entry[1]))
            messages = [message for _, _, row in group.entries for message in row]
            yield dialogue_record(group.first, self.format, key, messages, group.metadata, group.times_s)
