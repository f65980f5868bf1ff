"""The provider rules' reading of a refusal: which parameter it names, in the words each server
and LiteLLM use (taken from their answers: the OpenAI and Groq bodies as the stand-ins send them,
LiteLLM 1.110's UnsupportedParamsError as it raised it for gpt-5-mini's temperature 0)."""

import pytest

from flowrate.judge.errors import error_for, error_of
from flowrate.judge.provider_rules import refused_names


@pytest.mark.parametrize(
    "message, named",
    [
        (
            "gpt-5-mini doesn't support temperature=0.0 while reasoning is active. Only temperature=1 is supported"
            " unless reasoning_effort resolves to 'none'. To drop unsupported params set `litellm.drop_params = True`",
            ["temperature"],
        ),
        (
            "litellm.UnsupportedParamsError: azure does not support parameters: ['prompt_cache_key', 'seed']",
            ["prompt_cache_key", "seed"],
        ),
        (
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
            ["max_tokens"],
        ),
        ("an unrelated refusal: the messages are malformed", []),
    ],
)
def test_a_refusal_s_words_name_the_parameter_it_refused(message, named):
    assert refused_names(error_of(400, message)) == named


def test_openai_s_param_field_names_the_refused_parameter_whatever_the_words():
    body = b'{"error": {"message": "Unsupported value.", "type": "invalid_request_error", "param": "temperature"}}'
    assert refused_names(error_for(400, body)) == ["temperature"]


def test_an_output_limit_a_refusal_names_is_learned_and_every_later_reply_limit_kept_under_it():
    """Anthropic's words for a reply limit past the model's ("max_tokens: 8192 > 4096, which is the
    maximum allowed number of output tokens for ..."), for a model whose limit the map overstates."""
    from flowrate.judge.transports import make_backend

    backend = make_backend("anthropic/claude-newer-than-the-map", "http://127.0.0.1:9")
    body = backend.provider_body({"model": "claude-newer-than-the-map", "messages": [], "temperature": 0.0})
    assert body["max_tokens"] == 8192  # Anthropic requires one: sent even where the run gives none
    refusal = error_of(
        400,
        "max_tokens: 8192 > 4096, which is the maximum allowed number of output tokens for claude-newer-than-the-map",
    )
    assert backend.rules.learn(refusal, body)
    assert backend.provider_body(body)["max_tokens"] == 4096
    assert backend.notes() == ["the judge allows replies of 4096 tokens at most: max_tokens is sent at that"]
    assert backend.rules.learn(refusal, body)  # a call sent before it was learned is sent again, within it
    assert not backend.rules.learn(refusal, backend.provider_body(body))  # one sent within it: nothing to change
    assert len(backend.notes()) == 1  # said once
