"""Containers: a file decoded into the items a source reader reads (`sources.Item`): JSONL
lines, the elements of a JSON or YAML list, CSV or Parquet rows, each of a text format read
through gzip, bz2 or xz when its name ends so; what cannot be decoded is a problem `Record`
naming the file and line."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable, Iterator
from importlib import import_module
from pathlib import Path
from typing import IO, Any

import orjson

from flowrate.inputs.conversation import Source
from flowrate.inputs.formats import BOM, Record, where_of
from flowrate.inputs.sources.base import Item

# the compressions Python's standard library reads (3.11 has no zstd), by the suffix after the format's
# (each module imported when a file needs it: lzma and bz2 load shared libraries a run of plain files never uses)
COMPRESSIONS = {".gz": "gzip", ".bz2": "bz2", ".xz": "lzma"}


def decompression_errors() -> tuple[type[Exception], ...]:
    """What a compressed file cut short or corrupt raises besides `OSError` (gzip's `BadGzipFile`
    is one): `EOFError`, and xz's `LZMAError` once xz was read."""
    lzma = sys.modules.get("lzma")
    return (EOFError, lzma.LZMAError) if lzma is not None else (EOFError,)


def open_input(path: Path) -> IO[bytes]:
    """`path` opened for reading bytes, decompressed when its name ends in `.gz`, `.bz2` or `.xz`."""
    module = COMPRESSIONS.get(path.suffix.lower())
    if module is None:
        return path.open("rb")
    opened: IO[bytes] = import_module(module).open(path, "rb")
    return opened


def jsonl_items(path: Path, shown: str, id_base: str) -> Iterator[Item | Record]:
    """Each non-blank line of a JSONL file, decoded; a line that is not JSON is a problem."""
    with open_input(path) as handle:
        for number, line in enumerate(handle, start=1):
            if number == 1:
                line = line.removeprefix(BOM)
            if not line.strip():
                continue
            source = Source(path=shown, line=number)
            try:
                raw = orjson.loads(line)
            except orjson.JSONDecodeError as error:
                yield Record(source=source, format="unknown", problems=[f"{source}: invalid JSON: {error}"])
                continue
            yield Item(source, raw, f"{id_base}:{number}", str(source))


def json_items(path: Path, shown: str, id_base: str) -> Iterator[Item | Record]:
    """The elements of a JSON document's list (the document, or its `conversations`); a
    document that is neither is one whole item."""
    try:
        with open_input(path) as handle:
            document = orjson.loads(handle.read().removeprefix(BOM))
    except orjson.JSONDecodeError as error:
        yield Record(
            source=Source(path=shown, line=error.lineno), format="unknown", problems=[f"{shown}: invalid JSON: {error}"]
        )
        return
    items = _conversation_list(document)
    if items is None:
        source = Source(path=shown, index=0)
        yield Item(source, document, f"{id_base}#0", str(source), whole=True)
        return
    for index, raw in enumerate(items):
        source = Source(path=shown, index=index)
        yield Item(source, raw, f"{id_base}#{index}", where_of(source))


def yaml_items(path: Path, shown: str, id_base: str) -> Iterator[Item | Record]:
    """The elements of a YAML document's list (the document, or its `conversations`), each
    with its line; a record whose aliases expand too far is a problem."""
    import yaml

    loader_class = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with open_input(path) as handle:
        text = handle.read().decode("utf-8-sig")
    loader = loader_class(text)
    try:
        root = loader.get_single_node()
        if root is None:
            items: list[tuple[Any, int]] = []
        else:
            items = _yaml_items(loader, root, shown)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark else None
        where = f"{shown}:{line}" if line else shown
        problem = getattr(error, "problem", None) or str(error)
        yield Record(
            source=Source(path=shown, line=line), format="unknown", problems=[f"{where}: invalid YAML: {problem}"]
        )
        return
    except _NotAList as error:
        yield Record(source=Source(path=shown, index=0), format="unknown", problems=[str(error)])
        return
    finally:
        loader.dispose()
    for index, (raw, line) in enumerate(items):
        source = Source(path=shown, index=index, line=line)
        if isinstance(raw, _Refused):
            yield Record(source=source, format="unknown", problems=[f"{shown}:{line}: {raw.problem}"])
            continue
        yield Item(source, raw, f"{id_base}#{index}", where_of(source))


