"""Input files: the paths given resolved to files (directories scanned, each file and stdin read once, results files passed over), read record by record."""

from __future__ import annotations

import hashlib
import itertools
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from flowrate.errors import ConfigError, InputError
from flowrate.inputs.containers import COMPRESSIONS, CONTAINERS, decompression_errors, open_input
from flowrate.inputs.conversation import ConversationalEvalTestCase, Source, missing_side
from flowrate.inputs.formats import BOM, Record
from flowrate.inputs.sources.base import Item, Reader, RecordReader
from flowrate.inputs.sources.platform_api import PlatformError, PlatformURL, is_platform_url, platform_items
from flowrate.inputs.sources.registry import detect, reader_named

INPUT_SUFFIXES = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".parquet": "parquet",
    ".csv": "csv",
}
# what a directory scan reads: every input type, compressed or not (a CSV that no format takes,
# a report say, is passed over with a notice naming it)
SCANNED_SUFFIXES = {*INPUT_SUFFIXES, *COMPRESSIONS}
LISTED_UNREAD = 10  # the files of a directory named in its notice of files passed over
STDIN = "-"


def kind_of(path: Path) -> str | None:
    """The container of `path` by its name (`jsonl`, `json`, `yaml`, `parquet`, `csv`), a
    compression's suffix looked through (`day.jsonl.gz` is JSONL); None: no type flowrate reads."""
    suffixes = [suffix.lower() for suffix in path.suffixes]
    if suffixes and suffixes[-1] in COMPRESSIONS:
        suffixes.pop()
    kind = INPUT_SUFFIXES.get(suffixes[-1]) if suffixes else None
    if kind == "parquet" and path.suffix.lower() in COMPRESSIONS:
        return None  # Parquet compresses its own pages, and is read in place by DuckDB
    return kind


class InMemory:
    """Conversations given in memory rather than in a file (the pytest plugin's cases, a Ray
    dataset's rows): `rows()` gives each record as a JSONL line decodes to (a dict), a fresh pass
    each call, read by the same readers as a file's; `name` is how sources and messages name them
    (`<pytest>`: a row's source is `<pytest>:3`)."""

    def __init__(self, name: str, rows: Callable[[], Iterable[Any]]):
        self.name = name
        self.rows = rows

    def __str__(self) -> str:
        return self.name


InputFile = tuple[Path | InMemory, str, str]  #: (what to read, the name shown, the base of default ids)
Given = str | InMemory  #: an input as a run is given it: a path (a file, a directory, `-`), or records in memory


