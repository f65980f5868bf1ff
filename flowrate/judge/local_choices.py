"""The in-process judge's replies whose schema leaves the model nothing to write but choices: an
object of string enums, every field required and none else (the checklist's and the per-turn
look's "yes"/"no" under each key), where every value is one token of the model's own. The reply's
text is then known around one choice per field, so the model evaluates the prompt and that text
in one batch, each choice guessed, and is read only where it chooses: at each value, the
log-probabilities of its likely tokens and of every value's token (as `LogitsTrace` reads them),
the choice the most likely value (what greedy decoding under the schema's grammar picks); what
followed a wrong guess is evaluated again.

Why: a grammar-constrained reply is generated one token at a time, each a decode of its own; on 2
cores the 1.5B judge's checklist (its ten questions then) took 7.6-9.6 s this way against
12.4-13.2 s token by token, and its per-turn look (then every turn in one reply) 4.8-8.0 s against
10.6-12.5 s, with the same answers (`bench/local_choices.py`,
docs/judges.md)."""

from __future__ import annotations

import threading
from typing import Any

import orjson

from flowrate.judge.backend import Completion, Usage

Field = tuple[str, list[str], list[int]]  # a key, its values, and each value's one token


class Stopped(Exception):
    """The generation was stopped: its call timed out or the run is stopping."""


def choice_fields(llama: Any, response_format: dict | None) -> list[Field] | None:
    """The fields of `response_format`'s schema when it is an object of string enums only (every
    field required, none else) and each value is one token of `llama`'s, its values' tokens
    distinct; None for any other schema, which is generated token by token."""
    schema = (response_format or {}).get("schema")
    if (
        not isinstance(schema, dict)
        or schema.get("type") != "object"
        or schema.get("additionalProperties") is not False
    ):
        return None
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties or list(schema.get("required") or []) != list(properties):
        return None
    fields: list[Field] = []
    spelled_as: dict[str, list[int]] = {}  # a turn look's 15 keys share "yes" and "no": tokenised once
    for key, part in properties.items():
        if not isinstance(part, dict) or set(part) != {"type", "enum"} or part["type"] != "string":
            return None
        values = [str(value) for value in part["enum"] or []]
        for value in values:
            if value not in spelled_as:
                spelled_as[value] = llama.tokenize(value.encode("utf-8"), add_bos=False, special=False)
        tokens = [spelled_as[value] for value in values]
        if not values or any(len(spelled) != 1 for spelled in tokens) or len({t[0] for t in tokens}) < len(values):
            return None
        fields.append((key, values, [spelled[0] for spelled in tokens]))
    return fields


def chat_prompt(llama: Any, messages: list[dict[str, str]]) -> list[int]:
    """The prompt tokens `llama.create_chat_completion` evaluates for `messages`: its own chat
    handler's, caught before it generates, so the prefix the model holds from the call before is
    the same tokens."""
    handler = (
        llama.chat_handler or llama._chat_handlers.get(llama.chat_format) or _registered_handler(llama.chat_format)
    )
    catcher = _PromptCatcher(llama)
    try:
        handler(llama=catcher, messages=messages, temperature=0.0)
    except _Caught:
        pass
    if catcher.prompt is None:
        raise RuntimeError("llama-cpp-python's chat handler built no prompt")
    return list(catcher.prompt)


