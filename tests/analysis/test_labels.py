"""People's labels: read from files and the history, named when bad, and the template to fill in as
a spreadsheet reads it."""

import csv
import json

from tests.helpers import evaluation_row as _row
from tests.helpers import june_row as row
from tests.helpers import march_label as label
from tests.helpers import two_metric_rows, write_jsonl, write_rows

FORMULA_IDS = ['=HYPERLINK("http://evil/","x")', "+1+1", "-2+3", "@SUM(A1)", "\tcmd", "\rcmd", "'=quoted", "plain"]


def test_labels_take_ratings_verdicts_and_scores_and_name_bad_lines(run_flowrate, tmp_path):
    rows = [
        row("c1", "coherence", 0.8, rating=4, scale=5, suite="virtual_agent"),
        row("c1", "conversational_flow_rate", 0.9, verdict="mostly"),
    ]
    (tmp_path / "rows.jsonl").write_text("".join(item.model_dump_json() + "\n" for item in rows))
    with open(tmp_path / "labels.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["conversation_id", "metric", "rating", "verdict", "score", "labeled_at", "labeler"])
        writer.writerow(["c1", "coherence", "3", "", "", "2026-06-01", "ana"])
        writer.writerow(["c1", "conversational_flow_rate", "", "partial", "", "2026-06-01T10:00:00Z", ""])
    result = run_flowrate("calibrate", "rows.jsonl", "--labels", "labels.csv", "--as-of", "2026-06-30", "--json")
    assert result.returncode == 0, result.stderr
    metrics = json.loads(result.stdout)["metrics"]
    assert metrics["coherence"]["labeled_conversations"] == 1 and metrics["conversational_flow_rate"]["labels"] == 1
    write_jsonl(
        tmp_path / "bad.jsonl",
        [
            {"conversation_id": "c1", "metric": "coherence", "rating": 7, "labeled_at": "2026-06-01"},
            {"conversation_id": "c1", "metric": "coherence", "labeled_at": "2026-06-01"},
            {
                "conversation_id": "c1",
                "metric": "conversational_flow_rate",
                "verdict": "great",
                "labeled_at": "2026-06-01",
            },
            {"conversation_id": "c1", "metric": "coherence", "score": 0.5, "labeled_at": "June"},
        ],
    )
    bad = run_flowrate("calibrate", "rows.jsonl", "--labels", "bad.jsonl")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "bad.jsonl:1: rating: rating 7 is not on coherence's scale 1..5" in bad.stderr
    assert "bad.jsonl:2: label: give exactly one of rating, verdict or score" in bad.stderr
    assert "bad.jsonl:3: verdict: verdict 'great' is not a level of conversational_flow_rate" in bad.stderr
    assert "bad.jsonl:4: labeled_at: 'June' is not an ISO date or time" in bad.stderr


def test_calibrate_results_with_a_history_reads_the_history_labels(run_flowrate, tmp_path):
    write_rows(tmp_path / "rows.jsonl", two_metric_rows())
    assert run_flowrate("history", "import", "rows.jsonl", "--history", "h.duckdb").returncode == 0
    write_jsonl(tmp_path / "labels.jsonl", [label("c1", "a", 0.2), label("c2", "a", 0.4)])
    assert run_flowrate("labels", "import", "labels.jsonl", "--history", "h.duckdb").returncode == 0
    result = run_flowrate("calibrate", "rows.jsonl", "--history", "h.duckdb", "--as-of", "2026-06-30", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["metrics"]["a"]["labels"] == 2
    trends = run_flowrate("trends", "rows.jsonl", "--history", "h.duckdb", "--metric", "a", "--json")
    assert json.loads(trends.stdout)[0]["mean_label"] == 0.3


def test_the_labels_template_is_a_csv_to_fill_in(run_flowrate, tmp_path):
    rows = [row(f"c{n}", "conversational_flow_rate", 0.9, verdict="mostly", reason="fine") for n in range(40)]
    (tmp_path / "rows.jsonl").write_text("".join(item.model_dump_json() + "\n" for item in rows))
    result = run_flowrate("labels", "template", "rows.jsonl", "-o", "labels.csv", "--sample", "0.5")
    assert result.returncode == 0
    with open(tmp_path / "labels.csv") as handle:
        lines = list(csv.DictReader(handle))
    assert 0 < len(lines) < 40 and lines[0]["judge_value"] == "mostly" and lines[0]["rating"] == ""
    again = run_flowrate("labels", "template", "rows.jsonl", "-o", "again.csv", "--sample", "0.5")
    assert again.returncode == 0 and (tmp_path / "again.csv").read_text() == (tmp_path / "labels.csv").read_text()


def test_the_labels_template_never_starts_a_formula_and_import_reads_the_ids_back(run_flowrate, tmp_path):
    rows = [
        _row(key, 0.3, verdict="minor", reason=f"=cmd|' /C calc'!A{n}", line=n + 1) for n, key in enumerate(FORMULA_IDS)
    ]
    (tmp_path / "rows.jsonl").write_text("".join(row.model_dump_json() + "\n" for row in rows))
    made = run_flowrate("labels", "template", "rows.jsonl", "rows.jsonl", "-o", "labels.csv")
    assert made.returncode == 0 and f"{len(FORMULA_IDS)} row(s) to label" in made.stderr, made.stderr
    with open(tmp_path / "labels.csv", newline="", encoding="utf-8") as handle:
        table = list(csv.reader(handle))
    cells = [cell for line in table[1:] for cell in line]
    assert not [cell for cell in cells if cell.startswith(("=", "+", "-", "@", "\t", "\r"))]
    assert len(table) == 1 + len(FORMULA_IDS)  # each conversation and metric once, though given twice
    header = table[0]
    for line in table[1:]:
        line[header.index("score")] = "0.5"
        line[header.index("labeled_at")] = "2026-01-02"
        line[header.index("labeler")] = "=evil()"
    with open(tmp_path / "filled.csv", "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(table)
    imported = run_flowrate("labels", "import", "filled.csv", "--history", "h.duckdb")
    assert imported.returncode == 0 and f"{len(FORMULA_IDS)} new label(s)" in imported.stderr, imported.stderr
    import duckdb

    with duckdb.connect(str(tmp_path / "h.duckdb")) as connection:
        stored = connection.execute("SELECT conversation_id, labeler FROM labels").fetchall()
    assert sorted(key for key, _ in stored) == sorted(FORMULA_IDS)
    assert {labeler for _, labeler in stored} == {"=evil()"}
