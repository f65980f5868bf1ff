"""Calibration against people's labels, with a worked example computed by hand."""

import json
from datetime import date

import orjson
import pytest

from flowrate.analysis.calibration import Calibration, Deviation, MetricCalibration, calibrate, window_start
from flowrate.analysis.labels import Label
from tests.helpers import january_label as label
from tests.helpers import june_row as row
from tests.helpers import read_rows, write_jsonl

AS_OF = date(2026, 6, 30)  # with --window 6mo the window starts on 2025-12-30


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
    # 5 labeled with no delta (z0 twice, by two reviewers: the mean counts), 4 unlabeled, 1 error row
    for n in range(5):
        rows.append(row(f"z{n}", "m", 0.7))
        labels.append({**label(f"z{n}", "m", 0.7), "labeler": "ann"})
    labels.append({**label("z0", "m", 0.7, day="2025-12-30"), "labeler": "bob"})  # the window's first day: inside
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
        "several_reviewers": 1,  # z0, labeled by ann and bob
        "upper": {"n": 31, "deviation": 0.1},
        "lower": None,
        "error_band": -0.0328,  # (28 x 0.1 + 3 x 0.4 - 30 x 0.2) / 61 = -2 / 61
        "mean_score": 0.6714,  # 47 / 70 rows; the error row is left out
        "mean_adjusted": 0.6386,  # 47 / 70 - 2 / 61
    },
    "m2": {
        "labels": 30,
        "labeled_conversations": 30,
        "several_reviewers": 0,
        "upper": None,
        "lower": None,
        "error_band": 0.1,
        "mean_score": 0.4,
        "mean_adjusted": 0.5,
    },
    "m3": {
        "labels": 29,
        "labeled_conversations": 29,
        "several_reviewers": 0,
        "upper": None,
        "lower": None,
        "error_band": None,
        "mean_score": 0.4,
        "mean_adjusted": 0.4,
    },
    "m4": {
        "labels": 31,
        "labeled_conversations": 31,
        "several_reviewers": 0,
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


def _label_of(item):
    return Label(
        item["conversation_id"],
        item["metric"],
        item["score"],
        date.fromisoformat(item["labeled_at"]),
        item.get("labeler"),
    )


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
