"""A second reference beside people: GPT-4's dialogue-level ratings of the public sets, released with
Zhang et al. (AAAI 2024, "A Comprehensive Analysis of the Effectiveness of Large Language Models as
Automatic Dialogue Evaluators", github.com/e0397123/comp-analysis, `dialog_level_texts/`), read
and matched to a set's dialogues by their text. Data only.

Their release has, per set, a text file of the dialogues, a line each
(`FEDDIAL-000000<TAB>human: Hi!<TAB>model: Hi! What's up?<TAB>...`), and a JSON file of GPT-4's
ratings, five runs per dimension (`"coh_1"` ... `"coh_5"`, one rating per dialogue line, 1-5);
where only some lines were rated, `"indices"` gives their line numbers. A dialogue of a set is
matched to a line when their utterances are the same, in order, whitespace and case aside, so a
reordered or converted set still finds its ratings; a dialogue with no matching line has none.
The reference score of a dialogue is the mean of the runs (GPT-4 on FED Coherent: one run
Spearman 0.61-0.66 against people, the mean of five 0.72)."""

from __future__ import annotations

from pathlib import Path

import orjson
from pydantic import BaseModel

from flowrate.errors import ConfigError

RUNS_MAX = 5


class FrontierRatings(BaseModel):
    """A frontier judge's mean rating per dialogue id of a set (`by_id`), over `runs` runs of one
    `dimension`; `unmatched` dialogues of the set found no line in the release."""

    dimension: str
    runs: int
    by_id: dict[str, float]
    unmatched: int


def _normal(text: str) -> str:
    return " ".join(str(text).split()).casefold()


def record_utterances(record: dict) -> tuple[str, ...]:
    """A set record's utterances in order (user, then assistant, each turn; the trailing user
    message last), normalised; an empty opening user message is no utterance."""
    said: list[str] = []
    for turn in record.get("turns") or []:
        for text in (turn.get("input"), turn.get("actual_output")):
            if text:
                said.append(_normal(text))
    if record.get("trailing_user_utterance"):
        said.append(_normal(record["trailing_user_utterance"]))
    return tuple(said)


def _line_utterances(line: str) -> tuple[str, ...]:
    """A release's dialogue line's utterances: each tab-separated `speaker: text` after the id."""
    return tuple(_normal(part.split(": ", 1)[1] if ": " in part else part) for part in line.split("\t")[1:])


def frontier_ratings(
    texts: str | Path, annotations: str | Path, dimension: str, records: list[dict]
) -> FrontierRatings:
    """The mean of the runs of `dimension` (e.g. "coh") in `annotations` for each of `records`
    (a set's lines, with `id`) whose utterances match a line of `texts`. A plain `ConfigError`
    naming the file when either is unreadable or not in the release's shape."""
    try:
        lines = Path(texts).read_text(encoding="utf-8").splitlines()
        rated = orjson.loads(Path(annotations).read_bytes())
    except OSError as error:
        raise ConfigError(f"{error.filename}: cannot read the reference ratings: {error.strerror}") from None
    except (orjson.JSONDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{annotations}: not the reference's JSON ratings: {error}") from None
    if not isinstance(rated, dict):
        raise ConfigError(f"{annotations}: not the reference's JSON ratings: an object of runs was expected")
    runs = [rated[key] for n in range(1, RUNS_MAX + 1) if isinstance(rated.get(key := f"{dimension}_{n}"), list)]
    if not runs:
        known = sorted({key.rsplit("_", 1)[0] for key in rated if key != "indices"})
        raise ConfigError(f"{annotations}: no runs of {dimension!r} (its dimensions: {', '.join(known)})")
    indices = rated.get("indices") or list(range(len(lines)))
    if any(len(run) != len(indices) for run in runs) or any(not 0 <= i < len(lines) for i in indices):
        raise ConfigError(f"{annotations}: its runs do not match the {len(lines)} dialogues of {texts}")
    by_text: dict[tuple[str, ...], float] = {}
    for position, line_number in enumerate(indices):
        by_text[_line_utterances(lines[line_number])] = sum(float(run[position]) for run in runs) / len(runs)
    found, unmatched = {}, 0
    for record in records:
        mean = by_text.get(record_utterances(record))
        if mean is None:
            unmatched += 1
        else:
            found[str(record.get("id"))] = round(mean, 6)
    return FrontierRatings(dimension=dimension, runs=len(runs), by_id=found, unmatched=unmatched)
