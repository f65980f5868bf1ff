"""The labelling queue: every failing conversation, a seeded 20 % of the passing ones, every one
whose samples disagree; or N random unlabelled ones from the last D days; and the answers on
each metric's own scale."""

from datetime import UTC, date, datetime

from flowrate.inputs.selection import stable_hash
from flowrate.review.queue import QueueRule, answers_for, build_queue
from tests.helpers import dated_row

FLOW = "conversational_flow_rate"


def flow_row(key, verdict, **extra):
    scores = {"fully": 1.0, "mostly": 0.9, "partial": 0.7, "minor": 0.3, "none": 0.0}
    return dated_row(key, FLOW, scores[verdict], verdict=verdict, **extra)


def test_the_default_queue_is_every_failure_a_seeded_fifth_of_passes_and_every_disagreement():
    passing = [flow_row(f"p{n}", "fully") for n in range(1000)]
    failing = [flow_row(f"f{n}", "minor") for n in range(7)]
    split = [flow_row(f"s{n}", "mostly", samples=3, agreement=2 / 3) for n in range(4)]
    errors = [dated_row("e0", FLOW, None)]
    queue = build_queue(passing + failing + split + errors, FLOW, QueueRule(), set())
    ids = {row.id for row in queue}
    assert {f"f{n}" for n in range(7)} <= ids and {f"s{n}" for n in range(4)} <= ids and "e0" not in ids
    sampled = {row.id for row in passing if stable_hash(f"0:{row.id}") < 0.2 * 2**64}
    assert ids - {f"f{n}" for n in range(7)} - {f"s{n}" for n in range(4)} == sampled
    assert 170 < len(sampled) < 230  # about a fifth of 1000
    assert [row.id for row in build_queue(passing + failing, FLOW, QueueRule(), set())] == [
        row.id for row in build_queue(list(reversed(passing + failing)), FLOW, QueueRule(), set())
    ]  # the same queue whatever the rows' order
    other_seed = {row.id for row in build_queue(passing, FLOW, QueueRule(seed=1), set())}
    assert other_seed != sampled


def test_the_queue_order_does_not_put_failures_first():
    rows = [flow_row(f"p{n}", "fully") for n in range(50)] + [flow_row(f"f{n}", "none") for n in range(50)]
    queue = build_queue(rows, FLOW, QueueRule(passing_share=1.0), set())
    first_half = [row.success for row in queue[:50]]
    assert 10 < first_half.count(False) < 40


def test_recent_takes_n_random_unlabelled_conversations_from_the_last_d_days():
    today = date(2026, 3, 20)
    rows = [flow_row(f"c{n}", "fully", evaluated_at=datetime(2026, 3, 20 - n, 9, tzinfo=UTC)) for n in range(20)] + [
        flow_row("chat-old", "fully", chat_date="2026-01-02", evaluated_at=datetime(2026, 3, 19, tzinfo=UTC))
    ]
    rule = QueueRule(recent=5, days=10)
    queue = build_queue(rows, FLOW, rule, {"c0", "c1"}, today=today)
    assert len(queue) == 5
    for row in queue:
        assert row.id not in {"c0", "c1", "chat-old"}  # labelled, or chatted long ago
        assert int(row.id[1:]) <= 10
    assert [row.id for row in queue] == [row.id for row in build_queue(rows, FLOW, rule, {"c0", "c1"}, today=today)]
    assert len(build_queue(rows, FLOW, QueueRule(recent=50, days=10), set(), today=today)) == 11


def test_answers_are_the_metrics_own_levels_or_points_each_with_its_key():
    flow = answers_for(flow_row("c", "minor"))
    assert [(a.value, a.score, a.key) for a in flow] == [
        ("fully", 1.0, "1"), ("mostly", 0.9, "2"), ("partial", 0.7, "3"), ("minor", 0.3, "4"), ("none", 0.0, "5")
    ]  # fmt: skip
    repetition = answers_for(dated_row("c", "repetitive_pattern_detection", 0.3, verdict="mostly"))
    assert [(a.value, a.score) for a in repetition][0] == ("none", 1.0)  # its inverted scale
    points = answers_for(dated_row("c", "coherence", 0.6, rating=3, scale=5))
    assert [(a.value, a.score, a.key) for a in points] == [(str(n), n / 5, str(n)) for n in range(1, 6)]
    assert answers_for(dated_row("c", "user_satisfaction", 0.6)) is None


def test_a_rubric_of_ones_own_gives_its_levels_and_without_it_no_buttons_are_made_from_the_verdict():
    from tests.helpers import ROOT

    row = dated_row("c", "resolution", 0.0, verdict="unresolved")
    assert answers_for(row) is None  # never the judge's own verdict as the only button
    rubric = str(ROOT / "configs" / "rubric.example.yaml")
    assert [(a.value, a.score, a.key) for a in answers_for(row, rubric)] == [
        ("resolved", 1.0, "1"), ("partly", 0.5, "2"), ("unresolved", 0.0, "3")
    ]  # fmt: skip
    assert [r.id for r in build_queue([row], "resolution", QueueRule(), set(), rubric=rubric)] == ["c"]
    assert build_queue([row], "resolution", QueueRule(), set()) == []


def test_a_conversation_the_judge_was_unsure_of_is_queued_beside_the_disagreements():
    passing = [flow_row(f"p{n}", "fully") for n in range(200)]
    unsure = [flow_row(f"u{n}", "fully", uncertain=True, level_probs={"fully": 0.45, "mostly": 0.4}) for n in range(5)]
    ids = {row.id for row in build_queue(passing + unsure, FLOW, QueueRule(), set())}
    assert {f"u{n}" for n in range(5)} <= ids
    assert len(ids & {row.id for row in passing}) < 80  # the passing ones still only sampled
