"""Every table flowrate prints, read on an 80-column terminal and with no terminal (a CI log):
no cell cut ("…"), every identifier (a period, a metric, a label, an id) whole on one line."""

import io
import json

import orjson
import pytest
from rich.console import Console

from tests.analysis.planted_issues import planted_rows
from tests.helpers import march_label, march_row, write_jsonl, write_rows

METRICS = ["repetitive_pattern_detection", "repetition_check", "conversational_flow_rate"]


def _labelled_run(tmp_path):
    rows, labels = [], []
    for metric in METRICS:
        for n in range(40):
            rows.append(march_row(f"c{n}", metric, 0.5 if n % 3 else 0.9))
            labels.append(march_label(f"c{n}", metric, 0.6 if n % 2 else 0.4))
    write_rows(tmp_path / "rows.jsonl", rows)
    write_jsonl(tmp_path / "labels.jsonl", labels)


def _whole(text, identifiers):
    assert "…" not in text, text
    lines = text.splitlines()
    for identifier in identifiers:
        assert any(identifier in line for line in lines), f"{identifier!r} is not whole on a line:\n{text}"


COMMANDS = {
    "trends": (("trends", "rows.jsonl", "--labels", "labels.jsonl"), ["2026-W10", *METRICS]),
    "calibrate": (("calibrate", "rows.jsonl", "--labels", "labels.jsonl", "--as-of", "2026-03-30"), METRICS),
    "agreement": (
        ("agreement", "--results", "rows.jsonl", "--labels", "labels.jsonl", "--metric", METRICS[0]),
        [METRICS[0]],
    ),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_table_on_80_columns_and_with_no_terminal_cuts_no_identifier(
    run_flowrate, run_process, cli_env, tmp_path, command
):
    _labelled_run(tmp_path)
    args, identifiers = COMMANDS[command]
    narrow = run_flowrate(*args, env={**cli_env, "COLUMNS": "80"})
    assert narrow.returncode in (0, 3), narrow.stderr
    _whole(narrow.stderr, identifiers)
    piped = run_process(*args, env={key: value for key, value in cli_env.items() if key != "COLUMNS"})
    assert piped.returncode in (0, 3), piped.stderr
    _whole(piped.stderr, identifiers)


def test_the_top_issues_table_on_80_columns_keeps_every_label_whole(run_flowrate, cli_env, tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"".join(orjson.dumps(row.model_dump(mode="json")) + b"\n" for row in planted_rows()))
    result = run_flowrate("top-issues", path, "--json", env={**cli_env, "COLUMNS": "80"})
    assert result.returncode == 0, result.stderr
    labels = [mode["label"] for mode in json.loads(result.stdout)["modes"][:10]]
    assert "…" not in result.stderr
    flat = " ".join(line.strip("│┃ ") for line in result.stderr.splitlines())
    assert all(label.split()[0] in flat for label in labels)


def test_the_bench_table_cuts_nothing_at_80_columns():
    from flowrate.analysis.agreement import Statistic
    from flowrate.analysis.judge_bench import BenchEstimate, BenchReport, BenchScore
    from flowrate.reports.bench import print_bench

    judge = "hosted_vllm/meta-llama/Llama-3.1-70B-Instruct-long-name"
    score = BenchScore(
        judge=judge, set="uss-mwoz", label="overall_satisfaction", metric="user_satisfaction", cut_logs=False,
        n=1000, spearman=Statistic(value=0.3125, ci95=[0.2512, 0.3733]), kendall=Statistic(value=0.25),
        conversations=1000, not_judged=0, parsed_first_call=990, repaired=5, reasked=5, errors=0, calls=1000,
        cached=0, prompt_tokens=1, completion_tokens=1, cost_usd=None, latency_s=1.0, results_file="x.jsonl",
    )  # fmt: skip
    report = BenchReport(
        created_at="now", flowrate_version="0", judges=[judge], estimate=BenchEstimate(), scores=[score]
    )
    out = io.StringIO()
    print_bench(Console(file=out, width=80), report)
    _whole(out.getvalue(), ["uss-mwoz", "0.312 [0.251, 0.373]"])
