"""The history's schema as ordered migrations: a history written before migrations existed opens
upgraded with its rows intact, each migration is applied once and in order, a failed one leaves
the file as it was, and a command that only reads writes nothing but the upgrade."""

import json
import subprocess
import sys

import duckdb
import pytest

from flowrate.analysis.history import connect
from flowrate.analysis.migrations import MIGRATIONS, applied, migrate, pending

# The schema exactly as flowrate wrote it before migrations (flowrate/analysis/history.py
# `SCHEMA` at commit ffc73e3): version 1, which every older history file has.
VERSION_1_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS runs (run_id VARCHAR PRIMARY KEY, started_at TIMESTAMP, finished_at TIMESTAMP,
    models VARCHAR, rubric_versions VARCHAR, metrics VARCHAR, rows BIGINT, passed BIGINT, failed BIGINT,
    errors BIGINT, cost_usd DOUBLE, source VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS rows (conversation_id VARCHAR NOT NULL, metric VARCHAR NOT NULL, suite VARCHAR,
    model VARCHAR NOT NULL, rubric_version VARCHAR NOT NULL, evaluated_at TIMESTAMP NOT NULL, chat_date DATE,
    verdict VARCHAR, rating INTEGER, scale INTEGER, score DOUBLE, threshold DOUBLE, success BOOLEAN,
    error_type VARCHAR, cost_usd DOUBLE, weights VARCHAR, run_id VARCHAR,
    PRIMARY KEY (conversation_id, metric, model, rubric_version, evaluated_at))""",
    """CREATE TABLE IF NOT EXISTS labels (conversation_id VARCHAR NOT NULL, metric VARCHAR NOT NULL,
    score DOUBLE NOT NULL, labeled_at DATE NOT NULL, labeler VARCHAR NOT NULL,
    PRIMARY KEY (conversation_id, metric, score, labeled_at, labeler))""",
]
VERSION_1_COLUMNS = {
    "runs": "run_id, started_at, finished_at, models, rubric_versions, metrics, rows, passed, failed, errors,"
    " cost_usd, source",
    "rows": "conversation_id, metric, suite, model, rubric_version, evaluated_at, chat_date, verdict, rating, scale,"
    " score, threshold, success, error_type, cost_usd, weights, run_id",
    "labels": "conversation_id, metric, score, labeled_at, labeler",
}
FLOW = "conversational_flow_rate"


def version_1_history(path):
    """A history as an older flowrate left it: the version 1 tables and their rows, no `_migrations`."""
    with duckdb.connect(str(path)) as connection:
        for statement in VERSION_1_SCHEMA:
            connection.execute(statement)
        connection.execute(
            """INSERT INTO rows VALUES
            ('c1', ?, NULL, 'gpt-4o', 'sha256:x', TIMESTAMP '2026-03-02 09:00:00', DATE '2026-02-27', 'mostly', NULL,
             NULL, 0.9, 0.7, true, NULL, 0.0012, NULL, 'run-1'),
            ('c2', ?, NULL, 'gpt-4o', 'sha256:x', TIMESTAMP '2026-03-03 09:00:00', NULL, 'minor', NULL, NULL, 0.3,
             0.7, false, NULL, 0.0011, NULL, 'run-1'),
            ('c3', ?, NULL, 'gpt-4o', 'sha256:x', TIMESTAMP '2026-03-03 10:00:00', NULL, NULL, NULL, NULL, NULL, 0.7,
             NULL, 'InternalServerError', NULL, NULL, 'run-1'),
            ('c1', 'coherence', 'virtual_agent', 'gpt-4o', 'sha256:y', TIMESTAMP '2026-03-09 09:00:00', NULL, NULL,
             4, 5, 0.8, 0.7, true, NULL, 0.002, '{"coherence": 1.0}', 'run-2')""",
            [FLOW, FLOW, FLOW],
        )
        connection.execute(
            """INSERT INTO runs VALUES
            ('run-1', TIMESTAMP '2026-03-02 08:59:00', TIMESTAMP '2026-03-03 10:00:00', 'gpt-4o', 'sha256:x', ?,
             3, 1, 1, 1, 0.0023, '/data/out-1.jsonl'),
            ('run-2', TIMESTAMP '2026-03-09 08:59:00', TIMESTAMP '2026-03-09 09:00:00', 'gpt-4o', 'sha256:y',
             'coherence', 1, 1, 0, 0, 0.002, '/data/out-2.jsonl')""",
            [FLOW],
        )
        connection.execute(
            "INSERT INTO labels VALUES ('c1', ?, 0.7, DATE '2026-03-05', 'ana'), ('c2', ?, 0.5, DATE '2026-03-05', '')",
            [FLOW, FLOW],
        )
    return path


def contents(path):
    """Every version 1 table's rows, in a fixed order, read without writing."""
    with duckdb.connect(str(path), read_only=True) as connection:
        return {
            table: connection.execute(f"SELECT {columns} FROM {table} ORDER BY ALL").fetchall()
            for table, columns in VERSION_1_COLUMNS.items()
        }


def recorded_migrations(path):
    with duckdb.connect(str(path), read_only=True) as connection:
        return applied(connection)


def test_a_history_written_before_migrations_opens_upgraded_with_its_rows_intact(tmp_path):
    path = version_1_history(tmp_path / "h.duckdb")
    before = contents(path)
    assert recorded_migrations(path) == [] and len(before["rows"]) == 4
    connect(path).close()
    assert recorded_migrations(path) == [function.__name__ for function in MIGRATIONS]
    assert contents(path) == before
    connect(path).close()  # opened again: nothing is applied twice
    assert recorded_migrations(path) == [function.__name__ for function in MIGRATIONS]
    assert contents(path) == before


def test_a_command_that_only_reads_upgrades_an_old_history_and_reads_it(run_flowrate, tmp_path):
    path = version_1_history(tmp_path / "h.duckdb")
    before = contents(path)
    trends = run_flowrate("trends", "--history", "h.duckdb", "--metric", FLOW, "--json")
    assert trends.returncode == 0, trends.stderr
    assert [(i["period"], i["conversations"], i["mean_score"], i["mean_label"]) for i in json.loads(trends.stdout)] == [
        ("2026-W10", 3, 0.6, 0.6)  # c3 is an error row: counted, not scored; labels 0.7 and 0.5
    ]
    assert recorded_migrations(path) == [function.__name__ for function in MIGRATIONS]
    assert contents(path) == before
    calibrated = run_flowrate("calibrate", "--history", "h.duckdb", "--as-of", "2026-06-30", "--json")
    assert calibrated.returncode == 0, calibrated.stderr
    assert json.loads(calibrated.stdout)["metrics"][FLOW]["labels"] == 2
    assert contents(path) == before


def test_an_up_to_date_history_is_not_written_by_a_command_that_only_reads(run_flowrate, tmp_path):
    path = version_1_history(tmp_path / "h.duckdb")
    connect(path).close()
    files = {item: item.read_bytes() for item in tmp_path.glob("h.duckdb*")}
    assert run_flowrate("trends", "--history", "h.duckdb", "--json").returncode == 0
    assert run_flowrate("calibrate", "--history", "h.duckdb", "--as-of", "2026-06-30").returncode == 0
    assert {item: item.read_bytes() for item in tmp_path.glob("h.duckdb*")} == files


def test_an_old_history_that_cannot_be_opened_for_writing_is_said_to_need_upgrading(run_flowrate, tmp_path):
    path = version_1_history(tmp_path / "h.duckdb")
    # Another process reading the history (a dashboard, a second trends) holds a shared lock:
    # flowrate can open it read-only, but not for writing, so it cannot upgrade it now.
    reader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys; c = duckdb.connect(sys.argv[1], read_only=True); print('open', flush=True);"
            " sys.stdin.read()",
            str(path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert reader.stdout.readline().strip() == "open"
        result = run_flowrate("trends", "--history", "h.duckdb")
    finally:
        reader.stdin.close()
        reader.wait(timeout=30)
    assert result.returncode == 2, result.stderr
    assert "--history h.duckdb: written by an older flowrate, it needs upgrading" in result.stderr
    assert "a command that writes the history (eval --history, history import, labels import) upgrades it" in (
        " ".join(result.stderr.split())
    )
    assert "Traceback" not in result.stderr
    assert recorded_migrations(path) == []
    assert run_flowrate("trends", "--history", "h.duckdb").returncode == 0  # the reader gone, it upgrades
    assert recorded_migrations(path) == [function.__name__ for function in MIGRATIONS]


def test_a_duckdb_file_that_is_not_a_history_is_refused_by_a_command_that_only_reads_and_left_alone(
    run_flowrate, tmp_path
):
    with duckdb.connect(str(tmp_path / "other.duckdb")) as connection:
        connection.execute("CREATE TABLE rows (x INTEGER)")
    files = {item: item.read_bytes() for item in tmp_path.glob("other.duckdb*")}
    for command in (["trends"], ["calibrate"]):
        result = run_flowrate(*command, "--history", "other.duckdb")
        assert result.returncode == 2 and "not a flowrate history (no table runs, labels)" in result.stderr
    assert {item: item.read_bytes() for item in tmp_path.glob("other.duckdb*")} == files


def test_migrations_are_applied_once_each_and_in_order(tmp_path):
    calls = []

    def m001_create(connection):
        calls.append("m001_create")
        connection.execute("CREATE TABLE t (a INTEGER)")

    def m002_add_a_column(connection):  # fails unless m001 ran before it
        calls.append("m002_add_a_column")
        connection.execute("ALTER TABLE t ADD COLUMN b VARCHAR")

    def m003_insert(connection):  # a second run would add a second row
        calls.append("m003_insert")
        connection.execute("INSERT INTO t VALUES (1, 'one')")

    migrations = [m001_create, m002_add_a_column, m003_insert]
    with duckdb.connect(str(tmp_path / "m.duckdb")) as connection:
        assert [function.__name__ for function in pending(connection, migrations)] == [
            "m001_create",
            "m002_add_a_column",
            "m003_insert",
        ]
        assert migrate(connection, migrations) == ["m001_create", "m002_add_a_column", "m003_insert"]
        assert migrate(connection, migrations) == []
    with duckdb.connect(str(tmp_path / "m.duckdb")) as connection:  # and after the file is opened again
        assert migrate(connection, migrations) == []

        def m004_insert_more(connection):
            calls.append("m004_insert_more")
            connection.execute("INSERT INTO t VALUES (2, 'two')")

        assert migrate(connection, [*migrations, m004_insert_more]) == ["m004_insert_more"]
        assert applied(connection) == ["m001_create", "m002_add_a_column", "m003_insert", "m004_insert_more"]
        assert connection.execute("SELECT * FROM t ORDER BY a").fetchall() == [(1, "one"), (2, "two")]
    assert calls == ["m001_create", "m002_add_a_column", "m003_insert", "m004_insert_more"]


def test_a_failed_migration_leaves_the_history_as_it_was(tmp_path):
    def m001_create(connection):
        connection.execute("CREATE TABLE t (a INTEGER)")

    def m002_half_done(connection):
        connection.execute("CREATE TABLE u (a INTEGER)")
        connection.execute("INSERT INTO t VALUES (1)")
        raise RuntimeError("disk full")

    with duckdb.connect(str(tmp_path / "m.duckdb")) as connection:
        with pytest.raises(RuntimeError, match="disk full"):
            migrate(connection, [m001_create, m002_half_done])
        assert applied(connection) == ["m001_create"]
        tables = {name for (name,) in connection.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        assert "u" not in tables and connection.execute("SELECT count(*) FROM t").fetchone()[0] == 0
