"""Benchmark 5: faults. 1000 conversations against a judge that answers 10% of requests with
429 (Retry-After 1 s), 5% with 500, 5% with a malformed reply, and hangs on 0.3%. Every
conversation must end with a verdict or an error row, exactly once, within the retry budget.

python bench/faults.py [--n 1000] [-j 50] [--timeout 5] [--max-retries 5]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from common import judge_process, write_conversations

FLOWRATE = str(Path(sys.executable).with_name("flowrate"))
FAULTS = "rate_limit=0.10,server_error=0.05,malformed=0.05,hang=0.003"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("-j", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--max-retries", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.05)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch, judge_process(options.latency, FAULTS) as base_url:
        scratch = Path(scratch)
        path = write_conversations(scratch / "c.jsonl", options.n)
        output = scratch / "out.jsonl"
        env = dict(os.environ, FLOWRATE_CACHE_DIR=str(scratch / "cache"))
        started = time.perf_counter()
        finished = subprocess.run(
            [
                FLOWRATE,
                "eval",
                str(path),
                "--api-base",
                base_url,
                "-j",
                str(options.j),
                "--timeout",
                str(options.timeout),
                "--max-retries",
                str(options.max_retries),
                "-o",
                str(output),
            ],
            env=env,
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - started
        rows = [json.loads(line) for line in output.open()]
    ids = Counter(row["id"] for row in rows)
    expected = {f"bench-{n}" for n in range(options.n)}
    outcome = Counter(row["error"]["type"] if row["error"] else "verdict" for row in rows)
    attempts = Counter(row["attempts"] for row in rows)
    # the worst one conversation can take: every attempt times out, with the longest waits between,
    # twice over (its call and the corrective re-ask), and the default 60 s cap on each wait
    worst = 2 * ((options.max_retries + 1) * options.timeout + options.max_retries * 60)
    print(f"N={options.n} j={options.j} faults: {FAULTS} timeout={options.timeout}s max-retries={options.max_retries}")
    print(
        f"exit code {finished.returncode}; rows {len(rows)}; distinct ids {len(ids)}; every id once: {set(ids) == expected and max(ids.values()) == 1}"
    )
    print(f"outcomes: {dict(outcome)}; attempts per row: {dict(sorted(attempts.items()))}")
    print(
        f"wall time {wall:.1f} s; the retry budget of one conversation is at most {worst:.0f} s: within it: {wall <= worst}"
    )


if __name__ == "__main__":
    main()
