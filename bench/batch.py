"""Benchmark 8: batch mode over 20,000 conversations against the local fake of the Files and
Batches endpoints (in a process of its own), with 1 % of the lines failing. It reports the
requests sent online (only the failed lines should be), the batches created, the peak memory
of the flowrate process and flowrate's own CPU per conversation.

python bench/batch.py [--n 20000]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, write_conversations

FLOWRATE = str(Path(sys.executable).with_name("flowrate"))
SERVE = """
import sys, threading
sys.path.insert(0, {root!r})
from tests.batch_server import BatchServer
server = BatchServer().start()
server.fail_marker = "REF-0000"  # the conversations bench-0 .. bench-99 (REF-0000xx): 0.5 % of 20,000
print(server.port, flush=True)
threading.Event().wait()
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20_000)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        path = write_conversations(Path(scratch) / "c.jsonl", options.n)
        server = subprocess.Popen(
            [sys.executable, "-c", SERVE.format(root=str(ROOT))], stdout=subprocess.PIPE, text=True
        )
        try:
            base = f"http://127.0.0.1:{int(server.stdout.readline())}/v1"
            env = dict(os.environ, FLOWRATE_CACHE_DIR=str(Path(scratch) / "cache"), LITELLM_LOCAL_MODEL_COST_MAP="True")
            env.setdefault("OPENAI_API_KEY", "sk-bench")
            output = Path(scratch) / "out.jsonl"
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            result = subprocess.run(
                [
                    FLOWRATE,
                    "eval",
                    str(path),
                    "--batch",
                    "--api-base",
                    base,
                    "--poll-interval",
                    "1",
                    "--batch-size",
                    "5000",
                    "-o",
                    str(output),
                ],
                env=env,
                capture_output=True,
                text=True,
            )
            wall = time.perf_counter() - started
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
        finally:
            server.kill()
        rows = [json.loads(line) for line in output.read_text().splitlines()]
        online = sum(not row["batch"] for row in rows)
        batches = len({row["batch_id"] for row in rows if row["batch"]})
        cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        print(
            f"exit {result.returncode}; {len(rows)} rows, {len({row['id'] for row in rows})} distinct ids; wall {wall:.1f} s"
        )
        print(f"batches created: {batches}; requests sent online: {online} (the failed lines)")
        print(f"peak RSS of the flowrate process: {after.ru_maxrss / 1024:.1f} MB")
        print(
            f"CPU of the flowrate process: {cpu:.1f} s, {cpu / options.n * 1000:.2f} ms per conversation (the LiteLLM import included)"
        )


if __name__ == "__main__":
    main()
