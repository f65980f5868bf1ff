"""Agreement of the judge with people's labels: the statistics, the `agreement` command, and the
labeled conversations it cannot use."""

import json
import warnings

import numpy as np
import pytest
from scipy import stats

from flowrate.analysis.agreement import CORRELATIONS, agreement_report, correlations_by_row
from flowrate.results.rows import Verdict
from tests.helpers import suite_reply, turn_record, write_jsonl
from tests.helpers import verdict_record as _row


def labeled_records():
    script = [
        ("none", 0),
        ("minor", 0),
        ("partial", 1),
        ("partial", 1),
        ("mostly", 2),
        ("fully", 2),
        ("minor", 1),
        ("fully", 2),
    ]
    return script, [
        {**turn_record(f"d{n}", f"MARK-LABEL-{n}", "x"), "labels": {"Coherent": label, "Other": None}}
        for n, (_, label) in enumerate(script)
    ]


def test_agreement_statistics():
    verdicts = [Verdict.NONE, Verdict.PARTIAL, Verdict.FULLY, Verdict.MINOR]
    labels = [0, 1, 2, 2]
    scale = [(verdict.value, verdict.score) for verdict in sorted(Verdict, key=lambda verdict: verdict.score)]
    pairs = [(verdict.value, verdict.score, label) for verdict, label in zip(verdicts, labels)]
    report = agreement_report(pairs, "Coherent", scale=scale)
    scores = [v.score for v in verdicts]
    assert report.spearman.value == round(stats.spearmanr(scores, labels).statistic, 4)
    assert report.kendall.value == round(stats.kendalltau(scores, labels).statistic, 4)
    assert report.kappa.value == 0.8  # worked by hand: 1 - 0.25 / 1.25
    assert report.confusion.labels == [0, 1, 2] and report.confusion.verdicts == [
        "none",
        "minor",
        "partial",
        "mostly",
        "fully",
    ]
    assert report.confusion.counts == [[1, 0, 0, 0, 0], [0, 0, 1, 0, 0], [0, 1, 0, 0, 1]]
    assert report.spearman.ci95 is not None and agreement_report(pairs, "Coherent", scale=scale) == report


SCIPY_ONE_AT_A_TIME = {
    "spearman": lambda a, b: stats.spearmanr(a, b).statistic,
    "kendall": lambda a, b: stats.kendalltau(a, b, variant="b").statistic,
    "pearson": lambda a, b: stats.pearsonr(a, b).statistic,
}


@pytest.mark.parametrize("name", CORRELATIONS)
@pytest.mark.parametrize("labels", ["0-2 levels", "fifths", "continuous"])
@pytest.mark.parametrize("n", [3, 10, 125])
def test_each_resample_s_correlation_is_what_scipy_gives_for_that_resample_alone(name, labels, n):
    rng = np.random.default_rng(n)
    scores = rng.choice([0.0, 0.3, 0.7, 0.9, 1.0], n)
    humans = {
        "0-2 levels": np.round(scores * 2 + rng.normal(0, 0.6, n)).clip(0, 2),
        "fifths": np.round((scores * 4 + rng.normal(0, 1, n)) * 5) / 5,
        "continuous": scores + rng.normal(0, 1, n),
    }[labels]
    index = rng.integers(0, n, size=(300, n))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # resamples with no spread: NaN on both sides
        alone = np.array([SCIPY_ONE_AT_A_TIME[name](scores[row], humans[row]) for row in index])
        by_row = correlations_by_row(name, scores[index], humans[index])
    assert np.array_equal(np.isnan(alone), np.isnan(by_row)) and (n > 3 or np.isnan(alone).any())
    if name == "spearman":  # np.corrcoef's order of sums against pearsonr's
        np.testing.assert_allclose(by_row, alone, rtol=0, atol=1e-15)
    else:
        assert np.array_equal(by_row, alone, equal_nan=True)


