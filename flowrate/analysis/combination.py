"""Several looks of a judge at a conversation (the verdict's score, the expected score, the
verdict-first look, the checklist's score, ...) combined into one score, with weights fit on
human-rated sets other than the one it is reported on (issue 46), and the judge card's lines.
Data only.

The method, chosen to be unable to overfit a set of ~125 dialogues:
- each look is standardised by its mean and standard deviation over the fit sets' dialogues
  (kept with the weights, so a conversation is scored alone), and centred within its set for the
  fit, so a set whose looks sit higher weighs nothing;
- people's label is taken as its rank within its set, standardised: the sets rate on different
  scales, and only the order within a set is what a Spearman reads;
- the weights are a ridge regression shrunk towards the plain average of the standardised looks
  (w0 = 1/k each), with the penalty `PRIOR_SHARE` of the number of fit dialogues: the average
  counts as much as a tenth of the data. The looks of one judge agree closely (the verdict, its
  expected score and the combined one), and ordinary least squares then swings their weights to
  large opposite signs; a tenth is enough to hold two looks that correlate at 0.98 to weights of
  the same sign (`tests/analysis/test_combination.py`), while a look that is noise on every fit
  set keeps a few hundredths;
- no weight is negative: a look that would weigh against the others is left out and the rest
  fit again (a look can only add to the score);
- the weights are scaled to sum to 1, so they read as shares.
No weight, penalty or threshold is ever chosen on the set a combination is reported on:
`leave_one_set_out` fits on the others and reports on the one left out.

The fitted weights go out as a JSON file with their provenance (`Combination`: the looks, the
fit sets and their sizes, the date and the command), and the card as JSONL, a line per dialogue
(`card_lines`: `set`, `id`, each look by name, each fitted score and `fit_on`, the sets it was
fit on), from which every Spearman can be computed again with the public labels."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import orjson
from pydantic import BaseModel

from flowrate.analysis.agreement import correlation
from flowrate.analysis.statistics import Statistic
from flowrate.errors import ConfigError
from flowrate.results.rows import EvaluationRow, looks
from flowrate.rubric.combination import Combination

PRIOR_SHARE = 0.1  #: the ridge penalty over the number of fit dialogues (see above)
FITTED = "combined_fit"  #: the name of the fitted score on the card
MEAN = "looks_mean"  #: the plain mean of the looks a dialogue has, on the card: fit on nothing
SHARED = 0.9  #: a look is combined when at least this share of every set's dialogues has it


class DialogueLooks(BaseModel):
    """One dialogue of a human-rated set: its `set` and `id` (as in the public set), each look's
    score by name (`scores`; a look it lacks is absent), people's `label`, oriented so that
    higher is better (a rate of flow violations is given negated), and the judge's P(yes) to each
    checklist question (`checklist_p_yes`, by id), so each question can be measured alone, and
    to each turn of the per-turn look (`turn_p_problem`, by turn number), so a threshold can be
    fit on other dialogues."""

    set: str
    id: str
    scores: dict[str, float]
    label: float
    checklist_p_yes: dict[str, float] = {}
    turn_p_problem: dict[str, float] = {}


class HeldOut(BaseModel):
    """A set left out of the fit: the combination fit on the others, and on this set (`n`
    dialogues with every look) the Spearman of the combined score and of each look alone."""

    set: str
    n: int
    combination: Combination
    combined: Statistic
    looks: dict[str, Statistic]


def dialogue_looks(
    set_name: str, rows: Iterable[EvaluationRow], labels: dict[str, float], row_metric: str, better: int = 1
) -> list[DialogueLooks]:
    """The dialogues of a set judged in `rows` (those of `row_metric`, without an error, with a
    label), each with the looks its row carries (`results.rows.looks`) and their plain mean
    (`MEAN`), and people's label times `better` (-1 where a lower label is better)."""
    found = []
    for row in rows:
        label = labels.get(row.id)
        if row.metric != row_metric or row.error is not None or label is None or label != label:
            continue
        scores = looks(row)
        if scores:
            scores[MEAN] = sum(scores.values()) / len(scores)
        answers, turns = row.checklist_p_yes or {}, row.turn_p_problem or {}
        found.append(
            DialogueLooks(
                set=set_name,
                id=row.id,
                scores=scores,
                label=better * label,
                checklist_p_yes=answers,
                turn_p_problem=turns,
            )  # fmt: skip
        )
    return found


def shared_looks(dialogues: list[DialogueLooks]) -> list[str]:
    """The looks (not their mean) that at least `SHARED` of every set's dialogues have, in the
    order `results.rows.looks` gives them."""
    sets = {d.set for d in dialogues}
    names = list(dict.fromkeys(name for d in dialogues for name in d.scores if name != MEAN))
    return [
        name
        for name in names
        if all(
            sum(name in d.scores for d in dialogues if d.set == s) >= SHARED * sum(d.set == s for d in dialogues)
            for s in sets
        )
    ]


