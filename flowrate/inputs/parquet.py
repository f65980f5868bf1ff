"""Parquet input: one conversation per row, in the turn or the OpenAI-messages shape, read through
DuckDB and validated as a JSONL record is (`formats.parse_record`), each row named by its file and
its row number (from 0, as DuckDB's `file_row_number`, pyarrow and pandas count them).

The run's selection is pushed down into the query, so a file is not loaded to judge a part of it:
the shard (`I/N` by the id's hash) and the sample (a seeded hash of the id) are computed in SQL on
the id column alone, and, when no other filter could leave a row out before it, `--limit` too. The
rows they leave out are counted, never read, so they are not validated either. Everything the SQL
lets through is chosen again by `Selection` in Python, which decides; the SQL only needs to let no
chosen row out.

Parquet gives every row of a struct column every field, so a field that is null in a struct
(`metadata`, `labels`, a message) is read as absent, as it would be in the JSONL twin, and so is a
null top-level column. Dates and times are read as the ISO 8601 text JSON would hold, and a
`metadata` column of JSON text as the object it holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, time
from decimal import Decimal
from pathlib import Path
from typing import Any
from uuid import UUID

import orjson

from flowrate.inputs.conversation import Source
from flowrate.inputs.formats import Record, parse_record

FETCH_ROWS = 2048  # rows taken from DuckDB at a time: memory stays flat on a file of millions
HASH_SCALE = 2.0**64  # `selection.stable_hash` is 64 bits: its share of that is the sample's test
SAMPLE_SLACK = 1e-12  # the SQL's sample test lets a hair more through; `Selection` decides exactly


def read_parquet(path: Path, shown: str, id_base: str, pushdown: Any = None) -> Iterator[Record]:
    """Every row of the Parquet file at `path` the `pushdown` selection may choose (None: every
    row), validated into a `Record`; the rows the query leaves out are counted in
    `pushdown.left_out` by reason ("sample", "limit"; a row of another shard is not counted)."""
    import duckdb

    connection = duckdb.connect()
    try:
        try:
            columns = parquet_columns(path, connection)
            where, counts = _pushed_down(_literal(path), columns, id_base, pushdown)
            if counts is not None and pushdown is not None:
                _count_left_out(connection, counts, pushdown)
            query = f"SELECT * FROM read_parquet({_literal(path)}, file_row_number = true){where}"
            result = connection.execute(query + " ORDER BY file_row_number")
        except duckdb.Error as error:
            yield Record(source=Source(path=shown, index=0), format="unknown", problems=[f"{shown}: {_why(error)}"])
            return
        names = [column[0] for column in result.description]
        last = -1
        while batch := result.fetchmany(FETCH_ROWS):
            for values in batch:
                if _limit_reached(pushdown):
                    rest = f"SELECT count(*) FROM read_parquet({_literal(path)}, file_row_number = true){where}"
                    rest += (" AND " if where else " WHERE ") + f"file_row_number > {last}"
                    pushdown.left_out["limit"] += connection.execute(rest).fetchall()[0][0]
                    return
                raw = dict(zip(names, values))
                last = number = int(raw.pop("file_row_number"))
                source = Source(path=shown, index=number)
                where_shown = f"{shown} row {number}"
                yield parse_record(_plain_record(raw), source, default_id=f"{id_base}#{number}", where=where_shown)
    finally:
        connection.close()


def parquet_rows(path: Path, shown: str) -> Iterator[tuple[int, dict[str, Any] | Record]]:
    """Every row of the Parquet file at `path`, with its number, as the JSON record it stands
    for (`_plain_record`); a file DuckDB cannot read is one problem `Record`."""
    import duckdb

    connection = duckdb.connect()
    try:
        try:
            query = f"SELECT * FROM read_parquet({_literal(path)}, file_row_number = true) ORDER BY file_row_number"
            result = connection.execute(query)
        except duckdb.Error as error:
            problem = Record(source=Source(path=shown, index=0), format="unknown", problems=[f"{shown}: {_why(error)}"])
            yield 0, problem
            return
        names = [column[0] for column in result.description]
        while batch := result.fetchmany(FETCH_ROWS):
            for values in batch:
                raw = dict(zip(names, values))
                number = int(raw.pop("file_row_number"))
                yield number, _plain_record(raw)
    finally:
        connection.close()


def parquet_columns(path: Path, connection: Any = None) -> dict[str, str]:
    """The file's columns and their DuckDB types."""
    import duckdb

    db = connection or duckdb.connect()
    try:
        rows = db.execute(f"DESCRIBE SELECT * FROM read_parquet({_literal(path)})").fetchall()
    finally:
        if connection is None:
            db.close()
    return {str(name): str(kind) for name, kind, *_ in rows}


