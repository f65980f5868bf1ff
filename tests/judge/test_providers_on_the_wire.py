"""The judges people use today, judged through `flowrate eval` against a stand-in that answers as
each provider's API is documented to answer (tests/provider_stand_ins.py names each rule's page):
OpenAI's reasoning models, an Azure deployment whose name says nothing, Anthropic's Claude (its
output limits, its prompt cache), Gemini and Bedrock's Claude. LiteLLM talks to the stand-in over
HTTP, as it would to the provider."""

import pytest

from tests.helpers import distinct, read_rows, write_jsonl

pytestmark = pytest.mark.xdist_group("judge_server")

AWS = {
    "AWS_ACCESS_KEY_ID": "AKIASTANDIN0000",
    "AWS_SECRET_ACCESS_KEY": "stand-in-secret",
    "AWS_REGION_NAME": "us-east-1",
}


def judged(run_flowrate, cli_env, tmp_path, model, *extra, env=None, count=3):
    """`flowrate eval` of `count` conversations with `model`, `env` added to the test's; its result and rows."""
    path = write_jsonl(tmp_path / "c.jsonl", distinct(count))
    result = run_flowrate("eval", path, "--model", model, "-o", "out.jsonl", *extra, env={**cli_env, **(env or {})})
    rows = read_rows(tmp_path / "out.jsonl") if (tmp_path / "out.jsonl").exists() else []
    return result, rows


def every_conversation_judged(result, rows, count=3):
    assert result.returncode == 0, result.stderr
    assert len(rows) == count and all(row["error"] is None for row in rows), [row["error"] for row in rows]
    assert all(row["score"] == 1.0 for row in rows)


@pytest.mark.parametrize("model", ["gpt-5-mini", "o4-mini"])
def test_an_openai_reasoning_model_judges_every_conversation_with_the_parameters_it_takes(
    judge, run_flowrate, cli_env, tmp_path, transport, model
):
    """platform.openai.com/docs/guides/reasoning: temperature only 1, max_completion_tokens, no logprobs."""
    judge.behave_as("openai-api")
    result, rows = judged(run_flowrate, cli_env, tmp_path, model, env={"OPENAI_BASE_URL": judge.base_url})
    every_conversation_judged(result, rows)
    assert judge.requests == 3  # nothing refused: the rules were known before the first call
    for body in judge.bodies:
        assert "temperature" not in body and "max_tokens" not in body and "logprobs" not in body
        assert body["reasoning_effort"] == "low"  # the default, for judging
        assert body["prompt_cache_key"].startswith("flowrate-conversational_flow_rate-sha256:")
    # the stand-in charges "low" 192 reasoning tokens, billed as output
    assert all(row["usage"]["reasoning_tokens"] == 192 for row in rows)
    assert all(row["usage"]["completion_tokens"] > 192 for row in rows)


def test_an_openai_reasoning_model_asked_for_log_probabilities_judges_without_them_and_says_so(
    judge, run_flowrate, cli_env, tmp_path, transport
):
    judge.behave_as("openai-api")
    env = {"OPENAI_BASE_URL": judge.base_url}
    result, rows = judged(run_flowrate, cli_env, tmp_path, "gpt-5-mini", "--logprobs", env=env)
    every_conversation_judged(result, rows)
    assert all("logprobs" not in body for body in judge.bodies)
    assert result.stderr.count("the judge refused token log-probabilities") == 1, result.stderr
    assert all(row["level_probs"] is None for row in rows)


@pytest.mark.parametrize("effort", ["minimal", "medium"])
def test_the_reasoning_effort_is_sent_as_chosen_and_an_o_series_model_gets_low_for_minimal(
    judge, run_flowrate, cli_env, tmp_path, effort
):
    judge.behave_as("openai-api")
    env = {"OPENAI_BASE_URL": judge.base_url, "FLOWRATE_REASONING_EFFORT": effort}
    for model, sent in (("gpt-5-mini", effort), ("o4-mini", "low" if effort == "minimal" else effort)):
        judge.bodies.clear()
        result, rows = judged(run_flowrate, cli_env, tmp_path, model, "--no-cache", env=env, count=1)
        every_conversation_judged(result, rows, count=1)
        assert [body["reasoning_effort"] for body in judge.bodies] == [sent]


