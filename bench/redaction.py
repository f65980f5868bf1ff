"""Benchmark 15: `--redact`'s pattern detectors on real dialogues (../shared/data/dialogue-ratings).

In one run: a control set of 200 ordinary conversations (the first 25 of each of the eight
files), every replacement printed with its context for a reader to check (what is not an
identifier is a false positive); then 20,000 dialogues (the files in name order, read again
from the first once they run out), each read as flowrate reads a turn-format record and
redacted as `flowrate eval --redact` does: the time redaction adds per conversation (wall and
CPU, reading excluded) and the process's peak memory after 2,000 and after 20,000.

python bench/redaction.py [--n 20000] [--data DIR]
"""

import argparse
import itertools
import resource
import time
from pathlib import Path

from common import DEFAULT_DATA

from flowrate.inputs.conversation import ConversationalEvalTestCase
from flowrate.inputs.redaction.redactor import Redactor, regions_of

CONTROL_PER_FILE = 25
CONTEXT_CHARS = 35


def control(data: Path, redactor: Redactor) -> int:
    """Print every replacement in the control set, with its context; return how many."""
    found = 0
    for path in sorted(data.glob("*.jsonl")):
        for case in itertools.islice(records_of(path), CONTROL_PER_FILE):
            for turn in case.turns:
                for text in (turn.input, turn.actual_output or ""):
                    for span in redactor.spans(text, regions_of(case, redactor.regions)):
                        found += 1
                        before = text[max(0, span.start - CONTEXT_CHARS) : span.start]
                        after = text[span.end : span.end + 10]
                        print(
                            f"  {case.id} {span.kind}: {text[span.start : span.end]!r} in {before + '[...]' + after!r}"
                        )
    return found


def records_of(path: Path):
    """The dialogues of the file `path`, as conversations (a turn-format record's id and turns)."""
    import orjson

    with path.open("rb") as handle:
        for line in handle:
            record = orjson.loads(line)
            yield ConversationalEvalTestCase.model_validate({"id": record["id"], "turns": record["turns"]})


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    options = parser.parse_args()
    redactor = Redactor()
    print(f"detectors: {redactor.versions}")
    print(f"control set: the first {CONTROL_PER_FILE} dialogues of each file; every replacement:")
    replaced = control(options.data, redactor)
    print(f"control set: {replaced} replacement(s) in {CONTROL_PER_FILE * len(list(options.data.glob('*.jsonl')))}")
    wall_s = cpu_s = 0.0
    found = conversations = 0
    peak_at_2000 = 0.0
    for case in itertools.islice(_cycled(options.data), options.n):
        started, started_cpu = time.perf_counter(), time.process_time()
        redacted = redactor.redact(case)
        wall_s += time.perf_counter() - started
        cpu_s += time.process_time() - started_cpu
        conversations += 1
        found += sum(redacted.redactions.values())
        if conversations == 2000:
            peak_at_2000 = peak_mb()
    print(
        f"{conversations} dialogues: {found} identifiers replaced; redaction {wall_s / conversations * 1000:.2f} ms"
        f" wall, {cpu_s / conversations * 1000:.2f} ms CPU per conversation"
    )
    print(f"peak memory: {peak_at_2000:.1f} MB after 2,000, {peak_mb():.1f} MB after {conversations}")


def _cycled(data: Path):
    """The dialogues of every file in `data`, in name order, again and again."""
    while True:
        for path in sorted(data.glob("*.jsonl")):
            yield from records_of(path)


if __name__ == "__main__":
    main()
