"""Benchmark 3: peak RSS of `flowrate eval` judging 2,000 and 50,000 conversations at latency 0.

Each run is a real `flowrate` process; its peak RSS comes from the kernel (wait4).
Target: the larger run uses at most 30 MB more than the smaller.

python bench/memory.py [--small 2000] [--large 50000] [-j 50]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import judge_process, write_conversations

FLOWRATE = str(Path(sys.executable).with_name("flowrate"))


def peak_rss_mb(arguments: list[str], env: dict) -> tuple[float, float, int]:
    started = time.perf_counter()
    process = subprocess.Popen([FLOWRATE, *arguments], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    return usage.ru_maxrss / 1024, time.perf_counter() - started, os.waitstatus_to_exitcode(status)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--small", type=int, default=2000)
    parser.add_argument("--large", type=int, default=50000)
    parser.add_argument("-j", type=int, default=50)
    options = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as scratch, judge_process(0.0) as base_url:
        scratch = Path(scratch)
        env = dict(os.environ, FLOWRATE_CACHE_DIR=str(scratch / "cache"))
        for count in (options.small, options.large):
            path = write_conversations(scratch / f"c{count}.jsonl", count)
            output = scratch / f"out{count}.jsonl"
            rss, seconds, code = peak_rss_mb(
                ["eval", str(path), "--api-base", base_url, "-j", str(options.j), "-o", str(output)], env
            )
            rows = sum(1 for _ in output.open())
            assert code == 0 and rows == count, (code, rows)
            results[count] = rss
            print(f"{count:>6} conversations: peak RSS {rss:.1f} MB, {seconds:.1f} s, {rows} rows")
    growth = results[options.large] - results[options.small]
    print(f"growth from {options.small} to {options.large}: {growth:+.1f} MB (target <= 30 MB)")


if __name__ == "__main__":
    main()