def test_an_azure_deployment_of_a_reasoning_model_is_learned_from_its_refusals_and_judges_every_conversation(
    judge, run_flowrate, cli_env, tmp_path, transport
):
    """An Azure deployment's name says nothing of its model: its 400s name what it refuses
    (OpenAI's `param`), each learned once, said once, and the call sent again."""
    judge.deployments["my-judge"] = "o4-mini"
    env = {
        "AZURE_API_BASE": f"http://127.0.0.1:{judge.port}",
        "AZURE_API_KEY": "azure-test-key",
        "AZURE_API_VERSION": "2024-10-21",
    }
    result, rows = judged(run_flowrate, cli_env, tmp_path, "azure/my-judge", "-j", "1", env=env)
    every_conversation_judged(result, rows)
    refused = [body for body in judge.bodies if "temperature" in body or "max_tokens" in body]
    assert len(refused) == 2, judge.bodies  # temperature, then max_tokens: learned once each, for the run
    assert len(judge.bodies) == 3 + 2
    assert result.stderr.count("refused the parameter temperature") == 1, result.stderr
    assert result.stderr.count("refused the parameter max_tokens, max_completion_tokens sent instead") == 1


@pytest.mark.parametrize("model", ["anthropic/claude-opus-4-1", "anthropic/claude-sonnet-4-5"])
def test_a_claude_judge_judges_every_conversation_within_its_output_limit(
    judge, run_flowrate, cli_env, tmp_path, model
):
    """docs.anthropic.com/en/api/messages: max_tokens is required and at most the model's output
    limit (claude-opus-4-1: 32,000, docs.anthropic.com/en/docs/about-claude/models/overview)."""
    env = {"ANTHROPIC_API_KEY": "sk-ant-test"}
    result, rows = judged(
        run_flowrate, cli_env, tmp_path, model, "--api-base", f"http://127.0.0.1:{judge.port}", env=env
    )
    every_conversation_judged(result, rows)
    assert len(judge.bodies) == 3
    assert all(body["max_tokens"] <= 32_000 for body in judge.bodies)
    # --reasoning-effort low (the default) does not turn Claude's thinking on: the schema goes as a
    # forced tool (Opus 4.1) or as Anthropic's structured output (`output_format`: Sonnet 4.5, as
    # LiteLLM sends it), at temperature 0
    for body in judge.bodies:
        forced = (body.get("tool_choice") or {}).get("type") == "tool"
        assert forced or body["output_format"]["type"] == "json_schema", body.keys()
        assert "thinking" not in body and body["temperature"] == 0


def test_a_claude_judge_asked_to_reason_thinks_within_its_reply_limit_at_temperature_1(
    judge, run_flowrate, cli_env, tmp_path
):
    """docs.anthropic.com/en/docs/build-with-claude/extended-thinking: budget_tokens at least 1,024
    and below max_tokens, no temperature but 1, no forced tool use."""
    env = {"ANTHROPIC_API_KEY": "sk-ant-test", "FLOWRATE_REASONING_EFFORT": "medium"}
    api_base = f"http://127.0.0.1:{judge.port}"
    result, rows = judged(run_flowrate, cli_env, tmp_path, "anthropic/claude-opus-4-1", "--api-base", api_base, env=env)
    every_conversation_judged(result, rows)
    assert all(body["thinking"] == {"type": "enabled", "budget_tokens": 2048} for body in judge.bodies)
    assert all("tool_choice" not in body and "temperature" not in body for body in judge.bodies)
    assert all(row["usage"]["completion_tokens"] > 1024 for row in rows)  # the stand-in's thinking: half its budget


