"""Big runs: the response cache, resume, retry-errors, budgets, dry runs, shards, rate limits."""

import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import time
from datetime import UTC

import pytest

from flowrate.judge.limits import AdaptiveConcurrency, Ceiling
from tests.conftest import FLOWRATE, read_rows, turn_record, write_jsonl


def distinct(count, prefix="c"):
    return [turn_record(f"{prefix}{n}", f"question {prefix}{n}", f"answer {n}") for n in range(count)]


def ids(rows):
    return sorted(row["id"] for row in rows)


def test_a_rerun_is_served_from_the_cache(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(5))
    first = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "one.jsonl")
    assert first.returncode == 0 and judge.requests == 5
    second = run_flowrate("eval", path, "--api-base", judge.base_url, "-o", "two.jsonl")
    assert second.returncode == 0 and judge.requests == 5  # zero judge calls
    rows = read_rows(tmp_path / "two.jsonl")
    assert all(row["cached"] and row["cost_usd"] == 0.0 and row["attempts"] == 0 for row in rows)
    assert [r["verdict"] for r in rows] == [r["verdict"] for r in read_rows(tmp_path / "one.jsonl")]
    assert "cached 5" in second.stderr
    assert run_flowrate("eval", path, "--api-base", judge.base_url, "--no-cache").returncode == 0
    assert judge.requests == 10


def test_the_cache_key_follows_model_rubric_and_samples(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(2))
    base = ("eval", path, "--api-base", judge.base_url)
    run_flowrate(*base)
    assert judge.requests == 2
    run_flowrate(*base, "-j", "3", "--timeout", "30", "--max-retries", "1")  # not part of the key
    assert judge.requests == 2
    run_flowrate(*base, "--model", "gpt-4o-mini")
    assert judge.requests == 4
    rubric = tmp_path / "rubric.yaml"
    rubric.write_text(_packaged_rubric_text() + "\n# edited\n")
    run_flowrate(*base, "--rubric", rubric)
    assert judge.requests == 6
    run_flowrate(*base, "--samples", "2")
    assert judge.requests == 8


def _packaged_rubric_text():
    from pathlib import Path

    return (Path(__file__).resolve().parents[1] / "flowrate" / "rubrics" / "conversational_flow.yaml").read_text()


def test_errors_and_unparsable_replies_are_never_cached(judge, run_flowrate, tmp_path):
    judge.script("MARK-500", {"status": 500})
    judge.script("MARK-GARBLED", {"content": "no verdict"})
    path = write_jsonl(tmp_path / "c.jsonl", [turn_record("e", "MARK-500", "x"), turn_record("g", "MARK-GARBLED", "x")])
    for _ in range(2):
        assert run_flowrate("eval", path, "--api-base", judge.base_url, "--max-retries", "0").returncode == 3
    assert judge.calls_for("MARK-500") == 2 and judge.calls_for("MARK-GARBLED") == 4  # each run: a call and a re-ask


def test_cache_stats_and_clear(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(3))
    run_flowrate("eval", path, "--api-base", judge.base_url)
    stats = run_flowrate("cache", "stats", "--json")
    assert stats.returncode == 0
    numbers = json.loads(stats.stdout)
    assert (
        numbers["entries"] == 3
        and numbers["models"] == {"gpt-4o": 3}
        and numbers["path"].startswith(str(tmp_path / "cache"))
    )
    cleared = run_flowrate("cache", "clear")
    assert cleared.returncode == 0 and "removed 3 cached replies" in cleared.stderr
    assert json.loads(run_flowrate("cache", "stats", "--json").stdout)["entries"] == 0


