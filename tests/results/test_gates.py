"""Gates: the exit code they give, on a run and on a merge, and how they describe themselves."""

from tests.helpers import evaluation_row as _row
from tests.helpers import turn_record, write_jsonl


def test_gates_change_the_exit_code_as_documented(judge, run_flowrate, tmp_path):
    judge.script("MARK-NONE", {"verdict": "none", "key_issues": ["turn 1: ignores"]})
    records = [turn_record(f"ok{n}", f"hi {n}", "hello") for n in range(3)] + [turn_record("bad", "MARK-NONE", "x")]
    write_jsonl(tmp_path / "c.jsonl", records)
    base = ("eval", "c.jsonl", "--api-base", judge.base_url)
    assert run_flowrate(*base).returncode == 1  # by default any failure fails the run
    assert run_flowrate(*base, "--min-pass-rate", "0.75").returncode == 0
    failed = run_flowrate(*base, "--min-pass-rate", "0.9")
    assert failed.returncode == 1
    assert (
        "gate FAILED: conversational_flow_rate: min_pass_rate: 0.7500, at least 0.9 needed (short by 0.1500)"
        in failed.stderr
    )
    assert run_flowrate(*base, "--max-failures", "1").returncode == 0
    too_many = run_flowrate(*base, "--max-failures", "0", "--min-mean-score", "0.7")
    assert too_many.returncode == 1 and "max_failures: 1 failure, at most 0 allowed (1 too many)" in too_many.stderr
    assert "gate passed: conversational_flow_rate: min_mean_score: 0.7500, at least 0.7 needed" in too_many.stderr
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "flowrate.yaml").write_text("gates: {conversational_flow_rate: {min_pass_rate: 0.5}}\n")
    assert run_flowrate(*base).returncode == 0


def test_merge_applies_the_gates(run_flowrate, tmp_path):
    rows = [_row(f"c{n}", score=1.0 if n else 0.0) for n in range(4)]
    (tmp_path / "a.jsonl").write_text("".join(row.model_dump_json() + "\n" for row in rows[:2]))
    (tmp_path / "b.jsonl").write_text("".join(row.model_dump_json() + "\n" for row in rows[2:]))
    assert run_flowrate("merge", "a.jsonl", "b.jsonl", "-o", "m.jsonl").returncode == 1
    assert run_flowrate("merge", "a.jsonl", "b.jsonl", "-o", "m.jsonl", "--min-pass-rate", "0.75").returncode == 0


def test_one_failure_is_a_failure_not_failures():
    from flowrate.results.summary import GateResult

    gate = GateResult(metric="m", gate="max_failures", limit=0, actual=1, passed=False)
    assert "1 failure, at most 0 allowed" in gate.describe()