def test_a_gemini_judge_judges_every_conversation_with_its_thinking_budget(judge, run_flowrate, cli_env, tmp_path):
    """ai.google.dev/api/generate-content: the schema as responseJsonSchema, the thinking budget in
    generationConfig.thinkingConfig, the thoughts in usageMetadata.thoughtsTokenCount."""
    env = {"GEMINI_API_KEY": "gemini-test-key"}
    api_base = f"http://127.0.0.1:{judge.port}/v1beta"
    result, rows = judged(run_flowrate, cli_env, tmp_path, "gemini/gemini-2.5-flash", "--api-base", api_base, env=env)
    every_conversation_judged(result, rows)
    assert len(judge.bodies) == 3
    config = judge.bodies[0]["generationConfig"]
    assert "response_json_schema" in config or "responseJsonSchema" in config, config
    assert all(row["usage"]["reasoning_tokens"] > 0 for row in rows), [row["usage"] for row in rows]


def test_a_bedrock_claude_judge_judges_every_conversation_with_its_prefix_marked(
    judge, run_flowrate, cli_env, tmp_path
):
    """docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html, signed with SigV4;
    the rubric's prefix marked by a cachePoint block (docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html)."""
    env = {**AWS, "AWS_BEDROCK_RUNTIME_ENDPOINT": f"http://127.0.0.1:{judge.port}"}
    model = "bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0"
    result, rows = judged(run_flowrate, cli_env, tmp_path, model, "-j", "1", env=env)
    every_conversation_judged(result, rows)
    assert len(judge.bodies) == 3
    marks = [block for message in judge.bodies[0]["messages"] for block in message["content"] if "cachePoint" in block]
    assert len(marks) == 1
    assert [row["usage"]["cached_tokens"] > 0 for row in rows] == [False, True, True]


def test_a_groq_judge_asked_for_samples_and_log_probabilities_judges_every_conversation_without_them(
    judge, run_flowrate, cli_env, tmp_path
):
    """console.groq.com/docs/openai: no logprobs, n only 1: each refusal learned once."""
    judge.behave_as("groq")
    env = {"GROQ_API_KEY": "gsk-test"}
    api_base = judge.base_url
    model = "groq/llama-3.3-70b-versatile"
    result, rows = judged(
        run_flowrate,
        cli_env,
        tmp_path,
        model,
        "--api-base",
        api_base,
        "--logprobs",
        "--samples",
        "3",
        "-j",
        "1",
        env=env,
    )
    every_conversation_judged(result, rows)
    answered = [body for body in judge.bodies if "logprobs" not in body and int(body.get("n") or 1) == 1]
    assert len(answered) == 3 * 3  # three samples a conversation, one at a time
    assert len(judge.bodies) - len(answered) <= 2  # logprobs and n each refused once for the run
    assert "refused token log-probabilities" in result.stderr


@pytest.mark.parametrize("model", ["deepseek/deepseek-chat", "deepseek-chat"])
def test_a_deepseek_judge_s_rows_report_the_input_its_server_cached_in_its_own_fields(
    judge, run_flowrate, cli_env, tmp_path, model
):
    """api-docs.deepseek.com/guides/kv_cache: `prompt_cache_hit_tokens`, not OpenAI's `cached_tokens`;
    through LiteLLM's deepseek provider, and as an OpenAI-compatible server at --api-base (the direct transport)."""
    judge.behave_as("deepseek")
    env = {"DEEPSEEK_API_KEY": "sk-deepseek-test"}
    result, rows = judged(run_flowrate, cli_env, tmp_path, model, "--api-base", judge.base_url, "-j", "1", env=env)
    every_conversation_judged(result, rows)
    cached = [row["usage"]["cached_tokens"] for row in rows]
    assert cached[0] == 0 and all(tokens > 1024 for tokens in cached[1:]), cached
    if model.startswith("deepseek/"):  # priced by LiteLLM's map (an OpenAI-compatible name has no price)
        assert rows[1]["cost_usd"] < rows[0]["cost_usd"]


def test_an_azure_reasoning_deployment_judged_with_many_calls_at_once_learns_each_refusal_for_every_call(
    judge, run_flowrate, cli_env, tmp_path, transport
):
    """The calls sent together before the first refusal came back are each refused too: each is
    sent again without what the first learned, and the learning is said once."""
    judge.deployments["my-judge"] = "gpt-5-mini"
    judge.latency_s = 0.05
    env = {"AZURE_API_BASE": f"http://127.0.0.1:{judge.port}", "AZURE_API_KEY": "azure-test-key"}
    result, rows = judged(run_flowrate, cli_env, tmp_path, "azure/my-judge", "-j", "8", env=env, count=8)
    every_conversation_judged(result, rows, count=8)
    assert result.stderr.count("refused the parameter temperature") == 1, result.stderr


