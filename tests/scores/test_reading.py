"""A reply read into a verdict: found in prose and fences, refused when it is not one, and the
flow metric's verdicts as scores."""

import pytest

from flowrate.results.rows import Verdict
from flowrate.rubric.model import load_rubric
from flowrate.scores.reading import UnparsableReply
from flowrate.scores.reading import parse_reply as parse_with


def parse_reply(text):
    """The flow metric's reply, read as the packaged rubric derives it."""
    rating = parse_with(text, load_rubric()).ratings["conversational_flow_rate"]
    rating.verdict = Verdict(rating.value)
    return rating


@pytest.mark.parametrize(
    "text, verdict",
    [
        ('{"reason": "ok", "key_issues": [], "verdict": "fully"}', Verdict.FULLY),
        ('{"verdict": "  MOSTLY \\n", "reason": "r"}', Verdict.MOSTLY),
        ('```json\n{"reason": "r", "verdict": "Partial"}\n```', Verdict.PARTIAL),
        (
            'Here is my grading:\n{"reason": "a {brace} inside", "key_issues": ["turn 2: x"], "verdict": "minor"}\nThanks.',
            Verdict.MINOR,
        ),
        ('{"reason": "r", "verdict": "none", "extra": 1}', Verdict.NONE),
    ],
)
def test_parse_reply_finds_the_verdict(text, verdict):
    assert parse_reply(text).verdict is verdict


def test_parse_reply_keeps_reason_and_issues():
    reply = parse_reply('{"reason": " fine ", "key_issues": ["turn 3: repeats", ""], "verdict": "partial"}')
    assert (reply.reason, reply.key_issues) == ("fine", ["turn 3: repeats"])


@pytest.mark.parametrize("text", ["The flow was good.", '{"reason": "r"}', '{"verdict": "excellent"}', ""])
def test_parse_reply_refuses_what_is_not_a_verdict(text):
    with pytest.raises(UnparsableReply):
        parse_reply(text)


def test_verdict_scores():
    assert {v.value: v.score for v in Verdict} == {
        "fully": 1.0,
        "mostly": 0.9,
        "partial": 0.7,
        "minor": 0.3,
        "none": 0.0,
    }
