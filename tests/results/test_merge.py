"""`flowrate merge`: results files read once each, duplicates refused, and rows that are not result
rows named."""

from datetime import UTC

from tests.helpers import read_rows, two_metric_rows, write_rows


def test_merge_reads_a_file_named_twice_once(run_flowrate, tmp_path):
    write_rows(tmp_path / "shard.jsonl", two_metric_rows())
    result = run_flowrate("merge", "shard.jsonl", "./shard.jsonl", tmp_path / "shard.jsonl", "-o", "merged.jsonl")
    assert result.returncode == 1, result.stderr  # two rows fail their threshold: the whole run's exit code
    assert "more than one file" not in result.stderr
    assert len(read_rows(tmp_path / "merged.jsonl")) == 5


def test_merge_refuses_duplicates_without_an_eval_hint(run_flowrate, tmp_path):
    from datetime import datetime

    from flowrate.results.rows import EvaluationRow

    row = EvaluationRow(
        id="a",
        metric="conversational_flow_rate",
        verdict="fully",
        score=1.0,
        success=True,
        threshold=0.7,
        model="m",
        rubric_version="v",
        evaluated_at=datetime.now(UTC),
    )
    (tmp_path / "one.jsonl").write_text(row.model_dump_json() + "\n")
    (tmp_path / "two.jsonl").write_text(row.model_dump_json() + "\n")
    result = run_flowrate("merge", "one.jsonl", "two.jsonl", "-o", "merged.jsonl")
    assert result.returncode == 2 and not (tmp_path / "merged.jsonl").exists()
    assert result.stderr.startswith("flowrate: 1 row(s) in more than one file; nothing was merged:")
    assert "--skip-invalid" not in result.stderr


def test_a_row_with_neither_verdict_nor_error_is_a_plain_problem(run_flowrate, tmp_path):
    (tmp_path / "odd.jsonl").write_text(
        '{"id": "a", "metric": "m", "threshold": 0.7, "model": "m", "rubric_version": "v", "evaluated_at": "2026-01-01T00:00:00Z"}\n'
    )
    result = run_flowrate("merge", "odd.jsonl", "-o", "merged.jsonl")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert (
        "odd.jsonl:1: not a flowrate result row: a row has a score or an error, this one has neither" in result.stderr
    )
