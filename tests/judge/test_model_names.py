"""Model names as LiteLLM takes them, and a model no provider serves."""

import pytest

from flowrate.judge.address import JudgeAddress
from tests.helpers import distinct, write_jsonl


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
    assert JudgeAddress.parse(given, api_base).litellm_model == expected


def test_a_model_no_provider_serves_is_exit_2_before_any_call(run_flowrate, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(2))
    for model in ("gpt4o", "foo/bar"):
        for extra in ([], ["--dry-run"]):
            result = run_flowrate("eval", path, "-m", model, *extra)
            assert result.returncode == 2, result.stderr
            assert f"no provider serves model {model!r}" in result.stderr
