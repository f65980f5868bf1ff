"""Benchmark 1: flowrate's wall time over a bare LiteLLM loop's, same judge, same settings.

python bench/throughput.py [--n 2000] [--latency 0.5] [-j 50]
"""

import argparse
import asyncio
import math
import tempfile
from pathlib import Path

from common import bare_litellm_loop, flowrate_run, judge_process, rendered_messages, write_conversations


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("-j", type=int, default=50)
    options = parser.parse_args()
    ideal = math.ceil(options.n / options.j) * options.latency
    with tempfile.TemporaryDirectory() as scratch, judge_process(options.latency) as base_url:
        scratch = Path(scratch)
        path = write_conversations(scratch / "conversations.jsonl", options.n)
        messages = rendered_messages(path)
        asyncio.run(bare_litellm_loop(messages[: options.j], base_url, options.j))  # warm-up: imports, connections
        bare = asyncio.run(bare_litellm_loop(messages, base_url, options.j))
        ours, summary = asyncio.run(flowrate_run(path, base_url, options.j, scratch / "cache", scratch / "out.jsonl"))
    assert summary.judged == options.n, summary
    print(f"N={options.n} latency={options.latency}s j={options.j} ideal=ceil(N/j)*latency={ideal:.1f}s")
    print(f"bare LiteLLM loop: {bare:.2f}s  ({bare / ideal:.3f} x ideal)")
    print(f"flowrate:          {ours:.2f}s  ({ours / ideal:.3f} x ideal)")
    print(f"flowrate / bare LiteLLM loop = {ours / bare:.3f}  (target <= 1.05)")


if __name__ == "__main__":
    main()
