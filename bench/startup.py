"""Benchmark 4: start-up, on realistic records. `flowrate --help` and `flowrate validate` must not
import LiteLLM (3-4 s here), nor must `flowrate eval` on the direct transport. Measured, each the
median of `--repeat` alternating runs, against a minimal two-command Typer app in the same venv:
`--help` (target 1.5 x) and `validate` of one USS-SGD dialogue (target 1.8 x); then the time from
process start to the first judge request of `flowrate eval` over 2,000 USS dialogues (SGD's, then MultiWOZ's)
(validation of all 2,000 included), against a raw aiohttp loop started the same way that sends
the same bodies, read ready-made from a file (target: at most 0.8 s on the direct transport).
`flowrate eval` must not wait on the network at start-up: LiteLLM's price list is read locally
(LITELLM_LOCAL_MODEL_COST_MAP), so the time to the first judge request is the imports alone.

The dialogues are read from `--data` (../shared/data/dialogue-ratings beside the repository).

python bench/startup.py [--repeat 5] [--data DIR] [--no-litellm]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, add_data_argument, judge_process, rendered_messages, request_bodies, write_realistic

FLOWRATE = str(Path(sys.executable).with_name("flowrate"))
PYTHON = sys.executable


def seconds_of(arguments: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(arguments, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def imports_litellm(arguments: list[str]) -> bool:
    traced = subprocess.run([PYTHON, "-X", "importtime", "-m", "flowrate", *arguments], capture_output=True, text=True)
    return any(line.rstrip().endswith("| litellm") for line in traced.stderr.splitlines())


MINIMAL_APP = """
import typer
app = typer.Typer(add_completion=False)
@app.command()
def first(path: str): pass
@app.command()
def second(): pass
app()
"""

# The raw loop as a process of its own: aiohttp and orjson imported, the bodies read, one POST
# each under a semaphore of 50 over one session; nothing validated, nothing rendered.
RAW_LOOP = """
import asyncio, os, sys
import aiohttp, orjson
async def main(bodies_path, url):
    bodies = open(bodies_path, "rb").read().splitlines()
    headers = {"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"}
    semaphore = asyncio.Semaphore(50)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as client:
        async def one(body):
            async with semaphore, client.post(url, data=body, headers=headers) as answer:
                return orjson.loads(await answer.read())["choices"][0]["message"]["content"]
        await asyncio.gather(*(one(body) for body in bodies))
asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def first_request_s(command: list[str], env: dict[str, str]) -> float:
    """Seconds from starting `command` (its judge: the scripted one, at `{base_url}` in the
    command) to its first request at that judge (in this process, its clock shared); the run is
    stopped there."""
    from tests.judge_server import JudgeServer

    judge = JudgeServer(keep_bodies=False).start()
    try:
        started = time.monotonic()
        process = subprocess.Popen(
            [part.replace("{base_url}", judge.base_url) for part in command],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        while not judge.arrivals and process.poll() is None:
            time.sleep(0.002)
        first = judge.arrivals[0][0] - started if judge.arrivals else float("nan")
        process.kill()
        process.wait()
        return first
    finally:
        judge.stop()


def against_typer(options, scratch: Path) -> None:
    minimal = scratch / "minimal.py"
    minimal.write_text(MINIMAL_APP)
    one = write_realistic(scratch / "one.jsonl", 1, options.data)
    for label, arguments, baseline, target in (
        ("flowrate --help", ["--help"], ["--help"], 1.5),
        ("flowrate validate (one USS-SGD dialogue)", ["validate", str(one)], ["first", str(one)], 1.8),
    ):
        ours, floor = [], []
        for _ in range(options.repeat):
            ours.append(seconds_of([FLOWRATE, *arguments]))
            floor.append(seconds_of([PYTHON, str(minimal), *baseline]))
        ratios = [a / b for a, b in zip(ours, floor)]
        print(
            f"{label}: {statistics.median(ours):.3f} s, minimal Typer app {statistics.median(floor):.3f} s:"
            f" {statistics.median(ratios):.2f} x median (runs: {', '.join(f'{r:.2f}' for r in ratios)};"
            f" target {target} x), imports litellm: {imports_litellm(arguments)}"
        )


def litellm_whole_process(options, scratch: Path) -> None:
    with judge_process(0.0) as base_url:
        path = write_realistic(scratch / "one.jsonl", 1, options.data)
        env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}  # flowrate sets it
        env["FLOWRATE_CACHE_DIR"] = str(scratch / "cache")
        command = [FLOWRATE, "eval", str(path), "--api-base", base_url, "--transport", "litellm"]
        seconds = statistics.median(
            seconds_of([*command, "-o", str(scratch / "o.jsonl")]) for _ in range(options.repeat)
        )
        importing = statistics.median(
            seconds_of([PYTHON, "-c", "import os; os.environ['LITELLM_LOCAL_MODEL_COST_MAP']='True'; import litellm"])
            for _ in range(options.repeat)
        )
    print(
        f"flowrate eval of one conversation through LiteLLM, whole process: {seconds:.2f} s; `import litellm` alone:"
        f" {importing:.2f} s; beyond the import: {seconds - importing:.2f} s (no network wait: the price list is local)"
    )