class InputFiles:
    """The files one run's `paths` name, each as (path to read, name shown, base of default ids),
    in order: a directory scanned for conversation files; a path given twice (compared
    resolved) once, and stdin once, spooled to a temporary file so it can be read twice.
    `output` is the run's results file: it may never be an input, and a directory scan passes
    over it. `reports` are the other files the run writes, as (option, path): none may be an
    input either (each compared with `same_file`). A flowrate results file found in a directory
    is passed over with a notice; one named directly is a problem. The problems are raised
    together, as an `InputError`."""

    def __init__(self, paths: Sequence[Given], output: str | None, reports: Sequence[tuple[str, str | None]]):
        self.files: list[InputFile] = []
        self.notices: list[str] = []
        self.optional: set[Path] = set()  #: files found in a directory that are read only if a format takes them
        self.platforms: list[str] = []  #: the platform URLs given (`platform_api`), read through the platform's API
        self._spool: tempfile.TemporaryDirectory | None = None
        self._problems: list[str] = []
        self._target = output if output and output != STDIN else None
        self._written = [(option, report) for option, report in reports if report and report != STDIN]
        self._seen: set[Path | str] = set()
        for given in paths:
            self._add_given(given)
        if self._problems:
            self.close()
            raise InputError(self._problems, hint=None)

    def _add_given(self, given: Given) -> None:
        """The files of one path as given: stdin, a directory's files, or a file; records in memory as they are."""
        problems = self._problems
        if isinstance(given, InMemory):
            self.files.append((given, given.name, given.name))
            return
        if is_platform_url(given):
            PlatformURL.parse(given)  # a URL that names no place or holds credentials: exit 2 before any call
            if given not in self.platforms:
                self.platforms.append(given)
                self.files.append((Path(given), given, given))
            return
        if given == STDIN:
            if STDIN not in self._seen:
                self._seen.add(STDIN)
                self.files.append((self._spool_stdin(), "<stdin>", "<stdin>"))
            return
        path = Path(given)
        if path.is_dir():
            for item in _directory_files(path, given, problems, self.notices):
                if kind_of(item) == "csv":  # read when a format takes it (`InputSet`): it may be a report
                    self.optional.add(item)
                self._add(item, str(item), item.relative_to(path).as_posix(), named=False)
        elif not path.exists():
            problems.append(f"{given}: no such file or directory")
        elif kind_of(path) is None:
            problems.append(
                f"{given}: unknown file type (expected .jsonl, .json, .yaml, .yml, .parquet or .csv,"
                " or one of them compressed: .gz, .bz2, .xz)"
            )
        else:
            self._add(path, given, path.name, named=True)

    def _add(self, path: Path, shown: str, id_base: str, named: bool) -> None:
        """One file, found in a directory or `named` itself, unless it is read already, written
        by the run or a results file."""
        resolved = _resolved(str(path))
        if resolved in self._seen:
            return
        self._seen.add(resolved)
        problems = self._problems
        is_results = looks_like_results(path)
        is_output = self._target is not None and same_file(path, self._target)
        report = next((option for option, report in self._written if same_file(path, report)), None)
        if is_output and (named or not (is_results or _is_empty(path))):
            problems.append(f"{shown}: is both an input and the --output file; writing results there would destroy it")
        elif is_output:
            return  # the run's own output, inside a directory it reads
        elif report is not None:
            problems.append(f"{shown}: is both an input and the {report} file; writing there would destroy it")
        elif is_results and named:
            problems.append(
                f"{shown}: this is a flowrate results file, not conversations; give the conversations it was made from"
            )
        elif is_results:
            self.notices.append(f"{shown}: passed over, it is a flowrate results file")
        else:
            self.files.append((path, shown, id_base))

    def _spool_stdin(self) -> Path:
        if self._spool is None:
            self._spool = tempfile.TemporaryDirectory(prefix="flowrate-stdin-")
        target = Path(self._spool.name) / "stdin.jsonl"
        with target.open("wb") as out:
            shutil.copyfileobj(sys.stdin.buffer, out)
        return target

    def close(self) -> None:
        """Remove the spooled copy of stdin."""
        if self._spool is not None:
            self._spool.cleanup()
            self._spool = None


