"""The rows of a results file written again as Parquet (`--output-parquet`), for warehouses and
dataframes: one Parquet row per JSONL row, the nested fields (source, usage, error, key issues)
kept nested, every column typed from `EvaluationRow` whatever the rows hold, so that the files of
two runs (one with no error, say) have one schema and combine."""

from __future__ import annotations

import os
import re
import types
import typing
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel

from flowrate.errors import OutputError
from flowrate.results.rows import EvaluationRow

_SCALARS = {str: "VARCHAR", int: "BIGINT", float: "DOUBLE", bool: "BOOLEAN", datetime: "TIMESTAMPTZ"}


def write_parquet(results: str, parquet: str) -> int:
    """Write the rows of the JSONL `results` file to `parquet` (replaced if it exists), in the
    schema `parquet_columns` gives; returns how many rows it holds. An empty results file makes a
    Parquet file of that schema and no rows. Raises `OutputError` when it cannot be written."""
    import duckdb

    source, target = Path(results).expanduser(), Path(parquet).expanduser()
    partial = target.with_name(target.name + ".partial")
    columns = parquet_columns()
    try:
        connection = duckdb.connect()
        try:
            if source.stat().st_size == 0:
                typed = ", ".join(f"CAST(NULL AS {kind}) AS {_name(name)}" for name, kind in columns.items())
                rows = f"(SELECT {typed} WHERE false)"
            else:
                struct = "{" + ", ".join(f"{_literal(name)}: {_literal(kind)}" for name, kind in columns.items()) + "}"
                rows = f"read_json({_literal(source)}, format = 'newline_delimited', columns = {struct})"
            count = connection.execute(f"SELECT count(*) FROM {rows}").fetchall()[0][0]
            connection.execute(f"COPY (SELECT * FROM {rows}) TO {_literal(partial)} (FORMAT parquet)")
        finally:
            connection.close()
        partial.replace(target)
    except (OSError, duckdb.Error) as error:
        partial.unlink(missing_ok=True)
        raise OutputError(f"--output-parquet {parquet}: cannot be written ({_reason(error)})") from None
    return count


def _reason(error: Exception) -> str:
    """Why a write failed, in the system's words: an `OSError`'s, or that of the errno DuckDB's IO
    error carries in its JSON detail (`..."errno":"28"}` on a full disk); else the error's text."""
    if isinstance(error, OSError):
        return error.strerror or str(error)
    found = re.search(r'"errno":\s*"?(\d+)', str(error))
    return os.strerror(int(found.group(1))) if found else str(error)


def parquet_columns() -> dict[str, str]:
    """The Parquet file's columns and their DuckDB types, in `EvaluationRow`'s field order."""
    return {name: _duckdb_type(field.annotation) for name, field in EvaluationRow.model_fields.items()}


def _duckdb_type(annotation: typing.Any) -> str:
    """The DuckDB type of a row field's annotation: optional is nullable, a model a STRUCT, a
    list a LIST, a dict a MAP, a union of scalars (a verdict or a rating) VARCHAR."""
    arguments = [kind for kind in typing.get_args(annotation) if kind is not type(None)]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return _duckdb_type(arguments[0]) if len(arguments) == 1 else "VARCHAR"
    if origin is list:
        return _duckdb_type(arguments[0]) + "[]"
    if origin is dict:
        return f"MAP({_duckdb_type(arguments[0])}, {_duckdb_type(arguments[1])})"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        fields = annotation.model_fields.items()
        return "STRUCT(" + ", ".join(f"{_name(name)} {_duckdb_type(field.annotation)}" for name, field in fields) + ")"
    return _SCALARS[annotation]


def _name(name: str) -> str:
    """A column name as a SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _literal(path: Path | str) -> str:
    """`path` (or any text) as a SQL string literal."""
    return "'" + str(path).replace("'", "''") + "'"
