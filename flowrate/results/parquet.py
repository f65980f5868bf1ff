"""The rows of a results file written again as Parquet (`--output-parquet`), for warehouses and
dataframes: one Parquet row per JSONL row, the nested fields (source, usage, error, key issues)
kept nested, the types DuckDB reads from every row of the file."""

from __future__ import annotations

from pathlib import Path

from flowrate.errors import OutputError


def write_parquet(results: str, parquet: str) -> int:
    """Write the rows of the JSONL `results` file to `parquet` (replaced if it exists); returns
    how many rows it holds. An empty results file makes a Parquet file of no rows. Raises
    `OutputError` when it cannot be written."""
    import duckdb

    source, target = Path(results).expanduser(), Path(parquet).expanduser()
    partial = target.with_name(target.name + ".partial")
    try:
        connection = duckdb.connect()
        try:
            if source.stat().st_size == 0:
                connection.execute(f"COPY (SELECT NULL AS id WHERE false) TO {_literal(partial)} (FORMAT parquet)")
                count = 0
            else:
                rows = f"read_json({_literal(source)}, format = 'newline_delimited', sample_size = -1)"
                count = connection.execute(f"SELECT count(*) FROM {rows}").fetchone()[0]
                connection.execute(f"COPY (SELECT * FROM {rows}) TO {_literal(partial)} (FORMAT parquet)")
        finally:
            connection.close()
        partial.replace(target)
    except (OSError, duckdb.Error) as error:
        partial.unlink(missing_ok=True)
        raise OutputError(f"--output-parquet {parquet}: cannot be written ({error})") from None
    return count


def _literal(path: Path) -> str:
    """`path` as a SQL string literal."""
    return "'" + str(path).replace("'", "''") + "'"