def first_requests(options, scratch: Path) -> None:
    path = write_realistic(scratch / "c2000.jsonl", 2000, options.data)
    bodies = request_bodies(rendered_messages(path), scratch / "bodies.jsonl")
    raw = scratch / "raw_loop.py"
    raw.write_text(RAW_LOOP)
    transports = ["auto"] + (["litellm"] if options.litellm else [])
    times: dict[str, list[float]] = {"raw aiohttp loop": [], **{transport: [] for transport in transports}}
    for round_ in range(options.repeat):
        times["raw aiohttp loop"].append(
            first_request_s([PYTHON, str(raw), str(bodies), "{base_url}/chat/completions"], dict(os.environ))
        )
        for transport in transports:
            env = dict(os.environ, FLOWRATE_CACHE_DIR=str(scratch / f"cache-{transport}-{round_}"))
            command = [FLOWRATE, "eval", str(path), "--api-base", "{base_url}", "--transport", transport]
            times[transport].append(first_request_s([*command, "-o", str(scratch / "first.jsonl")], env))
    raw_s = times["raw aiohttp loop"]
    print(f"first request after process start, 2,000 USS dialogues, median of {options.repeat} alternating runs:")
    print(f"  raw aiohttp loop (the bodies ready-made): {statistics.median(raw_s):.3f} s (runs: {_runs(raw_s)})")
    for transport in transports:
        name = "direct" if transport == "auto" else transport
        taken = times[transport]
        arguments = ["eval", str(path), "--api-base", "http://127.0.0.1:9/v1", "--transport", transport, "--dry-run"]
        print(
            f"  flowrate eval, {name} transport: {statistics.median(taken):.3f} s (runs: {_runs(taken)})"
            f"{' target <= 0.8 s' if transport == 'auto' else ''}; minus the raw loop's, median"
            f" {statistics.median(a - b for a, b in zip(taken, raw_s)):+.3f} s; imports litellm: {imports_litellm(arguments)}"
        )


def _runs(taken: list[float]) -> str:
    return ", ".join(f"{t:.3f}" for t in taken)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-litellm", dest="litellm", action="store_false", help="LiteLLM's runs left out")
    add_data_argument(parser)
    options = parser.parse_args()
    # flowrate's bytecode written first, as `pip install` of a wheel does: an editable install
    # under PYTHONDONTWRITEBYTECODE=1 would compile every module from source on every start
    # (0.25 s of CPU more before the first request, measured)
    subprocess.run([PYTHON, "-m", "compileall", "-q", str(ROOT / "flowrate")], check=True)
    with tempfile.TemporaryDirectory() as scratch:
        against_typer(options, Path(scratch))
        if options.litellm:
            litellm_whole_process(options, Path(scratch))
        first_requests(options, Path(scratch))


if __name__ == "__main__":
    main()
