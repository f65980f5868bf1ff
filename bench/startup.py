"""Benchmark 4: start-up. `flowrate --help` and `flowrate validate` must not import LiteLLM
(3-4 s here); target under 0.5 s. `flowrate eval` must not wait on the network at start-up:
LiteLLM's price list is read locally (LITELLM_LOCAL_MODEL_COST_MAP), so the time to the
first judge request is the imports alone.

python bench/startup.py [--repeat 5]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, judge_process, write_conversations

FLOWRATE = str(Path(sys.executable).with_name("flowrate"))
PYTHON = sys.executable


def best_of(repeat: int, arguments: list[str]) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(arguments, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - started)
    return min(times)


def imports_litellm(arguments: list[str]) -> bool:
    traced = subprocess.run([PYTHON, "-X", "importtime", "-m", "flowrate", *arguments], capture_output=True, text=True)
    return any(line.rstrip().endswith("| litellm") for line in traced.stderr.splitlines())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    samples = str(ROOT / "sample_conversations")
    for label, arguments in (
        ("flowrate --help", ["--help"]),
        ("flowrate validate sample_conversations/", ["validate", samples]),
    ):
        seconds = best_of(options.repeat, [FLOWRATE, *arguments])
        print(
            f"{label}: {seconds:.3f} s best of {options.repeat} ({seconds / 0.5:.2f} x the 0.5 s target), imports litellm: {imports_litellm(arguments)}"
        )
    with tempfile.TemporaryDirectory() as scratch, judge_process(0.0) as base_url:
        path = write_conversations(Path(scratch) / "one.jsonl", 1)
        env = {
            k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"
        }  # flowrate must set it itself
        env["FLOWRATE_CACHE_DIR"] = str(Path(scratch) / "cache")
        seconds = best_of(
            options.repeat, [FLOWRATE, "eval", str(path), "--api-base", base_url, "-o", str(Path(scratch) / "o.jsonl")]
        )
        importing = best_of(
            options.repeat,
            [PYTHON, "-c", "import os; os.environ['LITELLM_LOCAL_MODEL_COST_MAP']='True'; import litellm"],
        )
    print(
        f"flowrate eval of one conversation, whole process: {seconds:.2f} s; `import litellm` alone: {importing:.2f} s"
    )
    print(
        f"eval start-up beyond LiteLLM's import: {seconds - importing:.2f} s (no network wait: the price list is local)"
    )


if __name__ == "__main__":
    main()
