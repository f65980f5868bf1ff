"""The one bootstrap: scipy's percentile bootstrap where every resample defines the figure,
undefined resamples left out where scipy's interval would be NaN, and no other resampling."""

import ast
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from flowrate.analysis.statistics import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, bootstrap_ci95, rounded

PACKAGE = Path(__file__).resolve().parents[2] / "flowrate"


def _scipy(data, statistic, paired=False):
    """scipy.stats.bootstrap, percentile method, with flowrate's seed and resample count."""
    return stats.bootstrap(
        data,
        statistic,
        n_resamples=BOOTSTRAP_RESAMPLES,
        paired=paired,
        method="percentile",
        rng=np.random.default_rng(BOOTSTRAP_SEED),
    )


def _nan_for_none(figure):
    return math.nan if figure is None else figure


@pytest.mark.parametrize("n", [2, 3, 17, 250])
def test_the_interval_is_scipys_percentile_bootstrap_where_every_resample_defines_the_figure(n):
    values = np.random.default_rng(n).normal(size=n)
    ours = bootstrap_ci95(lambda index: values[index].mean(axis=1), n)
    theirs = _scipy((values,), np.mean).confidence_interval
    assert ours == [round(float(theirs.low), 4), round(float(theirs.high), 4)]


def test_resampling_indices_keeps_pairs_together_as_scipys_paired_bootstrap_does():
    rng = np.random.default_rng(5)
    before, after = rng.random(40), rng.random(40)
    ours = bootstrap_ci95(lambda index: (after[index] - before[index]).mean(axis=1), 40)
    theirs = _scipy((before, after), lambda a, b, axis: (b - a).mean(axis=axis), paired=True).confidence_interval
    assert ours == [round(float(theirs.low), 4), round(float(theirs.high), 4)]
    unpaired = bootstrap_ci95(lambda index: after[index].mean(axis=1), 40)
    assert ours != unpaired


def test_a_resample_that_leaves_the_figure_undefined_is_left_out_where_scipys_interval_is_nan():
    labels = np.array([0.0, 1.0, 1.0, 0.0, 1.0])

    def share_of_ones_among_the_first_two(index):
        drawn = index[index < 2]  # none on a resample that draws neither of the first two items
        return labels[drawn].mean() if len(drawn) else None

    ours = bootstrap_ci95(share_of_ones_among_the_first_two, 5, vectorised=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = _scipy((np.arange(5),), lambda index: _nan_for_none(share_of_ones_among_the_first_two(index)))
    draws = result.bootstrap_distribution
    assert np.isnan(result.confidence_interval.low) and np.isnan(draws).sum() > 50
    assert ours == [round(float(x), 4) for x in np.nanpercentile(draws, [2.5, 97.5])]
    assert ours[0] < ours[1]


def test_fewer_than_two_items_or_no_defined_resample_give_no_interval():
    assert bootstrap_ci95(lambda index: index.mean(axis=1), 1) is None
    assert bootstrap_ci95(lambda index: index.mean(axis=1), 0) is None
    assert bootstrap_ci95(lambda index: None, 30, vectorised=False) is None
    assert bootstrap_ci95(lambda index: np.full(len(index), np.nan), 30) is None


def test_figures_are_given_to_4_places_and_undefined_ones_as_none():
    assert rounded(0.123456) == 0.1235 and rounded(np.float64(2 / 3)) == 0.6667
    assert rounded(None) is None and rounded(float("nan")) is None


def test_no_module_but_statistics_seeds_a_generator_or_defines_the_seed():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "analysis" / "statistics.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)
            defined = name == "BOOTSTRAP_SEED" and isinstance(node.ctx, ast.Store)
            if name == "default_rng" or defined:
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {name}")
    assert not found, "resampling outside flowrate/analysis/statistics.py: " + ", ".join(found)
