"""Benchmark 9: peak RSS of the `flowrate eval` process in batch mode against online mode, at
2,000 and 20,000 realistic conversations, with the default `--batch-size` and with 5000.

"Realistic" is the rated dialogues of ../shared/data/dialogue-ratings/*.jsonl (read where they
are, never copied into the repository), repeated to N in a scratch file: each copy gets an id of
its own and its first user message a copy number, so that no copy is a cache hit for another
(online, a repeat would be answered from the cache and make no call; a batch sends every one).
Without that directory, bench/common.py's synthetic support conversations stand in.

Online mode judges through the scripted judge (tests/judge_server.py), batch mode through the
fake Files and Batches endpoints (tests/batch_server.py), each in a process of its own on
127.0.0.1 and each run with a cache directory of its own. Each flowrate run is a real process;
its peak RSS comes from the kernel (wait4). Target: batch / online <= 1.3 at each N, whatever
the batch size.

python bench/batch_memory.py [--sizes 2000 20000] [-j 50] [--data DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from common import ROOT, judge_process, write_conversations

FLOWRATE = str(Path(sys.executable).with_name("flowrate"))
DATA = ROOT.parent / "shared" / "data" / "dialogue-ratings"
TARGET_RATIO = 1.3


def write_realistic(path: Path, count: int, data: Path) -> tuple[Path, str]:
    """`count` conversations from the rated dialogues in `data`, repeated with distinct ids and
    texts; bench/common.py's synthetic ones when `data` holds none. Returns the file and what
    it holds."""
    sources = sorted(data.glob("*.jsonl")) if data.is_dir() else []
    records = [json.loads(line) for source in sources for line in source.open() if line.strip()]
    if not records:
        return write_conversations(path, count), f"synthetic (no {data})"
    with path.open("w") as handle:
        for n in range(count):
            record = dict(records[n % len(records)])
            copy = n // len(records)
            turns = [dict(turn) for turn in record["turns"]]
            turns[0]["input"] = f"(copy {copy}) {turns[0]['input']}"
            handle.write(json.dumps({**record, "id": f"{record['id']}~{copy}", "turns": turns}) + "\n")
    return path, f"{len(records)} rated dialogues from {len(sources)} files in {data}, repeated"


@contextmanager
def batch_process():
    """The fake Files and Batches endpoints on 127.0.0.1, in their own process; yields the base URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.batch_server"], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        yield f"http://127.0.0.1:{int(process.stdout.readline())}/v1"
    finally:
        process.kill()
        process.wait()


def measure(command: list[str], env: dict, output: Path, count: int) -> tuple[float, float]:
    """Run one flowrate command, check it wrote one row per conversation, and return its peak
    RSS (MB) and wall time (s)."""
    started = time.perf_counter()
    process = subprocess.Popen([FLOWRATE, *command], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr = process.stderr.read()  # to its end (a full pipe would stall the run), then reaped by wait4
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    ids = [json.loads(line)["id"] for line in output.open()] if output.exists() else []
    assert code == 0 and len(ids) == len(set(ids)) == count, (command, code, len(ids), stderr.decode()[-2000:])
    return usage.ru_maxrss / 1024, seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 20_000])
    parser.add_argument("-j", type=int, default=50)
    parser.add_argument("--data", type=Path, default=DATA)
    options = parser.parse_args()
    modes = {
        "online": [],  # flowrate's default transport: its own HTTP client for an --api-base
        "online, --transport litellm": ["--transport", "litellm"],
        "batch, default --batch-size": ["--batch"],
        "batch, --batch-size 5000": ["--batch", "--batch-size", "5000"],
    }
    onlines = [mode for mode in modes if mode.startswith("online")]
    peaks: dict[tuple[int, str], float] = {}
    with tempfile.TemporaryDirectory() as scratch, judge_process(0.0) as judge_url, batch_process() as batch_url:
        scratch = Path(scratch)
        for count in options.sizes:
            path, what = write_realistic(scratch / f"c{count}.jsonl", count, options.data)
            print(f"{count} conversations: {what}; {path.stat().st_size / 1e6:.1f} MB of input", flush=True)
            for mode, extra in modes.items():
                run = scratch / f"{count}-{len(peaks)}"
                run.mkdir()
                env = {key: value for key, value in os.environ.items() if not key.startswith("FLOWRATE_")}
                env["FLOWRATE_CACHE_DIR"] = str(run / "cache")
                output = run / "out.jsonl"
                batch = "--batch" in extra
                base = batch_url if batch else judge_url
                command = ["eval", str(path), "--api-base", base, "-j", str(options.j), "-o", str(output), *extra]
                if batch:
                    command += ["--poll-interval", "1"]
                rss, seconds = measure(command, env, output, count)
                peaks[(count, mode)] = rss
                print(f"  {mode:<30} peak RSS {rss:7.1f} MB  {seconds:6.1f} s  {count} rows", flush=True)
    for online in onlines:
        print(f"\nbatch / {online} peak RSS (target <= {TARGET_RATIO}):")
        for count in options.sizes:
            for mode in [mode for mode in modes if mode not in onlines]:
                ratio = peaks[(count, mode)] / peaks[(count, online)]
                verdict = "ok" if ratio <= TARGET_RATIO else "OVER"
                print(f"  {count:>6} conversations, {mode:<28} {ratio:.2f} x  ({verdict})")


if __name__ == "__main__":
    main()
