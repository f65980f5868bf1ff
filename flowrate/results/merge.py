"""Merging the results files of a run's shards into one file and one summary."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from flowrate.errors import InputError
from flowrate.inputs.files import check_apart
from flowrate.inputs.selection import nothing_to_judge
from flowrate.results.files import check_output_path, read_rows
from flowrate.results.summary import RunSummary


def merge_results(paths: list[str], output: str, allow_empty: bool = False) -> RunSummary:
    """Join the results files of several shards into one; a row twice is an input error,
    and then no output is written. A file named twice (compared resolved: `f`, `./f`) is read
    once. `output` may not be one of `paths` (`check_apart`); files with no row at all are an input error
    unless `allow_empty`."""
    check_output_path(output)
    unique: dict[Path, str] = {}
    for path in paths:
        unique.setdefault(Path(path).expanduser().resolve(), path)
    paths = list(unique.values())
    check_apart([("--output", output)], paths, of="the merge")
    summary = RunSummary()
    seen: dict[tuple[str, str], str] = {}
    problems: list[str] = []
    with tempfile.NamedTemporaryFile(
        "wb", delete=False, dir=None if output == "-" else Path(output).parent, suffix=".merging"
    ) as staged:
        for path in paths:
            for number, row in enumerate(read_rows(Path(path)), start=1):
                key = (row.id, row.metric)
                if key in seen:
                    problems.append(f"{path}: row {number}: id {row.id!r} ({row.metric}) is also in {seen[key]}")
                    continue
                seen[key] = path
                staged.write(row.model_dump_json().encode() + b"\n")
                summary.add(row, len(seen))
    try:
        if problems:
            raise InputError(problems, headline="row(s) in more than one file; nothing was merged", hint=None)
        if not seen and not allow_empty:
            raise nothing_to_judge(paths)
        if output == "-":
            with open(staged.name, "rb") as merged:
                shutil.copyfileobj(merged, sys.stdout.buffer)
        else:
            os.replace(staged.name, output)
    finally:
        if os.path.exists(staged.name):
            os.unlink(staged.name)
    return summary
