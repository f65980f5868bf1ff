"""Human labels, calibration, the history and trends (issue 9), with a worked example
computed by hand."""

import csv
import json
import shutil
from datetime import UTC, date, datetime

import orjson
import pytest

from flowrate.analysis.calibration import Calibration, Deviation, MetricCalibration, calibrate, window_start
from flowrate.analysis.labels import Label
from flowrate.inputs.conversation import Source
from flowrate.results.rows import EvaluationRow
from tests.conftest import read_rows, turn_record, write_jsonl

CHROMIUM = shutil.which("chromium")
AS_OF = date(2026, 6, 30)  # with --window 6mo the window starts on 2025-12-30
INSIDE = "2026-01-15"


def row(conversation_id, metric, score, **extra):
    return EvaluationRow(
        id=conversation_id,
        source=Source(path="c.jsonl", line=1),
        metric=metric,
        score=score,
        threshold=0.7,
        success=None if score is None else score >= 0.7,
        model="gpt-4o",
        rubric_version="sha256:x",
        evaluated_at=extra.pop("evaluated_at", datetime(2026, 6, 1, tzinfo=UTC)),
        **extra,
    )


def label(conversation_id, metric, score, day=INSIDE):
    return {"conversation_id": conversation_id, "metric": metric, "score": score, "labeled_at": day}


def worked_example():
    """The example behind the expected figures (see each block)."""
    rows, labels = [], []
    # metric m: 31 positive deltas (28 of +0.1, 3 of +0.4: the 3 dropped as outliers) -> upper +0.1, n 31
    for n in range(31):
        rows.append(row(f"p{n}", "m", 0.5))
        labels.append(label(f"p{n}", "m", 0.6 if n < 28 else 0.9))
    # exactly 30 negative deltas of -0.2 -> no lower deviation (it needs more than 30)
    for n in range(30):
        rows.append(row(f"q{n}", "m", 0.8))
        labels.append(label(f"q{n}", "m", 0.6))
    # 5 labeled with no delta (z0 twice: the mean counts), 4 unlabeled, 1 error row
    for n in range(5):
        rows.append(row(f"z{n}", "m", 0.7))
        labels.append(label(f"z{n}", "m", 0.7))
    labels.append(label("z0", "m", 0.7, day="2025-12-30"))  # the window's first day: inside
    for n in range(4):
        rows.append(row(f"u{n}", "m", 1.0))
    labels.append(label("u0", "m", 0.0, day="2025-12-29"))  # one day before the window: left out
    rows.append(row("e0", "m", None, error={"type": "InternalServerError", "message": "x"}))
    # metric m2: exactly 30 nonzero deltas of +0.1 -> the band applies; 30 positives -> no upper
    for n in range(30):
        rows.append(row(f"a{n}", "m2", 0.4))
        labels.append(label(f"a{n}", "m2", 0.5))
    # metric m3: 29 nonzero deltas -> no band
    for n in range(29):
        rows.append(row(f"b{n}", "m3", 0.4))
        labels.append(label(f"b{n}", "m3", 0.5))
    # metric m4: 31 negative deltas (28 of -0.1, 3 of -0.7 dropped) -> lower -0.1
    for n in range(31):
        rows.append(row(f"d{n}", "m4", 0.9))
        labels.append(label(f"d{n}", "m4", 0.8 if n < 28 else 0.2))
    return rows, labels


EXPECTED_METRICS = {
    "m": {
        "labels": 67,  # 31 + 30 + 5 + z0's second label; u0's is outside the window
        "labeled_conversations": 66,
        "upper": {"n": 31, "deviation": 0.1},
        "lower": None,
        "error_band": -0.0328,  # (28 x 0.1 + 3 x 0.4 - 30 x 0.2) / 61 = -2 / 61
        "mean_score": 0.6714,  # 47 / 70 rows; the error row is left out
        "mean_adjusted": 0.6386,  # 47 / 70 - 2 / 61
    },
    "m2": {
        "labels": 30,
        "labeled_conversations": 30,
        "upper": None,
        "lower": None,
        "error_band": 0.1,
        "mean_score": 0.4,
        "mean_adjusted": 0.5,
    },
    "m3": {
        "labels": 29,
        "labeled_conversations": 29,
        "upper": None,
        "lower": None,
        "error_band": None,
        "mean_score": 0.4,
        "mean_adjusted": 0.4,
    },
    "m4": {
        "labels": 31,
        "labeled_conversations": 31,
        "upper": None,
        "lower": {"n": 31, "deviation": -0.1},
        "error_band": -0.1581,  # (28 x -0.1 + 3 x -0.7) / 31 = -4.9 / 31
        "mean_score": 0.9,
        "mean_adjusted": 0.7419,  # 0.9 - 4.9 / 31
    },
}


def _write(tmp_path, rows, labels):
    (tmp_path / "rows.jsonl").write_text("".join(item.model_dump_json() + "\n" for item in rows))
    write_jsonl(tmp_path / "labels.jsonl", labels)


