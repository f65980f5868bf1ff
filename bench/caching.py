"""Benchmark: what prompt caching saves, judge by judge. `flowrate eval` judges the USS dialogues
(../shared/data/dialogue-ratings/uss_*.jsonl, as bench/common.py reads them) with each judge
against the stand-in for its provider's API (tests/provider_stand_ins.py: each caches a prefix it
has seen by its provider's documented rule, and counts a token per 4 characters), and prints per
judge: the input tokens, the share read from the cache, and the run's cost as flowrate priced it
(cached input at LiteLLM's cached price, cache writes at its cache-write price) beside the same
tokens priced with nothing cached (all input at the input price). docs/judges.md holds the table.

Then gpt-5-mini once per `--reasoning-effort`: the reasoning tokens the stand-in charged (its
rule: tests/provider_stand_ins.py REASONING_TOKENS) and the run's cost.

python bench/caching.py [--count 1000] [--data DIR] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import ROOT, add_data_argument, write_realistic  # noqa: E402
from tests.judge_server import JudgeServer  # noqa: E402

AWS = {"AWS_ACCESS_KEY_ID": "AKIABENCH000000", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_REGION_NAME": "us-east-1"}


def judges(port: int) -> list[tuple[str, str, list[str], dict[str, str]]]:
    """(shown name, profile of the OpenAI route, extra flowrate arguments, environment) per judge."""
    base = f"http://127.0.0.1:{port}"
    return [
        ("gpt-4o", "openai-api", ["--model", "gpt-4o"], {"OPENAI_BASE_URL": f"{base}/v1"}),
        ("gpt-5-mini", "openai-api", ["--model", "gpt-5-mini"], {"OPENAI_BASE_URL": f"{base}/v1"}),
        (
            "anthropic/claude-sonnet-4-5",
            "openai",
            ["--model", "anthropic/claude-sonnet-4-5", "--api-base", base],
            {"ANTHROPIC_API_KEY": "sk-ant-bench"},
        ),
        (
            "gemini/gemini-2.5-flash",
            "openai",
            ["--model", "gemini/gemini-2.5-flash", "--api-base", f"{base}/v1beta"],
            {"GEMINI_API_KEY": "bench"},
        ),
        (
            "bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0",
            "openai",
            ["--model", "bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0"],
            {**AWS, "AWS_BEDROCK_RUNTIME_ENDPOINT": base},
        ),
    ]


def uncached_usd(model: str, rows: list[dict]) -> float | None:
    """The rows' tokens priced with nothing cached: all input at LiteLLM's input price."""
    import litellm

    try:
        facts = litellm.get_model_info(model)
    except Exception:
        return None
    prompt = sum(row["usage"]["prompt_tokens"] for row in rows)
    completion = sum(row["usage"]["completion_tokens"] for row in rows)
    if not facts.get("input_cost_per_token"):
        return None
    return prompt * facts["input_cost_per_token"] + completion * facts["output_cost_per_token"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000, help="USS dialogues judged by each judge")
    parser.add_argument("--concurrency", type=int, default=16)
    add_data_argument(parser)
    options = parser.parse_args()
    server = JudgeServer(keep_bodies=False).start()
    flowrate = Path(sys.executable).parent / "flowrate"
    print(f"{options.count} USS dialogues, -j {options.concurrency}, the stand-ins of tests/provider_stand_ins.py")
    print("judge | input tokens | of them cached | cost, cached | cost, nothing cached | cached / uncached | wall s")
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        dialogues = write_realistic(work / "uss.jsonl", options.count, options.data)

        def judged(shown: str, profile: str, arguments: list[str], extra: dict[str, str]) -> tuple[list[dict], float]:
            server.reset()
            server.behave_as(profile)
            output = work / f"{shown.replace('/', '_')}.jsonl"
            output.unlink(missing_ok=True)
            env = {key: value for key, value in os.environ.items() if not key.startswith("FLOWRATE_")}
            env.update(
                OPENAI_API_KEY="sk-bench", FLOWRATE_CACHE_DIR=str(work / "cache"), LITELLM_LOCAL_MODEL_COST_MAP="True"
            )
            env.update(extra)
            started = time.monotonic()
            command = [str(flowrate), "eval", str(dialogues), *arguments, "-o", str(output), "--no-cache"]
            command += ["-j", str(options.concurrency)]
            done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
            wall_s = time.monotonic() - started
            rows = [json.loads(line) for line in output.read_text().splitlines()] if output.exists() else []
            if done.returncode not in (0, 3) or len(rows) != options.count:
                print(f"{shown}: exit {done.returncode}, {len(rows)} rows\n{done.stderr[-2000:]}")
                return [], wall_s
            return rows, wall_s

        for shown, profile, arguments, extra in judges(server.port):
            rows, wall_s = judged(shown, profile, arguments, extra)
            if not rows:
                continue
            prompt = sum(row["usage"]["prompt_tokens"] for row in rows)
            cached = sum(row["usage"]["cached_tokens"] for row in rows)
            costs = [row["cost_usd"] for row in rows]
            cost = None if any(value is None for value in costs) else sum(costs)
            plain = uncached_usd(shown, rows)
            ratio = f"{cost / plain:.2f}" if cost is not None and plain else "n/a"
            shown_cost = f"${cost:.2f}" if cost is not None else "unknown"
            shown_plain = f"${plain:.2f}" if plain is not None else "unknown"
            print(
                f"{shown} | {prompt:,} | {cached:,} ({cached / prompt:.0%}) | {shown_cost} | {shown_plain} | {ratio} | {wall_s:.0f}"
            )
        print("\ngpt-5-mini --reasoning-effort | reasoning tokens | completion tokens | cost")
        gpt5 = judges(server.port)[1]
        for effort in ("minimal", "low", "medium", "high"):
            rows, _ = judged(f"gpt-5-mini-{effort}", gpt5[1], gpt5[2], {**gpt5[3], "FLOWRATE_REASONING_EFFORT": effort})
            reasoning = sum(row["usage"]["reasoning_tokens"] for row in rows)
            completion = sum(row["usage"]["completion_tokens"] for row in rows)
            print(f"{effort} | {reasoning:,} | {completion:,} | ${sum(row['cost_usd'] for row in rows):.2f}")
    server.stop()


if __name__ == "__main__":
    main()
