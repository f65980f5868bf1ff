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
