"""Each reply bounded by what the rubric's schema needs, and a runaway reply cut at that limit."""

from flowrate.metrics.rubric_metric import RubricMetric
from tests.helpers import SUITE_MARK, distinct, read_rows, reask_text, suite_reply, turn_record, write_jsonl


def test_each_reply_is_bounded_by_what_the_rubrics_schema_needs(judge, run_flowrate, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    judge.script(SUITE_MARK, {"content": suite_reply()})
    path = write_jsonl(tmp_path / "c.jsonl", distinct(1))
    run_flowrate("eval", path, "--api-base", judge.base_url)
    run_flowrate("eval", path, "--api-base", judge.base_url, "--metric", "virtual_agent")
    flow, suite = (
        RubricMetric(name, model="gpt-4o").budget.reply_token_limit
        for name in ("conversational_flow_rate", "virtual_agent")
    )
    assert [body["max_tokens"] for body in judge.bodies] == [flow, suite]
    assert flow == 512 and 512 < suite < 1352  # the runaway reply issue 14 measured


def test_a_runaway_reply_is_cut_at_its_limit_reasked_then_an_error_counted_as_cut(judge, run_flowrate, tmp_path):
    judge.script("MARK-RUNAWAY", {"runaway": True})
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("r", "MARK-RUNAWAY", "x")])
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl")
    assert result.returncode == 3
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["error"]["type"] == "ReplyCut" and judge.calls_for("MARK-RUNAWAY") == 2
    assert "stopped at its limit of 512 tokens" in reask_text(judge.bodies[1])
    assert row["usage"]["completion_tokens"] <= 2 * 512 + 2
