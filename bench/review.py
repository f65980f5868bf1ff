"""What keeping each reply's request costs the response cache, and how fast `flowrate review`
starts and stores an answer.

1. The cache: N replies put and flushed as a run writes them, with the flow rubric's real
   messages for N distinct conversations, against the same puts without the messages: time per
   entry and bytes on disk per entry.
2. The app over a results file of N rows (and its conversations): the time to import the file
   into a new history and load runs and transcripts (`server.prepare`), then the time of one
   answer (POST /api/answer through the real server on 127.0.0.1, the history opened, written
   and closed each time), median and worst of 50.

    .venv/bin/python bench/review.py [--count 20000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import write_conversations  # noqa: E402


def cache_figures(count: int, folder: Path) -> None:
    from flowrate.inputs.files import InputSet, iter_cases
    from flowrate.judge.cache import CACHE_FILE, ResponseCache
    from flowrate.rubric.model import load_rubric

    rubric = load_rubric()
    conversations = write_conversations(folder / "c.jsonl", count)
    inputs = InputSet([str(conversations)])
    cases = [record.case for record in iter_cases(inputs)]
    inputs.close()
    messages = [rubric.build_messages(case) for case in cases]
    reply = '{"reason": "Every turn addresses the user.", "key_issues": [], "verdict": "fully"}'
    for kept in (False, True):
        directory = folder / ("with" if kept else "without")
        cache = ResponseCache(directory)
        start = time.perf_counter()
        for n, case in enumerate(cases):
            if kept:
                cache.put(f"key-{n}", "gpt-4o", "v1", [reply], messages[n], case.id)
            else:
                cache.put(f"key-{n}", "gpt-4o", "v1", [reply])
        cache.close()
        elapsed = time.perf_counter() - start
        size = sum(path.stat().st_size for path in directory.glob(CACHE_FILE + "*"))
        label = "with requests   " if kept else "without requests"
        print(f"cache {label}: {elapsed / count * 1e6:7.1f} us per entry, {size / count:8.0f} bytes per entry")
    prompt = sum(len(m["content"].encode()) for m in messages[0])
    print(f"  (one prompt is {prompt} bytes; {len(messages[0])} messages, all but the last shared)")


def app_figures(count: int, folder: Path) -> None:
    import httpx

    from flowrate.inputs.conversation import Source
    from flowrate.results.rows import EvaluationRow
    from flowrate.review.guard import Secrets
    from flowrate.review.queue import QueueRule
    from flowrate.review.server import ReviewOptions, bind, make_server, prepare

    conversations = folder / "c.jsonl"
    results = folder / "results.jsonl"
    now = datetime.now(UTC)
    with results.open("w") as handle:
        for n in range(count):
            row = EvaluationRow(
                id=f"bench-{n}", source=Source(path=str(conversations), line=n + 1), metric="conversational_flow_rate",
                verdict="minor" if n % 4 == 0 else "fully", score=0.3 if n % 4 == 0 else 1.0, threshold=0.7,
                success=n % 4 != 0, reason="bench", key_issues=["turn 2: asks again"] if n % 4 == 0 else [],
                model="gpt-4o", rubric_version="v1", evaluated_at=now,
            )  # fmt: skip
            handle.write(row.model_dump_json() + "\n")
    options = ReviewOptions(results=[results], history=folder / "h.duckdb", reviewer="bench", rule=QueueRule())
    start = time.perf_counter()
    state, _ = prepare(options)
    print(f"app start-up over {count} rows (import, runs, transcripts): {time.perf_counter() - start:.2f} s")
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    state.keys = Secrets(port=port)
    server = make_server(state, sock)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port}{state.keys.prefix}"  # every address lies under the secret path
    queue = state.queues.queue("conversational_flow_rate")
    headers = {"x-flowrate-csrf": state.keys.csrf, "sec-fetch-site": "same-origin"}
    timings = []
    with httpx.Client() as client:
        client.get(f"{base}/?token={state.keys.token}")
        for row in queue[:50]:
            answer = {"metric": row.metric, "id": row.id, "value": "partial"}
            began = time.perf_counter()
            response = client.post(f"{base}/api/answer", json=answer, headers=headers)
            timings.append(time.perf_counter() - began)
            assert response.status_code == 200, response.text
        began = time.perf_counter()
        page = client.get(f"{base}/label/conversational_flow_rate?at=60")
        label_s = time.perf_counter() - began
        assert page.status_code == 200
    server.should_exit = True
    thread.join()
    print(
        f"answer stored: median {statistics.median(timings) * 1000:.1f} ms, worst {max(timings) * 1000:.1f} ms"
        f" (50 answers, queue of {len(queue)}); a label page {label_s * 1000:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20000)
    count = parser.parse_args().count
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        cache_figures(count, folder)
        app_figures(count, folder)


if __name__ == "__main__":
    main()
