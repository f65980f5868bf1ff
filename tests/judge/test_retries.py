"""One judge call retried: rate limits and server errors with their attempts counted, timeouts,
Retry-After, and a request the server refuses as invalid not retried."""

import random

import pytest

from flowrate import RetryPolicy, evaluate_conversations
from flowrate.judge.errors import RateLimited, retry_after_seconds
from tests.helpers import PYDANTIC_500, conversation, http_metric, read_rows, turn_record, write_jsonl


def rate_limited(retry_after: str) -> RateLimited:
    """A 429 as a backend raises it, with the wait its Retry-After header asked for."""
    return RateLimited("slow down", status=429, retry_after_s=retry_after_seconds({"Retry-After": retry_after}))


async def test_rate_limit_then_success_counts_attempts(judge, api_key):
    judge.script("MARK-429", {"status": 429, "retry_after": 1}, {"status": 500}, {"verdict": "partial"})
    [result] = await evaluate_conversations([conversation("MARK-429", "x")], [http_metric(judge)])
    data = result.metrics_data[0]
    assert data.score == 0.7 and data.evaluation_log["attempts"] == 3


async def test_exhausted_retries_become_an_error_row(judge, api_key):
    judge.script("MARK-500", {"status": 500})
    [failing, fine] = await evaluate_conversations(
        [conversation("MARK-500", "x", id="bad"), conversation("ok", "ok", id="good")], [http_metric(judge)]
    )
    data = failing.metrics_data[0]
    assert data.error.type == "InternalServerError" and data.score is None
    assert data.evaluation_log["attempts"] == 3  # 1 + max_retries
    assert judge.calls_for("MARK-500") == 3
    assert fine.metrics_data[0].score == 1.0


async def test_a_hung_call_times_out_and_is_retried(judge, api_key):
    judge.script("MARK-HANG", {"hang": True}, {"verdict": "minor"})
    policy = RetryPolicy(max_retries=1, timeout=0.5, backoff=0, backoff_max=0)
    [result] = await evaluate_conversations([conversation("MARK-HANG", "x")], [http_metric(judge, retry=policy)])
    assert result.metrics_data[0].score == 0.3 and judge.calls_for("MARK-HANG") == 2


def test_retry_after_is_honoured_and_capped():
    policy = RetryPolicy(backoff=0.5, backoff_max=10)
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert policy.wait_seconds(1, rate_limited("3"), jitter=0.5) == 3.0
    assert policy.wait_seconds(1, rate_limited("30"), jitter=0.5) == 10  # the cap wins
    assert policy.wait_seconds(4, None, jitter=0.5) == 4.0  # 0.5 * 2**3
    assert RetryPolicy(backoff=0, backoff_max=0).wait_seconds(3, rate_limited("5"), jitter=random.random()) == 0


def test_a_retry_after_that_is_neither_seconds_nor_a_date_is_ignored():
    assert retry_after_seconds({"Retry-After": "soon"}) is None
    assert RetryPolicy(backoff=1, backoff_max=60).wait_seconds(2, rate_limited("soon"), jitter=0.5) == 2.0


@pytest.mark.parametrize(
    "refusal",
    [PYDANTIC_500, {"status": 400, "message": "invalid request: temperature must be at most 2"}, {"status": 422}],
)
def test_a_request_the_server_calls_invalid_is_not_retried_whatever_its_status(judge, run_flowrate, tmp_path, refusal):
    judge.script("MARK-REFUSED", refusal)
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("bad", "MARK-REFUSED", "x"), turn_record("ok", "a", "b")])
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "--max-retries", "5", "-o", "out.jsonl")
    assert result.returncode == 3, result.stderr
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    assert judge.calls_for("MARK-REFUSED") == 1 and rows["bad"]["attempts"] == 1
    assert rows["bad"]["error"] is not None and rows["ok"]["error"] is None


def test_a_plain_server_error_is_still_retried(judge, run_flowrate, tmp_path):
    judge.script("MARK-FLAKY", {"status": 500, "message": "CUDA out of memory"}, {"verdict": "mostly"})
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("flaky", "MARK-FLAKY", "x")])
    assert run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "out.jsonl").returncode == 0
    [row] = read_rows(tmp_path / "out.jsonl")
    assert row["verdict"] == "mostly" and row["attempts"] == 2
