"""`--output-parquet`: one schema for every run, whatever its rows hold, so nightly files combine."""

import duckdb

from tests.helpers import turn_record, write_jsonl


def _run_to_parquet(run_flowrate, judge, tmp_path, name, records):
    write_jsonl(tmp_path / f"{name}.jsonl", records)
    result = run_flowrate(
        "eval", f"{name}.jsonl", "--api-base", judge.base_url, "--max-retries", "0",
        "-o", f"{name}-out.jsonl", "--output-parquet", f"{name}.parquet",
    )  # fmt: skip
    assert result.returncode in (0, 3), result.stderr
    return str(tmp_path / f"{name}.parquet")


def _schema(path):
    return duckdb.connect().execute(f"DESCRIBE SELECT * FROM read_parquet('{path}')").fetchall()


def test_a_run_with_no_error_and_one_with_errors_write_one_schema_and_combine(judge, run_flowrate, tmp_path):
    judge.script("MARK-500", {"status": 500})
    clean = _run_to_parquet(run_flowrate, judge, tmp_path, "clean", [turn_record("ok", "hi", "hello")])
    failed = _run_to_parquet(run_flowrate, judge, tmp_path, "failed", [turn_record("err", "MARK-500", "x")])
    assert _schema(clean) == _schema(failed)
    connection = duckdb.connect()
    errors = connection.execute(
        f"SELECT id, error.type FROM read_parquet(['{clean}', '{failed}'], union_by_name = true) ORDER BY id"
    ).fetchall()
    assert errors[1][0] == "ok" and errors[1][1] is None
    assert errors[0][0] == "err" and errors[0][1]
    plain = connection.execute(f"SELECT count(*) FROM read_parquet(['{clean}', '{failed}'])").fetchone()[0]
    assert plain == 2


def test_an_empty_results_file_gives_the_same_schema_with_no_rows(judge, run_flowrate, tmp_path):
    from flowrate.results.parquet import write_parquet

    clean = _run_to_parquet(run_flowrate, judge, tmp_path, "clean", [turn_record("ok", "hi", "hello")])
    (tmp_path / "empty.jsonl").write_text("")
    assert write_parquet(str(tmp_path / "empty.jsonl"), str(tmp_path / "empty.parquet")) == 0
    assert _schema(str(tmp_path / "empty.parquet")) == _schema(clean)
