"""The rules of each provider's and model family's requests, in one place: which parameters a
judge call sends and how (temperature, `max_tokens` or `max_completion_tokens`, `logprobs`, the
reply limit clamped to the model's output limit, the reasoning effort, the prompt-cache marks),
from LiteLLM's model facts where they exist; and a parameter a server refuses by name in a 400,
learned once per run, dropped or replaced, said once (`notes`) and the call sent again.

Every request leaves through a body built by `backend.chat_body` and then `ProviderRules.apply`
(a served judge's `JudgeBackend.provider_body`): the direct transport's and LiteLLM's
(`served.ServedJudge.chat_request`), the public step's (`metrics.step.request_body`, which the Ray
engine sends) and a provider batch's lines (`batch_api.request_line`). The rules, each with the
page it comes from:

- OpenAI's reasoning models (o1, o3, o4, gpt-5; and an Azure deployment of one, learned from its
  400s): temperature only at its default 1, `max_completion_tokens` instead of `max_tokens`, no
  `logprobs`; `reasoning_effort` sent (platform.openai.com/docs/guides/reasoning; the refusals are
  OpenAI's `unsupported_parameter` and `unsupported_value` errors, whose `param` names the field).
- OpenAI's prompt caching is automatic for a prefix of 1,024 tokens or more; `prompt_cache_key`
  keeps the calls of one rubric on the same cache (platform.openai.com/docs/guides/prompt-caching).
- Anthropic's Messages API requires `max_tokens` and refuses one above the model's output limit
  ("max_tokens: 128000 > 32000, which is the maximum allowed number of output tokens for
  claude-opus-4-1-20250805"; docs.anthropic.com/en/docs/about-claude/models/overview); it caches
  only up to a block marked `cache_control` (docs.anthropic.com/en/docs/build-with-claude/prompt-caching);
  Bedrock's Converse API takes the same mark as a `cachePoint` block, which LiteLLM writes from it.
- Gemini and Claude take the reasoning effort as a thinking budget (LiteLLM maps
  `reasoning_effort` to `thinkingConfig.thinkingBudget` and to Claude's `thinking.budget_tokens`).
- Mistral's API has no `logprobs` (its request model, mistralai/client-python's
  ChatCompletionRequest; a field it lacks is a 422 "Extra inputs are not permitted").
- Together's API takes `logprobs` as an integer, the top k alternatives (0 to 20), and no
  `top_logprobs` (togethercomputer/openapi, openapi.yaml, ChatCompletionRequest); OpenAI's
  `logprobs: true` is refused ("True is not of type 'integer'"). Its replies' own shape (`tokens`,
  `token_logprobs`, `top_logprobs` as {token: logprob}) is read by `backend.tokens_of`.
- OpenRouter caches a routed Claude's prompt only up to a `cache_control` mark, as Anthropic does
  (openrouter.ai/docs/features/prompt-caching), and LiteLLM passes the mark on for Claude there.
  Every answer's `usage.cost` is what the call was charged, in USD credits, its cache included
  (openrouter.ai/docs/use-cases/usage-accounting): a call costs that (`charged_usd`), where
  LiteLLM's map knows no price for most routed models or lists them at 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from flowrate.judge.address import JudgeAddress
from flowrate.judge.errors import JudgeError
from flowrate.judge.served_model import ServedModel

# The model families whose requests follow OpenAI's reasoning rules, by name where the map is silent.
OPENAI_REASONING_NAMES = re.compile(r"^(o\d|gpt-5)", re.IGNORECASE)
OPENAI_FAMILY = ("openai", "azure")
CLAUDE_PROVIDERS = ("anthropic", "bedrock", "vertex_ai")
# Routers that pass a Claude model's `cache_control` marks on to Anthropic (openrouter/anthropic/claude-…)
CLAUDE_ROUTERS = ("openrouter",)
# Providers whose answers say what the call was charged (`usage.cost`, USD)
CHARGE_REPORTERS = ("openrouter",)
TOGETHER_LOGPROBS_MAX = 20  # Together's `logprobs`: "an integer between 0 and 20" (openapi.yaml)
# Output limits where LiteLLM's map is wrong: it gives claude-opus-4-1 64,000, Anthropic's models
# overview (docs.anthropic.com/en/docs/about-claude/models/overview) 32,000, and its API refuses more.
OUTPUT_LIMITS = {"claude-opus-4-1": 32_000, "claude-opus-4-1-20250805": 32_000, "claude-opus-4": 32_000}
# The reply limit sent where a provider requires one and the run gives none (a reasoning judge,
# whose reasoning counts against it): a judge's reply is under 1,000 tokens (the rubric's schema
# bounds it), and a thinking budget of up to 4,096 tokens (LiteLLM's for "high") goes on top.
REQUIRED_REPLY_LIMIT = 8_192
# Claude does not think unless asked (Gemini 2.5 and OpenAI's reasoning models do, at "medium" or a
# dynamic budget): an effort below the provider's default lowers it and never turns thinking on, so
# Claude thinks at "medium" and "high" only (LiteLLM's budgets 2,048 and 4,096 tokens), and otherwise
# answers at temperature 0 through its forced schema tool (docs.anthropic.com/en/docs/build-with-claude/
# extended-thinking: thinking takes no forced tool use and no temperature but 1).
CLAUDE_THINKS_AT = ("medium", "high")
# OpenAI's o-series take low, medium and high; "minimal" is gpt-5's (platform.openai.com/docs/guides/reasoning)
O_SERIES_EFFORTS = ("low", "medium", "high")
# What a refusal names, in the words of each: OpenAI's "Unsupported parameter: 'max_tokens' ...
# Use 'max_completion_tokens' instead." and "Unsupported value: 'temperature' does not support 0 ...";
# LiteLLM's UnsupportedParamsError ("does not support parameters: ['temperature']", "O-series
# models don't support temperature=0"); Groq's "'logprobs' is not supported" and "'n' : number must
# be at most 1".
NAMED_WORDS = re.compile(
    r"unsupported (?:parameter|value):? '(\w+)'|does not support parameters: \[([^\]]*)\]"
    r"|do(?:es)?n'?t support (\w+)=|'(\w+)'\s*(?::|is)\s*(?:not supported|number must be at most 1)",
    re.IGNORECASE,
)
REPLACED_BY = re.compile(r"use '(\w+)' instead", re.IGNORECASE)
OUTPUT_LIMIT_WORDS = re.compile(r"max_tokens: (\d+) > (\d+), which is the maximum allowed", re.IGNORECASE)
# The parameters a judge call can do without, or send under another name, when a server refuses
# them; the others (the messages, the schema, n, logprobs) each have their own handling.
DISPENSABLE = {"temperature", "max_tokens", "max_completion_tokens", "reasoning_effort", "prompt_cache_key", "top_p"}
CACHE_MARK = {"type": "ephemeral"}
MIN_CACHED_PREFIX = 1024  # the shortest prefix OpenAI, Anthropic (Sonnet, Opus) and Gemini 2.5 Flash cache


@dataclass(eq=False)
class ProviderRules:
    """The request rules of one served `model`: its address, its facts (LiteLLM's model info or
    map entry) and the OpenAI parameters its transport passes (`ServedModel.supported_params`),
    each read when first needed (LiteLLM's are slow to import). What a server refused is learned
    into `refused` (parameter -> what replaces it, "" for nothing) and `output_limit_learned`."""

    model: ServedModel
    refused: dict[str, str] = field(default_factory=dict)
    output_limit_learned: int | None = None
    _said: list[str] = field(default_factory=list)

    # -- what the model is ------------------------------------------------------------------------
    @property
    def address(self) -> JudgeAddress:
        return self.model.address

    @property
    def facts(self) -> dict[str, Any] | None:
        return self.model.info

    @property
    def supported(self) -> frozenset[str] | None:
        return self.model.supported_params

    @property
    def openai_reasoning(self) -> bool:
        """An OpenAI reasoning model (by the map, else by its name's family)."""
        if self.address.provider not in OPENAI_FAMILY:
            return False
        return bool((self.facts or {}).get("supports_reasoning")) or bool(
            OPENAI_REASONING_NAMES.match(self.address.name)
        )

    @property
    def claude(self) -> bool:
        """A Claude model, on Anthropic's API or Bedrock's or Vertex's."""
        return self.address.provider in CLAUDE_PROVIDERS and "claude" in self.address.name.lower()

    @property
    def refuses_logprobs(self) -> str | None:
        """Why the model takes no log-probabilities, where its rules say so; None where it may."""
        if self.openai_reasoning:
            return "OpenAI's reasoning models take no logprobs (platform.openai.com/docs/guides/reasoning)"
        if self.address.provider == "mistral":
            return "Mistral's chat completions take no logprobs (docs.mistral.ai/api: none in its request)"
        return None

    @property
    def requires_reply_limit(self) -> bool:
        """The provider refuses a request without `max_tokens` (Anthropic's Messages API), or
        fills in its own that the model may refuse (LiteLLM sends Claude's largest)."""
        return self.claude

    @property
    def output_limit(self) -> int | None:
        """The most tokens a reply may ask: learned from a refusal, else the known fix, else the map's."""
        if self.output_limit_learned is not None:
            return self.output_limit_learned
        name = self.address.name.split("/")[-1].split(":")[0]  # Bedrock's: us.anthropic.claude-...-v1:0
        name = name[name.find("claude") :] if "claude" in name else name
        for known, fixed in OUTPUT_LIMITS.items():
            if name == known or name.startswith(known + "-2"):
                return fixed
        facts = self.facts or {}
        limit = facts.get("max_output_tokens") or facts.get("max_tokens")
        return int(limit) if isinstance(limit, int) and limit > 0 else None

    @property
    def routed_claude(self) -> bool:
        """A Claude model reached through a router that passes its cache marks on (OpenRouter)."""
        return self.address.provider in CLAUDE_ROUTERS and "claude" in self.address.name.lower()

    @property
    def caches_by_mark(self) -> bool:
        """The provider caches only what a request marks (Anthropic, Bedrock's Claude, Claude on OpenRouter)."""
        if self.routed_claude:
            return True
        return self.claude and bool((self.facts or {}).get("supports_prompt_caching", True))

    @property
    def logprobs_as_top_k(self) -> bool:
        """The provider takes `logprobs` as the number of alternatives, not a flag (Together)."""
        return self.address.provider == "together_ai"

    @property
    def takes_cache_key(self) -> bool:
        """OpenAI's own API (no --api-base) takes `prompt_cache_key`; a server elsewhere may refuse it."""
        if self.address.provider != "openai" or self.address.api_base:
            return False
        return self.supported is None or "prompt_cache_key" in self.supported

    def charged_usd(self, usage: dict[str, Any]) -> float | None:
        """What the provider says the call was charged (`usage.cost`, OpenRouter's), else None."""
        if self.address.provider not in CHARGE_REPORTERS:
            return None
        cost = usage.get("cost")
        return float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0 else None

    def cached_prefix_tokens(self, prefix_tokens: int) -> int:
        """Of a prompt whose shared prefix is `prefix_tokens` long, what the provider reads from
        its cache once written: the prefix where the model caches (the map's
        `supports_prompt_caching`) and the prefix is long enough (OpenAI, Anthropic's Sonnet and
        Opus, Gemini 2.5 Flash: 1,024 tokens at least; Claude's Haiku 2,048); else 0."""
        if not (self.facts or {}).get("supports_prompt_caching"):
            return 0
        least = 2048 if self.claude and "haiku" in self.address.name.lower() else MIN_CACHED_PREFIX
        return prefix_tokens if prefix_tokens >= least else 0

    # -- the request ------------------------------------------------------------------------------
    def apply(self, body: dict[str, Any], reasoning_effort: str | None, cache_key: str | None) -> dict[str, Any]:
        """`body` (an OpenAI chat-completions body from `chat_body`) as this judge's provider takes it."""
        body = dict(body)
        if self.openai_reasoning:
            body.pop("temperature", None)  # only the default, 1, is taken
            body.pop("logprobs", None)
            body.pop("top_logprobs", None)
            if "max_tokens" in body:
                body["max_completion_tokens"] = body.pop("max_tokens")
        if self.logprobs_as_top_k and body.get("logprobs") is True:
            body["logprobs"] = min(int(body.pop("top_logprobs", 1) or 1), TOGETHER_LOGPROBS_MAX)
        if self.requires_reply_limit and not body.get("max_tokens"):
            body["max_tokens"] = REQUIRED_REPLY_LIMIT
        limit = self.output_limit
        for key in ("max_tokens", "max_completion_tokens"):
            if limit is not None and isinstance(body.get(key), int) and body[key] > limit:
                body[key] = limit
        effort = self._effort(reasoning_effort)
        if effort is not None:
            body["reasoning_effort"] = effort
            if self.claude:  # Anthropic: temperature may only be 1 with thinking on
                body.pop("temperature", None)
        if cache_key and self.takes_cache_key:
            body["prompt_cache_key"] = cache_key
        if self.caches_by_mark:
            body["messages"] = marked_prefix(body["messages"])
        return self._without_refused(body)

    def _effort(self, wanted: str | None) -> str | None:
        """The effort sent to a model that reasons: OpenAI's reasoning models always (the o-series
        have no "minimal": "low" instead), Gemini's and Claude's where LiteLLM passes it (a thinking
        budget); None to a model that does not reason or where the run wants none ("none")."""
        if wanted is None or wanted == "none":
            return None
        if self.openai_reasoning:
            o_series = self.address.name.lower().startswith("o")
            return "low" if o_series and wanted not in O_SERIES_EFFORTS else wanted
        if not (self.facts or {}).get("supports_reasoning") or not self.supported:
            return None
        if "reasoning_effort" not in self.supported:
            return None
        if (self.claude or self.routed_claude) and wanted not in CLAUDE_THINKS_AT:
            # Claude thinks only when asked, and thinking forbids forcing the schema's tool; OpenRouter
            # turns any effort into a thinking budget (openrouter.ai/docs/use-cases/reasoning-tokens)
            return None
        return wanted

    def _without_refused(self, body: dict[str, Any]) -> dict[str, Any]:
        for name, replacement in self.refused.items():
            if name not in body:
                continue
            value = body.pop(name)
            if replacement:
                body[replacement] = value
        return body

    # -- what a server refused --------------------------------------------------------------------
    def learn(self, error: JudgeError, body: dict[str, Any]) -> bool:
        """Learn what `error`, the answer to `body`, refused by name: a parameter (OpenAI's
        `param`, or the words of the message, LiteLLM's UnsupportedParamsError's among them),
        dropped or replaced from now on, or an output limit (Anthropic's words). True when the
        request changes, so the call is worth sending again: also when another call, sent at
        the same time, learned it first."""
        message = str(error)
        limit = OUTPUT_LIMIT_WORDS.search(message)
        if limit:
            if self.output_limit is None or int(limit.group(2)) < self.output_limit:
                self.output_limit_learned = int(limit.group(2))
                self._say(f"the judge allows replies of {limit.group(2)} tokens at most: max_tokens is sent at that")
            asked = max(int(body.get(key) or 0) for key in ("max_tokens", "max_completion_tokens"))
            return self.output_limit is not None and asked > self.output_limit
        changed = False
        for name in refused_names(error):
            if name not in DISPENSABLE or name not in body:
                continue
            changed = True  # sent with it; from now on without it
            if name in self.refused:
                continue  # learned from another call's refusal
            replaced = REPLACED_BY.search(message)
            replacement = replaced.group(1) if replaced and replaced.group(1) != name else ""
            self.refused[name] = replacement
            instead = f", {replacement} sent instead" if replacement else ", left out from now on"
            self._say(f"the judge refused the parameter {name}{instead}. It said: {message[:200]}")
        return changed

    def _say(self, note: str) -> None:
        if note not in self._said:
            self._said.append(note)

    def notes(self) -> list[str]:
        """What was learned this run, each once, for the run's end."""
        return list(self._said)


def refused_names(error: JudgeError) -> list[str]:
    """The parameters `error` names as refused: its `param` (OpenAI's error body), else those the
    message's words name."""
    named = [error.param] if error.param else []
    for found in NAMED_WORDS.finditer(str(error)):
        listed = found.group(2)
        if listed:
            named += [part.strip(" '\"") for part in listed.split(",") if part.strip(" '\"")]
        named += [group for group in (found.group(1), found.group(3), found.group(4)) if group]
    return list(dict.fromkeys(named))


def marked_prefix(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with the last message of the rubric's shared prefix (every message before the
    conversation's, which is last) marked for caching, as Anthropic's `cache_control` block: the
    provider caches everything up to and including it. Unchanged with no prefix."""
    if len(messages) < 2:
        return messages
    marked = [dict(message) for message in messages]
    last = marked[-2]
    content = last.get("content")
    if isinstance(content, str):
        last["content"] = [{"type": "text", "text": content, "cache_control": CACHE_MARK}]
    return marked
