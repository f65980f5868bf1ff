"""The judging step as a public API: `build_request` is the request `flowrate eval` sends, and
`rows_from_reply` makes the rows it writes, re-ask rules included, with nothing sent by the API."""

import asyncio
import json

import httpx
import pytest

from flowrate import ConversationalFlowRateMetric, VirtualAgentSuite, build_request, rows_from_reply
from flowrate.judge.cache import ResponseCache
from flowrate.metrics.step import JudgeRequest, reply_from_answer
from tests.helpers import NO_WAIT, RATINGS, SUITE_MARK, conversation, suite_reply, transport

TIMING = {"evaluated_at", "latency_s", "wait_s"}


def _post(judge, request):
    """Send a request's body as an engine would: one HTTP POST, no flowrate code on the way."""
    answer = httpx.post(f"{judge.base_url}/chat/completions", json=request.body, timeout=10)
    return answer.json()


def _fields(rows):
    return [{key: value for key, value in row.model_dump(mode="json").items() if key not in TIMING} for row in rows]


def _metric(judge, kind=ConversationalFlowRateMetric, **options):
    return kind(model="gpt-4o", api_base=judge.base_url, retry=NO_WAIT, transport=transport(), **options)


def test_the_request_is_what_the_online_path_sends_and_its_rows_are_the_online_rows(judge, api_key):
    case = conversation("Where is my order?", "Which one: #4471 or #4490?", "#4471", "It ships today.", id="c1")
    judge.script("#4471", {"verdict": "mostly", "reason": "one extra question", "key_issues": ["turn 1: asks"]})
    online = asyncio.run(_metric(judge).evaluate(case))
    sent = judge.bodies[-1]
    metric = _metric(judge)
    request = build_request(metric, case)
    assert request.body == sent  # the messages, the schema in the server's form, temperature, max_tokens
    assert request.messages == sent["messages"] and request.response_format == "json_schema"
    assert request.rubric_version == metric.rubric.version and request.conversation_id == "c1"
    step = rows_from_reply(metric, case, request, reply_from_answer(metric, request, _post(judge, request)))
    assert step.reasks == [] and step.cache_texts is not None
    assert _fields(step.rows) == _fields(online)
    assert step.rows[0].verdict == "mostly" and step.rows[0].score == 0.9


def test_the_cache_key_is_where_flowrate_eval_caches_the_reply(judge, api_key, tmp_path):
    case = conversation("hello", "hi, how can I help?", id="c1")
    cache = ResponseCache(tmp_path)
    asyncio.run(_metric(judge, cache=cache).evaluate(case))
    cache.flush()
    metric = _metric(judge, cache=cache)
    request = build_request(metric, case)
    assert request.cached_replies == cache.get(request.cache_key) is not None
    rows = rows_from_reply(metric, case, request, None).rows  # from the cache: nothing sent
    assert rows[0].cached is True and rows[0].verdict == "fully" and judge.requests == 1
    assert build_request(metric, case, lookup=False).cached_replies is None


def test_an_unusable_reply_reports_the_reask_it_needs_and_its_reply_finishes_the_rows(judge, api_key):
    case = conversation("MARK-BROKEN please", "sure", id="c1")
    judge.script("MARK-BROKEN", {"content": "I think it went well."}, {"verdict": "partial", "reason": "r"})
    online = asyncio.run(_metric(judge).evaluate(case))
    judge.reset()
    judge.script("MARK-BROKEN", {"content": "I think it went well."}, {"verdict": "partial", "reason": "r"})
    metric = _metric(judge)
    request = build_request(metric, case)
    first = reply_from_answer(metric, request, _post(judge, request))
    step = rows_from_reply(metric, case, request, first)
    [row] = step.rows
    assert row.error.type == "ReaskNeeded" and "a re-ask would have been needed" in row.error.message
    assert "holds no JSON object" in row.error.message and row.raw_reply == "I think it went well."
    assert step.cache_texts is None
    [reask] = step.reasks
    assert reask.sample == 0 and "Your reply could not be used" in reask.messages[-1]["content"]
    assert JudgeRequest.from_dict(json.loads(json.dumps(reask.to_dict()))) == reask  # plain data for an engine's rows
    again = reply_from_answer(metric, reask, _post(judge, reask))
    finished = rows_from_reply(metric, case, request, first, reask_replies={0: again})
    assert finished.reasks == [] and finished.rows[0].reasked is not None
    assert _fields(finished.rows) == _fields(online)


def test_a_suite_reask_for_one_criterion_keeps_the_others_as_online(judge, api_key):
    case = conversation("Where is order 12?", "It ships today.", id="s1")
    first, second = suite_reply({"slot_filling": 5}), suite_reply({name: 1 for name in RATINGS} | {"slot_filling": 2})
    judge.script(SUITE_MARK, {"content": first}, {"content": second})
    metric = _metric(judge, VirtualAgentSuite)
    request = build_request(metric, case)
    reply = reply_from_answer(metric, request, _post(judge, request))
    [reask] = rows_from_reply(metric, case, request, reply).reasks
    assert reask.only == ["slot_filling"]
    again = reply_from_answer(metric, reask, _post(judge, reask))
    rows = {row.metric: row for row in rows_from_reply(metric, case, request, reply, reask_replies={0: again}).rows}
    assert {name: rows[name].rating for name in RATINGS} == RATINGS | {"slot_filling": 2}


def test_an_error_answer_is_the_error_flowrate_eval_raises(judge, api_key):
    metric = _metric(judge)
    case = conversation("q", "a", id="c1")
    request = build_request(metric, case)
    with pytest.raises(Exception, match="not a chat completion"):
        reply_from_answer(metric, request, {"error": {"message": "scripted 500", "code": 500}})


def test_each_turn_look_goes_out_as_its_own_request_and_its_reply_names_the_turn_by_number(judge, api_key):
    from flowrate.metrics.step import build_turn_looks
    from flowrate.settings.groups import ScoreChoice

    case = conversation("Where is my order?", "Which one?", "#4471", "Do you like cats?", id="c1")
    breaks = {"answers": {"follows_on": "no"}}
    judge.script(
        "Where is my order?", {"verdict": "partial", "reason": "off", "turns": {"by_input": {"#4471": breaks}}}
    )
    online = asyncio.run(_metric(judge, choice=ScoreChoice(turn_look=True)).evaluate(case))
    metric = _metric(judge, choice=ScoreChoice(turn_look=True))
    request = build_request(metric, case)
    looks = build_turn_looks(metric, request)
    assert [look.sample for look in looks] == [1, 2] and all(look.kind == "turns" for look in looks)
    assert [look.body for look in looks] == judge.bodies[1:3]  # what eval sent after the grading call
    replies = {look.sample: reply_from_answer(metric, look, _post(judge, look)) for look in looks}
    reply = reply_from_answer(metric, request, _post(judge, request))
    step = rows_from_reply(metric, case, request, reply, turns_replies=replies)
    assert step.rows[0].turn_p_problem == {"1": 0.0, "2": 1.0} and step.rows[0].problem_turns == [2]
    assert _fields(step.rows) == _fields(online) and set(step.turns_kept) == {1, 2}
