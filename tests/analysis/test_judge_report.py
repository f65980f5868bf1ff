"""The judge report that does not flatter: pass/fail agreement beside its base rate, Cohen's
kappa, the failing class's rates, the confusion matrix on the metric's scale, the worst
disagreements and the figures per language, checked on matrices computed by hand; and the
`agreement --results (--history | --labels)` command over files and a history."""

import json
from datetime import date, datetime

from flowrate.analysis.history import connect, import_results
from flowrate.analysis.judge_report import agreement_page_data, judge_report, metric_scales
from flowrate.analysis.labels import Label
from flowrate.analysis.reviews import Review, record_review
from tests.helpers import dated_row, turn_record, verdict_record, write_jsonl

FLOW = "conversational_flow_rate"
SCORES = {"fully": 1.0, "mostly": 0.9, "partial": 0.7, "minor": 0.3, "none": 0.0}


def judged(pairs, metric=FLOW):
    """Rows and labels for (people's verdict, judge's verdict) pairs, ids t000, t001, ..."""
    rows = [dated_row(f"t{n:03d}", metric, SCORES[judge], verdict=judge) for n, (_, judge) in enumerate(pairs)]
    labels = [Label(f"t{n:03d}", metric, SCORES[human], date(2026, 3, 1), "ann") for n, (human, _) in enumerate(pairs)]
    return rows, labels


def report_of(pairs, languages=None):
    rows, labels = judged(pairs)
    return judge_report(rows, labels, metric_scales(rows, [FLOW]), languages).metrics[FLOW]


# The issue's case: 228 traces, 208 of which people pass. The judge passes 204 of those and fails
# 4; of the 20 failures it catches 16 and passes 4. Worked by hand:
#   agreement = (204 + 16) / 228 = 0.9649; base rate = 208 / 228 = 0.9123 (always "pass")
#   chance agreement = (208/228)^2 + (20/228)^2 = 43664 / 51984
#   kappa = (50160 - 43664) / (51984 - 43664) = 6496 / 8320 = 0.7808
#   failing class: TPR = 16 / 20 = 0.8; TNR = 204 / 208 = 0.9808
ISSUE_CASE = (
    [("fully", "fully")] * 204 + [("fully", "minor")] * 4 + [("minor", "minor")] * 16 + [("minor", "fully")] * 4
)


def test_pass_fail_agreement_stands_beside_its_base_rate_and_kappa():
    figures = report_of(ISSUE_CASE).pass_fail
    assert (figures.true_positive, figures.false_negative, figures.false_positive, figures.true_negative) == (
        16,
        4,
        4,
        204,
    )
    assert figures.majority == "pass"
    assert figures.agreement.value == 0.9649
    assert figures.base_rate.value == 0.9123
    assert figures.kappa.value == 0.7808
    assert figures.true_positive_rate.value == 0.8
    assert figures.true_negative_rate.value == 0.9808
    for name in ("agreement", "base_rate", "kappa", "true_positive_rate", "true_negative_rate"):
        low, high = getattr(figures, name).ci95
        assert low <= getattr(figures, name).value <= high, name


def test_a_judge_that_always_passes_scores_the_base_rate_and_no_kappa():
    always = [(human, "fully") for human, _ in ISSUE_CASE]
    figures = report_of(always).pass_fail
    assert figures.agreement.value == figures.base_rate.value == 0.9123
    assert figures.kappa.value == 0.0  # chance agreement, (208/228) x 1 + (20/228) x 0, is all its agreement
    assert figures.true_positive_rate.value == 0.0  # it catches no failure
    assert figures.true_negative_rate.value == 1.0


def test_the_confusion_matrix_is_on_the_metrics_own_scale():
    pairs = [("fully", "fully"), ("fully", "mostly"), ("partial", "fully"), ("none", "minor"), ("none", "minor")]
    report = report_of(pairs)
    assert report.confusion.values == ["none", "minor", "partial", "mostly", "fully"]
    assert report.confusion.counts == [
        [0, 2, 0, 0, 0],  # people: none
        [0, 0, 0, 0, 0],
        [0, 0, 0, 0, 1],  # people: partial, judge: fully
        [0, 0, 0, 0, 0],
        [0, 0, 0, 1, 1],  # people: fully
    ]


def test_the_worst_disagreements_come_first_by_gap_and_number_ten():
    pairs = [("none", "fully")] * 3 + [("fully", "minor")] * 9 + [("mostly", "fully")] * 2 + [("fully", "fully")] * 5
    worst = report_of(pairs).worst
    assert len(worst) == 10
    assert [item.id for item in worst[:3]] == ["t000", "t001", "t002"] and worst[0].gap == -1.0
    assert all(item.gap == 0.7 and item.human_value == "fully" for item in worst[3:])
    assert {item.metric for item in worst} == {FLOW}