# -- the OpenAI-compatible hosts: Mistral, Together, OpenRouter ----------------------------------
# (tests/provider_stand_ins.py names each rule's page: Mistral's request model from
# mistralai/client-python, Together's from togethercomputer/openapi, OpenRouter's from
# openrouter.ai/docs; LiteLLM reads TOGETHER_AI_API_BASE and OPENROUTER_API_BASE, Mistral's address
# is --api-base: LiteLLM's MistralConfig reads no MISTRAL_API_BASE)


def test_a_mistral_judge_judges_every_conversation_with_only_the_fields_its_api_takes(
    judge, run_flowrate, cli_env, tmp_path
):
    """docs.mistral.ai/api (mistralai/client-python's ChatCompletionRequest): a field outside its
    request model is a 422; its cache reads a repeated prefix in 64-token blocks
    (docs.mistral.ai/studio-api/conversations/advanced/prompt-caching), cheaper than the rest."""
    judge.behave_as("mistral")
    env = {"MISTRAL_API_KEY": "mistral-test-key"}
    model = "mistral/mistral-small-latest"
    result, rows = judged(run_flowrate, cli_env, tmp_path, model, "--api-base", judge.base_url, "-j", "1", env=env)
    every_conversation_judged(result, rows)
    assert len(judge.bodies) == 3  # nothing refused
    assert all(body["response_format"]["type"] == "json_schema" for body in judge.bodies)
    cached = [row["usage"]["cached_tokens"] for row in rows]
    assert cached[0] == 0 and all(tokens > 1024 and tokens % 64 == 0 for tokens in cached[1:]), cached


def test_a_mistral_judge_asked_for_log_probabilities_says_its_api_gives_none(judge, run_flowrate, cli_env, tmp_path):
    """mistralai/client-python's ChatCompletionRequest has no `logprobs` (LiteLLM passes none to
    Mistral): the run's end says why level_probs are null, instead of leaving them null unexplained."""
    judge.behave_as("mistral")
    env = {"MISTRAL_API_KEY": "mistral-test-key"}
    model = "mistral/mistral-small-latest"
    result, rows = judged(
        run_flowrate, cli_env, tmp_path, model, "--api-base", judge.base_url, "--logprobs", "-j", "1", env=env
    )
    every_conversation_judged(result, rows)
    assert len(judge.bodies) == 3 and all("logprobs" not in body for body in judge.bodies)
    assert all(row["level_probs"] is None for row in rows)
    assert result.stderr.count("the judge refused token log-probabilities") == 1, result.stderr


def test_a_mistral_model_at_its_api_base_asked_for_log_probabilities_judges_every_conversation_without_them(
    judge, run_flowrate, cli_env, tmp_path
):
    """Mistral's API as an OpenAI-compatible server (--api-base, the direct transport): `logprobs`
    is no field of its request model, refused with pydantic's 422 `extra_forbidden`, learned once."""
    judge.behave_as("mistral")
    env = {"OPENAI_API_KEY": "mistral-test-key"}
    result, rows = judged(
        run_flowrate, cli_env, tmp_path, "mistral-small-latest", "--api-base", judge.base_url, "--logprobs",
        "-j", "1", env=env,
    )  # fmt: skip
    every_conversation_judged(result, rows)
    refused = [body for body in judge.bodies if "logprobs" in body or "top_logprobs" in body]
    assert len(refused) == 1, judge.bodies
    assert len(judge.bodies) == 3 + 1
    assert result.stderr.count("refused token log-probabilities") == 1, result.stderr


