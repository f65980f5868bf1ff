"""The history: every run's rows, the runs themselves and human labels, in one DuckDB file
that any DuckDB client can query with SQL. DuckDB is imported only here, only when used.

Tables (documented in the README):
- `runs(run_id, started_at, finished_at, models, rubric_versions, metrics, rows, passed, failed, errors, cost_usd, source)`;
- `rows(conversation_id, metric, suite, model, rubric_version, evaluated_at, chat_date, verdict, rating, scale, score, threshold, success, error_type, cost_usd, weights, run_id, key_issues, number_of_turns, turns_sha256)`,
  one per (conversation_id, metric, model, rubric_version, evaluated_at): importing a row again adds nothing;
- `labels(conversation_id, metric, score, labeled_at, labeler)`, each distinct label once;
- `reviews(review_id, conversation_id, metric, reviewer, value, score, comment, answered_at, run_id, judge_shown)`,
  every answer given in `flowrate review`, never updated (`flowrate.analysis.reviews`);
- `_migrations(name, applied_at)`: the schema's migrations applied to the file (`migrations`).

Every open applies the migrations the file lacks; a command that only reads upgrades an older
file first, in a connection of its own, then reads it read-only (see `connect`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flowrate.analysis.labels import Label
from flowrate.analysis.migrations import LABELS, migrate, pending
from flowrate.errors import ConfigError, OutputError
from flowrate.results.files import complete_results

#: how long a writer waits for a history another process holds; the review app and an eval
#: each hold it for one short transaction (an answer, a run's rows), so this is ample
WAIT_FOR_HISTORY_S = 10.0
DUCKDB_MAGIC = b"DUCK"  #: bytes 8 to 12 of every DuckDB database file


class HistoryBusy(ConfigError):
    """Another process holds the history (DuckDB lets one process write a file at a time)."""


COLUMNS = (
    "{id: 'VARCHAR', metric: 'VARCHAR', suite: 'VARCHAR', model: 'VARCHAR', rubric_version: 'VARCHAR',"
    " evaluated_at: 'VARCHAR', chat_date: 'VARCHAR', verdict: 'VARCHAR', rating: 'INTEGER', scale: 'INTEGER',"
    " score: 'DOUBLE', threshold: 'DOUBLE', success: 'BOOLEAN', error: 'JSON', cost_usd: 'DOUBLE', weights: 'JSON',"
    " key_issues: 'JSON', number_of_turns: 'INTEGER', turns_sha256: 'VARCHAR'}"
)


def connect(path: str | Path | None, read_only: bool = False) -> Any:
    """The history at `path`, created when missing, with the migrations it lacks applied; an
    in-memory one when `path` is None (for plain results files).

    With `read_only` (commands that only read: trends, calibrate) a missing file is an error
    and nothing is created; a file that is not a flowrate history is an error and is left as
    it is. A flowrate history from an older flowrate is upgraded first, in a writable
    connection of its own (the only write such a command makes), then opened read-only;
    temporary tables still work. Where it cannot be written, the error says it needs upgrading."""
    if read_only and path is not None:
        return _open_to_read(path)
    connection = _open(path)
    migrate(connection)
    return connection


def _open_to_read(path: str | Path) -> Any:
    """`connect(path, read_only=True)`."""
    import duckdb

    if not Path(path).exists():
        raise ConfigError(f"--history {path}: does not exist (a command that only reads creates no history)")
    connection = _open(path, read_only=True)
    tables = {name for (name,) in connection.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    missing = [name for name in ("runs", "rows", "labels") if name not in tables]
    if missing:
        connection.close()
        raise ConfigError(f"--history {path}: not a flowrate history (no table {', '.join(missing)})")
    if not pending(connection):
        return connection
    connection.close()
    try:
        upgrade = duckdb.connect(str(path))
    except (duckdb.Error, OSError) as error:
        raise ConfigError(
            f"--history {path}: written by an older flowrate, it needs upgrading, and it cannot be opened"
            f" for writing here ({error}); a command that writes the history (eval --history, history"
            " import, labels import) upgrades it"
        ) from None
    try:
        migrate(upgrade)
    finally:
        upgrade.close()
    return _open(path, read_only=True)


def connect_waiting(path: str | Path, wait_s: float | None = None) -> Any:
    """`connect(path)`, tried again for up to `wait_s` seconds (None: `WAIT_FOR_HISTORY_S`) while
    another process holds the file; then the `HistoryBusy` error says who holds it."""
    deadline = time.monotonic() + (WAIT_FOR_HISTORY_S if wait_s is None else wait_s)
    while True:
        try:
            return connect(path)
        except HistoryBusy:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@contextmanager
def writing(path: str | Path, wait_s: float | None = None) -> Iterator[Any]:
    """The history at `path` open for one short write (`connect_waiting`), closed after it. A
    close that fails (the last checkpoint on a full disk) is an `OutputError` naming the file."""
    import duckdb

    connection = connect_waiting(path, wait_s)
    try:
        yield connection
    finally:
        try:
            connection.close()
        except duckdb.Error as error:
            raise OutputError(f"--history {path}: cannot be written ({error})") from None


def check_history_file(path: str | Path) -> None:
    """Raise `ConfigError` when `path` exists and is not a DuckDB database (a results file named by
    mistake, say): DuckDB would otherwise open it as an empty database and keep nothing."""
    try:
        with open(Path(path).expanduser(), "rb") as handle:
            head = handle.read(12)
    except FileNotFoundError:
        return
    except OSError as error:
        raise ConfigError(f"--history {path}: cannot be read ({error.strerror})") from None
    if head[8:12] != DUCKDB_MAGIC:
        raise ConfigError(
            f"--history {path}: not a DuckDB database, so not a flowrate history; name the history file"
            " (a new name starts one)"
        )


def _open(path: str | Path | None, read_only: bool = False) -> Any:
    import duckdb

    if path is not None:
        check_history_file(path)
    try:
        return duckdb.connect(":memory:" if path is None else str(path), read_only=read_only)
    except (duckdb.Error, OSError) as error:
        if "Conflicting lock" in str(error):  # DuckDB's words for a file another process holds
            raise HistoryBusy(f"--history {path}: in use by another process: {error}") from None
        raise ConfigError(f"--history {path}: cannot open the history: {error}") from None


def import_results(connection: Any, path: str | Path, started_at: datetime | None = None) -> int:
    """Add a results file's rows (each once) and record the run, in one transaction; returns how
    many rows were new.

    The file is checked row by row first (`complete_results`: a bad line is a plain error naming
    it, a partial last line is passed over), then read by DuckDB itself; the run's figures are
    computed in SQL over the rows it added. A write that fails (a full disk) stores nothing and
    is an `OutputError` naming the history."""
    import duckdb

    with complete_results(Path(path)) as rows_file:
        connection.execute("BEGIN TRANSACTION")
        try:
            added = _insert_run(connection, rows_file, str(path), started_at)
            connection.execute("COMMIT")
        except BaseException as error:
            with suppress(duckdb.Error):  # a COMMIT that failed has ended the transaction already
                connection.execute("ROLLBACK")
            if not isinstance(error, duckdb.Error):
                raise
            raise OutputError(
                f"--history {_file_of(connection)}: cannot be written ({error}); nothing of {path} was added"
            ) from None
    return added


def _file_of(connection: Any) -> str:
    """The file of the database `connection` is on (`:memory:` for none)."""
    query = "SELECT coalesce(path, ':memory:') FROM duckdb_databases() WHERE database_name = current_database()"
    return connection.execute(query).fetchone()[0]


def _insert_run(connection: Any, rows_file: Path, source: str, started_at: datetime | None) -> int:
    """`import_results` inside its transaction: the rows of `rows_file`, then the run."""
    run_id = uuid.uuid4().hex
    connection.execute(
        f"""INSERT OR IGNORE INTO rows SELECT id, metric, suite, model, rubric_version,
        CAST(evaluated_at AS TIMESTAMPTZ) AT TIME ZONE 'UTC', TRY_CAST(chat_date AS DATE), verdict, rating, scale,
        score, threshold, success, json_extract_string(error, '$.type'), cost_usd, CAST(weights AS VARCHAR), ?,
        CAST(key_issues AS VARCHAR), number_of_turns, turns_sha256
        FROM read_json(?, format = 'newline_delimited', columns = {COLUMNS}, ignore_errors = true)""",
        [run_id, str(rows_file)],
    )
    added = connection.execute("SELECT count(*) FROM rows WHERE run_id = ?", [run_id]).fetchone()[0]
    if added:
        connection.execute(
            """INSERT INTO runs SELECT ?, coalesce(CAST(? AS TIMESTAMP), min(evaluated_at)), max(evaluated_at),
            string_agg(DISTINCT model, ',' ORDER BY model), string_agg(DISTINCT rubric_version, ',' ORDER BY rubric_version),
            string_agg(DISTINCT metric, ',' ORDER BY metric), count(*), count(*) FILTER (WHERE success),
            count(*) FILTER (WHERE success = false), count(*) FILTER (WHERE error_type IS NOT NULL),
            coalesce(sum(cost_usd), 0), ? FROM rows WHERE run_id = ?""",
            [run_id, started_at, source, run_id],
        )
    return added


def judged_conversations(path: str | Path, identities: list[tuple[str, str, str]]) -> set[tuple[str, str]]:
    """The (conversation_id, turns_sha256) of every conversation the history at `path` holds a
    row without error for under each of `identities` (row name, model, rubric version): judged
    already, by these judges, with these turns. Empty when the history does not exist yet."""
    if not identities or not Path(path).expanduser().exists():
        return set()
    with writing(path) as connection:  # waits, as a write does, while another process holds it
        connection.execute("CREATE TEMP TABLE wanted (metric VARCHAR, model VARCHAR, rubric_version VARCHAR)")
        connection.executemany("INSERT INTO wanted VALUES (?, ?, ?)", [list(identity) for identity in identities])
        found = connection.execute(
            """SELECT conversation_id, turns_sha256 FROM rows JOIN wanted USING (metric, model, rubric_version)
            WHERE turns_sha256 IS NOT NULL AND error_type IS NULL
            GROUP BY conversation_id, turns_sha256 HAVING count(DISTINCT metric) = ?""",
            [len(set(identities))],
        ).fetchall()
    return {(key, sha) for key, sha in found}


def import_labels(connection: Any, labels: list[Label]) -> int:
    """Add labels (each distinct one once); returns how many were new."""
    before = connection.execute("SELECT count(*) FROM labels").fetchone()[0]
    connection.executemany(
        "INSERT OR IGNORE INTO labels VALUES (?, ?, ?, ?, ?)",
        [[label.conversation_id, label.metric, label.score, label.labeled_at, label.labeler or ""] for label in labels],
    )
    return connection.execute("SELECT count(*) FROM labels").fetchone()[0] - before


def stored_labels(connection: Any) -> list[Label]:
    """The imported labels, then each reviewer's current answer from `flowrate review` as a label."""
    from flowrate.analysis.reviews import current_reviews

    imported = [
        Label(key, metric, score, labeled_at, labeler or None)
        for key, metric, score, labeled_at, labeler in connection.execute("SELECT * FROM labels").fetchall()
    ]
    return imported + [review.label() for review in current_reviews(connection)]


