"""The per-turn look (`--turn-look`) against ABC-Eval's turn labels, from the judge card's lines
(docs/cards/<card>.jsonl, `turn_p_problem` per dialogue, written by `flowrate judge-bench --card`):
for each behaviour (redundant, ignore, irrelevant, and any of them), the threshold on P(the reply
breaks the flow) is fit on the dialogues after the first `--reported` of the set's file (the F1
against the two people, best over every P seen), and precision, recall and F1 are reported on the
first `--reported` only, beside ChatGPT-3.5's kept prediction, the two people and every turn named,
on the same dialogues. No threshold is fit on a dialogue it is reported on. With `--ship FILE`, the
threshold fit for any behaviour is written into a rubric's combination file (`turn_threshold`,
`turn_fit_on`), for `--turn-look` to name turns by. Nothing here judges anything.

python bench/turn_look.py --card docs/cards/qwen2.5-coder-1.5b.jsonl --data-dir DIR [--reported 60] [--ship FILE]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flowrate.analysis.judge_bench import SETS  # noqa: E402
from flowrate.analysis.turn_labels import (  # noqa: E402
    ANY,
    BEHAVIOURS,
    chatgpt_turns,
    fit_threshold,
    rater_turns,
    read_turn_flags,
    score_turns,
    turns_above,
)
from flowrate.rubric.combination import read_combination, write_combination  # noqa: E402

SET = "abc-eval"


def percent(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--card", required=True, type=Path)
    parser.add_argument("--data-dir", required=True, type=Path)
    parser.add_argument("--reported", type=int, default=60, help="the first N dialogues reported; the rest fit")
    parser.add_argument("--ship", type=Path, help="a combination file to write the any-behaviour threshold into")
    args = parser.parse_args()
    path = args.data_dir / SETS[SET].file
    flags = read_turn_flags(path)
    order = [str(orjson.loads(line)["id"]) for line in path.read_bytes().splitlines() if line.strip()]
    lines = [orjson.loads(line) for line in args.card.read_bytes().splitlines() if line.strip()]
    looked = {
        line["id"]: {int(turn): p for turn, p in line["turn_p_problem"].items()}
        for line in lines
        if line["set"] == SET and line.get("turn_p_problem")
    }
    reported = [i for i in order[: args.reported] if i in looked and i in flags]
    fitting = [i for i in order[args.reported :] if i in looked and i in flags]
    missing = [i for i in order if i not in looked]
    print(
        f"{len(reported)} of the first {args.reported} dialogues reported, {len(fitting)} after them fit the"
        f" thresholds; {len(missing)} of {len(order)} without a per-turn look"
    )
    print("\n| behaviour | threshold (fit on the rest) | per-turn look P / R / F1 | with the any threshold |"
          " ChatGPT-3.5 | two people | every turn named |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")

    def shown(found) -> str:
        return f"{percent(found.precision)} / {percent(found.recall)} / **{percent(found.f1)}**"

    fitted = {
        b: fit_threshold([looked[i] for i in fitting], rater_turns(flags, fitting, b), b) for b in (*BEHAVIOURS, ANY)
    }
    for behaviour in (*BEHAVIOURS, ANY):
        people = rater_turns(flags, reported, behaviour)
        p_problem = [looked[i] for i in reported]
        own = score_turns(behaviour, turns_above(p_problem, fitted[behaviour]), people)
        shared = score_turns(behaviour, turns_above(p_problem, fitted[ANY]), people)
        chatgpt = score_turns(behaviour, [chatgpt_turns(flags[i][1], behaviour) for i in reported], people)
        agree = score_turns(behaviour, people[1], [people[0]])
        every = score_turns(behaviour, [set(range(1, flags[i][2] + 1)) for i in reported], people)
        print(
            f"| {behaviour} | {fitted[behaviour]:.3f} | {shown(own)} | {shown(shared)} | {shown(chatgpt)} |"
            f" {shown(agree)} | {shown(every)} |"
        )
    if args.ship is not None:
        combination = read_combination(args.ship)
        combination.turn_threshold = round(fitted[ANY], 6)
        combination.turn_fit_on = (
            f"{SET} dialogues {args.reported + 1}-{len(order)} of {path.name} ({len(fitting)} with a per-turn look),"
            f" F1 of any flagged behaviour against two people; {args.card}"
        )
        write_combination(args.ship, combination)
        print(f"\nwrote turn_threshold {combination.turn_threshold} into {args.ship}")


if __name__ == "__main__":
    main()