class _NotAList(Exception):
    pass


# A record's YAML may expand to at most this many values once its aliases are followed: a real
# conversation of 500 turns with metadata has a few thousand. A 496-byte "billion laughs" file
# (aliases nested 9 deep) expands to 10^9 and took 4.9 GB before this check.
MAX_YAML_VALUES = 100_000


class _Refused:
    """A YAML record not constructed, and why."""

    def __init__(self, problem: str):
        self.problem = problem


def _expanded_size(root: Any, limit: int) -> int:
    """How many values `root` becomes with its aliases followed, counted on the composed nodes
    (each node once, with memory) without building anything; stops counting past `limit`.
    A recursive alias counts as past the limit."""
    import yaml

    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        if isinstance(node, yaml.ScalarNode):
            sizes[key] = 1
            continue
        children = (
            [part for pair in node.value for part in pair] if isinstance(node, yaml.MappingNode) else list(node.value)
        )
        if children_done:
            on_path.discard(key)
            sizes[key] = min(limit + 1, 1 + sum(sizes[id(child)] for child in children))
            continue
        if key in on_path:
            return limit + 1
        on_path.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in on_path:
                return limit + 1
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


def _yaml_items(loader: Any, root: Any, shown: str) -> list[tuple[Any, int]]:
    import yaml

    node = root
    if isinstance(node, yaml.MappingNode):
        node = next((value for key, value in node.value if key.value == "conversations"), None)
    if not isinstance(node, yaml.SequenceNode):
        raise _NotAList(f"{shown}: expected a list of conversations, or a mapping with a `conversations` list")
    items: list[tuple[Any, int]] = []
    for item in node.value:
        line = item.start_mark.line + 1
        if _expanded_size(item, MAX_YAML_VALUES) > MAX_YAML_VALUES:
            refused = _Refused(
                f"its aliases expand to more than {MAX_YAML_VALUES:,} values; refused (a YAML alias bomb?)"
            )
            items.append((refused, line))
        else:
            items.append((loader.construct_document(item), line))
    return items


def _conversation_list(document: Any) -> list[Any] | None:
    if isinstance(document, dict) and isinstance(document.get("conversations"), list):
        return document["conversations"]
    if isinstance(document, list):
        return document
    return None


def csv_items(path: Path, shown: str, id_base: str) -> Iterator[Item | Record]:
    """Each row of a CSV file with a header row, as a mapping of column to text (an empty
    cell is absent), named by its line."""
    import csv

    with io.TextIOWrapper(open_input(path), encoding="utf-8-sig", newline="") as handle:
        rows = csv.DictReader(handle)
        line = 1
        for row in rows:
            source = Source(path=shown, line=line + 1)
            line = rows.line_num
            yield Item(
                source,
                {key: value for key, value in row.items() if key and value != ""},
                f"{id_base}:{source.line}",
                str(source),
            )


def parquet_items(path: Path, shown: str, id_base: str) -> Iterator[Item | Record]:
    """Each row of a Parquet file as the JSON record it stands for (`parquet.plain_record`),
    named by its row number; for sources other than flowrate's own, which `read_parquet` reads
    with the run's selection pushed down."""
    from flowrate.inputs.parquet import parquet_rows

    for number, raw in parquet_rows(path, shown):
        if isinstance(raw, Record):
            yield raw
            continue
        source = Source(path=shown, index=number)
        yield Item(source, raw, f"{id_base}#{number}", f"{shown} row {number}")


def memory_items(records: Any, shown: str, id_base: str) -> Iterator[Item | Record]:
    """Each record of conversations given in memory (`files.InMemory`), as a JSONL line's."""
    for number, raw in enumerate(records.rows(), start=1):
        source = Source(path=shown, line=number)
        yield Item(source, raw, f"{id_base}:{number}", str(source))


#: each container's items, by kind: a reader of (the file or the records in memory, the name shown, the base of ids)
CONTAINERS: dict[str, Callable[[Any, str, str], Iterator[Item | Record]]] = {
    "jsonl": jsonl_items, "json": json_items, "yaml": yaml_items, "csv": csv_items, "parquet": parquet_items,
    "memory": memory_items,
}  # fmt: skip
