"""The history's schema as ordered migrations, kept the way simonw/llm keeps its own
(`llm/migrations.py`): a list of functions, applied in order, each once, each recorded by name
in the `_migrations` table, so that a history written by an older flowrate opens and is
upgraded in place, its rows kept.

A released migration is never edited, reordered or removed: a change to the schema is a new
function at the end of `MIGRATIONS`. Each migration runs in one transaction with its record,
so one that fails leaves the file as it was before it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

MIGRATIONS_TABLE = "_migrations"

Migration = Callable[[Any], None]
MIGRATIONS: list[Migration] = []


def migration(function: Migration) -> Migration:
    """Add `function` (it takes a DuckDB connection) to the end of `MIGRATIONS`."""
    MIGRATIONS.append(function)
    return function


RUNS = """CREATE TABLE IF NOT EXISTS runs (run_id VARCHAR PRIMARY KEY, started_at TIMESTAMP, finished_at TIMESTAMP,
    models VARCHAR, rubric_versions VARCHAR, metrics VARCHAR, rows BIGINT, passed BIGINT, failed BIGINT,
    errors BIGINT, cost_usd DOUBLE, source VARCHAR)"""
ROWS = """CREATE TABLE IF NOT EXISTS rows (conversation_id VARCHAR NOT NULL, metric VARCHAR NOT NULL, suite VARCHAR,
    model VARCHAR NOT NULL, rubric_version VARCHAR NOT NULL, evaluated_at TIMESTAMP NOT NULL, chat_date DATE,
    verdict VARCHAR, rating INTEGER, scale INTEGER, score DOUBLE, threshold DOUBLE, success BOOLEAN,
    error_type VARCHAR, cost_usd DOUBLE, weights VARCHAR, run_id VARCHAR,
    PRIMARY KEY (conversation_id, metric, model, rubric_version, evaluated_at))"""
# `history.replace_labels` makes its temporary labels table from this statement: a later
# migration that changes `labels` must keep that one in step.
LABELS = """CREATE TABLE IF NOT EXISTS labels (conversation_id VARCHAR NOT NULL, metric VARCHAR NOT NULL,
    score DOUBLE NOT NULL, labeled_at DATE NOT NULL, labeler VARCHAR NOT NULL,
    PRIMARY KEY (conversation_id, metric, score, labeled_at, labeler))"""


@migration
def m001_runs_rows_and_labels(connection: Any) -> None:
    """The tables every flowrate before migrations made: `runs`, `rows` and `labels`. A history
    from then has them already (IF NOT EXISTS), so for it this only records the version."""
    for statement in (RUNS, ROWS, LABELS):
        connection.execute(statement)


def applied(connection: Any) -> list[str]:
    """The names of the migrations recorded on `connection` (a DuckDB connection), in the
    order they were applied; none for a history from before migrations."""
    tables = {name for (name,) in connection.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    if MIGRATIONS_TABLE not in tables:
        return []
    query = f"SELECT name FROM {MIGRATIONS_TABLE} ORDER BY applied_at, name"
    return [name for (name,) in connection.execute(query).fetchall()]


def pending(connection: Any, migrations: list[Migration] = MIGRATIONS) -> list[Migration]:
    """Those of `migrations` not yet recorded on `connection`, in their order. Reads only:
    a read-only connection can ask."""
    done = set(applied(connection))
    return [function for function in migrations if function.__name__ not in done]


def migrate(connection: Any, migrations: list[Migration] = MIGRATIONS) -> list[str]:
    """Apply, in order, each of `migrations` not yet recorded on `connection` (writable), each
    in one transaction with its record in `_migrations`; returns the names applied now."""
    connection.execute(
        f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP NOT NULL)"
    )
    names = []
    for function in pending(connection, migrations):
        connection.execute("BEGIN TRANSACTION")
        try:
            function(connection)
            connection.execute(
                f"INSERT INTO {MIGRATIONS_TABLE} VALUES (?, ?)",
                [function.__name__, datetime.now(UTC).replace(tzinfo=None)],
            )
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")
        names.append(function.__name__)
    return names


REVIEWS = """CREATE TABLE IF NOT EXISTS reviews (review_id VARCHAR PRIMARY KEY, conversation_id VARCHAR NOT NULL,
    metric VARCHAR NOT NULL, reviewer VARCHAR NOT NULL, value VARCHAR NOT NULL, score DOUBLE NOT NULL,
    comment VARCHAR, answered_at TIMESTAMP NOT NULL, run_id VARCHAR, judge_shown BOOLEAN NOT NULL)"""


@migration
def m002_reviews(connection: Any) -> None:
    """`reviews`: the answers people give in `flowrate review`, one line per answer and never
    updated, so a label changed later keeps its earlier value; a reviewer's current label for a
    conversation and metric is their latest answer (`flowrate.analysis.reviews`)."""
    connection.execute(REVIEWS)


@migration
def m003_rows_key_issues(connection: Any) -> None:
    """`rows.key_issues` (the row's key issues, a JSON list) and `rows.number_of_turns`, which
    `flowrate top-issues --history` groups and places; rows imported before have neither (NULL)."""
    connection.execute("ALTER TABLE rows ADD COLUMN IF NOT EXISTS key_issues VARCHAR")
    connection.execute("ALTER TABLE rows ADD COLUMN IF NOT EXISTS number_of_turns INTEGER")


@migration
def m004_rows_turns_sha256(connection: Any) -> None:
    """`rows.turns_sha256`: the fingerprint of the turns a row judged, by which `eval --history`
    leaves out a conversation already judged with the same turns; rows imported before have
    none (NULL), and their conversations are judged again once."""
    connection.execute("ALTER TABLE rows ADD COLUMN IF NOT EXISTS turns_sha256 VARCHAR")
