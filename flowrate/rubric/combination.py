"""Weights that combine a judge's looks at a conversation (the verdict's score, the expected
score, the verdict-first look, the checklist's score) into one score (`--score fitted`), with
where they were fit. They are fit by `flowrate.analysis.combination` on public human-rated sets
and shipped beside a rubric's file as `<rubric>.combination.json`: scoring, not judging, so they
are not part of the rubric's version and changing them asks the judge nothing again."""

from __future__ import annotations

from pathlib import Path

import orjson
from pydantic import BaseModel, Field

from flowrate.errors import ConfigError

METHOD = (
    "ridge towards the average of standardised looks, penalty = 0.1 x fit dialogues, no weight below 0,"
    " on within-set label ranks"
)
TURN_THRESHOLD = 0.5  #: P(the reply breaks the flow) from which `--turn-look` names a turn, where no fit one ships
SUFFIX = ".combination.json"  #: the weights' file beside a rubric's: `conversational_flow.combination.json`


class Combination(BaseModel):
    """Weights of standardised looks and where they were fit. The combined score of a conversation
    ranks as Σ weight × (score − mean) / sd over `looks` does, given on the looks' own [0, 1] scale:
    the weighted mean of the looks with each weight divided by its look's spread (`score`), so it can
    meet a threshold as any other score."""

    looks: list[str]
    weights: dict[str, float]
    means: dict[str, float]
    sds: dict[str, float]
    method: str = METHOD
    fit_on: list[str]
    sizes: dict[str, int]  #: dialogues of each fit set with every look
    date: str = ""
    command: str = ""
    labels: dict[str, str] = Field(default_factory=dict)  #: each fit set's human label
    #: the P(the reply breaks the flow) from which `--turn-look` names a turn, fit on per-turn labels
    #: (`turn_fit_on`: the sets and dialogues); None: `TURN_THRESHOLD`
    turn_threshold: float | None = Field(None, ge=0, le=1)
    turn_fit_on: str = ""

    def score(self, scores: dict[str, float]) -> float | None:
        """The combined score of a conversation's looks, in [0, 1]; None when one of `looks` is missing."""
        if any(scores.get(look) is None for look in self.looks):
            return None
        raw = {look: self.weights[look] / self.sds[look] for look in self.looks}
        total = sum(raw.values())
        if total <= 0:
            return None
        return min(1.0, max(0.0, sum(raw[look] * scores[look] for look in self.looks) / total))


def turn_threshold(combination: Combination | None) -> float:
    """The P(the reply breaks the flow) from which a turn is named: `combination`'s fit one, else `TURN_THRESHOLD`."""
    if combination is None or combination.turn_threshold is None:
        return TURN_THRESHOLD
    return combination.turn_threshold


def problem_turns(p_problem: dict[str, float] | dict[int, float], threshold: float) -> list[int]:
    """The turns (numbers, in order) whose P(the reply breaks the flow) in `p_problem` is at least `threshold`."""
    return sorted(int(turn) for turn, p in p_problem.items() if p >= threshold)


def write_combination(path: str | Path, combination: Combination) -> None:
    """The fitted weights with their provenance, as indented JSON."""
    Path(path).write_bytes(orjson.dumps(combination.model_dump(), option=orjson.OPT_INDENT_2) + b"\n")


def read_combination(path: str | Path) -> Combination:
    """Fitted weights from a file `write_combination` wrote; a plain error naming the file when it is not one."""
    try:
        return Combination.model_validate_json(Path(path).read_bytes())
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the combination: {error.strerror}") from None
    except ValueError as error:
        raise ConfigError(f"{path}: not a combination of looks: {str(error).splitlines()[0]}") from None
