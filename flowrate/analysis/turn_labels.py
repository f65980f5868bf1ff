"""Where the judge points: the turns its key issues name against the turns people flagged, for a
set with per-turn behaviour labels (ABC-Eval: each turn's "redundant", "ignore", "irrelevant"
marked by two people, and ChatGPT-3.5's prediction kept beside them). Data only.

Each behaviour is scored by precision, recall and F1 of the flagged turns, taken against each of
the two people in turn and averaged (F1 is then symmetric, so the two people's own agreement is
one figure); the turns the judge names stand for every behaviour, since a key issue says which
turn but not which behaviour, and the union of the behaviours ("any") is scored too.

Beside them, `every_turn` names every turn of every dialogue: recall 100 % and precision the share
of turns flagged, the F1 a judge must pass to have pointed at anything (on ABC-Eval's first 60:
redundant 14.3, ignore 20.7, irrelevant 28.7, where ChatGPT-3.5 reaches 32.4, 24.9, 40.0)."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
from pydantic import BaseModel

from flowrate.results.rows import EvaluationRow
from flowrate.rubric.combination import problem_turns

BEHAVIOURS = ("redundant", "ignore", "irrelevant")
ANY = "any"
# "turn 3: ...", "turns 2 and 4: ...", "(turn 5) ...": the turns a key issue starts with
_NAMED = re.compile(r"^\s*\(?turns?\s+(\d+(?:\s*(?:,|and|&|-|–)\s*\d+)*)", re.IGNORECASE)
_NUMBER = re.compile(r"\d+")
Flags = dict[str, list[set[int]]]  # behaviour -> one set of flagged turns per rater


class TurnScore(BaseModel):
    """Precision, recall and F1 of one behaviour's flagged turns, over `dialogues` dialogues and
    `flagged` turns people flagged (the mean over the two people)."""

    behaviour: str
    precision: float | None
    recall: float | None
    f1: float | None


class TurnReport(BaseModel):
    """Where the judge points against people, per behaviour, beside ChatGPT-3.5's kept prediction
    and the two people's own agreement on the same `dialogues`."""

    dialogues: int
    judge: list[TurnScore]
    chatgpt: list[TurnScore]
    people: list[TurnScore]
    every_turn: list[
        TurnScore
    ] = []  #: every turn of every dialogue named: what pointing at nothing in particular scores
    #: the turns the per-turn look named (`problem_turns`, `--turn-look`), on the dialogues it answered
    turn_look: list[TurnScore] = []
    turn_look_dialogues: int = 0


def named_turns(issues: list[str]) -> set[int]:
    """The turn numbers the key `issues` begin with."""
    found: set[int] = set()
    for issue in issues:
        match = _NAMED.match(issue)
        if match:
            found.update(int(number) for number in _NUMBER.findall(match.group(1)))
    return found


def read_turn_flags(path: str | Path) -> dict[str, tuple[Flags, dict[str, set[int]], int]]:
    """Per dialogue id of a set file, each behaviour's turns (1-based) flagged by each person, by
    ChatGPT-3.5, and the number of turns labelled."""
    found = {}
    for line in Path(path).read_bytes().splitlines():
        if not line.strip():
            continue
        record = orjson.loads(line)
        turns = record.get("turn_behavior_labels")
        if not isinstance(turns, list):
            continue
        people: Flags = {behaviour: [set(), set()] for behaviour in BEHAVIOURS}
        chatgpt: dict[str, set[int]] = {behaviour: set() for behaviour in BEHAVIOURS}
        for number, labels in enumerate(turns, start=1):
            for behaviour in BEHAVIOURS:
                label = labels.get(behaviour) or {}
                for rater, flagged in enumerate((label.get("human") or [0, 0])[:2]):
                    if flagged:
                        people[behaviour][rater].add(number)
                if label.get("gpt"):
                    chatgpt[behaviour].add(number)
        found[str(record.get("id"))] = (people, chatgpt, len(turns))
    return found