def fit_combination(
    dialogues: Iterable[DialogueLooks], looks: list[str], *, date: str = "", command: str = ""
) -> Combination:
    """The weights of `looks` fit on `dialogues` (several sets; those lacking a look are left out)."""
    import numpy as np

    usable = [d for d in dialogues if all(d.scores.get(look) is not None for look in looks)]
    sets = sorted({d.set for d in usable})
    if len(looks) < 1 or len(usable) < len(looks) + 2:
        raise ConfigError(f"too few dialogues with every look ({', '.join(looks)}) to fit: {len(usable)}")
    raw = np.array([[d.scores[look] for look in looks] for d in usable], dtype=float)
    means, sds = raw.mean(axis=0), raw.std(axis=0)
    flat = [look for look, sd in zip(looks, sds) if sd == 0]
    if flat:
        raise ConfigError(f"a look with the same score on every fit dialogue cannot be weighted: {', '.join(flat)}")
    features, target = design(usable, (raw - means) / sds)
    weights = _non_negative(features, target, PRIOR_SHARE * len(usable))
    return Combination(
        looks=list(looks),
        weights={look: round(float(w), 6) for look, w in zip(looks, weights)},
        means={look: round(float(m), 6) for look, m in zip(looks, means)},
        sds={look: round(float(s), 6) for look, s in zip(looks, sds)},
        fit_on=sets,
        sizes={name: sum(d.set == name for d in usable) for name in sets},
        date=date,
        command=command,
    )


def design(usable: list[DialogueLooks], standardised):
    """The fit's features (each look `standardised`, centred within its set) and target (people's
    label as its standardised rank within its set), a row per dialogue of `usable`."""
    import numpy as np

    features, target = standardised.copy(), np.zeros(len(usable))
    for name in sorted({d.set for d in usable}):
        rows = np.array([d.set == name for d in usable])
        features[rows] -= features[rows].mean(axis=0)
        target[rows] = _standard_ranks([d.label for d, keep in zip(usable, rows) if keep])
    return features, target


def ridge_weights(features, target, penalty: float):
    """The ridge solution shrunk towards the plain average (1/k each) with `penalty`."""
    import numpy as np

    k = features.shape[1]
    prior = np.full(k, 1.0 / k)
    return np.linalg.solve(features.T @ features + penalty * np.eye(k), features.T @ target + penalty * prior)


def _non_negative(features, target, penalty: float):
    """`ridge_weights` with no look weighing against the others: while a weight is negative, the
    most negative look is set to 0 and the rest fit again; then scaled to sum to 1. A look can
    only add to the score (on iEval's 60 the checklist took -0.14, a fit to noise that also
    turned the score's scale upside down), so the weights read as shares of a mean of the looks."""
    import numpy as np

    kept = list(range(features.shape[1]))
    weights = np.zeros(features.shape[1])
    while kept:
        fitted = ridge_weights(features[:, kept], target, penalty)
        if (fitted >= 0).all():
            weights[kept] = fitted
            break
        kept.pop(int(np.argmin(fitted)))
    total = weights.sum()
    return weights / total if total > 0 else np.full(features.shape[1], 1.0 / features.shape[1])


def _standard_ranks(values: list[float]):
    """`values`' ranks (ties averaged), standardised; all zero when they do not vary."""
    import numpy as np
    from scipy.stats import rankdata

    ranks = rankdata(values)
    spread = ranks.std()
    return (ranks - ranks.mean()) / spread if spread > 0 else np.zeros(len(values))


def leave_one_set_out(
    dialogues: list[DialogueLooks], looks: list[str], *, date: str = "", command: str = ""
) -> list[HeldOut]:
    """For each set: the combination fit on every other set, and its agreement on the set left out."""
    import numpy as np

    held = []
    for name in sorted({d.set for d in dialogues}):
        combination = fit_combination([d for d in dialogues if d.set != name], looks, date=date, command=command)
        mine = sorted((d for d in dialogues if d.set == name), key=lambda d: d.id)
        scored = [(d, s) for d in mine if (s := combination.score(d.scores)) is not None]
        labels = np.array([d.label for d, _ in scored], dtype=float)
        combined = correlation("spearman", np.array([s for _, s in scored], dtype=float), labels)
        alone = {
            look: correlation("spearman", np.array([d.scores[look] for d, _ in scored], dtype=float), labels)
            for look in looks
        }
        held.append(HeldOut(set=name, n=len(scored), combination=combination, combined=combined, looks=alone))
    return held


def card_lines(dialogues: list[DialogueLooks], held: list[HeldOut]) -> list[dict]:
    """The judge card's lines: a line per dialogue with `set`, `id`, each look by name, where
    its set was held out the fitted score (`FITTED`) and the sets it was fit on (`fit_on`), and
    the P(yes) to each checklist question (`checklist_p_yes`) and each turn's P(the reply breaks
    the flow) (`turn_p_problem`) where the judge answered them."""
    by_set = {h.set: h.combination for h in held}
    lines = []
    for d in sorted(dialogues, key=lambda d: (d.set, d.id)):
        line: dict = {"set": d.set, "id": d.id, **d.scores}
        combination = by_set.get(d.set)
        fitted = combination.score(d.scores) if combination is not None else None
        if combination is not None and fitted is not None:
            line[FITTED] = round(fitted, 6)
            line["fit_on"] = {FITTED: combination.fit_on}
        if d.checklist_p_yes:
            line["checklist_p_yes"] = d.checklist_p_yes
        if d.turn_p_problem:
            line["turn_p_problem"] = d.turn_p_problem
        lines.append(line)
    return lines


def write_card(path: str | Path, lines: list[dict]) -> None:
    """The card's lines as JSONL at `path`, written whole or not at all."""
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    partial.replace(path)
