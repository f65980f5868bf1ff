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


def price_usd(facts: dict[str, Any] | None, prompt_tokens: int, completion_tokens: int) -> float | None:
    """USD by the map's per-token prices; None without a price, never 0."""
    if not facts:
        return None
    prompt, completion = facts.get("input_cost_per_token"), facts.get("output_cost_per_token")
    if prompt is None or completion is None:
        return None
    return float(prompt * prompt_tokens + completion * completion_tokens)


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
