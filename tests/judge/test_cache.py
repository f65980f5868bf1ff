"""The response cache: reruns served from it, its key, what is never cached, concurrent writers,
a cache that cannot be written, and `flowrate cache stats` and `clear`."""

import json
import multiprocessing
import os
import subprocess

import pytest

from tests.helpers import FLOWRATE, distinct, read_rows, turn_record, write_jsonl
from tests.helpers import packaged_rubric_text as _packaged_rubric_text


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


def test_the_same_model_at_another_endpoint_is_another_judge(judge, run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(2))
    assert run_flowrate("eval", path, "--api-base", judge.base_url).returncode == 0
    other = judge.base_url.replace("127.0.0.1", "localhost")
    assert run_flowrate("eval", path, "--api-base", other).returncode == 0
    assert judge.requests == 4


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


def test_cache_stats_on_a_directory_that_does_not_exist_is_exit_2_and_creates_nothing(run_flowrate, tmp_path):
    missing = tmp_path / "nonexistent"
    result = run_flowrate("cache", "stats", "--cache-dir", missing)
    assert result.returncode == 2 and str(missing) in result.stderr and "does not exist" in result.stderr
    assert not missing.exists()
    (tmp_path / "empty").mkdir()
    empty = run_flowrate("cache", "stats", "--cache-dir", tmp_path / "empty", "--json")
    assert empty.returncode == 0 and json.loads(empty.stdout)["entries"] == 0
    assert list((tmp_path / "empty").iterdir()) == []


# the cache's locking is the same whatever sent the calls: one transport (each process over
# LiteLLM cost 4 s more CPU, for this test 10.3 s against 2.0 s)
@pytest.mark.parametrize("transport", ["auto"], indirect=True)
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
    assert cache.writes.lost_writes == 1 and "closed" in cache.writes.last_error
