"""Rate ceilings and adaptive concurrency around each call, and the waits they make kept out of
the latency."""

import pytest

from flowrate.judge.limits import AdaptiveConcurrency, Ceiling
from tests.helpers import distinct, read_rows, write_jsonl


def test_concurrency_shrinks_under_429_and_grows_back(judge, run_flowrate, tmp_path):
    # each call held 0.2 s: long enough for LiteLLM's client on a loaded machine (two xdist workers
    # on 2 cores) to fill 8 slots again (at 0.05 s it reached 7 of them); 80 conversations are
    # 8 + 22 calls to grow back from 4 and 50 at full width
    judge.latency_s = 0.2
    burst = [{"status": 429, "retry_after": 0}] * 8
    judge.script("question", *burst, {"verdict": "fully"})
    path = write_jsonl(tmp_path / "c.jsonl", distinct(80))
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-j", "8", "--no-cache")
    assert result.returncode == 0, result.stderr
    in_flight = [count for _, count in judge.arrivals]
    assert max(in_flight[:8]) == 8  # full width until the 429s come back
    assert max(in_flight[8:12]) <= 4  # halved right after the burst
    assert max(in_flight[12:16]) <= 5  # then one more after each window of successes
    assert max(in_flight[-40:]) == 8  # and grown back while calls succeed


async def test_adaptive_concurrency_halves_once_per_burst():
    limiter = AdaptiveConcurrency(8)
    starts = [await limiter.acquire() for _ in range(8)]
    for started in starts:
        await limiter.release(started, rate_limited=True)  # one burst of eight 429s
    assert limiter.limit == 4
    for _ in range(4):
        await limiter.release(await limiter.acquire(), rate_limited=False)
    assert limiter.limit == 5


async def test_rate_ceiling_spaces_requests():
    now = [0.0]
    slept = []

    async def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds

    ceiling = Ceiling(per_minute=60, clock=lambda: now[0], sleep=sleep)  # 1 a second, 5 at once
    for _ in range(8):
        await ceiling.take(1)
    assert now[0] == pytest.approx(3.0)  # five from the burst, then one a second


async def test_tpm_holds_over_every_60_second_window_whatever_the_call_size():
    now = [0.0]

    async def sleep(seconds):
        now[0] += seconds

    ceiling = Ceiling(per_minute=10_000, clock=lambda: now[0], sleep=sleep)
    taken = []
    for _ in range(12):
        await ceiling.take(2_600)
        taken.append((now[0], 2_600))
    for start, _ in taken:
        assert sum(amount for when, amount in taken if start <= when < start + 60) <= 10_000
    await ceiling.take(15_000)  # larger than a whole minute: waits for an empty window, then goes alone
    assert now[0] >= taken[-1][0] + 60 and ceiling.oversized == 1


def test_row_timing_is_the_judges_not_the_schedulers(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(7))
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "--rpm", "60", "-j", "1", "-o", "out.jsonl")
    assert result.returncode == 0
    rows = read_rows(tmp_path / "out.jsonl")
    waited = [row for row in rows if row["wait_s"] >= 0.5]  # five at once, then one a second
    assert waited and all(row["latency_s"] < row["wait_s"] for row in waited)  # the wait is not in the latency
    assert [row["evaluated_at"] for row in rows] == sorted(row["evaluated_at"] for row in rows)
