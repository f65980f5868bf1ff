"""The review app's fixtures: rows made by a real `flowrate eval` against the scripted judge, and
`flowrate review` started as a real process on 127.0.0.1, its address read from what it prints."""

import re
import subprocess
import threading
from pathlib import Path

import pytest

from tests.helpers import FLOWRATE, turn_record, write_jsonl

FAILING = 5
PASSING = 3
HOSTILE = "<!--<script> </script><script>document.title='owned'</script> javascript:alert(1)"


def _records(judge):
    """Five failing conversations (minor, key issues at turns 1 and 2), three passing ones; the
    second failing one carries hostile text in its turns and its judge's reason."""
    records = []
    for n in range(FAILING + PASSING):
        marker = f"MARK-REVIEW-{n}"
        failing = n < FAILING
        said = HOSTILE if n == 1 else f"words {n}"
        if failing:
            judge.script(
                marker,
                {
                    "verdict": "minor",
                    "reason": f"reason {n}: {said}",
                    "key_issues": [f"turn 2: asks again {n} {said}", f"turn 1: ignores the order {n}"],
                },
            )
        else:
            judge.script(marker, {"verdict": "fully", "reason": f"reason {n}: fine", "key_issues": []})
        records.append(
            turn_record(f"c{n}", f"{marker} where is my parcel? {said}", f"It left today. {said}", "and now?", "Soon.")
        )
    return records


@pytest.fixture
def scripted(judge_server):
    """The scripted judge, reset; the app only reads what a run wrote, so one transport will do."""
    judge_server.reset()
    judge_server.latency_s = 0.0
    judge_server.fault_rates = {}
    yield judge_server
    judge_server.reset()


@pytest.fixture
def judged(scripted, run_flowrate, tmp_path):
    """`flowrate eval` of the eight conversations: the results file and the conversations file."""
    conversations = write_jsonl(tmp_path / "conversations.jsonl", _records(scripted))
    result = run_flowrate("eval", conversations, "--api-base", scripted.base_url, "-o", "results.jsonl")
    assert result.returncode == 1, result.stderr  # five fail the threshold
    return tmp_path / "results.jsonl", conversations


class ReviewProcess:
    """`flowrate review ARGS` running; `url` is the address it printed (with the token), `base`
    the same without it (the server's secret path included), `origin` its scheme, host and port."""

    def __init__(self, args, env, cwd, file_size_limit_bytes=None):
        self.process = subprocess.Popen(
            [FLOWRATE, "review", *map(str, args)],
            env=env,
            cwd=cwd,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_file_size_limit(file_size_limit_bytes) if file_size_limit_bytes is not None else None,
        )
        self.said = []
        self.url = self._address()
        self.base = self.url.split("/?token=")[0]
        self.origin = "/".join(self.url.split("/")[:3])
        self.token = self.url.split("token=")[1]
        threading.Thread(target=self._drain, daemon=True).start()

    def _address(self):
        for line in self.process.stderr:
            self.said.append(line)
            found = re.search(r"open (http://\S+)", line)
            if found:
                return found.group(1)
        raise AssertionError("flowrate review printed no address: " + "".join(self.said))

    def _drain(self):
        for line in self.process.stderr:
            self.said.append(line)

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)


def _file_size_limit(limit_bytes):
    """Run in the child before `flowrate review`: no file it writes may grow past `limit_bytes`
    (a write beyond fails with EFBIG, as one on a full disk fails with ENOSPC; Python ignores SIGXFSZ)."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, resource.RLIM_INFINITY))

    return limit


@pytest.fixture
def start_review(cli_env, tmp_path):
    """Start `flowrate review` with the given arguments (and `file_size_limit_bytes`: see
    `_file_size_limit`); every one started is stopped after the test."""
    started = []

    def start(*args, file_size_limit_bytes=None):
        review = ReviewProcess(args, {**cli_env, "PYTHONUNBUFFERED": "1"}, tmp_path, file_size_limit_bytes)
        started.append(review)
        return review

    yield start
    for review in started:
        review.stop()


def history_reviews(path: Path):
    """The history's reviews table, read by DuckDB itself: (conversation_id, metric, reviewer, value, judge_shown)."""
    import duckdb

    with duckdb.connect(str(path), read_only=True) as connection:
        return connection.execute(
            "SELECT conversation_id, metric, reviewer, value, judge_shown FROM reviews ORDER BY answered_at"
        ).fetchall()
