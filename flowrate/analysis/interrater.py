"""Agreement between people: where two or more reviewers labelled the same conversation and
metric, Krippendorff's alpha and the pairwise exact agreement.

Each reviewer counts once per conversation, with their latest label. A label with no labeler
names no reviewer to compare, so it is left out here (it still counts in calibration). On a
metric with a scale (the flow levels, 1..S points) each label is put on the nearest value of
the scale and alpha is ordinal; a metric scored in [0, 1] with no scale (user_satisfaction, the
offline check) is measured at the interval level. The `krippendorff` package computes alpha;
it is imported by the function that needs it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from itertools import combinations
from typing import Any, Literal

from pydantic import BaseModel

from flowrate.analysis.labels import Label
from flowrate.analysis.statistics import Statistic, bootstrap_ci95, rounded


class PeopleAgreement(BaseModel):
    """One metric's agreement between reviewers: `conversations` labelled by two or more of
    them, the `reviewers` among those, alpha at `level` ("ordinal" or "interval") with its
    interval over conversations, and the share of reviewer pairs on one conversation that gave
    the same answer (`exact_agreement`, over `pairs` such pairs)."""

    metric: str
    conversations: int
    reviewers: int
    level: str
    alpha: Statistic
    pairs: int
    exact_agreement: Statistic


def nearest_value(score: float, scores: list[float]) -> int:
    """The index of the scale value nearest to `score` (`scores` lowest first); a tie goes to
    the lower value, the cautious side, as a tie between samples does."""
    return min(range(len(scores)), key=lambda index: (abs(scores[index] - score), index))


def latest_per_reviewer(labels: list[Label]) -> dict[str, dict[str, Label]]:
    """By conversation, each named reviewer's latest label (the later line on a tie)."""
    found: dict[str, dict[str, Label]] = defaultdict(dict)
    for label in labels:
        if label.labeler is None:
            continue
        mine = found[label.conversation_id]
        if label.labeler not in mine or label.labeled_at >= mine[label.labeler].labeled_at:
            mine[label.labeler] = label
    return found


def several_reviewers(labels: list[Label]) -> int:
    """How many conversations of `labels` (one metric's) carry labels of more than one named reviewer."""
    return sum(len(mine) > 1 for mine in latest_per_reviewer(labels).values())


# the levels of measurement krippendorff.alpha knows, by the names the callers give them
LEVELS: dict[str, Literal["nominal", "ordinal", "interval", "ratio"]] = {
    "nominal": "nominal",
    "ordinal": "ordinal",
    "interval": "interval",
    "ratio": "ratio",
}


def krippendorff_alpha(table: Any, level: str, domain: Sequence[float] | None = None) -> float | None:
    """Krippendorff's alpha of `table` (one row per reviewer, one column per conversation,
    NaN where a reviewer gave no label) at `level`, over the values `domain` when given;
    None where it is not defined (no pairable values, or no variation at all)."""
    import warnings

    import krippendorff
    import numpy as np

    data = np.asarray(table, dtype=float)
    pairable = (~np.isnan(data)).sum(axis=0) >= 2
    if not pairable.any():
        return None
    values = np.unique(data[:, pairable][~np.isnan(data[:, pairable])])
    if domain is None and len(values) < 2:
        return None
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore")  # no expected disagreement: alpha is undefined, NaN
        try:
            value = float(krippendorff.alpha(data, value_domain=domain, level_of_measurement=LEVELS[level]))
        except ValueError:  # every pairable value the same: nothing to measure against
            return None
    return None if np.isnan(value) else value


def people_agreement(metric: str, labels: list[Label], scale: list[float] | None = None) -> PeopleAgreement | None:
    """Agreement between the reviewers of `metric` in `labels` (its labels only), None when no
    conversation has two reviewers. `scale` lists the scores of the metric's values, lowest
    first (ordinal alpha over them); None measures the scores at the interval level."""
    import numpy as np

    by_conversation = {key: mine for key, mine in latest_per_reviewer(labels).items() if len(mine) > 1}
    if not by_conversation:
        return None
    keys = sorted(by_conversation)
    reviewers = sorted({name for mine in by_conversation.values() for name in mine})
    table = np.full((len(reviewers), len(keys)), np.nan)
    for column, key in enumerate(keys):
        for name, label in by_conversation[key].items():
            value = label.score if scale is None else nearest_value(label.score, scale)
            table[reviewers.index(name), column] = value
    level, domain = ("interval", None) if scale is None else ("ordinal", list(range(len(scale))))
    same = []  # per conversation: (pairs agreeing, pairs)
    for column in range(len(keys)):
        given = table[:, column][~np.isnan(table[:, column])]
        pairs = list(combinations(given, 2))
        same.append((sum(a == b for a, b in pairs), len(pairs)))
    agreed = np.array(same, dtype=float)
    return PeopleAgreement(
        metric=metric,
        conversations=len(keys),
        reviewers=len(reviewers),
        level=level,
        alpha=Statistic(
            value=rounded(krippendorff_alpha(table, level, domain)),
            ci95=bootstrap_ci95(
                lambda index: krippendorff_alpha(table[:, index], level, domain), len(keys), vectorised=False
            ),
        ),
        pairs=int(agreed[:, 1].sum()),
        exact_agreement=Statistic(
            value=rounded(agreed[:, 0].sum() / agreed[:, 1].sum()),
            ci95=bootstrap_ci95(lambda index: agreed[index, 0].sum(axis=1) / agreed[index, 1].sum(axis=1), len(keys)),
        ),
    )
