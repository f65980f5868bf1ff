"""Benchmark 10: the direct transport against a raw aiohttp loop, and against LiteLLM.

In one run, alternating: wall time at N=1000 with 500 ms latency and N=2000 with 200 ms, -j 50,
for a raw aiohttp loop, flowrate over the direct transport and flowrate over LiteLLM, on the
same prompts and the same scripted judge (a process of its own); then client CPU per call at
latency 0. The conversations are realistic and distinct: USS-SGD's 1,000 dialogues, then
USS-MultiWOZ's (12.8 and 10.6 turns, 3.9 and 4.2 KB a line, MultiWOZ's ending with an unanswered
goodbye, their labels and extras kept), read from `--data` (../shared/data/dialogue-ratings
beside the repository).
Each figure is the median of the rounds; each ratio the median of the rounds' own ratios.

python bench/direct.py [--rounds 3] [--data DIR] [--no-litellm]
"""

import argparse
import asyncio
import gc
import math
import statistics
import tempfile
import time
from pathlib import Path

from common import (
    add_data_argument,
    bare_litellm_loop,
    flowrate_run,
    judge_process,
    raw_aiohttp_loop,
    rendered_messages,
    write_realistic,
)

J = 50
CASES = [(1000, 0.5), (2000, 0.2)]


def wall(options, scratch: Path) -> None:
    for n, latency in CASES:
        ideal = math.ceil(n / J) * latency
        path = write_realistic(scratch / f"w{n}.jsonl", n, options.data)
        messages = rendered_messages(path)
        transports = (("auto", "flowrate, direct"),) + ((("litellm", "flowrate, litellm"),) if options.litellm else ())
        times = {"raw aiohttp loop": [], **{name: [] for _, name in transports}}
        with judge_process(latency) as base_url:
            asyncio.run(raw_aiohttp_loop(messages[:J], base_url, J))  # warm-up: imports, connections
            if options.litellm:
                asyncio.run(bare_litellm_loop(messages[:J], base_url, J))
            for round_ in range(options.rounds):
                times["raw aiohttp loop"].append(asyncio.run(raw_aiohttp_loop(messages, base_url, J)))
                for transport, name in transports:
                    took, summary = asyncio.run(
                        flowrate_run(
                            path, base_url, J, scratch / f"c-{n}-{transport}-{round_}", scratch / "o.jsonl", transport
                        )
                    )
                    assert summary.judged == n, summary
                    times[name].append(took)
        print(f"N={n} latency={latency}s j={J} ideal={ideal:.1f}s, median of {options.rounds} alternating rounds")
        for name, taken in times.items():
            middle = statistics.median(taken)
            print(f"  {name:18} {middle:7.2f}s  {middle / ideal:.3f} x ideal  (rounds: {_seconds(taken)})")
        ratios = [ours / raw for ours, raw in zip(times["flowrate, direct"], times["raw aiohttp loop"])]
        print(
            f"  flowrate direct / raw aiohttp loop = {statistics.median(ratios):.3f} median"
            f" (rounds: {', '.join(f'{r:.3f}' for r in ratios)}; target <= 1.10)"
        )


def _seconds(taken: list[float]) -> str:
    return ", ".join(f"{t:.2f}" for t in taken)


def cpu(options, scratch: Path) -> None:
    n = 2000
    path = write_realistic(scratch / "cpu.jsonl", n, options.data)
    messages = rendered_messages(path)
    spent = {"raw aiohttp loop": [], "flowrate, direct": [], "bare LiteLLM loop": [], "flowrate, litellm": []}

    def measure(name, work):
        started = time.process_time()
        work()
        spent[name].append(time.process_time() - started)

    with judge_process(0.0) as base_url:
        asyncio.run(raw_aiohttp_loop(messages[:J], base_url, J))
        if options.litellm:
            asyncio.run(bare_litellm_loop(messages[:J], base_url, J))
        for round_ in range(options.rounds):
            gc.freeze()
            measure("raw aiohttp loop", lambda: asyncio.run(raw_aiohttp_loop(messages, base_url, J)))
            if options.litellm:
                measure("bare LiteLLM loop", lambda: asyncio.run(bare_litellm_loop(messages, base_url, J)))
            gc.unfreeze()
            for transport, name in (("auto", "flowrate, direct"), ("litellm", "flowrate, litellm")):
                if transport == "litellm" and not options.litellm:
                    continue
                cache = scratch / f"cpu-{transport}-{round_}"
                measure(
                    name,
                    lambda cache=cache, transport=transport: asyncio.run(
                        flowrate_run(path, base_url, J, cache, scratch / "o.jsonl", transport)
                    ),
                )
    print(f"client CPU per call, N={n} j={J} latency 0, median of {options.rounds} alternating rounds")
    for name, taken in spent.items():
        if taken:
            print(f"  {name:18} {statistics.median(taken) / n * 1000:6.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-litellm", dest="litellm", action="store_false", help="flowrate over LiteLLM left out")
    parser.add_argument("--no-cpu", dest="cpu", action="store_false", help="the CPU rounds left out")
    add_data_argument(parser)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        wall(options, Path(scratch))
        if options.cpu:
            cpu(options, Path(scratch))


if __name__ == "__main__":
    main()
