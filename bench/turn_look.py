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
    print_reading(looked, flags, fitting, reported, fitted)
    if args.ship is not None:
        combination = read_combination(args.ship)
        combination.turn_threshold = round(fitted[ANY], 6)
        combination.turn_fit_on = (
            f"{SET} dialogues {args.reported + 1}-{len(order)} of {path.name} ({len(fitting)} with a per-turn look),"
            f" F1 of any flagged behaviour against two people; {args.card}"
        )
        write_combination(args.ship, combination)
        print(f"\nwrote turn_threshold {combination.turn_threshold} into {args.ship}")


def print_reading(looked, flags, fitting: list[str], reported: list[str], fitted: dict[str, float]) -> None:
    """What the P of the turns read: how well they rank the turns people flagged on the fit
    dialogues (ROC AUC), whether they follow the turn's place (the mean at turns 1, 5, 10 and 15),
    and each behaviour's F1 at its threshold and at the any threshold less ChatGPT-3.5's on the
    reported dialogues, with a 95 % bootstrap interval over the dialogues (2,000 draws, seed 0)."""
    import random

    from sklearn.metrics import roc_auc_score

    print("\nROC AUC on the fit dialogues:", end="")
    for behaviour in (*BEHAVIOURS, ANY):
        people = rater_turns(flags, fitting, behaviour)
        flagged, p_problem = [], []
        for index, dialogue in enumerate(fitting):
            for turn, p in looked[dialogue].items():
                flagged.append(turn in people[0][index] or turn in people[1][index])
                p_problem.append(p)
        auc = f"{roc_auc_score(flagged, p_problem):.3f}" if 0 < sum(flagged) < len(flagged) else "n/a"
        print(f" {behaviour} {auc}", end="")
    named = turns_above([looked[i] for i in fitting], fitted[ANY])
    precision = score_turns(ANY, named, rater_turns(flags, fitting, ANY)).precision
    print(f"\nthe any threshold names {sum(map(len, named))} of the fit dialogues' {sum(len(looked[i]) for i in fitting)}"
          f" turns (precision {percent(precision)} %)", end="")  # fmt: skip
    at = {place: [ps[place] for ps in looked.values() if place in ps] for place in (1, 5, 10, 15)}
    print("\nmean P by the turn's place:", ", ".join(f"turn {k} {sum(v) / len(v):.3f}" for k, v in at.items() if v))
    rng = random.Random(0)
    draws = [[rng.choice(reported) for _ in reported] for _ in range(2000)]
    for behaviour in BEHAVIOURS:
        for name, threshold in ((behaviour, fitted[behaviour]), (ANY, fitted[ANY])):
            differences = []
            for ids in draws:
                people = rater_turns(flags, ids, behaviour)
                own = score_turns(behaviour, turns_above([looked[i] for i in ids], threshold), people).f1 or 0.0
                chatgpt = score_turns(behaviour, [chatgpt_turns(flags[i][1], behaviour) for i in ids], people).f1 or 0.0
                differences.append(own - chatgpt)
            differences.sort()
            low, high = differences[int(0.025 * len(draws))], differences[int(0.975 * len(draws)) - 1]
            print(f"{behaviour} F1 at the {name} threshold less ChatGPT-3.5's: 95 % interval [{low:.1f}, {high:.1f}]")


if __name__ == "__main__":
    main()
