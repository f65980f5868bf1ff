"""Benchmark 10: the direct transport against a raw aiohttp loop, and against LiteLLM.

In one run, alternating: wall time at N=1000 with 500 ms latency and N=2000 with 200 ms, -j 50,
for a raw aiohttp loop, flowrate over the direct transport and flowrate over LiteLLM, on the
same prompts and the same scripted judge (a process of its own); then client CPU per call at
latency 0, the lowest of the rounds.

python bench/direct.py [--rounds 2]
"""

import argparse
import asyncio
import gc
import math
import tempfile
import time
from pathlib import Path

from common import (
    bare_litellm_loop,
    flowrate_run,
    judge_process,
    raw_aiohttp_loop,
    rendered_messages,
    write_conversations,
)

J = 50
CASES = [(1000, 0.5), (2000, 0.2)]


def wall(options, scratch: Path) -> None:
    for n, latency in CASES:
        ideal = math.ceil(n / J) * latency
        path = write_conversations(scratch / f"w{n}.jsonl", n)
        messages = rendered_messages(path)
        times = {"raw aiohttp loop": [], "flowrate, direct": [], "flowrate, litellm": []}
        with judge_process(latency) as base_url:
            asyncio.run(raw_aiohttp_loop(messages[:J], base_url, J))  # warm-up: imports, connections
            asyncio.run(bare_litellm_loop(messages[:J], base_url, J))
            for round_ in range(options.rounds):
                times["raw aiohttp loop"].append(asyncio.run(raw_aiohttp_loop(messages, base_url, J)))
                for transport, name in (("auto", "flowrate, direct"), ("litellm", "flowrate, litellm")):
                    took, summary = asyncio.run(
                        flowrate_run(
                            path, base_url, J, scratch / f"c-{n}-{transport}-{round_}", scratch / "o.jsonl", transport
                        )
                    )
                    assert summary.judged == n, summary
                    times[name].append(took)
        print(f"N={n} latency={latency}s j={J} ideal={ideal:.1f}s, best of {options.rounds} alternating rounds")
        for name, taken in times.items():
            print(f"  {name:18} {min(taken):7.2f}s  {min(taken) / ideal:.3f} x ideal")
        ratio = min(times["flowrate, direct"]) / min(times["raw aiohttp loop"])
        print(f"  flowrate direct / raw aiohttp loop = {ratio:.3f}  (target <= 1.15)")


def cpu(options, scratch: Path) -> None:
    n = 2000
    path = write_conversations(scratch / "cpu.jsonl", n)
    messages = rendered_messages(path)
    spent = {"raw aiohttp loop": [], "flowrate, direct": [], "bare LiteLLM loop": [], "flowrate, litellm": []}

    def measure(name, work):
        started = time.process_time()
        work()
        spent[name].append(time.process_time() - started)

    with judge_process(0.0) as base_url:
        asyncio.run(raw_aiohttp_loop(messages[:J], base_url, J))
        asyncio.run(bare_litellm_loop(messages[:J], base_url, J))
        for round_ in range(options.rounds):
            gc.freeze()
            measure("raw aiohttp loop", lambda: asyncio.run(raw_aiohttp_loop(messages, base_url, J)))
            measure("bare LiteLLM loop", lambda: asyncio.run(bare_litellm_loop(messages, base_url, J)))
            gc.unfreeze()
            for transport, name in (("auto", "flowrate, direct"), ("litellm", "flowrate, litellm")):
                cache = scratch / f"cpu-{transport}-{round_}"
                measure(
                    name,
                    lambda cache=cache, transport=transport: asyncio.run(
                        flowrate_run(path, base_url, J, cache, scratch / "o.jsonl", transport)
                    ),
                )
    print(f"client CPU per call, N={n} j={J} latency 0, lowest of {options.rounds} alternating rounds")
    for name, taken in spent.items():
        print(f"  {name:18} {min(taken) / n * 1000:6.2f} ms  (target for flowrate, direct: <= 1 ms)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        wall(options, Path(scratch))
        cpu(options, Path(scratch))


if __name__ == "__main__":
    main()