def test_two_runs_can_write_the_cache_at_once(judge, tmp_path, cli_env):
    judge.latency_s = 0.02
    paths = [write_jsonl(tmp_path / f"{name}.jsonl", distinct(40, prefix=name)) for name in ("a", "b")]
    processes = [
        subprocess.Popen(
            [FLOWRATE, "eval", str(path), "--api-base", judge.base_url, "-j", "8", "-o", f"{path.stem}.out"],
            cwd=tmp_path,
            env=cli_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for path in paths
    ]
    for process in processes:
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr
    cache_dir = cli_env["FLOWRATE_CACHE_DIR"]
    stats = subprocess.run([FLOWRATE, "cache", "stats", "--json"], env=cli_env, capture_output=True, text=True)
    assert json.loads(stats.stdout)["entries"] == 80 and cache_dir in stats.stdout


def test_resume_after_kill_9_judges_each_conversation_once(judge, tmp_path, cli_env, run_flowrate):
    judge.latency_s = 0.2
    path = write_jsonl(tmp_path / "c.jsonl", distinct(60))
    process = subprocess.Popen(
        [FLOWRATE, "eval", str(path), "--api-base", judge.base_url, "-j", "4", "-o", "out.jsonl", "--no-cache"],
        cwd=tmp_path,
        env=cli_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    output = tmp_path / "out.jsonl"
    deadline = time.monotonic() + 60
    while (not output.exists() or output.read_text().count("\n") < 8) and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.communicate()
    with output.open("ab") as handle:
        handle.write(b'{"id": "c59", "metric": "conversational_fl')  # a line the kill cut short
    before = len(read_rows_tolerant(output))
    calls_before = judge.requests
    result = run_flowrate(
        "eval", path, "--api-base", judge.base_url, "-j", "4", "-o", "out.jsonl", "--resume", "--no-cache"
    )
    assert result.returncode == 0, result.stderr
    assert "cut a partial last line" in result.stderr
    rows = read_rows(output)
    assert ids(rows) == ids(distinct(60)) and len(rows) == 60  # every conversation exactly once
    assert judge.requests - calls_before == 60 - before
    assert "passed 60" in result.stderr and f"resumed from the output file {before}" in result.stderr, result.stderr


def read_rows_tolerant(path):
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return rows


def test_retry_errors_replaces_only_the_error_rows(judge, run_flowrate, tmp_path):
    judge.script("question c1", {"status": 500}, {"status": 500}, {"verdict": "minor"})
    path = write_jsonl(tmp_path / "c.jsonl", distinct(4))
    first = run_flowrate("eval", path, "--api-base", judge.base_url, "--max-retries", "1", "-o", "out.jsonl")
    assert first.returncode == 3
    assert judge.requests == 5
    second = run_flowrate("eval", path, "--api-base", judge.base_url, "--retry-errors", "-o", "out.jsonl")
    assert second.returncode == 1 and judge.requests == 6  # one call: only c1 again
    rows = {row["id"]: row for row in read_rows(tmp_path / "out.jsonl")}
    assert len(rows) == 4 and rows["c1"]["verdict"] == "minor" and rows["c1"]["error"] is None
    assert "1 error row(s) to judge again" in second.stderr


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


def test_dry_run_estimates_without_calling(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(4))
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "--dry-run")
    assert result.returncode == 0 and judge.requests == 0
    assert "dry run for gpt-4o: 4 conversation(s), 0 cached, 4 call(s)" in result.stderr
    assert "estimated cost $0.0" in result.stderr and "nothing was called" in result.stderr
    unknown = run_flowrate("eval", path, "--api-base", judge.base_url, "--model", "my-local-model", "--dry-run")
    assert "estimated cost unknown (no price for this model)" in unknown.stderr


def test_shards_and_merge_cover_every_id_once(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(30))
    for index in (1, 2, 3):
        result = run_flowrate(
            "eval", path, "--api-base", judge.base_url, "--shard", f"{index}/3", "-o", f"shard{index}.jsonl"
        )
        assert result.returncode == 0, result.stderr
    shards = [ids(read_rows(tmp_path / f"shard{i}.jsonl")) for i in (1, 2, 3)]
    assert all(shards) and sorted(sum(shards, [])) == ids(distinct(30))
    merged = run_flowrate("merge", "shard1.jsonl", "shard2.jsonl", "shard3.jsonl", "-o", "all.jsonl")
    assert merged.returncode == 0 and "passed 30" in merged.stderr
    assert ids(read_rows(tmp_path / "all.jsonl")) == ids(distinct(30))
    shutil.copyfile(tmp_path / "shard1.jsonl", tmp_path / "copy1.jsonl")  # the same rows in another file
    twice = run_flowrate("merge", "shard1.jsonl", "copy1.jsonl", "-o", "bad.jsonl")
    assert twice.returncode == 2 and "is also in shard1.jsonl" in twice.stderr
    assert run_flowrate("eval", path, "--shard", "4/3").returncode == 2


def test_concurrency_shrinks_under_429_and_grows_back(judge, run_flowrate, tmp_path):
    judge.latency_s = 0.05
    burst = [{"status": 429, "retry_after": 0}] * 8
    judge.script("question", *burst, {"verdict": "fully"})
    path = write_jsonl(tmp_path / "c.jsonl", distinct(120))
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-j", "8", "--no-cache")
    assert result.returncode == 0, result.stderr
    in_flight = [count for _, count in judge.arrivals]
    assert max(in_flight[:8]) == 8  # full width until the 429s come back
    assert max(in_flight[8:12]) <= 4  # halved right after the burst
    assert max(in_flight[12:16]) <= 5  # then one more after each window of successes
    assert max(in_flight[-40:]) == 8  # and grown back while calls succeed


def test_above_the_connection_pool_a_one_line_notice(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(2))
    result = run_flowrate("eval", path, "--api-base", judge.base_url, "-j", "2000")
    assert result.returncode == 0
    notices = [line for line in result.stderr.splitlines() if "connections per host" in line]
    assert notices == ["flowrate: --concurrency 2000 is above LiteLLM's pool of 500 connections per host; using 500"]


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


def _open_and_write(directory, barrier, results):
    from flowrate.judge.cache import ResponseCache

    barrier.wait()
    try:
        cache = ResponseCache(directory)
        cache.put(f"key-{os.getpid()}", "model", "rubric", ["reply"])
        cache.close()
        results.put("ok")
    except Exception as error:  # reported to the test, which fails on it
        results.put(f"{type(error).__name__}: {error}")


def test_runs_opening_a_new_cache_at_the_same_moment_all_succeed(tmp_path):
    context = multiprocessing.get_context("fork")
    outcomes = []
    for trial in range(10):
        barrier, results = context.Barrier(4), context.Queue()
        workers = [
            context.Process(target=_open_and_write, args=(tmp_path / str(trial), barrier, results)) for _ in range(4)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
        outcomes += [results.get(timeout=5) for _ in workers]
    assert outcomes == ["ok"] * 40


def test_a_cache_that_cannot_be_written_does_not_stop_the_run(tmp_path):
    from flowrate.judge.cache import ResponseCache

    cache = ResponseCache(tmp_path)
    cache._db.close()  # as good as a full disk: every write fails
    cache.put("key", "model", "rubric", ["reply"])
    cache.flush()
    assert cache.lost_writes == 1 and "closed" in cache.last_error


def test_merge_refuses_duplicates_without_an_eval_hint(run_flowrate, tmp_path):
    from datetime import datetime

    from flowrate.results.rows import EvaluationRow

    row = EvaluationRow(
        id="a",
        metric="conversational_flow_rate",
        verdict="fully",
        score=1.0,
        success=True,
        threshold=0.7,
        model="m",
        rubric_version="v",
        evaluated_at=datetime.now(UTC),
    )
    (tmp_path / "one.jsonl").write_text(row.model_dump_json() + "\n")
    (tmp_path / "two.jsonl").write_text(row.model_dump_json() + "\n")
    result = run_flowrate("merge", "one.jsonl", "two.jsonl", "-o", "merged.jsonl")
    assert result.returncode == 2 and not (tmp_path / "merged.jsonl").exists()
    assert result.stderr.startswith("flowrate: 1 row(s) in more than one file; nothing was merged:")
    assert "--skip-invalid" not in result.stderr


def test_a_row_with_neither_verdict_nor_error_is_a_plain_problem(run_flowrate, tmp_path):
    (tmp_path / "odd.jsonl").write_text(
        '{"id": "a", "metric": "m", "threshold": 0.7, "model": "m", "rubric_version": "v", "evaluated_at": "2026-01-01T00:00:00Z"}\n'
    )
    result = run_flowrate("merge", "odd.jsonl", "-o", "merged.jsonl")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert (
        "odd.jsonl:1: not a flowrate result row: a row has a score or an error, this one has neither" in result.stderr
    )
