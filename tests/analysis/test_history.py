"""The DuckDB history: each row added once, and a history that does not exist."""

import json

from tests.helpers import january_label as label
from tests.helpers import turn_record, write_jsonl


def test_the_history_adds_each_row_once(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record(f"c{n}", f"q{n}", "a") for n in range(3)])
    first = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl", "--history", "h.duckdb")
    assert first.returncode == 0 and "history h.duckdb: 3 new row(s)" in first.stderr
    again = run_flowrate("history", "import", "out.jsonl", "out.jsonl", "--history", "h.duckdb")
    assert again.returncode == 0 and "0 new row(s) in h.duckdb from 2 file(s)" in again.stderr
    import duckdb

    with duckdb.connect(str(tmp_path / "h.duckdb")) as connection:
        assert connection.execute("SELECT count(*) FROM rows").fetchone()[0] == 3
        assert connection.execute("SELECT rows, models FROM runs").fetchall() == [(3, "gpt-4o")]
    write_jsonl(tmp_path / "labels.jsonl", [label("c0", "conversational_flow_rate", 0.3)] * 2)
    imported = run_flowrate("labels", "import", "labels.jsonl", "--history", "h.duckdb")
    assert imported.returncode == 0 and "1 new label(s)" in imported.stderr
    calibrated = run_flowrate("calibrate", "--history", "h.duckdb", "--as-of", "2026-06-30", "--json")
    assert json.loads(calibrated.stdout)["metrics"]["conversational_flow_rate"]["labels"] == 1


def test_trends_on_a_history_that_does_not_exist_is_exit_2_and_creates_nothing(run_flowrate, tmp_path):
    for command in (["trends", "--history", "typo.duckdb"], ["calibrate", "--history", "typo.duckdb"]):
        result = run_flowrate(*command)
        assert result.returncode == 2, result.stderr
        assert "typo.duckdb" in result.stderr and "does not exist" in result.stderr
        assert "Traceback" not in result.stderr
        assert not (tmp_path / "typo.duckdb").exists()
