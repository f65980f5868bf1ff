"""GPT-4's released dialogue-level ratings (Zhang et al., AAAI 2024) as a second reference: read
from the release's own files and matched to a set's dialogues by their text.

The release (github.com/e0397123/comp-analysis, `dialog_level_texts/`) is public material from
another repository, so the project does not commit it: the tests on the real files read it from
`../shared/fixtures/zhang2024-dialog-level-texts/` beside the checkout (FLOWRATE_GPT4_RATINGS
names another folder) and the FED set from `../shared/data/dialogue-ratings/`
(FLOWRATE_BENCH_DATA), and are skipped where they are not. The other tests write files in the
release's shape (a line per dialogue, `ID<TAB>speaker: text<TAB>...`; runs `coh_1`.. as lists,
`indices` where only some lines were rated), as read from the release."""

import json
import os
from pathlib import Path

import pytest

from flowrate.analysis.reference import frontier_ratings
from flowrate.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
RELEASE = Path(
    os.environ.get("FLOWRATE_GPT4_RATINGS") or ROOT.parent / "shared" / "fixtures" / "zhang2024-dialog-level-texts"
)
DATA = Path(os.environ.get("FLOWRATE_BENCH_DATA") or ROOT.parent / "shared" / "data" / "dialogue-ratings")


def release_file(name: str) -> Path:
    path = RELEASE / name
    if not path.is_file():
        pytest.skip(
            f"the release's {name} is not in {RELEASE} (github.com/e0397123/comp-analysis, dialog_level_texts/)"
        )
    return path


def records_of(name: str) -> list[dict]:
    path = DATA / name
    if not path.is_file():
        pytest.skip(f"the set {name} is not in {DATA}")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_gpt4s_fed_ratings_match_every_fed_dialogue_and_give_the_published_agreement():
    from scipy.stats import spearmanr

    records = records_of("fed_dialog_level.jsonl")
    ratings = frontier_ratings(
        release_file("fed-dial_text.txt"), release_file("fed_gpt4_annotations.json"), "coh", records
    )
    assert ratings.runs == 5 and ratings.unmatched == 0 and len(ratings.by_id) == 125
    people = [record["labels"]["Coherent"] for record in records]
    gpt4 = [ratings.by_id[record["id"]] for record in records]
    assert round(spearmanr(gpt4, people).statistic, 2) == 0.72  # the mean of five runs, as published


def test_gpt4s_ieval_ratings_cover_the_lines_its_indices_name():
    records = records_of("ieval_dialog_level.jsonl")[:60]
    ratings = frontier_ratings(
        release_file("ieval-dial_text.txt"), release_file("ieval_gpt4_annotations.json"), "coh", records
    )
    assert ratings.runs == 5 and 0 < len(ratings.by_id) < 60 and ratings.unmatched == 60 - len(ratings.by_id)


def write_release(folder: Path, lines: list[str], runs: dict) -> tuple[Path, Path]:
    texts, annotations = folder / "x-dial_text.txt", folder / "x_gpt4_annotations.json"
    texts.write_text("\n".join(lines) + "\n")
    annotations.write_text(json.dumps(runs))
    return texts, annotations


def record(conversation_id, *said, trailing=None):
    pairs = [{"input": said[i], "actual_output": said[i + 1]} for i in range(0, len(said), 2)]
    return {"id": conversation_id, "turns": pairs, "trailing_user_utterance": trailing}


def test_a_dialogue_is_matched_by_its_utterances_whatever_its_order_whitespace_or_case(tmp_path):
    lines = [
        "XDIAL-000000\thuman: Hi!\tmodel: Hello there.\thuman: Bye",
        "XDIAL-000001\thuman: What is 2+2?\tmodel: Four.",
    ]
    texts, annotations = write_release(tmp_path, lines, {"coh_1": [4.0, 2.0], "coh_2": [5.0, 3.0], "ovr_1": [1, 1]})
    records = [
        record("b", "what is 2+2?", "Four."),
        record("a", "Hi!", "Hello  there.", trailing="Bye"),
        record("c", "Hi!", "Something else."),
    ]
    ratings = frontier_ratings(texts, annotations, "coh", records)
    assert ratings.by_id == {"a": 4.5, "b": 2.5} and ratings.unmatched == 1 and ratings.runs == 2


def test_where_only_some_lines_were_rated_their_indices_say_which(tmp_path):
    lines = ["I-0\tA: one\tB: two", "I-1\tA: three\tB: four", "I-2\tA: five\tB: six"]
    texts, annotations = write_release(tmp_path, lines, {"coh_1": [2.0, 5.0], "indices": [2, 0]})
    records = [record("x", "one", "two"), record("y", "three", "four"), record("z", "five", "six")]
    ratings = frontier_ratings(texts, annotations, "coh", records)
    assert ratings.by_id == {"x": 5.0, "z": 2.0} and ratings.unmatched == 1


def test_a_missing_dimension_or_a_broken_file_is_a_plain_error_naming_the_file(tmp_path):
    texts, annotations = write_release(tmp_path, ["X-0\thuman: a\tmodel: b"], {"coh_1": [3.0]})
    with pytest.raises(ConfigError, match=r"x_gpt4_annotations.json: no runs of 'eng' \(its dimensions: coh\)"):
        frontier_ratings(texts, annotations, "eng", [])
    annotations.write_text('{"coh_1": [3.0, 4.0]}')
    with pytest.raises(ConfigError, match="its runs do not match the 1 dialogues"):
        frontier_ratings(texts, annotations, "coh", [])
    annotations.write_text("{not json")
    with pytest.raises(ConfigError, match="not the reference's JSON ratings"):
        frontier_ratings(texts, annotations, "coh", [])
    with pytest.raises(ConfigError, match="cannot read the reference ratings"):
        frontier_ratings(tmp_path / "absent.txt", annotations, "coh", [])