def test_a_together_judge_asked_for_log_probabilities_sends_them_as_an_integer_and_reads_its_shape(
    judge, run_flowrate, cli_env, tmp_path
):
    """togethercomputer/openapi's ChatCompletionRequest: `logprobs` is an integer from 0 to 20 (the
    top k), no `top_logprobs`; its replies carry `tokens`, `token_logprobs` and `top_logprobs` as
    {token: logprob} (LogprobsPart), read into the verdict's level probabilities."""
    judge.behave_as("together")
    judge.script(
        "", {"verdict": "mostly", "reason": "r", "key_issues": [], "logprobs": {"mostly": -0.1, "fully": -2.4}}
    )
    env = {"TOGETHERAI_API_KEY": "together-test-key", "TOGETHER_AI_API_BASE": judge.base_url}
    model = "together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo"
    result, rows = judged(run_flowrate, cli_env, tmp_path, model, "--logprobs", "-j", "1", env=env)
    assert result.returncode == 0, result.stderr
    assert len(rows) == 3 and all(row["error"] is None for row in rows), [row["error"] for row in rows]
    assert len(judge.bodies) == 3, judge.bodies  # nothing refused
    assert all(isinstance(body["logprobs"], int) and not isinstance(body["logprobs"], bool) for body in judge.bodies)
    assert all("top_logprobs" not in body for body in judge.bodies)
    assert all(row["level_probs"] and row["level_probs"]["mostly"] > 0.85 for row in rows), [
        row["level_probs"] for row in rows
    ]


def test_a_together_model_at_its_api_base_asked_for_log_probabilities_judges_every_conversation_without_them(
    judge, run_flowrate, cli_env, tmp_path
):
    """Together's API as an OpenAI-compatible server (`openai/NAME` at --api-base, which cannot tell
    it is Together's): OpenAI's `logprobs: true` is refused ("True is not of type 'integer' -
    'logprobs'", openapi.yaml types it integer), learned once, and every conversation judged."""
    judge.behave_as("together")
    env = {"OPENAI_API_KEY": "together-test-key"}
    model = "openai/meta-llama/Llama-3.3-70B-Instruct-Turbo"  # a name with a slash, at an OpenAI-compatible server
    result, rows = judged(
        run_flowrate, cli_env, tmp_path, model, "--api-base", judge.base_url, "--logprobs", "-j", "1", env=env
    )
    every_conversation_judged(result, rows)
    assert len(judge.bodies) == 3 + 1, judge.bodies
    assert result.stderr.count("the judge refused token log-probabilities") == 1, result.stderr


def test_an_openrouter_judge_judges_every_conversation_and_its_rows_report_the_prefix_its_provider_cached(
    judge, run_flowrate, cli_env, tmp_path
):
    """openrouter.ai/docs/api-reference: /api/v1/chat/completions with a Bearer key; an OpenAI model
    routed there caches a prefix by itself, reported in usage.prompt_tokens_details.cached_tokens
    (openrouter.ai/docs/use-cases/usage-accounting)."""
    env = {"OPENROUTER_API_KEY": "sk-or-test", "OPENROUTER_API_BASE": f"http://127.0.0.1:{judge.port}/api/v1"}
    result, rows = judged(run_flowrate, cli_env, tmp_path, "openrouter/openai/gpt-4o-mini", "-j", "1", env=env)
    every_conversation_judged(result, rows)
    assert len(judge.bodies) == 3
    assert all(body["model"] == "openai/gpt-4o-mini" for body in judge.bodies)
    cached = [row["usage"]["cached_tokens"] for row in rows]
    assert cached[0] == 0 and all(tokens >= 1024 for tokens in cached[1:]), cached


def test_an_openrouter_claude_judge_marks_the_rubric_prefix_for_its_cache(judge, run_flowrate, cli_env, tmp_path):
    """openrouter.ai/docs/features/prompt-caching: Anthropic's models routed through OpenRouter cache
    only up to a `cache_control` mark, as on Anthropic's own API; unmarked, every call pays full price."""
    env = {"OPENROUTER_API_KEY": "sk-or-test", "OPENROUTER_API_BASE": f"http://127.0.0.1:{judge.port}/api/v1"}
    model = "openrouter/anthropic/claude-sonnet-4.5"
    result, rows = judged(run_flowrate, cli_env, tmp_path, model, "-j", "1", env=env)
    every_conversation_judged(result, rows)
    marks = [
        block
        for message in judge.bodies[0]["messages"]
        for block in (message["content"] if isinstance(message["content"], list) else [])
        if "cache_control" in block
    ]
    assert len(marks) == 1, judge.bodies[0]["messages"]
    assert [row["usage"]["cached_tokens"] > 0 for row in rows] == [False, True, True]


