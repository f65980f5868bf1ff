"""Intercom: a conversation a record, as the REST API's Retrieve a conversation returns it (a
whole JSON document, a list of them, or one a line): the `source` is the first message, then the
`conversation_parts`; HTML bodies become text; internal notes are not the conversation."""

from __future__ import annotations

from typing import Any

from flowrate.inputs.formats import Record
from flowrate.inputs.sources.base import Item, RecordReader
from flowrate.inputs.sources.calls import seconds_of
from flowrate.inputs.sources.dialogue import Message, dialogue_record, html_text, problem_record

CUSTOMERS = frozenset({"user", "lead", "contact"})  # the other authors (admin, bot, team) answer
HIDDEN_PARTS = frozenset({"note", "note_and_reopen"})  # teammates' internal notes


class IntercomReader(RecordReader):
    """Intercom conversations (REST API), one conversation a record."""

    name = "intercom"
    title = "Intercom conversations (REST API)"
    reads = "id, source (author.type, body, delivered_as), conversation_parts.conversation_parts[] (part_type, author.type, body, created_at), contacts, tags, state"
    marks = frozenset({"conversation_parts", "source"})

    def problem(self, item: Item) -> str | None:
        raw = item.raw
        if not isinstance(raw, dict) or raw.get("type") != "conversation":
            return 'type: must be "conversation"'
        if not isinstance(raw.get("source"), dict) and not isinstance(raw.get("conversation_parts"), dict):
            return "has neither `source` nor `conversation_parts`"
        return None

    def record(self, item: Item) -> Record:
        problem = self.problem(item)
        raw = item.raw if isinstance(item.raw, dict) else {}
        key = str(raw.get("id") or item.default_id)
        if problem is not None:
            return problem_record(item, self.name, problem)
        try:
            messages, times_s = _dialogue(raw)
        except ValueError as error:
            return problem_record(item, self.name, str(error), key)
        return dialogue_record(item, self.name, key, messages, _metadata(raw), times_s)


def _dialogue(raw: dict[str, Any]) -> tuple[list[Message], list[float | None]]:
    """The messages and their times; `ValueError` naming a part that cannot be read."""
    messages: list[Message] = []
    times_s: list[float | None] = []
    source = raw.get("source")
    if isinstance(source, dict) and source.get("body"):
        messages.append(_message(source, "source"))
        times_s.append(seconds_of(raw.get("created_at")))
    listing = raw.get("conversation_parts") or {}
    parts = listing.get("conversation_parts") if isinstance(listing, dict) else None
    if not isinstance(parts, list):
        raise ValueError("conversation_parts.conversation_parts: must be a list")
    total = listing.get("total_count")
    if isinstance(total, int) and not isinstance(total, bool) and total > len(parts):
        # the API lists at most 500 parts: judged on those, a conversation would be judged on a part of it
        raise ValueError(
            f"conversation_parts: the API listed {len(parts)} of its {total} parts (total_count), the rest cut off;"
            " export the whole conversation"
        )
    for number, part in enumerate(parts):
        field = f"conversation_parts.conversation_parts[{number}]"
        if not isinstance(part, dict):
            raise ValueError(f"{field}: must be an object")
        if str(part.get("part_type")) in HIDDEN_PARTS or not part.get("body"):
            continue  # a note, or an event with no message (assignment, close, snooze)
        messages.append(_message(part, field))
        times_s.append(seconds_of(part.get("created_at")))
    return messages, times_s


def _message(part: dict[str, Any], field: str) -> Message:
    author = part.get("author")
    kind = author.get("type") if isinstance(author, dict) else None
    if not isinstance(kind, str):
        raise ValueError(f"{field}.author.type: is missing")
    if not isinstance(part["body"], str):
        raise ValueError(f"{field}.body: must be text")
    return {"role": "user" if kind in CUSTOMERS else "assistant", "content": html_text(part["body"])}


def _metadata(raw: dict[str, Any]) -> dict[str, Any]:
    metadata: dict[str, Any] = {"conversation_id": str(raw.get("id"))}
    given = raw.get("source")
    source: dict[str, Any] = given if isinstance(given, dict) else {}
    contacts = [contact for contact in _listed(raw, "contacts") if isinstance(contact, dict) and contact.get("id")]
    if contacts:
        metadata["user"] = str(contacts[0]["id"])
    if isinstance(source.get("delivered_as"), str):
        metadata["channel"] = source["delivered_as"]
    names = [tag["name"] for tag in _listed(raw, "tags") if isinstance(tag, dict) and isinstance(tag.get("name"), str)]
    if names:
        metadata["tags"] = names
    if isinstance(raw.get("state"), str):
        metadata["state"] = raw["state"]
    return metadata


def _listed(raw: dict[str, Any], name: str) -> list[Any]:
    """The items of an Intercom list object (`{"type": "tag.list", "tags": [...]}`), else none."""
    listing = raw.get(name)
    items = listing.get(name) if isinstance(listing, dict) else None
    return items if isinstance(items, list) else []
