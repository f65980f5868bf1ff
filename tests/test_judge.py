import random

import pytest

from flowrate.judge.backend import litellm_model_name
from flowrate.judge.retry import RetryPolicy, redact_secrets, retry_after_seconds
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


@pytest.mark.parametrize(
    "given, api_base, expected",
    [
        ("gpt-4o", None, "gpt-4o"),
        ("anthropic:claude-3-5-sonnet-latest", None, "anthropic/claude-3-5-sonnet-latest"),
        ("google:gemini-2.0-flash", None, "gemini/gemini-2.0-flash"),
        ("ollama:llama3", None, "ollama_chat/llama3"),
        ("ollama/llama3:8b", None, "ollama_chat/llama3:8b"),
        ("openai:gpt-4o-mini", None, "openai/gpt-4o-mini"),
        ("groq/llama-3.1-8b-instant", None, "groq/llama-3.1-8b-instant"),
        ("my-local-model", "http://127.0.0.1:8000/v1", "openai/my-local-model"),
    ],
)
def test_model_strings(given, api_base, expected):
    assert litellm_model_name(given, api_base) == expected


class FakeRateLimit(Exception):
    status_code = 429

    def __init__(self, retry_after):
        self.litellm_response_headers = {"retry-after": retry_after}


def test_retry_after_is_honoured_and_capped():
    policy = RetryPolicy(backoff=0.5, backoff_max=10)
    assert retry_after_seconds(FakeRateLimit("3")) == 3.0
    assert policy.wait_seconds(1, FakeRateLimit("3"), jitter=0.5) == 3.0
    assert policy.wait_seconds(1, FakeRateLimit("30"), jitter=0.5) == 10  # the cap wins
    assert policy.wait_seconds(4, None, jitter=0.5) == 4.0  # 0.5 * 2**3
    assert RetryPolicy(backoff=0, backoff_max=0).wait_seconds(3, FakeRateLimit("5"), jitter=random.random()) == 0


def test_secrets_are_redacted(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-verysecret")
    assert redact_secrets("Incorrect key sk-ant-verysecret given") == "Incorrect key *** given"


def test_a_retry_after_that_is_neither_seconds_nor_a_date_is_ignored():
    assert retry_after_seconds(FakeRateLimit("soon")) is None
    assert RetryPolicy(backoff=1, backoff_max=60).wait_seconds(2, FakeRateLimit("soon"), jitter=0.5) == 2.0