class InputSet:
    """The paths of one run (their files: `InputFiles`, which `output` and `reports` concern),
    read record by record. Each file is read by the source reader `format` names, else by the
    one its first item shows (`sources.detect`).
    """

    def __init__(
        self,
        paths: Sequence[Given],
        output: str | None = None,
        reports: Sequence[tuple[str, str | None]] = (),
        format: str | None = None,
        conversation_key: str | None = None,
        since: str | None = None,
        until: str | None = None,
    ):
        if format is not None:
            try:
                reader_named(format)
            except ValueError as error:
                raise ConfigError(f"option format: {error}") from None
        self.format = format  #: the source format every file is read as (`--format`); None: each file's own
        self.conversation_key = conversation_key  #: `--conversation-key`, given to each reader
        self._found = InputFiles(paths, output, reports)
        self.files = self._found.files  # (path to read, name shown, base of default ids)
        #: what the run is told once: files passed over, and the readers' notices once read
        self.notices = self._found.notices
        self.pushdown: Any = None  #: the selection a Parquet file's query applies (`push_down`)
        self.optional = self._found.optional
        self.passed_over: set[Path] = set()  #: the files of `optional` no format takes, once read
        self.barren: list[str] = []  #: the files that yielded no record, once read (`records`)
        #: `--since`/`--until` as seconds, the end fixed once (every pass over a platform reads the same traces)
        self.window = _window(since, until, self._found.platforms)

    def push_down(self, selection: Any) -> None:
        """Let the next pass over a Parquet file skip in its query what `selection` (a
        `selection.Selection`, counting what it leaves out) cannot choose; None: read every row."""
        self.pushdown = selection

    def records(self) -> Iterator[Record]:
        """Every record of every file, in order, valid or not (of a Parquet file, those the
        pushed-down selection may choose). The files a format reads by grouping calls or events
        (every reader but those of one conversation a record) are read as one stream, where the
        first is: a conversation split across daily exports or rotated files is one. A record
        repeated whole (a row exported twice) is read once; a conversation with no user or no
        assistant text is a problem; a file that yields no record is named in `barren`."""
        repeated = _Repeats()
        for reader, files in self._plan():
            count = 0
            for record in self._group(reader, files, repeated):
                count += 1
                yield _with_both_sides(record)
            if count == 0 and not (reader is None and _filtered(self.pushdown)):
                self.barren.extend(shown for _, shown, _ in files if shown not in self.barren)
        repeated.tell(self.notices)

    def _plan(self) -> list[tuple[Reader | str | _InStream | None, list[InputFile]]]:
        """The files in the order they are read: each with the reader that reads it (None: read
        as flowrate's own Parquet, or no item to detect one by; text: no format reads it), the
        files one grouping reader reads joined to its first. A CSV found in a directory that no
        format takes is passed over with a notice."""
        plan: list[tuple[Reader | str | _InStream | None, list[InputFile]]] = []
        joined: dict[str, list[InputFile]] = {}
        for file in self.files:
            path, shown, _ = file
            if isinstance(path, Path) and _kind(file) == "parquet" and _native_parquet(path, self.format):
                plan.append((None, [file]))
                continue
            if len(self.files) == 1 and path not in self.optional:
                plan.append((IN_STREAM, [file]))  # found from its first item as it is read: decoded once
                continue
            reader = _reader_of(file, self.format, self.conversation_key, self.window)
            if path in self.optional and self.format is None and not _takes(reader):
                self.passed_over.add(path)
                notice = f"{shown}: passed over, no format flowrate reads takes its first row"
                self.notices.extend([notice] if notice not in self.notices else [])
            elif not isinstance(reader, Reader) or isinstance(reader, RecordReader):
                plan.append((reader, [file]))
            elif reader.name in joined:
                joined[reader.name].append(file)
            else:
                plan.append((reader, joined.setdefault(reader.name, [file])))
        return plan

    def _group(
        self, reader: Reader | str | _InStream | None, files: list[InputFile], repeated: _Repeats
    ) -> Iterator[Record]:
        """The records of `files`, read by `reader` (see `_plan`) as one stream of items."""
        path, shown, id_base = files[0]
        if (
            reader is None
            and isinstance(path, Path)
            and _kind(files[0]) == "parquet"
            and _native_parquet(path, self.format)
        ):
            from flowrate.inputs.parquet import read_parquet

            yield from read_parquet(path, shown, id_base, self.pushdown)
            return
        items = repeated.once(item for file in files for item in _items(file, self.window))
        yield from _read(reader, items, self.format, self.conversation_key, self.notices)

    def close(self) -> None:
        """Remove the spooled copy of stdin (`InputFiles.close`)."""
        self._found.close()


def same_file(first: str | Path, second: str | Path) -> bool:
    """True when the paths `first` and `second` name one file: the same device and inode when
    both exist (a hard link, a symbolic link, `./f` and `f`), else the same resolved path."""
    one, other = Path(first).expanduser(), Path(second).expanduser()
    try:
        return os.path.samefile(one, other)
    except OSError:
        return one.resolve() == other.resolve()


