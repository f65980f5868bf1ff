"""`--dry-run`: the calls and the cost a run would make, without making them."""

from tests.helpers import distinct, write_jsonl


def test_dry_run_estimates_without_calling(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(4))
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "--dry-run")
    assert result.returncode == 0 and judge.requests == 0
    assert "dry run for gpt-4o: 4 conversation(s), 0 cached, 4 call(s)" in result.stderr
    assert "estimated cost $0.0" in result.stderr and "nothing was called" in result.stderr
    unknown = run_flowrate("eval", path, "--api-base", judge.base_url, "--model", "my-local-model", "--dry-run")
    assert "estimated cost unknown (no price for this model)" in unknown.stderr


def test_a_dry_run_with_everything_cached_costs_nothing(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(2))
    run_flowrate("eval", path, "--api-base", judge.base_url, "-m", "my-local-model")
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-m", "my-local-model", "--dry-run")
    assert "2 cached, 0 call(s)" in result.stderr and "estimated cost $0.0000" in result.stderr


def test_dry_run_counts_one_call_per_judged_metric(judge, run_flowrate, tmp_path):
    write_jsonl(tmp_path / "c.jsonl", distinct(3))
    result = run_flowrate(
        "eval",
        "c.jsonl",
        "--metric",
        "virtual_agent",
        "--metric",
        "conversational_flow_rate",
        "--metric",
        "repetition_check",
        "--api-base",
        judge.base_url,
        "--dry-run",
    )
    assert result.returncode == 0 and "3 conversation(s), 0 cached, 6 call(s)" in result.stderr and judge.requests == 0
