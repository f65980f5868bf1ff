"""bench/repetition_turns.py: the no-judge baseline for ABC-Eval's redundant turns (docs/judges.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers import write_jsonl

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "repetition_turns.py"


def _labels(redundant: tuple[int, int], gpt: int = 0) -> dict:
    return {
        "redundant": {"human": list(redundant), "gpt": gpt},
        "ignore": {"human": [0, 0], "gpt": 0},
        "irrelevant": {"human": [0, 0], "gpt": 0},
    }


def test_the_repetition_threshold_is_fit_on_the_later_dialogues_and_reported_on_the_first(tmp_path):
    replies = ["I can help with that. What is your order number?", "Thanks. It ships on Monday.",
               "I can help with that. What is your order number?"]  # fmt: skip
    flagged = [(0, 0), (0, 0), (1, 1)]  # both people: the third reply repeats the first
    records = []
    for number in range(3):
        gpt = [0, 1, 0] if number == 0 else [0, 0, 0]  # ChatGPT-3.5 names the wrong turn of the reported one
        records.append({
            "id": f"d{number}",
            "turns": [{"input": f"message {turn}", "actual_output": reply} for turn, reply in enumerate(replies)],
            "turn_behavior_labels": [_labels(f, g) for f, g in zip(flagged, gpt)],
        })  # fmt: skip
    (tmp_path / "data").mkdir()
    write_jsonl(tmp_path / "data" / "abc_eval_test_behaviors.jsonl", records)
    printed = subprocess.run(
        [sys.executable, str(SCRIPT), "--data-dir", "data", "--reported", "1"], cwd=tmp_path, capture_output=True,
        text=True,
    )  # fmt: skip
    assert printed.returncode == 0, printed.stderr
    # fit on d1 and d2, whose third reply repeats the first word for word (ratio 1.0) and nothing else does
    assert "| repetition >= 1.00 (fit on 2 dialogues after) | 100.0 | 100.0 | 100.0 |" in printed.stdout, printed.stdout
    assert "| ChatGPT-3.5 | 0.0 | 0.0 | 0.0 |" in printed.stdout
    assert "| every turn named | 33.3 | 100.0 | 50.0 |" in printed.stdout
