"""Benchmark 17: the nightly run against a real platform, per 1,000 conversations on the stand-in.

For each platform (Phoenix, MLflow; their servers from the `platforms` extra, as tests/platforms
starts them, SQLite in a temporary folder): N sessions of T turns chatted into it through its own
instrumentation (tests/platforms/fill.py) with the scripted judge in a process of its own as the
application's model; then, each a real `flowrate` process, `-j 50`, a response cache of its own:

1. `flowrate eval URL -o plain.jsonl`: read and judge, nothing written back;
2. `flowrate eval URL --write-back --history h.duckdb`: the nightly line's first night;
3. the same again: the second night, nothing new (every session in the history).

It prints each run's wall time, the judge's tokens and their price as `gpt-4o-mini` (LiteLLM's cost
map: the scripted judge counts the tokens, `--model gpt-4o-mini` prices them), scaled to 1,000
conversations, and the write-back's own time (run 2 less run 1).

python bench/platforms.py [--conversations 200] [--turns 3] [--platform phoenix mlflow]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, judge_process

sys.path.insert(0, str(ROOT))
from tests.platforms import servers  # noqa: E402

FLOWRATE = Path(sys.executable).parent / "flowrate"


def run(command, folder, judge_url):
    env = {key: value for key, value in os.environ.items() if not key.startswith("FLOWRATE_")}
    env.update(OPENAI_API_KEY="sk-bench", FLOWRATE_CACHE_DIR=str(folder / f"cache-{time.monotonic_ns()}"))
    started = time.perf_counter()
    done = subprocess.run(
        [
            str(FLOWRATE),
            "eval",
            *command,
            "--api-base",
            judge_url,
            "--model",
            "gpt-4o-mini",
            "-j",
            "50",
            "--allow-empty",
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
    )
    wall_s = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"flowrate exited {done.returncode}: {done.stderr[-2000:]}")
    return wall_s, done.stderr


def totals(path):
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    tokens = sum(row["usage"]["prompt_tokens"] + row["usage"]["completion_tokens"] for row in rows)
    return len(rows), tokens, sum(row.get("cost_usd") or 0.0 for row in rows)


def bench(name, conversations, turns, judge_url):
    with tempfile.TemporaryDirectory(prefix=f"flowrate-bench-{name}-") as scratch:
        folder = Path(scratch)
        platform = servers.Platform(name, folder).start()
        try:
            sessions = {
                f"b-{n}": [f"Question {t} of session {n} about my card" for t in range(turns)]
                for n in range(conversations)
            }
            started = time.perf_counter()
            place = platform.fill("nightly", judge_url, sessions).strip() or "nightly"
            fill_s = time.perf_counter() - started
            url = f"{name}+{platform.url}?{'project' if name == 'phoenix' else 'experiment'}={place}"
            plain_s, _ = run([url, "-o", "plain.jsonl"], folder, judge_url)
            rows, tokens, cost = totals(folder / "plain.jsonl")
            first_s, said = run([url, "-o", "out.jsonl", "--write-back", "--history", "h.duckdb"], folder, judge_url)
            second_s, _ = run([url, "-o", "second.jsonl", "--write-back", "--history", "h.duckdb"], folder, judge_url)
        finally:
            platform.kill()
    per = 1000 / conversations
    written = [line for line in said.splitlines() if "--write-back:" in line]
    print(f"{name}: {conversations} sessions of {turns} turns filled in {fill_s:.1f} s; {rows} rows")
    print(f"  read + judge, no write-back: {plain_s:.2f} s  ({plain_s * per:.1f} s per 1,000)")
    print(f"  first night (--write-back --history): {first_s:.2f} s  ({first_s * per:.1f} s per 1,000); {written}")
    print(f"  write-back's own time: {first_s - plain_s:.2f} s  ({(first_s - plain_s) * per:.1f} s per 1,000)")
    print(f"  second night, nothing new: {second_s:.2f} s")
    print(
        f"  judge tokens {tokens * per:,.0f} per 1,000 conversations, ${cost * per:.4f} per 1,000 at gpt-4o-mini prices"
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", type=int, default=200)  # 3,000 traces took MLflow past 5 min to take in
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--platform", nargs="+", default=["phoenix", "mlflow"], choices=["phoenix", "mlflow"])
    options = parser.parse_args()
    if not servers.installed():
        raise SystemExit(servers.MISSING)
    with judge_process() as judge_url:
        for name in options.platform:
            bench(name, options.conversations, options.turns, judge_url)


if __name__ == "__main__":
    main()
