"""Benchmark 2: client CPU per 1000 conversations, flowrate's own share separated from LiteLLM's.

The judge answers at once (latency 0) from a process of its own, so this process's CPU
time is the client's alone. Both loops run with LiteLLM's long-lived objects frozen out of
the garbage collector, as `flowrate eval` runs. The bare LiteLLM loop sends the same prompts with the same
settings; what flowrate spends beyond it is flowrate's own share (reading and validating
input, prompts, retries, gates, cache, rows).

python bench/client_cpu.py [--n 2000] [-j 50]
"""

import argparse
import asyncio
import gc
import tempfile
import time
from pathlib import Path

from common import bare_litellm_loop, flowrate_run, judge_process, rendered_messages, write_conversations


def cpu_seconds(work) -> tuple[float, object]:
    started = time.process_time()
    result = work()
    return time.process_time() - started, result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("-j", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2, help="alternating runs of each; the lowest counts")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch, judge_process(0.0) as base_url:
        scratch = Path(scratch)
        path = write_conversations(scratch / "conversations.jsonl", options.n)
        messages = rendered_messages(path)
        asyncio.run(bare_litellm_loop(messages[: options.j], base_url, options.j))  # warm-up
        bare, ours = [], []
        for round_ in range(options.rounds):
            gc.freeze()  # as `flowrate eval` does for itself: the difference is then flowrate's own work
            bare.append(cpu_seconds(lambda: asyncio.run(bare_litellm_loop(messages, base_url, options.j)))[0])
            gc.unfreeze()
            spent, (_, summary) = cpu_seconds(
                lambda cache=scratch / f"cache{round_}": asyncio.run(
                    flowrate_run(path, base_url, options.j, cache, scratch / "out.jsonl")
                )
            )
            assert summary.judged == options.n, summary
            ours.append(spent)
    per_thousand = 1000 / options.n
    litellm_ms, flowrate_ms = min(bare) / options.n * 1000, min(ours) / options.n * 1000
    print(f"N={options.n} j={options.j} latency=0, lowest of {options.rounds} alternating rounds")
    print(f"bare LiteLLM loop: {min(bare) * per_thousand:.2f} CPU s per 1000 conversations ({litellm_ms:.2f} ms each)")
    print(f"flowrate:          {min(ours) * per_thousand:.2f} CPU s per 1000 conversations ({flowrate_ms:.2f} ms each)")
    print(f"flowrate's own share: {flowrate_ms - litellm_ms:.2f} ms per conversation (target < 1 ms)")
    print(f"flowrate / bare LiteLLM loop CPU = {min(ours) / min(bare):.3f}")


if __name__ == "__main__":
    main()