def test_an_openrouter_judge_s_rows_cost_what_openrouter_says_it_charged(judge, run_flowrate, cli_env, tmp_path):
    """openrouter.ai/docs/use-cases/usage-accounting: every response's `usage.cost` is what the call
    was charged, its cache included; LiteLLM's map knows no price for most routed models (none for
    openai/gpt-4o-mini, 0 for anthropic/claude-sonnet-4.5), so the rows would say null."""
    env = {"OPENROUTER_API_KEY": "sk-or-test", "OPENROUTER_API_BASE": f"http://127.0.0.1:{judge.port}/api/v1"}
    for model in ("openrouter/openai/gpt-4o-mini", "openrouter/anthropic/claude-sonnet-4.5"):
        judge.prompt_cache.clear()
        result, rows = judged(run_flowrate, cli_env, tmp_path, model, "-j", "1", "--no-cache", env=env)
        every_conversation_judged(result, rows)
        charged = [
            round(
                (
                    row["usage"]["prompt_tokens"]
                    - 0.9 * row["usage"]["cached_tokens"]
                    + row["usage"]["completion_tokens"]
                )
                * 1e-7,
                9,
            )
            for row in rows
        ]  # the stand-in's charge (provider_stand_ins.openrouter_usage)
        assert [row["cost_usd"] for row in rows] == pytest.approx(charged), (model, [row["cost_usd"] for row in rows])
        assert rows[1]["cost_usd"] < rows[0]["cost_usd"]  # the prefix read from the cache costs less


def test_an_openrouter_claude_judge_asked_for_samples_and_log_probabilities_judges_every_conversation(
    judge, run_flowrate, cli_env, tmp_path
):
    """openrouter.ai/docs/api-reference/parameters: a parameter the routed provider does not take is
    ignored, not refused (Anthropic's Messages API has no logprobs and gives one reply a call): the
    samples left unanswered are asked one a call, and the replies without log-probabilities are said."""
    env = {"OPENROUTER_API_KEY": "sk-or-test", "OPENROUTER_API_BASE": f"http://127.0.0.1:{judge.port}/api/v1"}
    model = "openrouter/anthropic/claude-sonnet-4.5"
    result, rows = judged(run_flowrate, cli_env, tmp_path, model, "--logprobs", "--samples", "3", "-j", "1", env=env)
    every_conversation_judged(result, rows)
    assert all(row["samples"] == 3 for row in rows)
    assert len(judge.bodies) == 3 * 3  # the first asks n=3 and gets one; every other sample alone
    assert "9 judge reply(ies) came without the token log-probabilities asked for" in result.stderr, result.stderr


def test_an_openrouter_claude_judge_thinks_only_when_asked_to_reason_as_claude_does_on_anthropic_s_api(
    judge, run_flowrate, cli_env, tmp_path
):
    """openrouter.ai/docs/use-cases/reasoning-tokens: OpenRouter turns an OpenAI-style effort into a
    Claude thinking budget, its tokens billed as output; --reasoning-effort low (the default) sends
    Claude none (as on Anthropic's own API: it thinks at medium and high only)."""
    env = {"OPENROUTER_API_KEY": "sk-or-test", "OPENROUTER_API_BASE": f"http://127.0.0.1:{judge.port}/api/v1"}
    model = "openrouter/anthropic/claude-sonnet-4.5"
    for effort, thinks in (("low", False), ("medium", True)):
        judge.bodies.clear()
        result, rows = judged(
            run_flowrate,
            cli_env,
            tmp_path,
            model,
            "--no-cache",
            "-j",
            "1",
            env={**env, "FLOWRATE_REASONING_EFFORT": effort},
        )
        every_conversation_judged(result, rows)
        assert [("reasoning_effort" in body or "reasoning" in body) for body in judge.bodies] == [thinks] * 3
        assert [row["usage"]["reasoning_tokens"] > 0 for row in rows] == [thinks] * 3