def stored_rows(connection: Any) -> list:
    """The rows as results rows (the fields calibration reads)."""
    import orjson

    from flowrate.results.rows import ErrorInfo, EvaluationRow

    found = connection.execute(
        "SELECT conversation_id, metric, suite, model, rubric_version, evaluated_at, chat_date, verdict, rating, scale,"
        " score, threshold, success, error_type, cost_usd, weights FROM rows"
    ).fetchall()
    rows = []
    for (
        key,
        metric,
        suite,
        model,
        version,
        at,
        chat,
        verdict,
        rating,
        scale,
        score,
        threshold,
        success,
        error,
        cost,
        weights,
    ) in found:
        rows.append(
            EvaluationRow(
                id=key,
                metric=metric,
                suite=suite,
                model=model,
                rubric_version=version,
                evaluated_at=at.replace(tzinfo=UTC),
                chat_date=chat.isoformat() if chat else None,
                verdict=verdict,
                rating=rating,
                scale=scale,
                score=score,
                threshold=threshold,
                success=success,
                error=ErrorInfo(type=error, message="") if error else None,
                cost_usd=cost,
                weights=orjson.loads(weights) if weights else None,
            )
        )
    return rows


def replace_labels(connection: Any, labels: list[Label]) -> None:
    """Use `labels` instead of the stored ones, for this connection only (the file is untouched)."""
    connection.execute(LABELS.replace("CREATE TABLE IF NOT EXISTS labels", "CREATE OR REPLACE TEMP TABLE labels"))
    import_labels(connection, labels)


def label_count(connection: Any) -> int:
    """How many labels the history on `connection` holds (or the labels put in their place)."""
    return connection.execute("SELECT count(*) FROM labels").fetchone()[0]
