"""flowrate's own format: a conversation as `turns` ({input, actual_output}) or as OpenAI chat
`messages` (which is also a Hugging Face chat dataset's `messages` column), per record
(`formats.parse_record`)."""

from __future__ import annotations

from flowrate.inputs.formats import Record, parse_record
from flowrate.inputs.sources.base import Item, RecordReader


class NativeReader(RecordReader):
    """flowrate's turns or OpenAI messages, one conversation a record."""

    name = "flowrate"
    title = "flowrate's turns, or OpenAI chat messages (also Hugging Face chat datasets)"
    reads = "id, turns[].input, turns[].actual_output, chatbot_role | messages[].role/content/tool_calls, metadata, labels, log_cut"
    marks = frozenset({"turns", "messages"})

    def problem(self, item: Item) -> str | None:
        if item.whole:
            return "expected an array of conversations, or an object with a `conversations` list"
        if not isinstance(item.raw, dict):
            return "a conversation must be an object"
        if not self.marks & item.raw.keys():
            return "has neither `turns` nor `messages`"
        if "choices" in item.raw:
            return "has `choices`: a log of API calls (--format openai-chat), not a conversation"
        return None

    def record(self, item: Item) -> Record:
        if item.whole:
            return Record(source=item.source, format="unknown", problems=[f"{item.source.path}: {self.problem(item)}"])
        return parse_record(item.raw, item.source, default_id=item.default_id, where=item.where)
