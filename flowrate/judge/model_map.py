"""LiteLLM's model map (prices, context windows, what each model takes), read as data for the
direct transport, without importing LiteLLM: its import took 3-4 s of every run, the map's
3.5 MB of JSON 40 ms. The map is the copy LiteLLM ships (`LITELLM_LOCAL_MODEL_COST_MAP` is what
flowrate sets for LiteLLM too), so both transports price and size a model alike."""

from __future__ import annotations

import importlib.util
import os
from functools import cache
from pathlib import Path
from typing import Any

import orjson

from flowrate.judge.backend import Usage
from flowrate.settings.groups import ModelPrice

MAP_FILE = "model_prices_and_context_window_backup.json"
TOKENIZERS = "litellm_core_utils/tokenizers"  # LiteLLM's bundled tiktoken files: no download
DEFAULT_ENCODING = "cl100k_base"  # the encoding LiteLLM's token_counter uses for OpenAI-protocol models


@cache
def _package_dir() -> Path | None:
    spec = importlib.util.find_spec("litellm")  # finds the package without running it
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) if locations else None


@cache
def _model_map() -> dict[str, dict[str, Any]]:
    folder = _package_dir()
    if folder is None or not (folder / MAP_FILE).is_file():
        return {}
    return orjson.loads((folder / MAP_FILE).read_bytes())


def model_facts(litellm_model: str) -> dict[str, Any] | None:
    """The map's entry for a model named as LiteLLM names it (`gpt-4o`, `openai/gpt-4o`,
    `azure/gpt-4o`): as LiteLLM's `get_model_info` finds it, None for a model it has no facts on."""
    entries = _model_map()
    provider, _, name = litellm_model.partition("/")
    if not name:
        provider, name = "openai", litellm_model
    found = entries.get(litellm_model) or entries.get(name)
    if found is None or found.get("litellm_provider") not in (provider, f"text-completion-{provider}"):
        return None
    return found


def price_usd(
    facts: dict[str, Any] | None, usage: Usage, paid: bool = True, configured: ModelPrice | None = None
) -> float | None:
    """USD for `usage` at the `configured` price (the config's, per million tokens), else by the
    map's per-token prices: input read from the prompt cache at `cache_read_input_token_cost`,
    written to it at `cache_creation_input_token_cost` (each the input's price where the map has
    none), the rest of the input at `input_cost_per_token`, all the output (reasoning included) at
    `output_cost_per_token`. None without a price, never 0: a model of a `paid` provider priced 0
    for input and output (the map lists some so: claude-opus-4-1) is one whose price is unknown."""
    if configured is not None:
        per_token = 1e-6
        rates = (configured.input, configured.cached_input, configured.cache_write, configured.output)
        prompt, cached, write, completion = (None if rate is None else rate * per_token for rate in rates)
    elif facts:
        prompt, completion = facts.get("input_cost_per_token"), facts.get("output_cost_per_token")
        cached, write = facts.get("cache_read_input_token_cost"), facts.get("cache_creation_input_token_cost")
    else:
        return None
    if prompt is None or completion is None or (paid and not prompt and not completion):
        return None
    cached = prompt if cached is None else cached
    write = prompt if write is None else write
    uncached = max(usage.prompt_tokens - usage.cached_tokens - usage.cache_write_tokens, 0)
    return float(
        prompt * uncached + cached * usage.cached_tokens + write * usage.cache_write_tokens
        + completion * usage.completion_tokens
    )  # fmt: skip


@cache
def _encoding() -> Any:
    """tiktoken's `cl100k_base` from LiteLLM's bundled files, as LiteLLM loads it (a user's
    TIKTOKEN_CACHE_DIR is kept)."""
    folder = _package_dir()
    if folder is not None:
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(folder / TOKENIZERS))
    import tiktoken

    return tiktoken.get_encoding(DEFAULT_ENCODING)


def count_tokens(text: str) -> int:
    """Tokens of `text` as LiteLLM's `token_counter` counts them for an OpenAI-protocol model."""
    return len(_encoding().encode(text, disallowed_special=()))