def test_several_labels_count_as_their_mean_on_the_nearest_value_of_the_scale():
    rows = [dated_row("c1", FLOW, 1.0, verdict="fully")]
    labels = [Label("c1", FLOW, 1.0, date(2026, 3, 1), "ann"), Label("c1", FLOW, 0.7, date(2026, 3, 1), "bob")]
    report = judge_report(rows, labels, metric_scales(rows, [FLOW])).metrics[FLOW]
    # mean 0.85: nearest is mostly (0.9), so the judge's "fully" disagrees by -0.15
    assert report.worst[0].human_value == "mostly" and report.worst[0].gap == -0.15
    assert report.people.conversations == 1 and report.people.exact_agreement.value == 0.0


def test_the_figures_are_given_per_language_and_the_same_on_every_run():
    pairs = [("fully", "fully"), ("minor", "fully")] * 10 + [("minor", "minor"), ("fully", "fully")] * 10
    languages = {f"t{n:03d}": ("pt" if n < 20 else "en") for n in range(40)}
    report = report_of(pairs, languages)
    assert sorted(report.languages) == ["en", "pt"]
    assert report.languages["en"].pass_fail.agreement.value == 1.0
    assert report.languages["pt"].pass_fail.agreement.value == 0.5
    assert report.languages["pt"].pass_fail.true_positive_rate.value == 0.0
    assert report == report_of(pairs, languages)


def test_agreement_on_a_labels_file_prints_the_report_and_its_json(run_flowrate, tmp_path):
    write_jsonl(tmp_path / "rows.jsonl", [verdict_record(f"c{n}", "fully" if n % 4 else "minor") for n in range(12)])
    write_jsonl(
        tmp_path / "c.jsonl",
        [
            {"id": f"c{n}", "turns": [{"input": "hi", "actual_output": "yo"}], "metadata": {"lang": "RU"}}
            for n in range(12)
        ],
    )
    labels = [
        {
            "conversation_id": f"c{n}",
            "metric": FLOW,
            "verdict": "fully" if n % 3 else "none",
            "labeled_at": "2026-11-01",
        }
        for n in range(12)
    ]
    write_jsonl(tmp_path / "labels.jsonl", [*labels, {**labels[0], "conversation_id": "gone"}])
    result = run_flowrate("agreement", "c.jsonl", "--results", "rows.jsonl", "--labels", "labels.jsonl", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)["metrics"][FLOW]
    assert report["n"] == 12 and list(report["languages"]) == ["ru"]
    assert report["pass_fail"]["base_rate"]["value"] == 0.6667  # people pass 8 of 12
    assert "base rate (always the majority)" in result.stderr and "66.7%" in result.stderr
    assert "1 labelled conversation(s) of conversational_flow_rate have no usable row" in result.stderr
    assert json.loads(result.stdout)["unpaired"] == {FLOW: 1}


