"""Zendesk: a ticket's conversation log, as the Support API's List Conversation log for Ticket
returns it (`{"events": [...]}`, a whole JSON document, or a page a line; the pages of one
ticket make one conversation): messaging messages (`Messaging::ConversationMessage`) and public
comments (`Comment`), in time order; an internal note (a comment not public) is not the
conversation; HTML bodies become text."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from flowrate.inputs.formats import Record
from flowrate.inputs.sources.base import Item, Reader
from flowrate.inputs.sources.calls import seconds_of
from flowrate.inputs.sources.dialogue import Groups, Message, html_text

MESSAGES = frozenset({"Messaging::ConversationMessage", "Comment"})
TICKET_IN_LINK = re.compile(r"/tickets/(\d+)/conversation_log")


class ZendeskReader(Reader):
    """Zendesk ticket conversation logs, one ticket a record."""

    name = "zendesk"
    title = "Zendesk ticket conversation log (Support API)"
    reads = (
        "ticket_id, events[] (type, author.type, content.type, content.text/body, created_at, metadata.public), links"
    )
    marks = frozenset({"events", "links", "meta"})

    def problem(self, item: Item) -> str | None:
        raw = item.raw
        events = raw.get("events") if isinstance(raw, dict) else None
        if not isinstance(events, list):
            return "events: must be a list of conversation log events"
        first = events[0] if events else None
        if not isinstance(first, dict) or not {"author", "content"} <= first.keys():
            return "events[0]: a conversation log event has `author` and `content`"
        return None

    def read(self, items: Iterable[Item | Record]) -> Iterator[Record]:
        groups = Groups(self.name)  # a ticket's log may come in pages (`meta.has_more`): one conversation
        passed: list[Record] = []
        for item in items:
            if isinstance(item, Record):
                passed.append(item)
                continue
            problem = self.problem(item)
            if problem is not None:
                groups.fail(None, item, problem)
                continue
            key = _ticket(item)
            try:
                timed = _timed(item.raw["events"])
            except ValueError as error:
                groups.fail(key, item, str(error))
                continue
            metadata = {"ticket_id": key} if key != item.default_id else {}
            if not groups.has(key):
                metadata.update(_customer(item.raw["events"]))
            groups.add(key, item, (0.0, 0), [], None, metadata)
            for seconds, number, message in timed:
                groups.add(key, item, (seconds, number), [message], seconds)
        yield from groups.records(passed)


def _ticket(item: Item) -> str:
    """The ticket's id: a `ticket_id` beside the events, else the one the page's links name."""
    raw = item.raw
    if isinstance(raw.get("ticket_id"), str | int):
        return str(raw["ticket_id"])
    links = raw.get("links") if isinstance(raw.get("links"), dict) else {}
    for link in links.values():
        found = TICKET_IN_LINK.search(link) if isinstance(link, str) else None
        if found:
            return found.group(1)
    return item.default_id


def _customer(events: list[Any]) -> dict[str, Any]:
    """The customer's Zendesk user id (`user`) and the channel of their first message
    (`channel`, a messaging message's `source.type`: `web`, `whatsapp`...)."""
    found: dict[str, Any] = {}
    for event in events:
        author = event.get("author") if isinstance(event, dict) else None
        if not isinstance(author, dict) or author.get("type") != "user":
            continue
        user = author.get("zen:support:user_id") or author.get("zen:sunco:user_id")
        if "user" not in found and isinstance(user, str | int) and not isinstance(user, bool):
            found["user"] = str(user)
        source = event.get("source")
        if "channel" not in found and isinstance(source, dict) and isinstance(source.get("type"), str):
            found["channel"] = source["type"]
    return found


def _timed(events: list[Any]) -> list[tuple[float, int, Message]]:
    """The messages of a page of events, each with its time and place; `ValueError` naming an
    event that cannot be read."""
    timed: list[tuple[float, int, Message]] = []
    for number, event in enumerate(events):
        field = f"events[{number}]"
        if not isinstance(event, dict):
            raise ValueError(f"{field}: must be an object")
        if str(event.get("type")) not in MESSAGES or _private(event):
            continue  # a ticket event, or an internal note
        author = event.get("author")
        kind = author.get("type") if isinstance(author, dict) else None
        if not isinstance(kind, str):
            raise ValueError(f"{field}.author.type: is missing")
        seconds = seconds_of(event.get("created_at"))
        if seconds is None:
            raise ValueError(f"{field}.created_at: must be an ISO 8601 time, got {event.get('created_at')!r}")
        role = "user" if kind == "user" else "assistant"  # agent, bot, business: the ones who answer
        timed.append((seconds, number, {"role": role, "content": _text(event.get("content"), field)}))
    return timed


def _private(event: dict[str, Any]) -> bool:
    """An internal note: a comment whose `metadata.public` is false."""
    metadata = event.get("metadata")
    return isinstance(metadata, dict) and metadata.get("public") is False


def _text(content: Any, field: str) -> str:
    if not isinstance(content, dict):
        raise ValueError(f"{field}.content: must be an object")
    kind = content.get("type")
    if kind == "html" and isinstance(content.get("body"), str):
        return html_text(content["body"])
    if isinstance(content.get("text"), str):
        return content["text"]
    if isinstance(content.get("body"), str):
        return content["body"]
    return f"[{kind}]"  # an image, a file, a form: not text the judge can read
