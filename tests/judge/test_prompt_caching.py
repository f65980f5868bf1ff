"""Prompt caching and what it costs: the rubric's prefix is the same bytes for every conversation,
Claude's is marked for caching (Anthropic caches only what is marked), OpenAI's is sent with a
`prompt_cache_key`, and each row carries the tokens its provider read from the cache, priced at
the cached-input price of LiteLLM's map. Over 24 real dialogues (the USS sets beside the project,
../shared/data/dialogue-ratings, or FLOWRATE_DIALOGUE_RATINGS; the tests that need them are
skipped where they are not)."""

import json
import os
import re
from pathlib import Path

import pytest

from flowrate.inputs.conversation import ConversationalEvalTestCase
from flowrate.judge.model_map import model_facts
from flowrate.rubric.model import load_rubric
from tests.helpers import ROOT, distinct, read_rows, turn_record, write_jsonl

pytestmark = pytest.mark.xdist_group("judge_server")

RATINGS = os.environ.get("FLOWRATE_DIALOGUE_RATINGS") or ROOT.parent / "shared" / "data" / "dialogue-ratings"
USS = Path(RATINGS) / "uss_sgd.jsonl"


def uss_dialogues(path, count=24):
    """The first `count` USS-SGD dialogues, as their file holds them, written to `path`."""
    if not USS.is_file():
        pytest.skip(f"{USS}: not found (the USS dialogues of ../shared/data/dialogue-ratings)")
    lines = [line for line in USS.read_text().splitlines() if line.strip()][:count]
    path.write_text("\n".join(lines) + "\n")
    return path


def uncached_cost(model, rows):
    """What `rows`' tokens would cost with nothing read from or written to a cache (the map's prices)."""
    facts = model_facts(model) or {}
    prompt = sum(row["usage"]["prompt_tokens"] for row in rows)
    completion = sum(row["usage"]["completion_tokens"] for row in rows)
    return prompt * facts["input_cost_per_token"] + completion * facts["output_cost_per_token"]


def test_the_rubric_prefix_is_the_same_bytes_for_every_conversation():
    """The providers that cache by themselves (OpenAI, Gemini) cache a prefix only when it is
    byte-identical: everything before the conversation's message must not depend on it."""
    rubric = load_rubric(None)
    cases = [
        ConversationalEvalTestCase.model_validate(turn_record("a", "Where is my parcel?", "It left today.")),
        ConversationalEvalTestCase.model_validate(
            turn_record("b", "Necesito un reembolso", "Claro.", "¿Cuándo?", "En 5 días.", chatbot_role="a bank")
        ),
    ]
    first, second = (rubric.build_messages(case) for case in cases)
    assert json.dumps(first[:-1]) == json.dumps(second[:-1])
    assert first[-1] != second[-1]


def test_a_claude_judge_marks_the_rubric_prefix_and_pays_at_most_six_tenths_of_the_uncached_price(
    judge, run_flowrate, cli_env, tmp_path
):
    """docs.anthropic.com/en/docs/build-with-claude/prompt-caching: the prefix up to the marked
    block is written once (1.25x the input price) and read after (0.1x)."""
    path = uss_dialogues(tmp_path / "uss.jsonl")
    env = {**cli_env, "ANTHROPIC_API_KEY": "sk-ant-test"}
    model = "anthropic/claude-sonnet-4-5"
    args = (
        "eval",
        path,
        "--model",
        model,
        "--api-base",
        f"http://127.0.0.1:{judge.port}",
        "-j",
        "1",
        "-o",
        "out.jsonl",
    )
    result = run_flowrate(*args, env=env)
    assert result.returncode in (0, 3), result.stderr
    rows = read_rows(tmp_path / "out.jsonl")
    assert len(rows) == 24 and all(row["error"] is None for row in rows)
    for body in judge.bodies:
        marked = [block for message in body["messages"] for block in message["content"] if "cache_control" in block]
        assert len(marked) == 1 and marked[0]["cache_control"] == {"type": "ephemeral"}
    written = [row["usage"]["cache_write_tokens"] for row in rows]
    read = [row["usage"]["cached_tokens"] for row in rows]
    assert written[0] > 1024 and written[1:] == [0] * 23
    assert read[0] == 0 and all(tokens == written[0] for tokens in read[1:])
    cost = sum(row["cost_usd"] for row in rows)
    assert cost <= 0.6 * uncached_cost(model, rows), (cost, uncached_cost(model, rows))
    assert "read from the judge's prompt cache" in result.stderr, result.stderr


