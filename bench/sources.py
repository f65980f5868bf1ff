"""Benchmark: reading 100,000 OpenTelemetry GenAI spans grouped into 10,000 conversations, beside
reading the same 10,000 conversations as flowrate's own JSONL.

Both files are written from real dialogues (USS-SGD and USS-MultiWOZ in the dialogue-ratings
directory, see bench/common.py): conversation n takes ten consecutive exchanges of them. The
OTel file is what the Collector's file exporter writes: one OTLP/JSON `ExportTraceServiceRequest`
a line (`resourceSpans[].scopeSpans[].spans[]`, hex trace and span ids), 100 spans a line, the
calls of 100 conversations at a time interleaved as live traffic is. Each call is one span with
the current GenAI attributes (https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/;
the message shapes are gen-ai-input-messages.json and gen-ai-output-messages.json of
open-telemetry/semantic-conventions): `gen_ai.conversation.id`, and `gen_ai.input.messages`
repeating the whole history before the call's user message, `gen_ai.output.messages` the reply,
each JSON text of messages with `parts: [{"type": "text", "content": ...}]`.

Each file is read by `flowrate validate FILE --json` in a process of its own; its wall time and
peak RSS (wait4's ru_maxrss) are printed, and the ratios. Without an `otel` reader registered
the JSONL half runs and the script then fails, exit 2, saying so.

`--probe` also feeds the same calls straight to `inputs.sources.calls.Conversations` (the
grouping every trace reader shares; the spans' messages turned to OpenAI's shape by the few
lines here, text parts only), once with each call's item as `containers.jsonl_items` yields it
(the decoded line) and once with the item's decoded line dropped: the difference is what the
grouping keeps of the lines, beyond the longest history of each conversation.

python bench/sources.py [--conversations 10000] [--calls 10] [--data DIR] [--probe]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from common import DEFAULT_DATA, REALISTIC_FILES

FLOWRATE = str(Path(sys.executable).with_name("flowrate"))
SPANS_PER_LINE = 100  # the calls of this many conversations go out together, one export a line
CALL_GAP_S = 20  # seconds between two calls of one conversation
START_S = 1772445600  # 2026-03-02T10:00:00Z
MODEL = "gpt-4o-mini"


def exchange_pool(data: Path) -> list[tuple[str, str]]:
    """Every (user, assistant) exchange of the USS dialogues, in order."""
    pool = []
    for name in REALISTIC_FILES:
        source = data / name
        if not source.is_file():
            raise SystemExit(f"{source}: not found; give the dialogue-ratings directory with --data DIR")
        for line in source.read_text(encoding="utf-8").splitlines():
            if line.strip():
                pool += [(turn["input"], turn["actual_output"] or "") for turn in json.loads(line)["turns"]]
    return pool


def conversation(pool: list[tuple[str, str]], n: int, calls: int) -> list[tuple[str, str]]:
    """The exchanges of conversation `n`: `calls` consecutive ones of the pool."""
    return [pool[(n * calls + k) % len(pool)] for k in range(calls)]


def write_native(path: Path, pool: list[tuple[str, str]], count: int, calls: int) -> None:
    """The conversations in flowrate's turn format, their times in the metadata."""
    with path.open("w", encoding="utf-8") as handle:
        for n in range(count):
            turns = [{"input": user, "actual_output": reply} for user, reply in conversation(pool, n, calls)]
            started_s = START_S + n * 3
            metadata = {"started_at": iso(started_s), "ended_at": iso(started_s + (calls - 1) * CALL_GAP_S + 2)}
            handle.write(json.dumps({"id": f"conv-{n:05d}", "turns": turns, "metadata": metadata}) + "\n")


def iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def text_message(role: str, text: str, **extra) -> dict:
    """A GenAI semantic-conventions message of one text part."""
    return {"role": role, "parts": [{"type": "text", "content": text}], **extra}


def attribute(key: str, value) -> dict:
    """An OTLP/JSON KeyValue (64-bit integers as decimal text, as the protobuf JSON mapping has them)."""
    kind = {str: "stringValue", int: "intValue"}[type(value)]
    return {"key": key, "value": {kind: str(value) if kind == "intValue" else value}}