def choose(
    llama: Any, messages: list[dict[str, str]], fields: list[Field], max_tokens: int | None,
    stop: threading.Event, top: int, guesses: dict[str, str] | None = None,
) -> Completion | None:  # fmt: skip
    """`llama`'s reply to `messages` under a schema of `fields` (`choice_fields`), with each value's
    `top` likeliest tokens and every value's starting tokens read (none read when `top` is 0); None
    when the reply cannot fit `max_tokens` or the loaded window, for the token-by-token path to
    answer as it does. `stop` stops it between evaluations (`Stopped`).

    The prompt and the whole reply are evaluated in one batch, each answer a guess (`guesses`, the
    answers under each key of the calls before, updated here), and the model is read at every
    answer's position; from the first answer the model did not choose as guessed, the rest is
    evaluated again after its choice, fewer answers guessed a batch. Measured on the checklist of
    the 1.5B judge on 2 cores: a decode of the 8-10 tokens before an answer took 0.20-0.40 s, most
    of it reading the weights, so a batch per answer spent 2.3-2.8 s on the reply's ten stretches
    and one batch about 1.6 s; the first per-turn look (15 answers in one reply) went from 5.6-6.5 s
    to 4.8-5.1 s."""
    prompt = chat_prompt(llama, messages)
    heads = [
        ("{" if index == 0 else '", ') + orjson.dumps(key).decode() + ': "' for index, (key, _, _) in enumerate(fields)
    ]
    head_tokens = [llama.tokenize(head.encode("utf-8"), add_bos=False, special=False) for head in heads]
    tail = '"}'
    tail_count = len(llama.tokenize(tail.encode("utf-8"), add_bos=False, special=False))
    written = sum(map(len, head_tokens)) + len(fields) + tail_count
    if (max_tokens is not None and written > max_tokens) or len(prompt) + written > llama.n_ctx():
        return None
    watched = starting_tokens(llama, sorted({value for _, values, _ in fields for value in values}))
    guessed = {} if guesses is None else guesses
    held = held_tokens(llama.input_ids[: llama.n_tokens], prompt + head_tokens[0])
    llama.n_tokens = held  # what the model holds past the shared prefix is evaluated again
    pending = (prompt + head_tokens[0])[held:]  # up to the next answer
    chosen: list[int] = []  # each field's value, by index
    steps: list[dict[int, float]] = []
    ahead = len(fields)  # answers read in one batch: all of them, fewer after a wrong guess
    last = next(reversed(guessed.values()), None)  # a key never answered is guessed as the answer before
    while len(chosen) < len(fields):
        if stop.is_set():
            raise Stopped()
        first, tokens = len(chosen), list(pending)
        reads, bets = [len(tokens) - 1], []
        for index in range(first + 1, min(first + ahead, len(fields))):
            key, values, value_tokens = fields[index - 1]
            bets.append(guess(values, guessed.get(key, last)))
            last = values[bets[-1]]
            tokens += [value_tokens[bets[-1]], *head_tokens[index]]
            reads.append(len(tokens) - 1)
        start = llama.n_tokens
        ahead *= 2  # the next batch reads twice as many, unless a guess below is wrong
        for offset, logits in enumerate(evaluate_reading(llama, tokens, reads)):
            _, values, value_tokens = fields[first + offset]
            pick = max(range(len(values)), key=lambda index: logits[value_tokens[index]])
            chosen.append(pick)
            steps.append(step_logprobs(logits, top, watched | set(value_tokens)))
            last = values[pick]
            if offset < len(bets) and bets[offset] != pick:  # what followed stood on a wrong guess
                llama.n_tokens = start + reads[offset] + 1
                ahead = 2  # then one answer guessed a batch, twice as many after each right batch
                break
        if len(chosen) < len(fields):
            pending = [fields[len(chosen) - 1][2][chosen[-1]], *head_tokens[len(chosen)]]
    pieces: list[dict[str, Any]] = []
    for head, (key, values, value_tokens), pick, step in zip(heads, fields, chosen, steps):
        guessed.pop(key, None)  # kept in the order answered: the last is the answer before
        guessed[key] = values[pick]
        pieces.append({"token": head, "logprob": 0.0, "top_logprobs": []})  # the schema's: certain
        pieces.append({
            "token": values[pick], "logprob": step[value_tokens[pick]], "top_logprobs": named_steps(llama, step),
        })  # fmt: skip
    pieces.append({"token": tail, "logprob": 0.0, "top_logprobs": []})
    text = "".join(piece["token"] for piece in pieces)
    return Completion(
        texts=[text],
        usage=Usage(prompt_tokens=len(prompt), completion_tokens=written, cached_tokens=min(held, len(prompt))),
        finish_reasons=["stop"],
        response_format="gguf_grammar",
        logprobs=[pieces if top else None],
    )


