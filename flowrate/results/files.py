"""Results files: reading rows back (a killed run's partial last line passed over), repairing that line, and rewriting a file atomically for a resume."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from pydantic import ValidationError

from flowrate.exit_codes import ConfigError, InputError
from flowrate.models import EvaluationRow
from flowrate.settings import plain_validation_message


def read_rows(path: Path) -> Iterator[EvaluationRow]:
    """The rows of a results file. A partial last line (a run killed mid-write) is passed over;
    a bad line anywhere else is an input error."""
    try:
        handle = open(path, "rb")
    except OSError as error:
        raise ConfigError(f"{path}: cannot read results: {error.strerror}") from None
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = EvaluationRow.model_validate_json(line)
            except ValidationError as error:
                if not line.endswith(b"\n"):  # the last line, cut short
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


def open_output(output: str, append: bool) -> BinaryIO:
    if output == "-":
        return sys.stdout.buffer
    return LazyOutput(output, append)  # type: ignore[return-value]  # closed by `FileRun.execute`


class LazyOutput:
    """A results file opened at its first row: a run that writes no row (a rejected key, a model
    the server does not know, Ctrl-C while loading) leaves an existing file exactly as it was."""

    def __init__(self, path: str, append: bool):
        self.path = path
        self.mode = "ab" if append else "wb"
        self._handle: BinaryIO | None = None

    def write(self, data: bytes) -> int:
        if self._handle is None:
            self._handle = open(self.path, self.mode)  # noqa: SIM115  (closed by `close`)
        return self._handle.write(data)

    def flush(self) -> None:
        if self._handle is not None:
            self._handle.flush()

    def close(self) -> None:
        if self._handle is not None:
            handle, self._handle = self._handle, None
            try:
                handle.close()
            except OSError:  # the flush at close failed too (disk full): already reported
                pass
