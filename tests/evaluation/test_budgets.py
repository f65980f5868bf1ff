"""The `--max-cost` budget: scheduling stops when it is spent, and it needs a known price."""

from tests.helpers import distinct, read_rows, write_jsonl


def test_max_cost_stops_scheduling_and_skips_the_rest(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(20))
    result = run_flowrate(
        "eval", path, "--api-base", judge.base_url, "-j", "1", "--max-cost", "0.03", "-o", "out.jsonl"
    )
    assert result.returncode == 3
    rows = read_rows(tmp_path / "out.jsonl")
    spent = sum(row["cost_usd"] for row in rows)
    assert 0 < len(rows) < 20 and spent <= 0.03
    assert judge.requests == len(rows)
    assert f"budget: {20 - len(rows)} conversation(s) not judged" in result.stderr
    assert f"c{len(rows)}: not judged, the --max-cost budget is spent" in result.stderr


def test_max_cost_needs_a_known_price(run_flowrate, tmp_path, judge):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(1))
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "--model", "my-local-model", "--max-cost", "1")
    assert result.returncode == 2
    assert "no price is known for model 'my-local-model', so --max-cost cannot be enforced" in result.stderr