def test_calibration_matches_the_worked_example_on_every_figure(run_flowrate, tmp_path):
    _write(tmp_path, *worked_example())
    result = run_flowrate(
        "calibrate",
        "rows.jsonl",
        "--labels",
        "labels.jsonl",
        "--as-of",
        "2026-06-30",
        "--window",
        "6mo",
        "--json",
        "--adjusted-output",
        "adjusted.jsonl",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report == {"as_of": "2026-06-30", "window": "6mo", "metrics": EXPECTED_METRICS, "user_satisfaction": None}
    adjusted = {item["id"]: item for item in read_rows(tmp_path / "adjusted.jsonl")}
    assert adjusted["p0"]["adjusted_score"] == round(0.5 - 2 / 61, 4) and adjusted["b0"]["adjusted_score"] == 0.4
    assert adjusted["e0"]["adjusted_score"] is None and adjusted["a0"]["adjusted_score"] == 0.5


def test_calibration_is_a_typed_record_and_its_json_is_byte_for_byte_the_documented_shape(run_flowrate, tmp_path):
    rows, labels = worked_example()
    report = calibrate(rows, [_label_of(item) for item in labels], AS_OF, "6mo")
    assert isinstance(report, Calibration) and report.as_of == AS_OF and report.user_satisfaction is None
    assert report.metrics["m"] == MetricCalibration(**EXPECTED_METRICS["m"])
    assert report.metrics["m4"].lower == Deviation(n=31, deviation=-0.1) and report.metrics["m3"].upper is None
    assert report.bands == pytest.approx({"m": -2 / 61, "m2": 0.1, "m4": -4.9 / 31})  # unrounded, for adjusting
    assert "bands" not in report.model_dump()
    _write(tmp_path, rows, labels)
    result = run_flowrate("calibrate", "rows.jsonl", "--labels", "labels.jsonl", "--as-of", "2026-06-30", "--json")
    assert result.returncode == 0, result.stderr
    documented = {"as_of": "2026-06-30", "window": "6mo", "metrics": EXPECTED_METRICS, "user_satisfaction": None}
    assert result.stdout == orjson.dumps(documented).decode() + "\n"


def _label_of(item):
    return Label(item["conversation_id"], item["metric"], item["score"], date.fromisoformat(item["labeled_at"]))


def test_user_satisfaction_calibration_at_30_and_29_labeled_conversations():
    def suite(count_labeled):
        rows, labels = [], []
        for n in range(count_labeled + 2):
            key = f"s{n}"
            rows.append(row(key, "c1", 0.4, suite="va"))
            rows.append(row(key, "c2", 1.0, suite="va"))
            rows.append(row(key, "user_satisfaction", 0.6, suite="va", weights={"c1": 2.0, "c2": 1.0}))
            if n < count_labeled:  # c1 labeled 0.7: human = (2 x 0.7 + 1.0) / 3 = 0.8, gap +0.2
                labels.append(Label(key, "c1", 0.7, date(2026, 6, 1)))
        return calibrate(rows, labels, AS_OF, "6mo").user_satisfaction.model_dump()

    assert suite(30) == {
        "labeled_conversations": 30,
        "mean_gap": 0.2,
        "upper": None,  # 30 positive gaps: not more than 30
        "lower": None,
        "mean_auto": 0.6,
        "mean_adjusted": 0.8,  # every conversation the suite rated, 32, moved by +0.2
    }
    assert suite(29)["mean_adjusted"] == 0.6 and suite(29)["mean_gap"] == 0.2
    assert (
        calibrate([row("x", "user_satisfaction", 0.5, weights={})], [], AS_OF, "6mo").user_satisfaction.mean_gap is None
    )


def test_windows_in_months_and_days():
    assert window_start(date(2026, 6, 30), "6mo") == date(2025, 12, 30)
    assert window_start(date(2026, 8, 31), "6mo") == date(2026, 2, 28)
    assert window_start(date(2026, 6, 30), "30d") == date(2026, 5, 31)


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


def _dated_rows():
    rows = []
    for n, (evaluated, chat, score) in enumerate(
        [
            ("2026-03-02T09:00:00", "2026-02-27", 1.0),  # evaluated Monday of ISO week 10; chatted in week 9
            ("2026-03-03T09:00:00", "2026-02-27", 0.3),
            ("2026-03-09T09:00:00", "2026-03-09", 0.7),  # week 11
            ("2026-04-01T09:00:00", "2026-03-31", 0.9),
        ]
    ):
        stamp = datetime.fromisoformat(evaluated).replace(tzinfo=UTC)
        rows.append(row(f"t{n}", "conversational_flow_rate", score, evaluated_at=stamp, chat_date=chat))
    return rows


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


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs Debian's chromium)")
def test_the_trends_page_in_headless_chromium(run_flowrate, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright driver is not installed")
    rows = _dated_rows() + [
        row("v0", "coherence", 0.8, rating=4, scale=5, evaluated_at=datetime(2026, 3, 2, tzinfo=UTC))
    ]
    (tmp_path / "rows.jsonl").write_text("".join(item.model_dump_json() + "\n" for item in rows))
    assert run_flowrate("trends", "rows.jsonl", "--html", "trends.html").returncode == 0
    errors = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        context = browser.new_context(offline=True)
        page = context.new_page()
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto((tmp_path / "trends.html").as_uri())
        assert page.locator("svg.trend").count() == 2
        assert page.locator('svg.trend[data-metric="conversational_flow_rate"] rect.volume').count() == 3
        page.screenshot(path=str(tmp_path / "trends.png"), full_page=True)
        browser.close()
    assert errors == [] and (tmp_path / "trends.png").stat().st_size > 1000
