"""Results files: reading rows back, repairing a killed run's last line, resuming."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import ValidationError

from flowrate.exit_codes import ConfigError, InputError
from flowrate.models import EvaluationRow


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
                problem = error.errors()[0]["msg"]
            else:
                if row.verdict is not None or row.error is not None:
                    yield row
                    continue
                problem = "a row has a verdict or an error, this one has neither"
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