def check_apart(
    written: Sequence[tuple[str, str | Path | None]], read: Sequence[str | Path] = (), of: str = ""
) -> None:
    """The one guard of the files a command writes: raise `ConfigError` when a path of `written`
    ((option, path) pairs; None and `-` are no file) is the same file (`same_file`) as one of
    `read` (the command's inputs; `of` names the command in the message) or as another written one."""
    files = [(option, path) for option, path in written if path is not None and str(path) != STDIN]
    for number, (option, path) in enumerate(files):
        if any(name != STDIN and same_file(path, name) for name in read):
            raise ConfigError(f"{option} {path}: is also an input of {of}; name another file")
        for other_option, other in files[:number]:
            if same_file(path, other):
                raise ConfigError(f"{option} {path}: is the same file as {other_option} {other}; name another file")


def _resolved(path: str) -> Path:
    return Path(path).expanduser().resolve()


def _is_empty(path: Path) -> bool:
    try:
        return path.stat().st_size == 0
    except OSError:
        return False


def looks_like_results(path: Path) -> bool:
    """True when the first record of a JSONL file (or a Parquet file's columns) is a flowrate
    results row, not a conversation."""
    if kind_of(path) == "parquet":
        from flowrate.inputs.parquet import looks_like_results_parquet

        return looks_like_results_parquet(path)
    if kind_of(path) != "jsonl":
        return False
    try:
        with open_input(path) as handle:
            for line in handle:
                if line.strip():
                    first = orjson.loads(line.removeprefix(BOM))
                    break
            else:
                return False
    except Exception as error:  # what cannot be read is no results file: reading it names the problem
        if not isinstance(error, (OSError, orjson.JSONDecodeError, *decompression_errors())):
            raise
        return False
    return (
        isinstance(first, dict)
        and {"metric", "rubric_version"} <= first.keys()
        and not {"turns", "messages"} & first.keys()
    )


class _InStream:
    """The reader of a run's only file, found from its first item as the file is read."""


IN_STREAM = _InStream()  # a run of one file decodes it once; a run of several peeks at each first


def _takes(reader: Reader | str | None) -> bool:
    """True when `reader` was found for a file because it takes its first item (`detect` gives
    flowrate's own reader as the closest too, which names each record's problems)."""
    return isinstance(reader, Reader) and reader.name != "flowrate"


