"""Trends: periods by either date, the mean label and adjusted mean, typed points and their JSON."""

import json
from datetime import UTC, date, datetime

import orjson
import pytest

from flowrate.analysis.labels import Label
from flowrate.results.rows import ErrorInfo
from tests.helpers import dated_rows as _dated_rows
from tests.helpers import january_label as label
from tests.helpers import june_row as row
from tests.helpers import write_jsonl


@pytest.mark.parametrize(
    "by, kind, expected",
    [
        ("week", "evaluated", [("2026-W10", 2, 0.65, 0.5), ("2026-W11", 1, 0.7, 1.0), ("2026-W14", 1, 0.9, 1.0)]),
        ("week", "chat", [("2026-W09", 2, 0.65, 0.5), ("2026-W11", 1, 0.7, 1.0), ("2026-W14", 1, 0.9, 1.0)]),
        ("month", "evaluated", [("2026-03", 3, 0.6667, 0.6667), ("2026-04", 1, 0.9, 1.0)]),
        ("month", "chat", [("2026-02", 2, 0.65, 0.5), ("2026-03", 2, 0.8, 1.0)]),
        ("day", "chat", [("2026-02-27", 2, 0.65, 0.5), ("2026-03-09", 1, 0.7, 1.0), ("2026-03-31", 1, 0.9, 1.0)]),
    ],
)
def test_trends_group_by_either_date(run_flowrate, tmp_path, by, kind, expected):
    (tmp_path / "rows.jsonl").write_text("".join(item.model_dump_json() + "\n" for item in _dated_rows()))
    result = run_flowrate("trends", "rows.jsonl", "--by", by, "--date", kind, "--json")
    assert result.returncode == 0, result.stderr
    items = json.loads(result.stdout)
    assert [(i["period"], i["conversations"], i["mean_score"], i["pass_rate"]) for i in items] == expected
    assert list(items[0]) == [
        "period",
        "metric",
        "conversations",
        "mean_score",
        "pass_rate",
        "mean_label",
        "mean_adjusted",
        "upper",
        "lower",
    ]


def test_trends_with_labels_give_the_mean_label_and_the_adjusted_mean(run_flowrate, tmp_path):
    rows = [row(f"w{n}", "m", 0.5, evaluated_at=datetime(2026, 3, 2, tzinfo=UTC)) for n in range(40)]
    (tmp_path / "rows.jsonl").write_text("".join(item.model_dump_json() + "\n" for item in rows))
    write_jsonl(tmp_path / "labels.jsonl", [label(f"w{n}", "m", 0.6) for n in range(35)])
    result = run_flowrate("trends", "rows.jsonl", "--labels", "labels.jsonl", "--json")
    [item] = json.loads(result.stdout)
    assert (item["mean_label"], item["upper"], item["lower"], item["mean_adjusted"]) == (0.6, 0.1, None, 0.6)


def test_trends_are_typed_points_and_their_json_is_byte_for_byte_the_documented_shape(run_flowrate, tmp_path):
    from flowrate.analysis.history import connect, import_labels, import_results
    from flowrate.analysis.trends import TrendPoint, trends

    rows = [row(f"w{n}", "m", 0.5, evaluated_at=datetime(2026, 3, 2, tzinfo=UTC)) for n in range(40)]
    (tmp_path / "rows.jsonl").write_text("".join(item.model_dump_json() + "\n" for item in rows))
    write_jsonl(tmp_path / "labels.jsonl", [label(f"w{n}", "m", 0.6) for n in range(35)])
    connection = connect(None)
    import_results(connection, tmp_path / "rows.jsonl")
    import_labels(connection, [Label(f"w{n}", "m", 0.6, date(2026, 1, 15)) for n in range(35)])
    expected = {
        "period": "2026-W10",
        "metric": "m",
        "conversations": 40,
        "mean_score": 0.5,
        "pass_rate": 0.0,
        "mean_label": 0.6,
        "mean_adjusted": 0.6,
        "upper": 0.1,
        "lower": None,
    }
    assert trends(connection, labels=True) == [TrendPoint(**expected)]
    result = run_flowrate("trends", "rows.jsonl", "--labels", "labels.jsonl", "--json")
    assert result.returncode == 0, result.stderr
    assert result.stdout == orjson.dumps([expected]).decode() + "\n"


def test_a_conversation_judged_in_two_runs_of_one_period_counts_once_by_its_latest_verdict(run_flowrate, tmp_path):
    monday, tuesday, wednesday = (datetime(2026, 3, day, 9, tzinfo=UTC) for day in (2, 3, 4))
    first = [row(f"c{n}", "m", 0.0, evaluated_at=monday) for n in range(3)]
    again = [
        row("c0", "m", 1.0, evaluated_at=tuesday),
        row("c1", "m", None, evaluated_at=wednesday, error=ErrorInfo(type="T", message="m")),
    ]
    (tmp_path / "rows.jsonl").write_text("".join(item.model_dump_json() + "\n" for item in first + again))
    result = run_flowrate("trends", "rows.jsonl", "--json")
    assert result.returncode == 0, result.stderr
    [item] = json.loads(result.stdout)
    # c0 by its rerun (1.0), c1 by its verdict (its later error row is no verdict), c2 once
    assert (item["conversations"], item["mean_score"], item["pass_rate"]) == (3, 0.3333, 0.3333)
    assert "each conversation counts once a period and metric, by its latest verdict" in result.stderr
