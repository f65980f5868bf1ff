"""Fitting a long conversation into the judge's input budget: the opening and the end kept, a huge
turn clipped, the budget the model's window gives, and one too small for the rubric."""

import json

from flowrate import ConversationalEvalTestCase, ConversationalFlowRateMetric, EvalTestCase, evaluate_conversations
from tests.helpers import (
    NO_WAIT,
    TEST_KEY,
    ScriptedClient,
    distinct,
    long_conversation,
    read_rows,
    turn_record,
    verdict,
    write_jsonl,
)


def test_long_conversations_keep_the_opening_and_the_end(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "long.jsonl", [long_conversation(), turn_record("short", "hi", "hello")])
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "--max-input-tokens", "4500", "-o", "out.jsonl")
    assert result.returncode == 0, result.stderr
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    assert rows["long"]["truncated"] is True and rows["short"]["truncated"] is False
    assert rows["long"]["number_of_turns"] == 60
    sent = next(body for body in judge.bodies if "MARK-TURN-60 " in body["messages"][-1]["content"])["messages"][-1][
        "content"
    ]
    assert "MARK-TURN-1 " in sent and "MARK-TURN-2 " in sent and "MARK-TURN-30 " not in sent
    elided = [json.loads(line) for line in sent.splitlines() if line.startswith('{"elided_turns"')]
    assert len(elided) == 1 and elided[0]["elided_turns"][0] == 3
    assert '"turn":60' in sent  # turn numbers stay the original ones
    assert "truncated: 1 conversation(s)" in result.stderr


def test_the_models_known_window_is_the_default_budget(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", TEST_KEY)
    metric = ConversationalFlowRateMetric(model="gpt-4o")
    plan = metric.plan(ConversationalEvalTestCase(**{k: v for k, v in long_conversation().items() if k != "id"}))
    assert plan.truncated is False and 100_000 < metric.budget.input_budget < 128_000


async def test_a_huge_last_turn_keeps_the_start_and_end_of_the_paste_and_the_whole_reply():
    client = ScriptedClient(verdict("partial"))
    metric = ConversationalFlowRateMetric(model=client, max_input_tokens=6000, retry=NO_WAIT)
    paste = "PASTE-START " + "lorem ipsum dolor " * 150_000 + " PASTE-END"
    reply = "Raise a ticket with the number RT-4471 and attach the log, please: that is all we need."
    case = ConversationalEvalTestCase(turns=[EvalTestCase(input=paste, actual_output=reply)])
    [result] = await evaluate_conversations([case], [metric])
    sent = client.calls[0][0][-1]["content"]
    assert result.metrics_data[0].evaluation_log["truncated"] is True
    assert "PASTE-START" in sent and "PASTE-END" in sent and "[…]" in sent
    assert json.dumps(reply)[1:-1] in sent  # the reply, whole


async def test_a_huge_turn_in_the_middle_is_clipped_and_the_end_survives():
    client = ScriptedClient(verdict("partial"))
    metric = ConversationalFlowRateMetric(model=client, max_input_tokens=6000, retry=NO_WAIT)
    huge = "MIDDLE-START " + "word " * 400_000 + " MIDDLE-END"
    case = ConversationalEvalTestCase(
        turns=[
            EvalTestCase(input="My router is broken.", actual_output="Which model is it?"),
            EvalTestCase(input=huge, actual_output="Thanks for the log."),
            EvalTestCase(input="So?", actual_output="FINAL-REPLY: a replacement ships today."),
        ]
    )
    [result] = await evaluate_conversations([case], [metric])
    sent = client.calls[0][0][-1]["content"]
    assert result.metrics_data[0].evaluation_log["truncated"] is True
    assert "MIDDLE-START" in sent and "MIDDLE-END" in sent and "FINAL-REPLY: a replacement ships today." in sent
    assert "My router is broken." in sent and len(sent) < 60_000


async def test_one_turn_too_long_for_the_window_is_clipped_and_marked():
    client = ScriptedClient(verdict("partial"))
    metric = ConversationalFlowRateMetric(model=client, max_input_tokens=6000, retry=NO_WAIT)
    text = "START " + "lorem ipsum " * 2000 + " END-OF-MESSAGE"
    case = ConversationalEvalTestCase(turns=[EvalTestCase(input=text, actual_output="ok")])
    [result] = await evaluate_conversations([case], [metric])
    sent = client.calls[0][0][-1]["content"]
    assert result.metrics_data[0].evaluation_log["truncated"] is True
    assert "[…]" in sent and "END-OF-MESSAGE" in sent and len(sent) < len(text)


def test_a_budget_below_what_the_rubric_needs_is_a_usage_error(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(2))
    for extra in ([], ["--dry-run"]):
        result = run_flowrate("eval", path, "--api-base", judge.base_url, "--max-input-tokens", "3000", *extra)
        assert result.returncode == 2, result.stderr
        assert "option max_input_tokens: 3000 cannot hold the rubric and a conversation" in result.stderr
        assert "the minimum for this rubric and model is" in result.stderr
    assert judge.requests == 0
