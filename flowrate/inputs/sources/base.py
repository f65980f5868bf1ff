"""The interface of a source reader: the items a container decodes, and the reader that turns them into conversations."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from flowrate.inputs.conversation import Source
from flowrate.inputs.formats import Record


@dataclass(frozen=True)
class Item:
    """One decoded item of a file: a JSONL line, an element of a JSON or YAML list, a row.

    `default_id`: the conversation's id when the item gives none; `where`: how problems name
    the item (`f.jsonl:3`, `f.parquet row 4`); `whole`: the item is a whole JSON document that
    is not a list (an OTLP export, say)."""

    source: Source
    raw: Any
    default_id: str
    where: str
    whole: bool = False


class Reader:
    """One source format.

    `name` is what `--format` takes; `title` and `reads` (the fields it reads) are what
    `flowrate formats` lists; `marks` are top-level keys only this format's items have, which
    make it the closest format when no reader takes an item; `notices` are what the run is
    told once about the files it read (a log with no conversation key, say)."""

    name: ClassVar[str]
    title: ClassVar[str]
    reads: ClassVar[str]
    marks: ClassVar[frozenset[str]] = frozenset()

    def __init__(self) -> None:
        self.notices: list[str] = []  #: what the run is told once about the files read (`InputSet.notices`)
        #: `--conversation-key`: the field naming a call's conversation, tried before the format's own keys
        self.given_keys: tuple[str, ...] = ()

    def problem(self, item: Item) -> str | None:
        """None when this reader takes `item` (the first item of a file); else its first
        complaint, naming the field."""
        raise NotImplementedError

    def read(self, items: Iterable[Item | Record]) -> Iterator[Record]:
        """The conversations of `items` (a `Record` among them is a problem found while
        decoding, passed on as it is), each a valid `Record` or one naming what is wrong."""
        raise NotImplementedError

    def closeness(self, item: Item) -> int:
        """How many of this format's `marks` the item has."""
        raw = item.raw
        return len(self.marks & raw.keys()) if isinstance(raw, dict) else 0


class RecordReader(Reader):
    """A reader of one conversation a record: `record` turns each item into its `Record`."""

    def read(self, items: Iterable[Item | Record]) -> Iterator[Record]:
        for item in items:
            yield item if isinstance(item, Record) else self.record(item)

    def record(self, item: Item) -> Record:
        """The conversation of `item`, or the problem naming its field."""
        raise NotImplementedError
