"""The rows trends keep: one metric with `--metric`, and rows with no chat date counted."""

import json

from tests.helpers import march_label as label
from tests.helpers import march_row as row
from tests.helpers import two_metric_rows, write_jsonl, write_rows


def test_trends_metric_keeps_only_that_metric_from_a_history_and_from_results(run_flowrate, tmp_path):
    write_rows(tmp_path / "rows.jsonl", two_metric_rows())
    assert run_flowrate("history", "import", "rows.jsonl", "--history", "h.duckdb").returncode == 0
    for source in (["--history", "h.duckdb"], ["rows.jsonl"]):
        result = run_flowrate("trends", *source, "--metric", "a", "--json")
        assert result.returncode == 0, result.stderr
        items = json.loads(result.stdout)
        assert [(i["period"], i["metric"], i["conversations"], i["mean_score"]) for i in items] == [
            ("2026-W10", "a", 2, 0.7),
            ("2026-W11", "a", 1, 1.0),
        ]
    labeled = write_jsonl(tmp_path / "labels.jsonl", [label("c1", "b", 0.5), label("c1", "a", 0.6)])
    with_labels = run_flowrate("trends", "rows.jsonl", "--metric", "b", "--labels", labeled, "--json")
    assert with_labels.returncode == 0, with_labels.stderr
    assert [(i["metric"], i["mean_label"]) for i in json.loads(with_labels.stdout)] == [("b", 0.5), ("b", None)]


def test_trends_by_chat_date_says_how_many_rows_have_no_chat_date(run_flowrate, tmp_path):
    rows = [row("c1", "a", 0.5, chat_date="2026-03-01"), row("c2", "a", 0.9), row("c3", "a", 0.1), row("c3", "b", 1)]
    write_rows(tmp_path / "rows.jsonl", rows)
    result = run_flowrate("trends", "rows.jsonl", "--date", "chat", "--json")
    assert result.returncode == 0, result.stderr
    assert [(i["metric"], i["conversations"]) for i in json.loads(result.stdout)] == [("a", 1)]
    assert "3 row(s) have no chat date and are left out" in result.stderr
    only_a = run_flowrate("trends", "rows.jsonl", "--date", "chat", "--metric", "a")
    assert "2 row(s) have no chat date and are left out" in only_a.stderr
    by_evaluation = run_flowrate("trends", "rows.jsonl")
    assert "no chat date" not in by_evaluation.stderr
