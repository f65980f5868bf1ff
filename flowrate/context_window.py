"""Fitting a long conversation into the judge's context: keep the opening and the end.

A turn too long on its own is clipped in the middle of its longest text, so the start and
end of a huge paste survive, and the assistant's reply stays whole where it fits: the end
state is what the judge must see.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flowrate.models import ConversationalEvalTestCase, EvalTestCase
from flowrate.rubric import elision_line, turn_line

HEAD_TURNS = 2  # opening turns kept: they set up what the user wants
PER_MESSAGE_OVERHEAD = 8  # role and separators a chat template adds to each message
CLIP_MARK = " […] "
CHARS_PER_TOKEN_CEILING = 16  # no tokenizer packs more characters than this in a token on real text
ONE_TURN_SHARE = 0.5  # of the budget, at most, for one turn of a conversation with several
CLIP_ROUNDS = 6


def fit_turns(
    case: ConversationalEvalTestCase, available: int, count_tokens: Callable[[str], int]
) -> tuple[ConversationalEvalTestCase, tuple[int, int] | None]:
    """Keep the first turns and as many of the latest turns as fit in `available` tokens.

    Returns the conversation to show and the (first, last) turn numbers left out (None when
    no turn is). The same object comes back when everything fits; anything else was cut.
    A turn larger than its share of the budget is clipped first (see `clip_turn`); the last
    turn is always kept.
    """
    total = len(case.turns)
    cap = available if total == 1 else int(available * ONE_TURN_SHARE)
    turns = [_preclip(turn, cap) for turn in case.turns]
    costs = [count_tokens(turn_line(number, turn)) for number, turn in enumerate(turns, start=1)]
    clipped = any(new is not old for new, old in zip(turns, case.turns))
    if not clipped and sum(costs) <= available:
        return case, None
    available -= count_tokens(elision_line((1, total)))
    cap = available if total == 1 else int(available * ONE_TURN_SHARE)
    for index, cost in enumerate(costs):
        if cost > cap:
            turns[index] = clip_turn(turns[index], index + 1, cap, count_tokens)
            costs[index] = count_tokens(turn_line(index + 1, turns[index]))
    head = min(HEAD_TURNS, total - 1)
    while head and sum(costs[:head]) + costs[-1] > available:
        head -= 1
    used = sum(costs[:head])
    tail_start = total
    while tail_start > head and used + costs[tail_start - 1] <= available:
        tail_start -= 1
        used += costs[tail_start]
    if tail_start == total:  # the last turn is within the cap, so this only happens for a tiny budget
        turns[-1] = clip_turn(turns[-1], total, max(available - used, 1), count_tokens)
        tail_start = total - 1
    kept = turns[:head] + turns[tail_start:]
    elided = (head + 1, tail_start) if tail_start > head else None
    return case.model_copy(update={"turns": kept}), elided


def clip_turn(turn: EvalTestCase, number: int, room: int, count_tokens: Callable[[str], int]) -> EvalTestCase:
    """Cut the middle of the turn's longest text until the turn fits `room` tokens.

    The longest text goes first, so a huge user paste is cut and a short reply stays whole;
    each cut keeps the text's start and end."""
    for _ in range(CLIP_ROUNDS):
        cost = count_tokens(turn_line(number, turn))
        if cost <= room:
            break
        texts = {"input": turn.input, "actual_output": turn.actual_output or ""}
        texts.update({f"tool{i}": line for i, line in enumerate(turn.tool_activity)})
        field = max(texts, key=lambda name: len(texts[name]))
        text = texts[field]
        tokens = max(count_tokens(text), 1)
        target = max(tokens - (cost - room) - PER_MESSAGE_OVERHEAD, 1)
        clipped = _clip(text, int(len(text) * target / tokens))
        if field.startswith("tool"):
            activity = list(turn.tool_activity)
            activity[int(field[4:])] = clipped
            turn = turn.model_copy(update={"tool_activity": activity})
        else:
            turn = turn.model_copy(update={field: clipped})
    return turn


def _preclip(turn: EvalTestCase, cap: int) -> EvalTestCase:
    """Cut texts far longer than any budget by characters first, so the tokenizer never reads
    twenty million of them: no text over `cap` x `CHARS_PER_TOKEN_CEILING` characters fits anyway."""
    limit = max(cap, 1) * CHARS_PER_TOKEN_CEILING
    texts = [turn.input, turn.actual_output or "", *turn.tool_activity]
    if all(len(text) <= limit for text in texts):
        return turn
    return EvalTestCase(
        input=_clip(turn.input, limit),
        actual_output=None if turn.actual_output is None else _clip(turn.actual_output, limit),
        tool_activity=[_clip(line, limit) for line in turn.tool_activity],
    )


def _clip(text: str, keep: int) -> str:
    """The first and last `keep` / 2 characters, with a mark between."""
    if keep >= len(text):
        return text
    half = max(keep, 2) // 2
    return text[:half] + CLIP_MARK + text[len(text) - half :]


# -- what a self-hosted server says about its window ------------------------------------------
PROBE_TIMEOUT_S = 2.0  # each question to the server; it answers these at once, even while busy
# Of a window a server reports, the share flowrate fills: it counts tokens with LiteLLM's default
# tokenizer, not the served model's, and a small model's tokenizer makes more tokens of the same
# text. Measured with SmolLM2-135M's (llama-cpp-python's /extras/tokenize) against LiteLLM's on
# the rubrics and sample conversations: 1.12-1.14 times as many for the rubrics, 1.13-1.27 for the
# English conversations, 1.24-1.33 Portuguese, 1.47-1.54 Russian. 0.65 covers 1.54.
SERVER_WINDOW_SHARE = 0.65
OLLAMA_DEFAULT_NUM_CTX = 4096  # Ollama's window when the model sets no num_ctx (OLLAMA_CONTEXT_LENGTH)
NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)", re.MULTILINE)


@dataclass(frozen=True)
class ServerFacts:
    """What a self-hosted server told about itself: `kind` ("vllm", "llama.cpp", "ollama"; None
    when it said nothing), its context window in tokens, and the requests it works on at once."""

    kind: str | None = None
    context_window: int | None = None
    slots: int | None = None

    @property
    def input_budget(self) -> int | None:
        """The window flowrate fills, with room for the tokenizer it does not have."""
        return int(self.context_window * SERVER_WINDOW_SHARE) if self.context_window else None


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
            return ServerFacts("vllm", int(length), None)
    props = _ask(f"{root}/props")
    if isinstance(props, dict):
        settings = props.get("default_generation_settings") or {}
        window = settings.get("n_ctx") if isinstance(settings, dict) else None
        slots = props.get("total_slots")
        if _positive(window):
            return ServerFacts("llama.cpp", int(window), int(slots) if _positive(slots) else None)
    return ServerFacts()


_UNREACHABLE = object()


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


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