def span(exchanges: list[tuple[str, str]], n: int, k: int, ids: random.Random) -> dict:
    """The span of call `k` of conversation `n`: the history and the k-th user message in, the reply out."""
    history = []
    for user, reply in exchanges[:k]:
        history += [text_message("user", user), text_message("assistant", reply)]
    user, reply = exchanges[k]
    started_ns = (START_S + n * 3 + k * CALL_GAP_S) * 10**9
    inputs = [*history, text_message("user", user)]
    outputs = [text_message("assistant", reply, finish_reason="stop")]
    return {
        "traceId": f"{ids.getrandbits(128):032x}",
        "spanId": f"{ids.getrandbits(64):016x}",
        "name": f"chat {MODEL}",
        "kind": 3,  # SPAN_KIND_CLIENT
        "startTimeUnixNano": str(started_ns),
        "endTimeUnixNano": str(started_ns + 1_800_000_000),
        "attributes": [
            attribute("gen_ai.operation.name", "chat"),
            attribute("gen_ai.provider.name", "openai"),
            attribute("gen_ai.request.model", MODEL),
            attribute("gen_ai.response.model", MODEL),
            attribute("gen_ai.conversation.id", f"conv-{n:05d}"),
            attribute("gen_ai.input.messages", json.dumps(inputs, ensure_ascii=False)),
            attribute("gen_ai.output.messages", json.dumps(outputs, ensure_ascii=False)),
            attribute("gen_ai.usage.input_tokens", sum(len(text) for pair in exchanges[: k + 1] for text in pair) // 4),
            attribute("gen_ai.usage.output_tokens", len(reply) // 4),
        ],
        "status": {},
    }


def write_otel(path: Path, pool: list[tuple[str, str]], count: int, calls: int) -> int:
    """The conversations as OTLP/JSON lines, one export of `SPANS_PER_LINE` spans a line; returns the spans."""
    ids = random.Random(27)
    spans = 0
    resource = {"attributes": [attribute("service.name", "support-bot"), attribute("telemetry.sdk.language", "python")]}
    scope = {"name": "opentelemetry.instrumentation.openai_v2", "version": "2.1b0"}
    with path.open("w", encoding="utf-8") as handle:
        for first in range(0, count, SPANS_PER_LINE):
            group = range(first, min(first + SPANS_PER_LINE, count))
            exchanges = {n: conversation(pool, n, calls) for n in group}
            for k in range(calls):
                batch = [span(exchanges[n], n, k, ids) for n in group]
                export = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": scope, "spans": batch}]}]}
                handle.write(json.dumps(export, ensure_ascii=False) + "\n")
                spans += len(batch)
    return spans


@dataclass
class Measure:
    """What one child process took: wall and CPU seconds (user and system: on a shared machine
    the steadier of the two), peak RSS in MB (wait4's ru_maxrss)."""

    wall_s: float
    cpu_s: float
    rss_mb: float

    def __str__(self) -> str:
        return f"{self.wall_s:.2f} s wall, {self.cpu_s:.2f} s CPU, peak RSS {self.rss_mb:.1f} MB"


def child(arguments: list[str]) -> tuple[Measure, str]:
    """Run `arguments` as a child process: what it took and its stdout; exits naming it when it fails."""
    started = time.perf_counter()
    process = subprocess.Popen(arguments, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = process.stdout.read(), process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall_s = time.perf_counter() - started
    if code := os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{' '.join(arguments)}: exit {code}\n{stderr}")
    return Measure(wall_s, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024), stdout


def validate(path: Path) -> tuple[Measure, dict]:
    """`flowrate validate path --json`: what it took, and its counts."""
    measure, stdout = child([FLOWRATE, "validate", str(path), "--json"])
    return measure, json.loads(stdout)


def registered_formats() -> list[str]:
    """The names of the readers `flowrate formats` lists."""
    from flowrate.inputs.sources.registry import readers

    return [reader.name for reader in readers()]


def openai_messages(text: str) -> list[dict]:
    """GenAI messages (JSON text) of text parts as OpenAI chat messages: for the probe only."""
    return [
        {"role": message["role"], "content": "".join(part.get("content", "") for part in message["parts"])}
        for message in json.loads(text)
    ]


def probe(path: Path, keep_lines: bool) -> None:
    """In this process: every span of the OTel file at `path` as a `Call` to one `Conversations`,
    its item the decoded line (`keep_lines`) or that item without it; prints the conversations read."""
    from flowrate.inputs.containers import jsonl_items
    from flowrate.inputs.sources.base import Item
    from flowrate.inputs.sources.calls import Call, Conversations, seconds_of

    grouped = Conversations("otel")
    for item in jsonl_items(path, str(path), str(path)):
        kept = item if keep_lines else Item(item.source, None, item.default_id, item.where)
        for resource in item.raw["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for one in scope["spans"]:
                    values = {entry["key"]: next(iter(entry["value"].values())) for entry in one["attributes"]}
                    call = Call(
                        values["gen_ai.conversation.id"],
                        openai_messages(values["gen_ai.input.messages"]),
                        openai_messages(values["gen_ai.output.messages"]),
                        kept,
                        seconds_of(one["startTimeUnixNano"]),
                        seconds_of(one["endTimeUnixNano"]),
                    )
                    grouped.add(call, one["traceId"])
    print(sum(1 for record in grouped.records() if not record.problems))


def probe_measure(path: Path, keep_lines: bool, expected: int) -> Measure:
    """`probe` in a child process: what it took."""
    arguments = [sys.executable, __file__, "--probe-child", str(path), *(["--keep-lines"] if keep_lines else [])]
    measure, stdout = child(arguments)
    if int(stdout) != expected:
        raise SystemExit(f"the probe read {stdout.strip()} conversations, not {expected}")
    return measure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=10, help="calls (spans) per conversation")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the dialogue-ratings directory")
    parser.add_argument("--probe", action="store_true", help="also measure the grouping (Conversations) alone")
    parser.add_argument("--probe-child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--keep-lines", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.probe_child:
        probe(options.probe_child, options.keep_lines)
        return
    formats = registered_formats()
    has_otel = "otel" in formats
    pool = exchange_pool(options.data)
    count, calls = options.conversations, options.calls
    with tempfile.TemporaryDirectory(prefix="flowrate-sources-") as scratch:
        native, otel = Path(scratch) / "conversations.jsonl", Path(scratch) / "spans.otlp.jsonl"
        write_native(native, pool, count, calls)
        spans = write_otel(otel, pool, count, calls) if has_otel or options.probe else 0
        native_took, native_counts = validate(native)
        assert native_counts["valid"] == count and native_counts["invalid"] == 0, native_counts
        print(f"flowrate JSONL: {count} conversations, {native.stat().st_size / 1e6:.1f} MB: {native_took}")
        if spans:
            print(f"OTel: {spans} spans of {count} conversations written, {otel.stat().st_size / 1e6:.1f} MB")
        if options.probe:
            for keep in (True, False):
                kept = "each call's decoded line kept" if keep else "the decoded lines dropped"
                print(f"Conversations alone over {spans} spans ({kept}): {probe_measure(otel, keep, count)}")
        if not has_otel:
            print(
                f"error: no `otel` reader is registered (formats: {', '.join(formats)}), so the OTel half"
                " cannot run: merge flowrate/inputs/sources/otel.py first",
                file=sys.stderr,
            )
            sys.exit(2)
        otel_took, otel_counts = validate(otel)
        assert otel_counts["valid"] == count and otel_counts["formats"] == {"otel": count}, otel_counts
        print(
            f"OTel: {spans} spans, {otel.stat().st_size / 1e6:.1f} MB, {otel_counts['valid']} conversations: {otel_took}"
        )
        print(
            f"OTel / JSONL: wall {otel_took.wall_s / native_took.wall_s:.1f} x, CPU"
            f" {otel_took.cpu_s / native_took.cpu_s:.1f} x, peak RSS {otel_took.rss_mb / native_took.rss_mb:.1f} x"
        )


if __name__ == "__main__":
    main()
