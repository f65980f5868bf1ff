"""What a self-hosted server says about itself: its context window and how many requests it serves at once (vLLM's /v1/models, llama.cpp's /props, Ollama's /api/show), and its tokenizer's counts (/tokenize), asked with a short timeout and without LiteLLM."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, replace
from typing import Any, TypeGuard

# -- what a self-hosted server says about its window ------------------------------------------
PROBE_TIMEOUT_S = 2.0  # each question to the server; it answers these at once, even while busy
# Of a window a server reports, the share flowrate fills: it counts tokens with LiteLLM's default
# tokenizer, not the served model's, and a small model's tokenizer makes more tokens of the same
# text. Measured with SmolLM2-135M's (llama-cpp-python's /extras/tokenize) against LiteLLM's on
# the rubrics and sample conversations: 1.12-1.14 times as many for the rubrics, 1.13-1.27 for the
# English conversations, 1.24-1.33 Portuguese, 1.47-1.54 Russian. 0.65 covers 1.54.
SERVER_WINDOW_SHARE = 0.65
# Of a window counted with the served model's own tokenizer (the server's /tokenize), the share
# flowrate fills: the chat template's tokens are counted per message (PER_MESSAGE_OVERHEAD), so
# only a small margin is kept.
EXACT_WINDOW_SHARE = 0.97
OLLAMA_DEFAULT_NUM_CTX = 4096  # Ollama's window when the model sets no num_ctx (OLLAMA_CONTEXT_LENGTH)
NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)", re.MULTILINE)


@dataclass(frozen=True)
class ServerFacts:
    """What a self-hosted server told about itself: `kind` ("vllm", "llama.cpp", "ollama"; None
    when it said nothing), its context window in tokens, and the requests it works on at once."""

    kind: str | None = None
    context_window: int | None = None
    slots: int | None = None
    tokenize_url: str | None = None  #: where the server counts tokens with the model's own tokenizer

    @property
    def input_budget(self) -> int | None:
        """The window flowrate fills: nearly all of it when the server counts the tokens, else
        with room for the tokenizer flowrate counts with instead."""
        if not self.context_window:
            return None
        share = EXACT_WINDOW_SHARE if self.tokenize_url else SERVER_WINDOW_SHARE
        return int(self.context_window * share)

    def count_tokens(self, text: str, model: str) -> int | None:
        """`text`'s tokens in the served model's tokenizer, through the server's /tokenize (vLLM:
        `{"model", "prompt"}` -> `count`; llama-server: `{"content"}` -> `tokens`); None when it
        does not answer."""
        if self.tokenize_url is None:
            return None
        body = (
            {"model": model, "prompt": text, "add_special_tokens": False} if self.kind == "vllm" else {"content": text}
        )
        answer = _ask(self.tokenize_url, body)
        if not isinstance(answer, dict):
            return None
        if _positive(answer.get("count")) or answer.get("count") == 0:
            return int(answer["count"])
        tokens = answer.get("tokens")
        return len(tokens) if isinstance(tokens, list) else None


def probe_server(api_base: str, model: str, ollama: bool = False) -> ServerFacts:
    """Ask a self-hosted server for its context window: vLLM's `/v1/models` (`max_model_len`),
    llama.cpp's `/props` (`n_ctx`, `total_slots`), Ollama's `/api/show` (`num_ctx`). Each with
    a short timeout, standard library only; a server that answers none (llama-cpp-python's has
    no such endpoint; its 400 tells the window) gives empty facts."""
    base = api_base.rstrip("/")
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    if ollama:
        shown = _ask(f"{root}/api/show", {"model": model, "name": model})
        if not isinstance(shown, dict):
            return ServerFacts()
        found = NUM_CTX.search(str(shown.get("parameters") or ""))
        trained = next(
            (v for k, v in (shown.get("model_info") or {}).items() if k.endswith(".context_length") and _positive(v)),
            None,
        )
        window = int(found.group(1)) if found else min(OLLAMA_DEFAULT_NUM_CTX, trained or OLLAMA_DEFAULT_NUM_CTX)
        return ServerFacts("ollama", window, None)
    listed = _ask(f"{base}/models")
    if listed is _UNREACHABLE:
        return ServerFacts()
    models = listed.get("data") if isinstance(listed, dict) else None
    if isinstance(models, list):
        mine = [entry for entry in models if isinstance(entry, dict) and entry.get("id") == model] or models
        length = next((entry.get("max_model_len") for entry in mine if isinstance(entry, dict)), None)
        if _positive(length):
            return _with_tokenizer(ServerFacts("vllm", length, None), f"{root}/tokenize", model)
    props = _ask(f"{root}/props")
    if isinstance(props, dict):
        settings = props.get("default_generation_settings") or {}
        n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
        slots = props.get("total_slots")
        if _positive(n_ctx):
            facts = ServerFacts("llama.cpp", n_ctx, slots if _positive(slots) else None)
            return _with_tokenizer(facts, f"{root}/tokenize", model)
    return ServerFacts()


_UNREACHABLE = object()


def _with_tokenizer(facts: ServerFacts, url: str, model: str) -> ServerFacts:
    """`facts` with the server's /tokenize, if it counts a word there. llama-cpp-python's
    /extras/tokenize is not used: it waits for the model while a completion runs, which would
    hold every conversation's planning behind the judge call before it."""
    told = replace(facts, tokenize_url=url)
    return told if told.count_tokens("flowrate", model) else facts


def _ask(url: str, body: dict[str, Any] | None = None) -> Any:
    """The JSON a URL answers (POSTing `body` when given); None for an error or non-JSON answer,
    `_UNREACHABLE` when nothing answered."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S) as answer:
            text = answer.read(1_000_000)
    except urllib.error.HTTPError:  # it answered, with an error: no such endpoint
        return None
    except (urllib.error.URLError, OSError, ValueError):
        return _UNREACHABLE
    try:
        return json.loads(text)
    except ValueError:
        return None


def _positive(value: object) -> TypeGuard[int]:
    """`value` is a count above zero (JSON's `true` is not one)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
