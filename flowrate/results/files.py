"""Results files: writing rows as a run makes them, reading them back (a killed run's partial
last line passed over), repairing that line, and rewriting a file atomically for a resume."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Literal

from pydantic import ValidationError

from flowrate.errors import ConfigError, InputError
from flowrate.results.events import OutputStopped, RunListener
from flowrate.results.rows import EvaluationRow
from flowrate.settings.options import plain_validation_message


def read_rows(path: Path, cut_at: Callable[[int], None] | None = None) -> Iterator[EvaluationRow]:
    """The rows of a results file. A partial last line (a run killed mid-write) is passed over,
    and `cut_at`, when given, told the length in bytes of the file without it; a bad line
    anywhere else is an input error."""
    try:
        handle = open(path, "rb")
    except OSError as error:
        raise ConfigError(f"{path}: cannot read results: {error.strerror}") from None
    with handle:
        length = 0
        for number, line in enumerate(handle, start=1):
            length += len(line)
            if not line.strip():
                continue
            try:
                row = EvaluationRow.model_validate_json(line)
            except ValidationError as error:
                if not line.endswith(b"\n"):  # the last line, cut short
                    if cut_at is not None:
                        cut_at(length - len(line))
                    return
                first = error.errors()[0]
                field = ".".join(str(part) for part in first["loc"])
                problem = f"field {field!r}: {plain_validation_message(first)}" if field else first["msg"]
            else:
                if row.score is not None or row.error is not None:
                    yield row
                    continue
                problem = "a row has a score or an error, this one has neither"
            raise InputError(
                [f"{path}:{number}: not a flowrate result row: {problem}"],
                headline="problem(s) in a results file",
                hint=None,
            )


@contextmanager
def complete_results(path: Path) -> Iterator[Path]:
    """A results file checked by `read_rows`, as a file of its complete rows only, for a reader
    that takes a file (DuckDB): `path` itself, or, when its last line was cut short, a temporary
    copy without that line (removed afterwards)."""
    cut: list[int] = []
    for _ in read_rows(path, cut.append):
        pass
    if not cut:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="flowrate-rows-") as directory:
        copy = Path(directory) / path.name
        with open(path, "rb") as source, open(copy, "wb") as target:
            target.write(source.read(cut[0]))
        yield copy


def repair_partial_tail(path: Path) -> bool:
    """Cut a last line that has no newline (the run was killed while writing it)."""
    with open(path, "rb+") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return False
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return False
        position = size - 1
        while position > 0:
            step = min(65536, position)
            handle.seek(position - step)
            chunk = handle.read(step)
            found = chunk.rfind(b"\n")
            if found != -1:
                position = position - step + found + 1
                break
            position -= step
        handle.truncate(position)
    return True


def rewrite_rows(path: Path, rows: Iterable[EvaluationRow]) -> None:
    """Replace the file's rows with `rows`, atomically: a kill leaves the old file or the new one."""
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as out:
        for row in rows:
            out.write(row.model_dump_json().encode() + b"\n")
    os.replace(temporary, path)


def write_whole(path: str | Path, write: Callable[[Path], None]) -> None:
    """Call `write` with a temporary file beside `path` (the link's target, for a symbolic
    link), then rename that over `path`: a kill or a full disk leaves the old file or none,
    never half of one. A `path` that exists and is not a regular file (a device, a pipe) is
    written directly. The file gets the mode a plain `open` would give it."""
    target = Path(os.path.realpath(Path(path).expanduser()))
    if target.exists() and not target.is_file():
        write(target)
        return
    handle, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".partial")
    os.close(handle)
    temporary = Path(name)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, target.stat().st_mode & 0o7777 if target.exists() else 0o666 & ~umask)
        write(temporary)
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def check_output_path(output: str, option: str = "--output") -> None:
    """Raise `ConfigError` unless `output` is `-` or a file that can be written: before any call.

    Permission bits say too little (root passes them; a read-only file system does not), so a
    file that does not exist yet is created and removed again, and one that exists is opened
    for appending, which changes nothing in it."""
    if output == "-":
        return
    path = Path(output).expanduser()
    if path.is_dir():
        raise ConfigError(f"{option} {output}: is a directory; name a file")
    parent = path.parent
    if not parent.is_dir():
        raise ConfigError(f"{option} {output}: the directory {parent} does not exist")
    existed = path.exists()
    try:
        with open(path, "ab"):
            pass
    except OSError as error:
        raise ConfigError(f"{option} {output}: cannot be written ({error.strerror})") from None
    if not existed:
        path.unlink(missing_ok=True)


class ResultsFile(RunListener):
    """The results file as a run's first listener: each row written and flushed as it comes.

    A file is opened at its first row, so a run that writes no row (a rejected key, a model the
    server does not know, Ctrl-C while loading) leaves an existing file exactly as it was. `-`
    is stdout. A closed pipe or a failed write (disk full) raises `OutputStopped`; the rows
    written before it are kept and later rows are not attempted."""

    def __init__(self, output: str, append: bool):
        self.output = output
        self.mode: Literal["ab", "wb"] = "ab" if append else "wb"
        self.rows_written = 0
        self._handle: BinaryIO | None = sys.stdout.buffer if output == "-" else None
        self._stopped: OutputStopped | None = None

    def row(self, row: EvaluationRow) -> None:
        if self._stopped is not None:
            raise self._stopped
        try:
            if self._handle is None:
                self._handle = open(self.output, self.mode)  # noqa: SIM115  (closed by `close`)
            self._handle.write(row.model_dump_json().encode() + b"\n")
            self._handle.flush()
        except BrokenPipeError:  # `... -o - | head`: the reader is gone; stop quietly
            self._stopped = OutputStopped("the reader of stdout went away", pipe_closed=True)
            raise self._stopped from None
        except OSError as error:  # disk full, a device error: stop, keep what was written
            self._stopped = OutputStopped(f"{self.output}: {error.strerror or error}")
            raise self._stopped from None
        self.rows_written += 1

    def close(self) -> None:
        """Close the file (never stdout); a flush that fails at close was reported already."""
        if self._handle is not None and self._handle is not sys.stdout.buffer:
            handle, self._handle = self._handle, None
            try:
                handle.close()
            except OSError:
                pass