def guess(values: list[str], answer: str | None) -> int:
    """The value to guess: `answer` where it is one of `values`, else the first."""
    return values.index(answer) if answer in values else 0


def evaluate_reading(llama: Any, tokens: list[int], reads: list[int]) -> list[Any]:
    """Evaluate `tokens` after what the model holds (as `Llama.eval` does, in batches of its
    `n_batch`), keeping the logits after each position in `reads` (ascending): llama.cpp computes
    the output rows a batch flags, so one decode reads every answer."""
    import numpy as np

    llama._ctx.kv_cache_seq_rm(-1, llama.n_tokens, -1)  # drop what the model holds past n_tokens
    found = []
    for begin in range(0, len(tokens), llama.n_batch):
        batch = tokens[begin : begin + llama.n_batch]
        inside = [read - begin for read in reads if begin <= read < begin + len(batch)]
        llama._batch.set_batch(batch=batch, n_past=llama.n_tokens, logits_all=False)  # flags the last
        for index in inside:
            llama._batch.batch.logits[index] = True
        llama._ctx.decode(llama._batch)
        for index in inside:
            row = llama._ctx.get_logits_ith(index)
            found.append(np.ctypeslib.as_array(row, shape=(llama.n_vocab(),)).astype(np.float64))
        llama.input_ids[llama.n_tokens : llama.n_tokens + len(batch)] = batch
        llama.n_tokens += len(batch)
    return found


def step_logprobs(logits: Any, top: int, watched: set[int]) -> dict[int, float]:
    """The log-probabilities, by token, of the `top` likeliest tokens of `logits` and of the `watched` ones."""
    import numpy as np

    values = np.asarray(logits, dtype=np.float64)
    peak = values.max()
    log_total = peak + np.log(np.exp(values - peak).sum())
    ids = {int(i) for i in np.argpartition(-values, top)[:top]} | watched
    return {i: float(values[i] - log_total) for i in ids}


def named_steps(llama: Any, step: dict[int, float]) -> list[dict[str, Any]]:
    """A step's log-probabilities as OpenAI's `top_logprobs`, likeliest first, each token as its text."""
    ranked = sorted(step.items(), key=lambda item: -item[1])
    return [{"token": llama.detokenize([i]).decode("utf-8", errors="replace"), "logprob": p} for i, p in ranked]


def starting_tokens(llama: Any, values: list[str]) -> set[int]:
    """The tokens that spell a prefix of a value whole, each in one token (with a leading quote or
    space too): the tokens a value may begin with."""
    ids: set[int] = set()
    for value in values:
        for end in range(1, len(value) + 1):
            for prefix in ("", '"', " ", ' "'):
                tokens = llama.tokenize((prefix + value[:end]).encode("utf-8"), add_bos=False, special=False)
                if len(tokens) == 1:
                    ids.add(tokens[0])
    return ids


def held_tokens(held: Any, prompt: Any) -> int:
    """How many of `prompt`'s first tokens (its last one aside) a model holding the tokens `held`
    keeps: the prompt cache of a judge in process, counted as a provider's `cached_tokens`."""
    count = 0
    for had, wanted in zip(held, prompt[:-1]):
        if had != wanted:
            break
        count += 1
    return count


def _registered_handler(chat_format: str) -> Any:
    from llama_cpp import llama_chat_format

    return llama_chat_format.get_chat_completion_handler(chat_format)


class _Caught(Exception):
    """The chat handler reached generation: its prompt is caught."""


class _PromptCatcher:
    """`llama` to a chat handler, but generating nothing: the prompt it would complete is kept."""

    def __init__(self, llama: Any):
        self._llama = llama
        self.prompt: list[int] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llama, name)

    def create_completion(self, prompt: list[int], **_: Any) -> Any:
        self.prompt = prompt
        raise _Caught()