def looks_like_results_parquet(path: Path) -> bool:
    """True when a Parquet file holds flowrate's rows (`--output-parquet`), not conversations."""
    try:
        columns = parquet_columns(path)
    except Exception:  # not Parquet: the reader names the problem
        return False
    return {"metric", "rubric_version"} <= columns.keys() and not {"turns", "messages"} & columns.keys()


def _pushed_down(file: str, columns: dict[str, str], id_base: str, pushdown: Any) -> tuple[str, dict | None]:
    """The WHERE clause the selection's hashes make, and the counts to take for what it leaves out."""
    if pushdown is None or (pushdown.shard is None and pushdown.sample is None):
        return "", None
    given = "CAST(id AS VARCHAR)" if "id" in columns else "NULL"
    conversation_id = (
        f"CASE WHEN {given} IS NULL OR {given} = '' THEN {_text(id_base + '#')} || CAST(file_row_number AS VARCHAR)"
        f" ELSE {given} END"
    )
    tests = {}
    if pushdown.shard is not None:
        index, count = pushdown.shard
        tests["shard"] = f"{_hash(conversation_id)} % {count} = {index - 1}"
    if pushdown.sample is not None:
        seeded = f"{_text(str(pushdown.sample_seed) + ':')} || {conversation_id}"
        tests["sample"] = f"CAST({_hash(seeded)} AS DOUBLE) / {HASH_SCALE!r} < {pushdown.sample + SAMPLE_SLACK!r}"
    where = " WHERE " + " AND ".join(f"({test})" for test in tests.values())
    counts = None
    if "sample" in tests:
        in_shard = tests.get("shard", "true")
        counts = {
            "sample": f"SELECT count(*) FROM read_parquet({file}, file_row_number = true)"
            f" WHERE ({in_shard}) AND NOT ({tests['sample']})"
        }
    return where, counts


def _limit_reached(pushdown: Any) -> bool:
    """The selection has taken its `--limit`, and every row from here on would be left out for
    it (no filter that comes before the limit is set): the rest is counted, not read."""
    if pushdown is None or pushdown.limit is None or pushdown.min_words is not None:
        return False
    return not pushdown.only and not pushdown.exclude and pushdown.full


def _count_left_out(connection: Any, counts: dict[str, str], pushdown: Any) -> None:
    for reason, query in counts.items():
        left = connection.execute(query).fetchall()[0][0]
        if left:
            pushdown.left_out[reason] += left


def _hash(expression: str) -> str:
    """`selection.stable_hash` in SQL: the first 64 bits of the SHA-256 of the text."""
    return f"CAST('0x' || sha256({expression})[1:16] AS UBIGINT)"


def _plain_record(raw: dict[str, Any]) -> dict[str, Any]:
    """A row as the JSONL record it stands for: null columns and null struct fields absent, a
    `metadata` of JSON text decoded."""
    record = {key: _without_nulls(value) for key, value in raw.items() if value is not None}
    metadata = record.get("metadata")
    if isinstance(metadata, str):
        try:
            record["metadata"] = orjson.loads(metadata)
        except orjson.JSONDecodeError:
            pass  # left as text: the record's validation names it
    return record


def _without_nulls(value: Any) -> Any:
    """`value` as JSON has it: null struct fields left out, dates and times as ISO 8601 text (a
    JSONL twin's `"2026-03-02"` is a DATE once a warehouse has typed it), decimals as numbers."""
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    if isinstance(value, date | time):  # datetime is a date
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, UUID):
        return str(value)
    return value


def _literal(path: Path | str) -> str:
    return _text(str(path))


def _text(value: str) -> str:
    """`value` as a SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def _why(error: Exception) -> str:
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    if any(sign in text.lower() for sign in ("magic bytes", "not a parquet file", "too small to be a parquet file")):
        return "cannot read: not a Parquet file"
    return f"cannot read: {text}"
