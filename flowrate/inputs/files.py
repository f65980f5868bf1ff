"""Input files: the paths given resolved to files (directories scanned, each file and stdin read once, results files passed over), read record by record."""

from __future__ import annotations

import itertools
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from flowrate.errors import ConfigError, InputError
from flowrate.inputs.containers import CONTAINERS
from flowrate.inputs.conversation import ConversationalEvalTestCase, Source
from flowrate.inputs.formats import BOM, Record
from flowrate.inputs.sources.base import Item
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
SCANNED_SUFFIXES = {suffix for suffix in INPUT_SUFFIXES if suffix != ".csv"}  # a directory's CSV may be a report
STDIN = "-"


class InputFiles:
    """The files one run's `paths` name, each as (path to read, name shown, base of default ids),
    in order: a directory scanned for conversation files; a path given twice (compared
    resolved) once, and stdin once, spooled to a temporary file so it can be read twice.
    `output` is the run's results file: it may never be an input, and a directory scan passes
    over it. `reports` are the other files the run writes, as (option, path): none may be an
    input either (each compared with `same_file`). A flowrate results file found in a directory
    is passed over with a notice; one named directly is a problem. The problems are raised
    together, as an `InputError`."""

    def __init__(self, paths: list[str], output: str | None, reports: Sequence[tuple[str, str | None]]):
        self.files: list[tuple[Path, str, str]] = []
        self.notices: list[str] = []
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

    def _add_given(self, given: str) -> None:
        """The files of one path as given: stdin, a directory's files, or a file."""
        problems = self._problems
        if given == STDIN:
            if STDIN not in self._seen:
                self._seen.add(STDIN)
                self.files.append((self._spool_stdin(), "<stdin>", "<stdin>"))
            return
        path = Path(given)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.suffix.lower() in SCANNED_SUFFIXES and p.is_file())
            if not found:
                problems.append(f"{given}: no .jsonl, .json, .yaml, .yml or .parquet files in this directory")
            for item in found:
                self._add(item, str(item), item.relative_to(path).as_posix(), named=False)
        elif not path.exists():
            problems.append(f"{given}: no such file or directory")
        elif path.suffix.lower() not in INPUT_SUFFIXES:
            problems.append(f"{given}: unknown file type (expected .jsonl, .json, .yaml, .yml, .parquet or .csv)")
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
        paths: list[str],
        output: str | None = None,
        reports: Sequence[tuple[str, str | None]] = (),
        format: str | None = None,
    ):
        if format is not None:
            try:
                reader_named(format)
            except ValueError as error:
                raise ConfigError(f"option format: {error}") from None
        self.format = format  #: the source format every file is read as (`--format`); None: each file's own
        self._found = InputFiles(paths, output, reports)
        self.files = self._found.files  # (path to read, name shown, base of default ids)
        #: what the run is told once: files passed over, and the readers' notices once read
        self.notices = self._found.notices
        self.pushdown: Any = None  #: the selection a Parquet file's query applies (`push_down`)

    def push_down(self, selection: Any) -> None:
        """Let the next pass over a Parquet file skip in its query what `selection` (a
        `selection.Selection`, counting what it leaves out) cannot choose; None: read every row."""
        self.pushdown = selection

    def records(self) -> Iterator[Record]:
        """Every record of every file, in order, valid or not (of a Parquet file, those the
        pushed-down selection may choose)."""
        for path, shown, id_base in self.files:
            kind = "jsonl" if shown == "<stdin>" else INPUT_SUFFIXES[path.suffix.lower()]
            try:
                if kind == "parquet" and self._native_parquet(path):
                    from flowrate.inputs.parquet import read_parquet

                    yield from read_parquet(path, shown, id_base, self.pushdown)
                    continue
                yield from _read(CONTAINERS[kind](path, shown, id_base), self.format, self.notices)
            except OSError as error:
                yield Record(
                    source=Source(path=shown, index=0),
                    format="unknown",
                    problems=[f"{shown}: cannot read: {error.strerror}"],
                )
            except UnicodeDecodeError as error:
                yield Record(
                    source=Source(path=shown, index=0),
                    format="unknown",
                    problems=[f"{shown}: not UTF-8 text (byte {error.start})"],
                )

    def _native_parquet(self, path: Path) -> bool:
        """A Parquet file read as flowrate's own format, with the selection pushed down."""
        if self.format is not None:
            return self.format == "flowrate"
        from flowrate.inputs.parquet import parquet_columns

        try:
            return bool({"turns", "messages"} & parquet_columns(path).keys())
        except Exception:  # not Parquet: `read_parquet` names the problem
            return True

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
    if INPUT_SUFFIXES.get(path.suffix.lower()) == "parquet":
        from flowrate.inputs.parquet import looks_like_results_parquet

        return looks_like_results_parquet(path)
    if INPUT_SUFFIXES.get(path.suffix.lower()) != "jsonl":
        return False
    try:
        with path.open("rb") as handle:
            for line in handle:
                if line.strip():
                    first = orjson.loads(line.removeprefix(BOM))
                    break
            else:
                return False
    except (OSError, orjson.JSONDecodeError):
        return False
    return (
        isinstance(first, dict)
        and {"metric", "rubric_version"} <= first.keys()
        and not {"turns", "messages"} & first.keys()
    )


def _read(decoded: Iterator[Item | Record], format: str | None, notices: list[str]) -> Iterator[Record]:
    """The records of one file's items, by the reader `format` names or the one its first item
    shows; when no reader takes the first item, one problem naming the formats tried. The
    reader's notices join `notices` once, however often the file is read."""
    waiting: list[Record] = []
    for first in decoded:
        if isinstance(first, Record):
            waiting.append(first)
            continue
        reader = reader_named(format) if format else detect(first)
        if isinstance(reader, str):
            yield from waiting
            yield Record(source=first.source, format="unknown", problems=[reader])
            return
        yield from reader.read(itertools.chain(waiting, [first], decoded))
        notices.extend(notice for notice in reader.notices if notice not in notices)
        return
    yield from waiting


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
    paths: list[str], ids: set[str], judged_id: Callable[[ConversationalEvalTestCase], str | None] | None = None
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
