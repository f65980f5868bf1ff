"""Intervals for every figure of the analysis: one seed, one resampling function, one interval type.

Every interval is a seeded percentile bootstrap over the items a figure is computed from
(conversations, or pairs of a judgement and a label), paired: a resample draws whole items, so
the two sides of a pair stay together. Callers pass items sorted (by conversation id), so the
same data give the same interval on every run. numpy is imported by the function that needs it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

BOOTSTRAP_SEED = 20240229
BOOTSTRAP_RESAMPLES = 1000


class Statistic(BaseModel):
    """A figure (None: not defined on these data) and its 95 % interval (None: none to give)."""

    value: float | None
    ci95: list[float] | None = None


def rounded(value: float | None) -> float | None:
    """`value` to the 4 places every figure is given with; None and NaN (undefined) give None."""
    return None if value is None or math.isnan(value) else round(float(value), 4)


def bootstrap_ci95(
    statistic: Callable[[Any], Any], n: int, resamples: int = BOOTSTRAP_RESAMPLES, vectorised: bool = True
) -> list[float] | None:
    """The 2.5th and 97.5th percentiles, to 4 places, of `statistic` over `resamples` seeded
    resamples of `n` items; None for fewer than 2 items or when no resample defines the figure.

    `statistic` is given indices into the caller's items, with replacement: with `vectorised`,
    all resamples at once as an integer array of shape (`resamples`, `n`), and it returns one
    figure per row; else one row at a time, and it returns one figure. A figure that is NaN or
    None on a resample (a correlation on a resample with no spread, a rate whose class the
    resample lacks) is left out of the percentiles.

    scipy.stats.bootstrap (percentile method, paired) draws the same index rows from the same
    generator, but is not used: its interval is NaN as soon as one resample leaves the figure
    undefined, which most of these figures do on small sets, and it takes the percentiles at
    (1 - 0.95) / 2 = 0.025000000000000022, not 0.025. On a figure defined on every resample
    the two agree (`tests/analysis/test_statistics.py` holds it)."""
    if n < 2:
        return None
    import numpy as np

    indices = np.random.default_rng(BOOTSTRAP_SEED).integers(0, n, size=(resamples, n))
    if vectorised:
        draws = np.asarray(statistic(indices), dtype=float)
    else:
        draws = np.array([_defined(statistic(row)) for row in indices], dtype=float)
    draws = draws[~np.isnan(draws)]
    if not len(draws):
        return None
    return [round(float(x), 4) for x in np.percentile(draws, [2.5, 97.5])]


def _defined(figure: float | None) -> float:
    return float("nan") if figure is None else float(figure)