def turn_report(
    rows: list[EvaluationRow], flags: dict[str, tuple[Flags, dict[str, set[int]], int]], metric: str
) -> TurnReport:
    """The judge's named turns in `rows` of `metric` (usable ones) against the people's `flags`."""
    judged = {row.id: named_turns(row.key_issues) for row in rows if row.metric == metric and row.error is None}
    ids = sorted(set(judged) & set(flags))
    judge, chatgpt, people, every = [], [], [], []
    for behaviour in (*BEHAVIOURS, ANY):
        raters = rater_turns(flags, ids, behaviour)
        judge.append(score_turns(behaviour, [judged[i] for i in ids], raters))
        chatgpt.append(score_turns(behaviour, [chatgpt_turns(flags[i][1], behaviour) for i in ids], raters))
        people.append(score_turns(behaviour, raters[1], [raters[0]]))
        every.append(score_turns(behaviour, [set(range(1, flags[i][2] + 1)) for i in ids], raters))
    looked = {
        row.id: set(row.problem_turns)
        for row in rows
        if row.metric == metric and row.error is None and row.problem_turns is not None and row.id in flags
    }
    looked_ids = sorted(looked)
    turn_look = []
    if looked_ids:
        for behaviour in (*BEHAVIOURS, ANY):
            turn_look.append(
                score_turns(behaviour, [looked[i] for i in looked_ids], rater_turns(flags, looked_ids, behaviour))
            )
    return TurnReport(
        dialogues=len(ids), judge=judge, chatgpt=chatgpt, people=people, every_turn=every, turn_look=turn_look,
        turn_look_dialogues=len(looked_ids),
    )  # fmt: skip


def rater_turns(
    flags: dict[str, tuple[Flags, dict[str, set[int]], int]], ids: list[str], behaviour: str
) -> list[list[set[int]]]:
    """Each of the two people's flagged turns of `behaviour` (or any, `ANY`), per dialogue of `ids`."""
    return [[_flagged(flags[i][0], behaviour, rater) for i in ids] for rater in (0, 1)]


def _flagged(people: Flags, behaviour: str, rater: int) -> set[int]:
    """The turns `rater` (0 or 1) flagged with `behaviour` (or with any of them, `ANY`)."""
    if behaviour == ANY:
        return set().union(*(people[b][rater] for b in BEHAVIOURS))
    return people[behaviour][rater]


def chatgpt_turns(chatgpt: dict[str, set[int]], behaviour: str) -> set[int]:
    """The turns ChatGPT-3.5's kept prediction flagged with `behaviour` (or with any, `ANY`)."""
    return set().union(*chatgpt.values()) if behaviour == ANY else chatgpt[behaviour]


def score_turns(behaviour: str, predicted: list[set[int]], references: list[list[set[int]]]) -> TurnScore:
    """P, R and F1 of `predicted` turns (one set per dialogue) against each reference, averaged."""
    scores: list[tuple[float | None, float | None, float | None]] = []
    for reference in references:
        hits = sum(len(p & r) for p, r in zip(predicted, reference))
        said, flagged = sum(len(p) for p in predicted), sum(len(r) for r in reference)
        precision = hits / said if said else None
        recall = hits / flagged if flagged else None
        f1 = 2 * hits / (said + flagged) if said + flagged else None
        scores.append((precision, recall, f1))

    def mean(index: int) -> float | None:
        values = [value for score in scores if (value := score[index]) is not None]
        return round(sum(values) / len(values) * 100, 1) if values else None

    return TurnScore(behaviour=behaviour, precision=mean(0), recall=mean(1), f1=mean(2))


def fit_threshold(p_problem: list[dict[int, float]], references: list[list[set[int]]], behaviour: str) -> float:
    """The P(the reply breaks the flow) from which naming the turns of `p_problem` (one dict of turn
    number to P per dialogue) scores the best F1 of `behaviour` against `references` (each rater's
    flagged turns, per dialogue), over every P seen; at equal F1 the higher, which names fewer turns.
    Fit it on dialogues other than those it is reported on."""
    candidates = sorted({p for turns in p_problem for p in turns.values()}, reverse=True)
    if not candidates:
        raise ValueError("no turn has a P(problem) to fit a threshold on")

    def f1(threshold: float) -> float:
        return score_turns(behaviour, turns_above(p_problem, threshold), references).f1 or 0.0

    return max(candidates, key=f1)  # max keeps the first of equals: the highest threshold


def turns_above(p_problem: list[dict[int, float]], threshold: float) -> list[set[int]]:
    """The turns of each dialogue whose P(the reply breaks the flow) is at least `threshold`."""
    return [set(problem_turns(turns, threshold)) for turns in p_problem]
