"""A reply that cannot be used is asked for once more, saying what was wrong; a second one is an
error row."""

from flowrate import ConversationalFlowRateMetric, evaluate_conversations
from tests.helpers import (
    NO_WAIT,
    RATINGS,
    SUITE_MARK,
    ScriptedClient,
    conversation,
    distinct,
    http_metric,
    read_rows,
    reask_text,
    suite_reply,
    turn_record,
    verdict,
    write_jsonl,
)


async def test_unparsable_reply_gets_one_reask_then_an_error_row():
    client = ScriptedClient("I liked it.", "Still no JSON, sorry.")
    metric = ConversationalFlowRateMetric(model=client, retry=NO_WAIT)
    [result] = await evaluate_conversations([conversation("a", "b")], [metric])
    data = result.metrics_data[0]
    assert len(client.calls) == 2
    assert "could not be used" in client.calls[1][0][-1]["content"]
    assert data.score is None and data.success is None
    assert data.error.type == "UnparsableReply"


async def test_reask_recovers_the_verdict():
    client = ScriptedClient('{"verdict": "great"}', verdict("fully"))
    metric = ConversationalFlowRateMetric(model=client, retry=NO_WAIT)
    [result] = await evaluate_conversations([conversation("a", "b")], [metric])
    assert result.metrics_data[0].score == 1.0 and len(client.calls) == 2


async def test_malformed_http_reply_is_reasked(judge, api_key):
    judge.script("MARK-MAL", {"content": '```json\n{"verdict": "superb"}\n```'}, {"content": "no verdict"})
    [result] = await evaluate_conversations([conversation("MARK-MAL", "x")], [http_metric(judge)])
    assert result.metrics_data[0].error.type == "UnparsableReply" and judge.calls_for("MARK-MAL") == 2


def test_the_reask_after_invalid_json_names_where_it_breaks(judge, run_flowrate, tmp_path):
    judge.script("MARK-BROKEN", {"content": "Here: {verdict = minor}"}, {"verdict": "partial"})
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("b", "MARK-BROKEN", "x")])
    run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl")
    reask = reask_text(judge.bodies[1])
    assert "the reply is not valid JSON: Expecting property name enclosed in double quotes" in reask
    assert "at line 1, column 8 (character 7)" in reask and "holds no JSON object" not in reask
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["verdict"] == "partial" and row["reasked"].startswith("the reply is not valid JSON")


def test_a_missing_field_is_named_and_the_unusable_replies_are_kept_on_the_error_row(judge, run_flowrate, tmp_path):
    judge.script("MARK-FIELD", {"content": '{"reason": "fine", "key_issues": []}'}, {"content": "Sorry, I cannot."})
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("f", "MARK-FIELD", "x")])
    run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl")
    assert 'the reply has no "verdict" field' in reask_text(judge.bodies[1])
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["error"]["type"] == "UnparsableReply" and "holds no JSON object" in row["error"]["message"]
    assert '{"reason": "fine", "key_issues": []}' in row["raw_reply"] and "Sorry, I cannot." in row["raw_reply"]


def test_a_suite_reask_asks_only_for_the_criterion_off_its_scale_and_keeps_the_others(judge, run_flowrate, tmp_path):
    first = suite_reply({"slot_filling": 5})  # slot_filling is rated on 3 points
    different = suite_reply({name: 1 for name in RATINGS} | {"slot_filling": 2})
    judge.script(SUITE_MARK, {"content": first}, {"content": different})
    path = write_jsonl(tmp_path / "c.jsonl", distinct(1))
    run_flowrate("eval", path, "--metric", "virtual_agent", "--api-base", judge.base_url, "-o", "out.jsonl")
    reask = reask_text(judge.bodies[1])
    assert "rating 5 for slot_filling is not on its scale 1..3" in reask
    assert '"slot_filling": {"reason": "...", "key_issues": ["..."], "rating": 1-3}' in reask
    assert "request_completion" not in reask.split("criteria:", 1)[1]
    rows = {row["metric"]: row for row in read_rows(tmp_path / "out.jsonl")}
    ratings = {name: rows[name]["rating"] for name in RATINGS}
    assert ratings == RATINGS | {"slot_filling": 2}  # every other criterion as first judged
    assert all(row["reasked"] == "rating 5 for slot_filling is not on its scale 1..3" for row in rows.values())
    assert rows["user_satisfaction"]["error"] is None


def test_the_reask_shows_the_fields_in_the_reply_order_the_run_asked_for(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("o", "MARK-ORDER", "x")])
    for order, first, second in (("verdict-first", '"verdict"', '"reason"'), ("reason-first", '"reason"', '"verdict"')):
        judge.reset()
        judge.script("MARK-ORDER", {"content": "no JSON here"}, {"verdict": "partial"})
        run_flowrate(
            "eval", path, "--api-base", judge.base_url, "--reply-order", order, "--no-cache", "-o", f"{order}.jsonl"
        )
        reask = reask_text(judge.bodies[1])
        shape = reask[reask.index("Reply again with only the JSON object") :]
        assert shape.index(first) < shape.index(second), (order, shape)
        [row] = read_rows(tmp_path / f"{order}.jsonl")
        assert row["verdict"] == "partial"
