"""The judge card, computed again from its committed lines (docs/cards/<card>.jsonl, written by
`flowrate judge-bench --card`) and the public sets' labels: for each set and each score on the
card (each look, their plain mean, and the looks combined with weights fit on the other sets),
Spearman and Kendall against people with their 95 % bootstrap intervals; with `--reference`, the
folder of GPT-4's released dialogue-level ratings (Zhang et al., AAAI 2024,
github.com/e0397123/comp-analysis, `dialog_level_texts/`), each score's Spearman against GPT-4's
mean of five runs too, and GPT-4's own against people; then each checklist question's P(the good
answer) alone against people. Prints the Markdown tables docs/judges.md holds; nothing here
judges anything.

python bench/card.py --card docs/cards/qwen2.5-coder-1.5b.jsonl --data-dir DIR [--reference DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flowrate.analysis.agreement import correlation, labels_named  # noqa: E402
from flowrate.analysis.combination import FITTED, MEAN  # noqa: E402
from flowrate.analysis.judge_bench import SETS  # noqa: E402
from flowrate.analysis.reference import frontier_ratings  # noqa: E402
from flowrate.analysis.statistics import Statistic  # noqa: E402
from flowrate.rubric.model import load_rubric  # noqa: E402

LOOKS = ("verdict", "expected", "verdict_first", "checklist", MEAN, FITTED)
#: the release's files of a set: its dialogue texts and GPT-4's ratings, and the dimension rated
REFERENCE = {
    "fed": ("fed-dial_text.txt", "fed_gpt4_annotations.json", "coh"),
    "ieval": ("ieval-dial_text.txt", "ieval_gpt4_annotations.json", "coh"),
}


def shown(statistic: Statistic) -> str:
    if statistic.value is None:
        return "n/a"
    interval = f" [{statistic.ci95[0]:.3f}, {statistic.ci95[1]:.3f}]" if statistic.ci95 else ""
    return f"{statistic.value:.3f}{interval}"


def paired(lines: list[dict], score: str, labels: dict[str, float]):
    import numpy as np

    pairs = [
        (line[score], labels[line["id"]]) for line in lines if line.get(score) is not None and line["id"] in labels
    ]
    return np.array([a for a, _ in pairs], dtype=float), np.array([b for _, b in pairs], dtype=float)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--card", required=True, type=Path)
    parser.add_argument("--data-dir", required=True, type=Path)
    parser.add_argument("--reference", type=Path, help="the folder of the release's dialog_level_texts files")
    args = parser.parse_args()
    lines = [orjson.loads(line) for line in args.card.read_bytes().splitlines() if line.strip()]
    rows: list[str] = []
    print("| set | score | n | Spearman [95 % CI] | Kendall tau-b | fit on | Spearman against GPT-4's mean |")
    print("|---|---|---|---|---|---|---|")
    for name in dict.fromkeys(line["set"] for line in lines):
        bench = SETS[name]
        path = args.data_dir / bench.file
        labels = {key: bench.better * value for key, value in labels_named([str(path)], bench.label).items()}
        mine = [line for line in lines if line["set"] == name]
        gpt4: dict[str, float] = {}
        if args.reference is not None and name in REFERENCE:
            texts, ratings, dimension = REFERENCE[name]
            records = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
            gpt4 = frontier_ratings(args.reference / texts, args.reference / ratings, dimension, records).by_id
        for score in LOOKS:
            scores, people = paired(mine, score, labels)
            if not len(scores):
                continue
            fit_on = ", ".join(next((line["fit_on"][score] for line in mine if score in line.get("fit_on", {})), []))
            against = paired(mine, score, gpt4) if gpt4 else None
            versus = shown(correlation("spearman", *against)) if against is not None and len(against[0]) else ""
            if versus and against is not None:
                versus += f" (n {len(against[0])})"
            spearman, kendall = correlation("spearman", scores, people), correlation("kendall", scores, people)
            print(f"| {name} | {score} | {len(scores)} | {shown(spearman)} | {shown(kendall)} | {fit_on} | {versus} |")
        if gpt4:
            judged = {line["id"] for line in mine}
            reference = [{"id": key, "gpt4": value} for key, value in gpt4.items() if key in judged]
            scores, people = paired(reference, "gpt4", labels)
            spearman, kendall = correlation("spearman", scores, people), correlation("kendall", scores, people)
            print(
                f"| {name} | GPT-4, mean of 5 runs (released) | {len(scores)} | {shown(spearman)} | {shown(kendall)} | | |"
            )
        rows.extend(question_rows(name, mine, labels))
    print("\nEach checklist question alone, P(the good answer) against people (Spearman [95 % CI]):\n")
    print("| set | question | good answer | weight | n | Spearman [95 % CI] |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print(row)


def question_rows(name: str, mine: list[dict], labels: dict[str, float]) -> list[str]:
    """A table row per checklist question of the flow rubric: its P(the good answer) alone against people."""
    rows = []
    for item in load_rubric().checklist:
        good = [
            {"id": line["id"], "p": p if item.good == "yes" else 1 - p}
            for line in mine
            if (p := (line.get("checklist_p_yes") or {}).get(item.id)) is not None
        ]
        scores, people = paired(good, "p", labels)
        if len(scores):
            spearman = shown(correlation("spearman", scores, people))
            rows.append(f"| {name} | {item.id} | {item.good} | {item.weight:g} | {len(scores)} | {spearman} |")
    return rows


if __name__ == "__main__":
    main()