def test_kendall_s_table_taken_a_few_cells_at_a_time_gives_the_same_figures():
    from flowrate.analysis.agreement import _kendall_tau_b_by_row

    rng = np.random.default_rng(5)
    scores, humans = rng.integers(0, 5, size=(50, 40)), rng.normal(size=(50, 40)).round(1)
    whole = _kendall_tau_b_by_row(scores, humans)
    assert np.array_equal(_kendall_tau_b_by_row(scores, humans, cells_at_once=1), whole, equal_nan=True)


def test_agreement_intervals_do_not_depend_on_row_order():
    from flowrate.analysis.agreement import agreement_report, pair_up
    from flowrate.results.rows import EvaluationRow

    values = ["none", "minor", "partial", "mostly", "fully"] * 6
    rows = [EvaluationRow.model_validate(_row(f"k{n:02d}", value)) for n, value in enumerate(values)]
    labels = {f"k{n:02d}": float((n * 7) % 5) for n in range(len(values))}
    forward = agreement_report(pair_up(labels, rows, "L")[0], "L")
    backward = agreement_report(pair_up(labels, list(reversed(rows)), "L")[0], "L")
    assert forward == backward and forward.spearman.ci95 is not None


def test_agreement_command_judges_then_reuses_results(judge, run_flowrate, tmp_path):
    script, records = labeled_records()
    for n, (value, _) in enumerate(script):
        judge.script(f"MARK-LABEL-{n}", {"verdict": value})
    path = write_jsonl(tmp_path / "labeled.jsonl", records)
    judged = run_flowrate("agreement", path, "--label", "Coherent", "--api-base", judge.base_url, "--json")
    assert judged.returncode == 0, judged.stderr
    report = json.loads(judged.stdout)
    assert list(report) == ["label", "metric", "n", "spearman", "kendall", "pearson", "kappa", "confusion"]
    assert report["label"] == "Coherent" and report["n"] == 8 and set(report["spearman"]) == {"value", "ci95"}
    assert report["kappa"]["value"] is not None and "Agreement with human label 'Coherent' (n=8)" in judged.stderr
    calls = judge.requests
    again = run_flowrate(
        "agreement", path, "--label", "Coherent", "--results", tmp_path / "flowrate-agreement.jsonl", "--json"
    )
    assert again.returncode == 0 and json.loads(again.stdout) == report and judge.requests == calls
    missing = run_flowrate("agreement", path, "--label", "Fluent", "--results", tmp_path / "flowrate-agreement.jsonl")
    assert missing.returncode == 2
    assert "no record carries the label 'Fluent' (labels found: Coherent, Other)" in missing.stderr


def test_agreement_names_the_labeled_conversations_with_no_usable_row(run_flowrate, tmp_path):
    script, records = labeled_records()
    write_jsonl(tmp_path / "labeled.jsonl", records)
    rows = [_row(f"d{n}", value) for n, (value, _) in enumerate(script[:5])]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = run_flowrate("agreement", "labeled.jsonl", "--label", "Coherent", "--results", "rows.jsonl")
    assert result.returncode == 3
    assert "3 of 8 labeled conversation(s) have no usable conversational_flow_rate row in rows.jsonl" in result.stderr


def test_agreement_on_a_criterion_of_the_suite(judge, run_flowrate, tmp_path):
    records = []
    for n, rating in enumerate([1, 2, 3, 4, 5, 5, 4, 2]):
        judge.script(f"MARK-AG-{n}", {"content": suite_reply({"coherence": rating})})
        records.append({**turn_record(f"d{n}", f"MARK-AG-{n}", "x"), "labels": {"Coherent": min(rating // 2, 2)}})
    write_jsonl(tmp_path / "l.jsonl", records)
    result = run_flowrate(
        "agreement", "l.jsonl", "--label", "Coherent", "--metric", "coherence", "--api-base", judge.base_url, "--json"
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["metric"] == "coherence" and report["n"] == 8 and judge.requests == 8
    assert report["confusion"]["verdicts"] == ["1/5", "2/5", "3/5", "4/5", "5/5"]
    again = run_flowrate(
        "agreement",
        "l.jsonl",
        "--label",
        "Coherent",
        "--metric",
        "coherence",
        "--results",
        "flowrate-agreement.jsonl",
        "--json",
    )
    assert again.returncode == 0 and json.loads(again.stdout) == report