def test_agreement_on_a_history_uses_each_reviewers_current_answer(run_flowrate, tmp_path):
    rows = tmp_path / "rows.jsonl"
    write_jsonl(rows, [verdict_record("c1", "fully"), verdict_record("c2", "minor")])
    history = tmp_path / "h.duckdb"
    connection = connect(history)
    import_results(connection, rows)
    record_review(connection, Review("c1", FLOW, "ana", "none", 0.0, answered_at=datetime(2026, 11, 1)))
    record_review(connection, Review("c1", FLOW, "ana", "fully", 1.0, answered_at=datetime(2026, 11, 2)))
    record_review(connection, Review("c1", FLOW, "bo", "mostly", 0.9, answered_at=datetime(2026, 11, 2)))
    record_review(connection, Review("c2", FLOW, "bo", "fully", 1.0, answered_at=datetime(2026, 11, 2)))
    page = agreement_page_data(connection)
    connection.close()
    result = run_flowrate("agreement", "--results", rows, "--history", history, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report == page
    flow = report["metrics"][FLOW]
    assert flow["people"]["conversations"] == 1 and flow["people"]["exact_agreement"]["value"] == 0.0
    # c1: ana's current "fully" (1.0) and bo's "mostly" (0.9), mean 0.95: a tie, which goes to the lower value
    assert [(item["id"], item["human_value"]) for item in flow["worst"]] == [("c2", "fully"), ("c1", "mostly")]


def test_agreement_without_results_or_with_both_label_sources_is_refused(run_flowrate, tmp_path):
    write_jsonl(tmp_path / "rows.jsonl", [verdict_record("c1", "fully")])
    write_jsonl(
        tmp_path / "labels.jsonl", [{"conversation_id": "x", "metric": FLOW, "score": 1, "labeled_at": "2026-11-01"}]
    )
    refused = run_flowrate("agreement", "--labels", "labels.jsonl")
    assert refused.returncode == 2 and "--results RESULTS" in refused.stderr
    nothing = run_flowrate("agreement", "--results", "rows.jsonl", "--labels", "labels.jsonl")
    assert nothing.returncode == 2 and "no labelled conversation in --labels labels.jsonl" in nothing.stderr
    no_label = run_flowrate("agreement", "labels.jsonl")  # today's form needs --label
    assert no_label.returncode == 2 and "--label NAME" in no_label.stderr
    both = run_flowrate("agreement", "--results", "rows.jsonl", "--labels", "labels.jsonl", "--history", "h.duckdb")
    assert both.returncode == 2 and "not both" in both.stderr
    assert "Traceback" not in refused.stderr + nothing.stderr + no_label.stderr + both.stderr


def test_agreement_reads_the_history_from_flowrate_history_and_the_config_as_eval_does(run_flowrate, cli_env, tmp_path):
    rows = tmp_path / "rows.jsonl"
    write_jsonl(rows, [verdict_record("c1", "fully"), verdict_record("c2", "minor")])
    history = tmp_path / "h.duckdb"
    connection = connect(history)
    import_results(connection, rows)
    record_review(connection, Review("c1", FLOW, "ana", "none", 0.0, answered_at=datetime(2026, 11, 1)))
    record_review(connection, Review("c2", FLOW, "bo", "fully", 1.0, answered_at=datetime(2026, 11, 1)))
    connection.close()
    (tmp_path / "flowrate.yaml").write_text(f"history: {history}\n")
    named = run_flowrate("agreement", "--results", rows, "--history", history, "--json")
    assert named.returncode == 0, named.stderr
    from_env = run_flowrate("agreement", "--results", rows, "--json", env=dict(cli_env, FLOWRATE_HISTORY=str(history)))
    from_config = run_flowrate("agreement", "--results", rows, "--json", "--config", "flowrate.yaml")
    assert (from_env.returncode, from_env.stdout) == (0, named.stdout), from_env.stderr
    assert (from_config.returncode, from_config.stdout) == (0, named.stdout), from_config.stderr


def test_a_labels_file_or_label_on_the_command_line_outranks_the_history_of_flowrate_history(
    run_flowrate, cli_env, tmp_path
):
    rows = tmp_path / "rows.jsonl"
    write_jsonl(rows, [verdict_record("c1", "fully")])
    labels = [{"conversation_id": "c1", "metric": FLOW, "verdict": "none", "labeled_at": "2026-11-01"}]
    write_jsonl(tmp_path / "labels.jsonl", labels)
    write_jsonl(tmp_path / "set.jsonl", [{**turn_record("c1", "hi", "hello"), "labels": {"Coherent": 2}}])
    env = dict(cli_env, FLOWRATE_HISTORY=str(tmp_path / "absent.duckdb"))  # never opened
    from_file = run_flowrate("agreement", "--results", rows, "--labels", "labels.jsonl", "--json", env=env)
    assert from_file.returncode == 0, from_file.stderr
    assert json.loads(from_file.stdout)["metrics"][FLOW]["n"] == 1
    on_records = run_flowrate("agreement", "set.jsonl", "--label", "Coherent", "--results", rows, env=env)
    assert on_records.returncode == 0, on_records.stderr
    both = run_flowrate("agreement", "set.jsonl", "--label", "Coherent", "--results", rows, "--history", "h.duckdb")
    assert both.returncode == 2 and "with --history or --labels leave it out" in both.stderr
    assert not (tmp_path / "absent.duckdb").exists()


def test_agreement_s_judging_run_adds_no_rows_to_the_history_it_would_read_labels_from(run_flowrate, judge, tmp_path):
    write_jsonl(tmp_path / "set.jsonl", [{**turn_record("c1", "hi", "hello"), "labels": {"Coherent": 2}}])
    (tmp_path / "flowrate.yaml").write_text("history: h.duckdb\n")
    judged = run_flowrate(
        "agreement", "set.jsonl", "--label", "Coherent", "--api-base", judge.base_url, "--config", "flowrate.yaml"
    )
    assert judged.returncode == 0, judged.stderr
    assert judge.requests == 1 and (tmp_path / "flowrate-agreement.jsonl").is_file()
    assert not (tmp_path / "h.duckdb").exists()