class _Repeats:
    """Items read once each across an input set: an item equal to one read before (its decoded
    value, keys in any order) is left out and counted, and the run told once where the first
    repeat was."""

    def __init__(self) -> None:
        self._seen: set[bytes] = set()
        self._count = 0
        self._first = ""

    def once(self, items: Iterator[Item | Record]) -> Iterator[Item | Record]:
        for item in items:
            if isinstance(item, Item):
                try:
                    text = orjson.dumps(item.raw, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
                except TypeError:  # a YAML value JSON has no type for: compared by no one
                    yield item
                    continue
                digest = hashlib.sha256(text).digest()[:16]  # SHA-NI: 0.6 of blake2b's CPU on 1.6 MB lines
                if digest in self._seen:
                    self._count += 1
                    self._first = self._first or item.where
                    continue
                self._seen.add(digest)
            yield item

    def tell(self, notices: list[str]) -> None:
        if self._count:
            notice = f"{self._first}: the same record as one read before; {self._count} repeated record(s) read once"
            if notice not in notices:
                notices.append(notice)


def _with_both_sides(record: Record) -> Record:
    """`record`, with a problem when its conversation has no user text or no assistant text:
    such a conversation is never sent to a judge (there is nothing to grade)."""
    if record.case is None or record.problems:
        return record
    missing = missing_side(record.case)
    if missing is not None:
        record.problems.append(f"{record.source}: conversation {record.name!r}: no {missing} text; nothing to judge")
        record.given_id = record.case.id
    return record


def iter_cases(inputs: InputSet) -> Iterator[Record]:
    """The valid records, in input order, each with its conversation."""
    for record in with_duplicates_marked(inputs.records(), {}):
        if not record.problems:
            yield record


def with_duplicates_marked(records: Iterator[Record], seen: dict[str, str]) -> Iterator[Record]:
    for record in records:
        if record.case is not None and record.case.id is not None:  # a record read has an id (`parse_record`)
            first = seen.setdefault(record.case.id, str(record.source))
            if first != str(record.source):
                record.problems.append(f"{record.source}: id: duplicate id {record.case.id!r} (first seen at {first})")
        yield record


def load_transcripts(
    paths: Sequence[Given], ids: set[str], judged_id: Callable[[ConversationalEvalTestCase], str | None] | None = None
) -> dict[str, ConversationalEvalTestCase]:
    """The conversations with these ids, or whose `judged_id` (the id `--redact` gave them) is
    one of them, read again from `paths` (for reports), by their own ids; invalid records and
    unreadable paths are passed over."""
    try:
        inputs = InputSet(paths)
    except InputError:
        return {}
    try:
        cases = (record.case for record in iter_cases(inputs))
        return {
            case.id: case
            for case in cases
            if case is not None
            and case.id is not None
            and (case.id in ids or (judged_id is not None and judged_id(case) in ids))
        }
    finally:
        inputs.close()


def _directory_files(path: Path, given: str, problems: list[str], notices: list[str]) -> list[Path]:
    """The files to read under the directory `path`: each of a type flowrate reads (a CSV found
    there is read when a format takes it, `InputSet` names it otherwise: it may be a report); the
    others are named in one notice, and the hidden ones (a name or a directory with a leading
    dot, left out as `ls` leaves them) counted in another; none to read is one of `problems`."""
    every = [p for p in path.rglob("*") if p.is_file()]
    found = sorted(p for p in every if not any(part.startswith(".") for part in p.relative_to(path).parts))
    hidden = len(every) - len(found)
    read = [item for item in found if kind_of(item) is not None]
    unread = [item.relative_to(path).as_posix() for item in found if kind_of(item) is None]
    shown = ", ".join(unread[:LISTED_UNREAD]) + (
        f" and {len(unread) - LISTED_UNREAD} more" if len(unread) > LISTED_UNREAD else ""
    )
    if not read:
        problems.append(
            f"{given}: no .jsonl, .json, .yaml, .yml, .parquet or .csv files in this directory"
            " (nor any of them compressed)" + (f"; found {shown}" if unread else "")
        )
    elif unread:
        notices.append(f"{given}: passed over {len(unread)} file(s) of no type flowrate reads: {shown}")
    if hidden:
        notices.append(f"{given}: left out {hidden} hidden file(s) (a name or a directory starting with a dot)")
    return read


def file_format(path: str) -> tuple[str | None, Iterator[Item | Record]]:
    """The source format of the file at `path` (found from its first item, as a run finds it;
    None: none reads it) and its items, read again from the start."""
    file = (Path(path), path, Path(path).name)
    reader = _reader_of(file, None, None, (None, time.time()))
    return (reader.name if isinstance(reader, Reader) else None), _items(file)


def _kind(file: InputFile) -> str:
    path, shown, _ = file
    if isinstance(path, InMemory):
        return "memory"
    return "jsonl" if shown == "<stdin>" else kind_of(path) or "jsonl"


def _window(since: str | None, until: str | None, platforms: list[str]) -> tuple[float | None, float]:
    """`--since` and `--until` as seconds since the epoch (the end: now, when not given); a
    `ConfigError` when either is given and no input is a platform URL, whose traces they choose."""
    from flowrate.settings.groups import moment_s

    if (since or until) and not platforms:
        raise ConfigError(
            "--since and --until choose the traces read from a platform URL (phoenix+http://…, mlflow+http://…);"
            " no input is one. For files, use --only or --closed-after"
        )
    now_s = time.time()
    return (None if since is None else moment_s(since, now_s)), (now_s if until is None else moment_s(until, now_s))


def _items(file: InputFile, window: tuple[float | None, float] | None = None) -> Generator[Item | Record, None, None]:
    """The decoded items of one file (of a platform URL, its pages in `window`); a file that
    cannot be read or decompressed, or a platform that does not answer, ends in a problem."""
    path, shown, id_base = file
    if is_platform_url(shown):
        try:
            yield from platform_items(shown, window or (None, time.time()))
        except PlatformError as error:
            yield Record(
                source=Source(path=shown, index=0), format="unknown", problems=[f"{shown}: cannot read: {error}"]
            )
        return
    try:
        yield from CONTAINERS[_kind(file)](path, shown, id_base)
    except OSError as error:
        yield Record(
            source=Source(path=shown, index=0),
            format="unknown",
            problems=[f"{shown}: cannot read: {error.strerror or error}"],
        )
    except decompression_errors() as error:
        yield Record(
            source=Source(path=shown, index=0), format="unknown", problems=[f"{shown}: cannot decompress: {error}"]
        )
    except UnicodeDecodeError as error:
        yield Record(
            source=Source(path=shown, index=0),
            format="unknown",
            problems=[f"{shown}: not UTF-8 text (byte {error.start})"],
        )


def _reader_of(
    file: InputFile, format: str | None, key: str | None, window: tuple[float | None, float]
) -> Reader | str | None:
    """The reader of a file (`_reader_for` its first item), the file closed once that is decoded."""
    items = _items(file, window)
    try:
        first = next((item for item in items if isinstance(item, Item)), None)
    finally:
        items.close()
    return _reader_for(first, format, key)


def _head(items: Iterator[Item | Record]) -> list[Item | Record]:
    """The items of `items` up to and with the first `Item`, which a file's format is found from."""
    head: list[Item | Record] = []
    for item in items:
        head.append(item)
        if isinstance(item, Item):
            break
    return head


def _reader_for(first: Item | None, format: str | None, key: str | None) -> Reader | str | None:
    """The reader of a file whose first item is `first`: the one `format` names (`--format`), else
    the one `first` shows (`sources.detect`: a text when none reads it); None when the file has
    no item. The reader tries `key` (`--conversation-key`) first."""
    if format is None and first is None:
        return None
    reader = reader_named(format) if format else detect(first)  # type: ignore[arg-type]
    if isinstance(reader, Reader) and key:
        reader.given_keys = (key,)
    return reader


def _native_parquet(path: Path, format: str | None) -> bool:
    """A Parquet file read as flowrate's own format (`format`, else by its columns), with the
    selection pushed down."""
    if format is not None:
        return format == "flowrate"
    from flowrate.inputs.parquet import parquet_columns

    try:
        return bool({"turns", "messages"} & parquet_columns(path).keys())
    except Exception:  # not Parquet: `read_parquet` names the problem
        return True


def _filtered(pushdown: Any) -> bool:
    """True when the pushed-down selection may leave a Parquet file's rows unread (a shard, a
    sample, a limit), so that a file read as none is not known to hold none."""
    return pushdown is not None and any(
        getattr(pushdown, name, None) is not None for name in ("shard", "sample", "limit")
    )


def _read(
    reader: Reader | str | _InStream | None,
    items: Iterator[Item | Record],
    format: str | None,
    key: str | None,
    notices: list[str],
) -> Iterator[Record]:
    """The records of `items` by `reader` (`IN_STREAM`: the one their first item shows, see
    `_reader_for`); the reader's notices join `notices` once, however often the files are read."""
    if reader is IN_STREAM:
        head = _head(items)
        first = head[-1] if head and isinstance(head[-1], Item) else None
        reader = _reader_for(first, format, key)
        items = itertools.chain(head, items)
    if not isinstance(reader, Reader):
        for item in items:
            if isinstance(item, Record):
                yield item
            elif isinstance(reader, str):  # no format reads it: one problem for the file
                yield Record(source=item.source, format="unknown", problems=[reader])
                return
        return
    yield from reader.read(items)
    notices.extend(notice for notice in reader.notices if notice not in notices)
