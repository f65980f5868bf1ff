"""The per-turn look (`--turn-look`) of the in-process judge on every ABC-Eval dialogue, without
the grading call: each assistant reply asked about on its own with the requests `--turn-look`
sends (`rubric.checklist.turn_window_messages`: the turn and the two exchanges before it, "does
the reply follow on from what the user just said?"), its schema and reader (`scores.checklist`),
answered by the call `--model gguf:` makes (`judge.local_model.generate`, read where the model
chooses). The P(the reply breaks the flow) of every turn is written as a judge card's lines
(`--card`, `turn_p_problem` per dialogue, resumed where it stopped), which `bench/turn_look.py
--card` fits and reports: each threshold fit on the dialogues after the first 60, reported on the
first 60 only. `--start 60` asks the fit dialogues first.

python bench/turn_window.py --model qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --data-dir DIR --card FILE
"""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path

import orjson
from common import ROOT  # noqa: F401  (puts the project on the path)

from flowrate.analysis.judge_bench import SETS
from flowrate.inputs.conversation import EvalTestCase
from flowrate.judge.backend import TOP_LOGPROBS
from flowrate.judge.local_model import generate, load_llama
from flowrate.metrics.planning import TOKENS_PER_ANSWER
from flowrate.rubric.checklist import turn_window_messages
from flowrate.rubric.model import load_rubric
from flowrate.scores.checklist import turn_reading, turn_schema

SET = "abc-eval"
SCHEMA = {"type": "json_object", "schema": turn_schema()}  # as `LocalModel.structured_output` gives it


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, type=Path, help="a GGUF file, judged in process")
    parser.add_argument("--data-dir", required=True, type=Path)
    parser.add_argument("--card", required=True, type=Path, help="the card's lines, written and resumed")
    parser.add_argument("--start", type=int, default=0, help="the first dialogue of the set's file asked (0-based)")
    args = parser.parse_args()
    data = args.data_dir / SETS[SET].file
    if args.card.exists() and args.card.samefile(data):
        parser.error(f"--card {args.card} is the set's own file: the card is written, the set only read")
    records = [orjson.loads(line) for line in data.read_bytes().splitlines() if line]
    done = set()
    if args.card.exists():
        done = {orjson.loads(line)["id"] for line in args.card.read_bytes().splitlines() if line.strip()}
    llama, stop, guesses, rubric = load_llama(args.model), threading.Event(), {}, load_rubric()
    order = records[args.start :] + records[: args.start]
    with args.card.open("ab") as card:
        for record in order:
            if str(record["id"]) in done:
                continue
            started, p_problem = time.perf_counter(), {}
            turns = [EvalTestCase(input=t["input"], actual_output=t["actual_output"]) for t in record["turns"]]
            for number in range(1, len(turns) + 1):
                asked = turn_window_messages(rubric, turns, number - 1)
                reply = generate(llama, asked, SCHEMA, 0.0, TOKENS_PER_ANSWER * 2, stop,
                                 top_logprobs=TOP_LOGPROBS, guesses=guesses)  # fmt: skip
                p = turn_reading(reply.texts[0], reply.logprobs[0])
                if p is not None:
                    p_problem[str(number)] = round(p, 6)
            card.write(orjson.dumps({"set": SET, "id": str(record["id"]), "turn_p_problem": p_problem}) + b"\n")
            card.flush()
            print(f"{record['id']}: {len(p_problem)} turns, {time.perf_counter() - started:.1f} s", flush=True)


if __name__ == "__main__":
    main()
