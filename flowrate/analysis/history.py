"""The history: every run's rows, the runs themselves and human labels, in one DuckDB file
that any DuckDB client can query with SQL. DuckDB is imported only here, only when used.

Tables (documented in the README):
- `runs(run_id, started_at, finished_at, models, rubric_versions, metrics, rows, passed, failed, errors, cost_usd, source)`;
- `rows(conversation_id, metric, suite, model, rubric_version, evaluated_at, chat_date, verdict, rating, scale, score, threshold, success, error_type, cost_usd, weights, run_id, key_issues, number_of_turns)`,
  one per (conversation_id, metric, model, rubric_version, evaluated_at): importing a row again adds nothing;
- `labels(conversation_id, metric, score, labeled_at, labeler)`, each distinct label once;
- `reviews(review_id, conversation_id, metric, reviewer, value, score, comment, answered_at, run_id, judge_shown)`,
  every answer given in `flowrate review`, never updated (`flowrate.analysis.reviews`);
- `_migrations(name, applied_at)`: the schema's migrations applied to the file (`migrations`).

Every open applies the migrations the file lacks; a command that only reads upgrades an older
file first, in a connection of its own, then reads it read-only (see `connect`).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flowrate.analysis.labels import Label
from flowrate.analysis.migrations import LABELS, migrate, pending
from flowrate.errors import ConfigError
from flowrate.results.files import read_rows

COLUMNS = (
    "{id: 'VARCHAR', metric: 'VARCHAR', suite: 'VARCHAR', model: 'VARCHAR', rubric_version: 'VARCHAR',"
    " evaluated_at: 'VARCHAR', chat_date: 'VARCHAR', verdict: 'VARCHAR', rating: 'INTEGER', scale: 'INTEGER',"
    " score: 'DOUBLE', threshold: 'DOUBLE', success: 'BOOLEAN', error: 'JSON', cost_usd: 'DOUBLE', weights: 'JSON',"
    " key_issues: 'JSON', number_of_turns: 'INTEGER'}"
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


def _open(path: str | Path | None, read_only: bool = False) -> Any:
    import duckdb

    try:
        return duckdb.connect(":memory:" if path is None else str(path), read_only=read_only)
    except (duckdb.Error, OSError) as error:
        raise ConfigError(f"--history {path}: cannot open the history: {error}") from None


def import_results(connection: Any, path: str | Path, started_at: datetime | None = None) -> int:
    """Add a results file's rows (each once) and record the run; returns how many rows were new.

    The file is checked row by row first (a bad one is a plain error naming its line), then read
    by DuckDB itself; the run's figures are computed in SQL over the rows it added."""
    for _ in read_rows(Path(path)):
        pass
    run_id = uuid.uuid4().hex
    connection.execute(
        f"""INSERT OR IGNORE INTO rows SELECT id, metric, suite, model, rubric_version,
        CAST(evaluated_at AS TIMESTAMPTZ) AT TIME ZONE 'UTC', TRY_CAST(chat_date AS DATE), verdict, rating, scale,
        score, threshold, success, json_extract_string(error, '$.type'), cost_usd, CAST(weights AS VARCHAR), ?,
        CAST(key_issues AS VARCHAR), number_of_turns
        FROM read_json(?, format = 'newline_delimited', columns = {COLUMNS}, ignore_errors = true)""",
        [run_id, str(path)],
    )
    added = connection.execute("SELECT count(*) FROM rows WHERE run_id = ?", [run_id]).fetchone()[0]
    if added:
        connection.execute(
            """INSERT INTO runs SELECT ?, coalesce(CAST(? AS TIMESTAMP), min(evaluated_at)), max(evaluated_at),
            string_agg(DISTINCT model, ',' ORDER BY model), string_agg(DISTINCT rubric_version, ',' ORDER BY rubric_version),
            string_agg(DISTINCT metric, ',' ORDER BY metric), count(*), count(*) FILTER (WHERE success),
            count(*) FILTER (WHERE success = false), count(*) FILTER (WHERE error_type IS NOT NULL),
            coalesce(sum(cost_usd), 0), ? FROM rows WHERE run_id = ?""",
            [run_id, started_at, str(path), run_id],
        )
    return added


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

    from flowrate.results.summary import EvaluationRow

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
                error={"type": error, "message": ""} if error else None,
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
