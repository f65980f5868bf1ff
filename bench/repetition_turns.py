"""A baseline with no judge for ABC-Eval's "redundant" turns: each assistant reply's repetition of
the assistant's earlier replies, the best rapidfuzz token-set ratio (0-1) between one of its
sentences and one of theirs. The threshold is fit on the dialogues after the first `--reported`
(`turn_labels.fit_threshold`: the best F1 against the two people) and precision, recall and F1 are
reported on the first `--reported` only, beside ChatGPT-3.5's kept prediction, the two people and
every turn named. It measures how far plain text overlap goes on the behaviour a judge should name
best; flowrate ships no such measure.

python bench/repetition_turns.py --data-dir DIR [--reported 60]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import orjson
from rapidfuzz import fuzz

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flowrate.analysis.judge_bench import SETS  # noqa: E402
from flowrate.analysis.turn_labels import (  # noqa: E402
    chatgpt_turns,
    fit_threshold,
    rater_turns,
    read_turn_flags,
    score_turns,
    turns_above,
)

SET, BEHAVIOUR = "abc-eval", "redundant"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def sentences(text: str) -> list[str]:
    return [part for part in _SENTENCE_END.split(text) if part.strip()]


def repetition(replies: list[str]) -> dict[int, float]:
    """Per turn number (1-based), how much the reply repeats an earlier one: the best token-set
    ratio between one of its sentences and one of the earlier replies' (0 for the first)."""
    found, earlier = {}, []
    for number, reply in enumerate(replies, start=1):
        own = sentences(reply)
        found[number] = max((fuzz.token_set_ratio(a, b) / 100 for a in own for b in earlier), default=0.0)
        earlier.extend(own)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True, type=Path)
    parser.add_argument("--reported", type=int, default=60, help="the first N dialogues reported; the rest fit")
    args = parser.parse_args()
    path = args.data_dir / SETS[SET].file
    flags = read_turn_flags(path)
    records = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    measured = {str(r["id"]): repetition([turn["actual_output"] for turn in r["turns"]]) for r in records}
    order = [str(r["id"]) for r in records if str(r["id"]) in flags]
    reported, fitting = order[: args.reported], order[args.reported :]
    threshold = fit_threshold([measured[i] for i in fitting], rater_turns(flags, fitting, BEHAVIOUR), BEHAVIOUR)
    people = rater_turns(flags, reported, BEHAVIOUR)
    rows = {
        f"repetition >= {threshold:.2f} (fit on {len(fitting)} dialogues after)": turns_above(
            [measured[i] for i in reported], threshold
        ),
        "ChatGPT-3.5": [chatgpt_turns(flags[i][1], BEHAVIOUR) for i in reported],
        "every turn named": [set(range(1, flags[i][2] + 1)) for i in reported],
    }
    print(f"{BEHAVIOUR} turns on the first {len(reported)} dialogues of {path.name}\n")
    print("| named by | precision | recall | F1 |\n|---|---|---|---|")
    for name, predicted in rows.items():
        found = score_turns(BEHAVIOUR, predicted, people)
        print(f"| {name} | {found.precision} | {found.recall} | {found.f1} |")
    agree = score_turns(BEHAVIOUR, people[1], [people[0]])
    print(f"| two people | {agree.precision} | {agree.recall} | {agree.f1} |")


if __name__ == "__main__":
    main()
