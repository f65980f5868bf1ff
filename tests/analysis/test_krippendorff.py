"""Agreement between people: Krippendorff's alpha on Krippendorff's own worked example, the
pairwise exact agreement, and the conversations calibration counts as labelled by several."""

from datetime import date

import pytest

from flowrate.analysis.interrater import krippendorff_alpha, people_agreement, several_reviewers
from flowrate.analysis.labels import Label

NAN = float("nan")
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: four observers
# (rows), twelve units (columns), values 1..5, missing ones NaN. Published: nominal 0.743,
# ordinal 0.815, interval 0.849, ratio 0.797 (the krippendorff package's docstring quotes it).
RELIABILITY_DATA = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
    [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
]


def as_labels(table, points=5, metric="coherence"):
    """The table as labels: observer A..D a labeler, unit u0..u11 a conversation, value v the row score v / points."""
    return [
        Label(f"u{unit:02d}", metric, value / points, date(2026, 3, 1), "ABCD"[observer])
        for observer, values in enumerate(table)
        for unit, value in enumerate(values)
        if value == value  # not NaN
    ]


@pytest.mark.parametrize(
    ("level", "published"), [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)]
)
def test_alpha_gives_krippendorffs_published_values(level, published):
    assert round(krippendorff_alpha(RELIABILITY_DATA, level), 3) == published


def test_alpha_of_labels_on_a_point_scale_is_ordinal_and_matches_the_published_value():
    scale = [point / 5 for point in range(1, 6)]
    report = people_agreement("coherence", as_labels(RELIABILITY_DATA), scale)
    assert report.level == "ordinal"
    assert round(report.alpha.value, 3) == 0.815
    # u11 has one observer: nothing to compare it with, so it is not counted
    assert (report.conversations, report.reviewers) == (11, 4)
    low, high = report.alpha.ci95
    assert low <= report.alpha.value <= high


def test_exact_agreement_is_the_share_of_reviewer_pairs_that_gave_the_same_answer():
    report = people_agreement("coherence", as_labels(RELIABILITY_DATA), [point / 5 for point in range(1, 6)])
    # pairs per unit, counted by hand from the table: (agreeing, pairs)
    by_unit = [(3, 3), (3, 6), (6, 6), (6, 6), (6, 6), (0, 6), (6, 6), (3, 6), (6, 6), (3, 3), (1, 1)]
    assert report.pairs == sum(pairs for _, pairs in by_unit) == 55
    assert report.exact_agreement.value == round(sum(same for same, _ in by_unit) / 55, 4)


def test_alpha_on_a_metric_with_no_scale_is_interval():
    report = people_agreement("user_satisfaction", as_labels(RELIABILITY_DATA), None)
    assert report.level == "interval" and round(report.alpha.value, 3) == 0.849


def test_a_reviewer_counts_once_per_conversation_with_their_latest_label():
    labels = [
        Label("c1", "m", 0.0, date(2026, 3, 1), "ann"),
        Label("c1", "m", 1.0, date(2026, 3, 5), "ann"),  # ann changed her mind: this one counts
        Label("c1", "m", 1.0, date(2026, 3, 2), "bob"),
        Label("c2", "m", 1.0, date(2026, 3, 2), "bob"),
        Label("c2", "m", 0.0, date(2026, 3, 2), None),  # no labeler: no reviewer to compare
    ]
    report = people_agreement("m", labels, [0.0, 1.0])
    assert (report.conversations, report.pairs, report.exact_agreement.value) == (1, 1, 1.0)
    assert several_reviewers(labels) == 1


def test_no_conversation_with_two_reviewers_gives_no_report():
    labels = [Label("c1", "m", 1.0, date(2026, 3, 1), "ann"), Label("c2", "m", 0.0, date(2026, 3, 1), "bob")]
    assert people_agreement("m", labels, [0.0, 1.0]) is None
