"""Rasa: conversations from the tracker store, in its three exports.

- A tracker, as the HTTP API's `GET /conversations/{id}/tracker` returns it and the Mongo tracker
  store keeps it: `sender_id` and its `events`, a conversation a record (a whole JSON document, a
  list of them, or one a line). The Redis and in-memory tracker stores keep the tracker's dialogue
  (`Dialogue.as_dict()`: `name`, the sender id, and `events`), read the same way.
- Events one a line, each with its `sender_id`, as `rasa export` publishes them to an event broker.
- The SQL tracker store's `events` table exported as CSV or Parquet: `sender_id`, `type_name`,
  `timestamp` and the event as JSON text in `data`, rows of many conversations, grouped by
  `sender_id` and ordered by `timestamp`, then `id`.

`user` and `bot` events are the dialogue; an `action` event of the bot's own actions (not
`utter_*`, whose text is the `bot` event that follows, and not Rasa's default actions) is a tool
call; the last value of each slot goes to the conversation's `metadata.slots`; other events are
not shown to the judge.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from flowrate.inputs.formats import Record
from flowrate.inputs.sources.base import Item, Reader
from flowrate.inputs.sources.calls import seconds_of
from flowrate.inputs.sources.dialogue import (
    Groups,
    Message,
    dialogue_record,
    json_field,
    problem_record,
    tool_call,
)

# Rasa's default actions (rasa.shared.core.constants.DEFAULT_ACTION_NAMES): the framework's own
# steps, not the bot's tools.
DEFAULT_ACTIONS = frozenset(
    {
        "action_listen",
        "action_restart",
        "action_session_start",
        "action_default_fallback",
        "action_deactivate_loop",
        "action_revert_fallback_events",
        "action_default_ask_affirmation",
        "action_default_ask_rephrase",
        "action_two_stage_fallback",
        "action_unlikely_intent",
        "action_back",
        "action_extract_slots",
        "action_run_slot_mappings",
    }
)


class RasaReader(Reader):
    """Rasa trackers, broker events and the SQL tracker store's events table."""

    name = "rasa"
    title = "Rasa tracker store (trackers: HTTP API, Mongo and Redis stores; broker events; SQL events table)"
    reads = "sender_id (or a Redis tracker's name), events[] | event | type_name + data: event (user, bot, action, slot), text, name, value, timestamp, input_channel"
    marks = frozenset({"sender_id", "type_name", "events"})

    def problem(self, item: Item) -> str | None:
        raw = item.raw
        if not isinstance(raw, dict) or ("sender_id" not in raw and not _dialogue_name(raw)):
            return "sender_id: is missing"
        if "type_name" in raw or "event" in raw:
            return None
        events = raw.get("events")
        if not isinstance(events, list) or (events and not isinstance(events[0], dict)):
            return "events: must be a list of tracker events"
        if events and "event" not in events[0]:
            return "events[0].event: is missing"
        return None

    def read(self, items: Iterable[Item | Record]) -> Iterator[Record]:
        groups = Groups(self.name)
        passed: list[Record] = []
        for item in items:
            if isinstance(item, Record):
                passed.append(item)
            elif isinstance(item.raw, dict) and ("type_name" in item.raw or "event" in item.raw):
                _add_row(groups, item)
            else:
                yield from passed
                passed.clear()
                yield self._tracker(item)
        yield from groups.records(passed)

    def _tracker(self, item: Item) -> Record:
        problem = self.problem(item)
        if problem is not None:
            return problem_record(item, self.name, problem)
        key = str(item.raw["sender_id"] if "sender_id" in item.raw else item.raw["name"])
        try:
            dialogue = _Dialogue()
            for number, event in enumerate(item.raw["events"]):
                dialogue.add(event, f"events[{number}]")
        except ValueError as error:
            return problem_record(item, self.name, str(error), key)
        metadata = {"sender_id": key, **dialogue.metadata()}
        return dialogue_record(item, self.name, key, dialogue.messages, metadata, dialogue.times_s)


class _Dialogue:
    """The messages of a conversation's events, read one event at a time."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.times_s: list[float | None] = []
        self.slots: dict[str, Any] = {}
        self.channel: str | None = None

    def add(self, event: Any, field: str) -> None:
        """Event `event` (named `field` in problems); `ValueError` when it cannot be read."""
        message = self.message(event, field)
        if message is not None:
            self.messages.append(message)
            self.times_s.append(seconds_of(event.get("timestamp")))

    def message(self, event: Any, field: str) -> Message | None:
        """The message event `event` is, None when it is none (and its slot or channel noted)."""
        if not isinstance(event, dict):
            raise ValueError(f"{field}: must be an object")
        kind = event.get("event")
        if not isinstance(kind, str):
            raise ValueError(f"{field}.event: is missing")
        if kind in ("user", "bot"):
            text = event.get("text")
            if text is not None and not isinstance(text, str):
                raise ValueError(f"{field}.text: must be text")
            if kind == "user" and isinstance(event.get("input_channel"), str):
                self.channel = self.channel or event["input_channel"]
            return {"role": "user" if kind == "user" else "assistant", "content": text or ""}
        if kind == "slot" and isinstance(event.get("name"), str):
            self.slots[event["name"]] = event.get("value")
        elif kind == "action":
            name = event.get("name")
            if not isinstance(name, str):
                raise ValueError(f"{field}.name: an action event names its action")
            if name not in DEFAULT_ACTIONS and not name.startswith("utter_"):
                return tool_call(name, "")
        return None

    def metadata(self) -> dict[str, Any]:
        """The conversation's channel and the last value of each slot that has one."""
        metadata: dict[str, Any] = {}
        if self.channel:
            metadata["channel"] = self.channel
        slots = {name: value for name, value in self.slots.items() if value is not None}
        if slots:
            metadata["slots"] = slots
        return metadata


def _dialogue_name(raw: dict[str, Any]) -> bool:
    """`raw` is a tracker's dialogue as the Redis tracker store keeps it (`{"events", "name"}`)."""
    return isinstance(raw.get("name"), str) and bool(raw["name"]) and isinstance(raw.get("events"), list)


def _add_row(groups: Groups, item: Item) -> None:
    """A broker event or a row of the SQL events table, into its conversation."""
    raw = item.raw
    key = str(raw["sender_id"]) if raw.get("sender_id") not in (None, "") else None
    if key is None:
        groups.fail(None, item, "sender_id: is missing")
        return
    if "type_name" in raw:
        try:
            event = json_field(raw.get("data"))
        except ValueError as error:
            groups.fail(key, item, f"data: {error}")
            return
        if not isinstance(event, dict):
            groups.fail(key, item, "data: must be the event as a JSON object")
            return
        event = {"event": raw["type_name"], **event}
    else:
        event = raw
    dialogue = _Dialogue()
    try:
        message = dialogue.message(event, "data" if "type_name" in raw else "event")
    except ValueError as error:
        groups.fail(key, item, str(error))
        return
    seconds = seconds_of(raw.get("timestamp", event.get("timestamp")))
    order = (seconds if seconds is not None else float("inf"), _row_id(raw))
    groups.add(key, item, order, [message] if message else [], seconds, {"sender_id": key, **dialogue.metadata()})


def _row_id(raw: dict[str, Any]) -> float:
    try:
        return float(raw.get("id", 0))
    except (TypeError, ValueError):
        return 0.0
