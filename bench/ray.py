"""Benchmark 13: `flowrate eval --engine ray` against `flowrate eval` on one machine.

Each run is a real `flowrate` process against the scripted judge (a process of its own), with
no cache: `flowrate eval` (the local engine, -j J); `--engine ray` joining a Ray cluster started
beforehand (so its wall time is the engine's: the dataset's actors started, the requests sent,
the rows back); and `--engine ray` with no address, starting a local cluster for the run, as a
first try on a laptop does. Prints wall times, throughput and Ray's overhead over the local run.
Needs the ray extra (`pip install -e '.[test,ray]'`).

python bench/ray.py [--n 1000] [--latency 0.2] [-j 50]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, judge_process, write_conversations

FLOWRATE = str(Path(sys.executable).parent / "flowrate")
CLUSTER = """
import sys, ray
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
print(ray.get_runtime_context().gcs_address, flush=True)
sys.stdin.read()  # until the benchmark closes it
ray.shutdown()
"""


def timed_eval(path: Path, base_url: str, output: Path, *extra: str) -> float:
    """Wall time of one `flowrate eval` process, from its start to its exit; checks every row came."""
    env = dict(os.environ, FLOWRATE_CACHE_DIR=str(output.parent / "cache"), OPENAI_API_KEY="sk-bench-not-a-real-key")
    env["RAY_AUTH_MODE"] = "token"  # the cluster ray.init starts asks its clients for ~/.ray/auth_token
    args = [FLOWRATE, "eval", str(path), "--api-base", base_url, "--model", "gpt-4o", "-o", str(output), "--no-cache"]
    started = time.perf_counter()
    done = subprocess.run([*args, *extra], env=env, cwd=ROOT, capture_output=True, text=True)
    took = time.perf_counter() - started
    if not output.exists():
        raise SystemExit(f"run failed ({done.returncode}): {done.stderr[-3000:]}")
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    if done.returncode != 0 or len({row["id"] for row in rows}) != len(path.read_text().splitlines()):
        raise SystemExit(f"run failed ({done.returncode}): {done.stderr[-2000:]}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("-j", type=int, default=50)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch, judge_process(options.latency) as base_url:
        scratch = Path(scratch)
        path = write_conversations(scratch / "conversations.jsonl", options.n)
        started = time.perf_counter()
        cluster = subprocess.Popen(
            [sys.executable, "-c", CLUSTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        address = cluster.stdout.readline().strip()
        cluster_start = time.perf_counter() - started
        try:
            local = timed_eval(path, base_url, scratch / "local.jsonl", "-j", str(options.j))
            joined = timed_eval(
                path, base_url, scratch / "ray.jsonl", "-j", str(options.j), "--engine", "ray", "--ray-address", address
            )
        finally:
            cluster.stdin.close()
            cluster.wait(60)
        own = timed_eval(path, base_url, scratch / "ray-own.jsonl", "-j", str(options.j), "--engine", "ray")
    n = options.n
    print(f"N={n} judge latency={options.latency}s, one 2-core machine, every run a real process, no cache")
    print(f"  flowrate eval -j {options.j}:            {local:7.2f}s  {n / local:7.1f} conversations/s")
    print(f"  --engine ray -j {options.j}, cluster up:   {joined:7.2f}s  {n / joined:7.1f} conversations/s")
    print(f"  --engine ray -j {options.j}, its own:        {own:7.2f}s  {n / own:7.1f} conversations/s")
    print(f"  starting a 2-CPU local cluster: {cluster_start:.2f}s")
    print(
        f"  Ray's overhead over flowrate eval: {joined - local:+.2f}s joined, {own - local:+.2f}s with its own cluster"
    )
    print(f"  ratio ray / local: {joined / local:.2f} x joined, {own / local:.2f} x with its own cluster")


if __name__ == "__main__":
    main()