def test_a_gpt_4o_judge_s_rows_report_the_tokens_its_server_cached_priced_at_the_cached_price(
    judge, run_flowrate, cli_env, tmp_path, transport
):
    """platform.openai.com/docs/guides/prompt-caching: a repeated prefix of 1,024 tokens or more is
    cached by itself, `usage.prompt_tokens_details.cached_tokens`; gpt-4o's cached input is half price."""
    judge.behave_as("openai-api")
    path = uss_dialogues(tmp_path / "uss.jsonl")
    env = {**cli_env, "OPENAI_BASE_URL": judge.base_url}
    result = run_flowrate("eval", path, "--model", "gpt-4o", "-j", "1", "-o", "out.jsonl", env=env)
    assert result.returncode in (0, 3), result.stderr
    rows = read_rows(tmp_path / "out.jsonl")
    assert len(rows) == 24 and all(row["error"] is None for row in rows)
    assert all(body["prompt_cache_key"] == judge.bodies[0]["prompt_cache_key"] for body in judge.bodies)
    cached = [row["usage"]["cached_tokens"] for row in rows]
    assert cached[0] == 0 and all(tokens >= 1024 for tokens in cached[1:])
    facts = model_facts("gpt-4o")
    for row in rows:
        usage = row["usage"]
        expected = (
            (usage["prompt_tokens"] - usage["cached_tokens"]) * facts["input_cost_per_token"]
            + usage["cached_tokens"] * facts["cache_read_input_token_cost"]
            + usage["completion_tokens"] * facts["output_cost_per_token"]
        )
        assert row["cost_usd"] == pytest.approx(expected)
    assert sum(row["cost_usd"] for row in rows) < uncached_cost("gpt-4o", rows)


def test_a_model_the_map_prices_at_zero_on_a_paid_provider_has_an_unknown_cost_never_zero(
    judge, run_flowrate, cli_env, tmp_path
):
    """LiteLLM gives claude-opus-4-1 (which its map does not list) 0 a token: a price no one knows."""
    import litellm

    assert litellm.get_model_info("anthropic/claude-opus-4-1")["input_cost_per_token"] == 0
    path = write_jsonl(tmp_path / "c.jsonl", distinct(2))
    env = {**cli_env, "ANTHROPIC_API_KEY": "sk-ant-test"}
    api_base = f"http://127.0.0.1:{judge.port}"
    result = run_flowrate(
        "eval", path, "--model", "anthropic/claude-opus-4-1", "--api-base", api_base, "-o", "out.jsonl", env=env
    )
    assert result.returncode == 0, result.stderr
    rows = read_rows(tmp_path / "out.jsonl")
    assert [row["cost_usd"] for row in rows] == [None, None]
    assert "rows with unknown price" in result.stderr


def test_a_price_from_the_config_prices_a_deployment_the_map_does_not_know(judge, run_flowrate, cli_env, tmp_path):
    judge.deployments["my-judge"] = "gpt-4o"
    config = tmp_path / "flowrate.yaml"
    config.write_text("prices:\n  azure/my-judge: {input: 2.5, cached_input: 1.25, output: 10}\n")
    path = write_jsonl(tmp_path / "c.jsonl", distinct(2))
    env = {**cli_env, "AZURE_API_BASE": f"http://127.0.0.1:{judge.port}", "AZURE_API_KEY": "azure-test-key"}
    result = run_flowrate("eval", path, "--model", "azure/my-judge", "--config", config, "-o", "out.jsonl", env=env)
    assert result.returncode == 0, result.stderr
    for row in read_rows(tmp_path / "out.jsonl"):
        usage = row["usage"]
        expected = (
            (usage["prompt_tokens"] - usage["cached_tokens"]) * 2.5 + usage["cached_tokens"] * 1.25
        ) / 1e6 + usage["completion_tokens"] * 10 / 1e6
        assert row["cost_usd"] == pytest.approx(expected) and expected > 0


def test_a_dry_run_prices_the_rubric_prefix_as_cached_and_says_so(run_flowrate, cli_env, tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", distinct(3))
    result = run_flowrate("eval", path, "--model", "gpt-4o", "--dry-run", env=cli_env)
    assert result.returncode == 0, result.stderr
    said = result.stderr + result.stdout
    assert "priced as read from the provider's prompt cache" in said
    cached, uncached = (float(cost) for cost in re.findall(r"\$(\d+\.\d+)", said)[:2])
    assert 0 < cached < uncached  # gpt-4o's cached input is half price
