"""Benchmark 4: start-up. `flowrate --help` and `flowrate validate` must not import LiteLLM
(3-4 s here), nor must `flowrate eval` on the direct transport: its time from process start to
the first judge request, validation of 2,000 conversations included, is measured for both
transports (target: at most 1.0 s on the direct one). Targets, against a minimal two-command Typer app in the same venv: `--help`
within 1.5x, `validate` of a one-line file within 1.8x. `flowrate eval` must not wait on the network at start-up:
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

from common import judge_process, write_conversations

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


MINIMAL_APP = """
import typer
app = typer.Typer(add_completion=False)
@app.command()
def first(path: str): pass
@app.command()
def second(): pass
app()
"""


def first_request_s(path: Path, transport: str, scratch: Path) -> float:
    """Seconds from starting `flowrate eval PATH` to its first request at the scripted judge (in
    this process, its clock shared); the run is stopped there."""
    from tests.judge_server import JudgeServer

    judge = JudgeServer(keep_bodies=False).start()
    try:
        env = dict(os.environ, FLOWRATE_CACHE_DIR=str(scratch / f"cache-{transport}-{time.time()}"))
        started = time.monotonic()
        process = subprocess.Popen(
            [FLOWRATE, "eval", str(path), "--api-base", judge.base_url, "--transport", transport,
             "-o", str(scratch / "first.jsonl")],
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        minimal = Path(scratch) / "minimal.py"
        minimal.write_text(MINIMAL_APP)
        one = write_conversations(Path(scratch) / "one.jsonl", 1)
        for label, arguments, baseline, target in (
            ("flowrate --help", ["--help"], ["--help"], 1.5),
            ("flowrate validate one.jsonl", ["validate", str(one)], ["first", str(one)], 1.8),
        ):
            seconds = best_of(options.repeat, [FLOWRATE, *arguments])
            floor = best_of(options.repeat, [PYTHON, str(minimal), *baseline])
            print(
                f"{label}: {seconds:.3f} s, minimal Typer app {floor:.3f} s: {seconds / floor:.2f} x"
                f" (target {target} x), imports litellm: {imports_litellm(arguments)}"
            )
    with tempfile.TemporaryDirectory() as scratch, judge_process(0.0) as base_url:
        path = write_conversations(Path(scratch) / "one.jsonl", 1)
        env = {
            k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"
        }  # flowrate must set it itself
        env["FLOWRATE_CACHE_DIR"] = str(Path(scratch) / "cache")
        seconds = best_of(
            options.repeat,
            [
                FLOWRATE,
                "eval",
                str(path),
                "--api-base",
                base_url,
                "--transport",
                "litellm",
                "-o",
                str(Path(scratch) / "o.jsonl"),
            ],
        )
        importing = best_of(
            options.repeat,
            [PYTHON, "-c", "import os; os.environ['LITELLM_LOCAL_MODEL_COST_MAP']='True'; import litellm"],
        )
    print(
        f"flowrate eval of one conversation through LiteLLM, whole process: {seconds:.2f} s; `import litellm` alone:"
        f" {importing:.2f} s"
    )
    print(
        f"eval start-up beyond LiteLLM's import: {seconds - importing:.2f} s (no network wait: the price list is local)"
    )
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        path = write_conversations(scratch / "c2000.jsonl", 2000)
        for transport in ("auto", "litellm"):
            first = min(first_request_s(path, transport, scratch) for _ in range(options.repeat))
            arguments = [
                "eval",
                str(path),
                "--api-base",
                "http://127.0.0.1:9/v1",
                "--transport",
                transport,
                "--dry-run",
            ]
            name = "direct" if transport == "auto" else transport
            print(
                f"flowrate eval of 2,000 conversations, {name} transport: first request {first:.3f} s after start"
                f"{' (target <= 1.0 s)' if transport == 'auto' else ''}, imports litellm: {imports_litellm(arguments)}"
            )


if __name__ == "__main__":
    main()
