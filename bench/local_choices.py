"""The in-process judge's yes/no replies (the checklist's, the per-turn look's) read where the model
chooses (`flowrate.judge.local_choices`) against generated token by token under the schema's
grammar, as `--model gguf:` generated them before: the time each takes right after the grading
call (the rubric and the conversation already in the model's cache, as in a run), the answers, and
P(yes) under each key from both, beside the reply the cache kept.

The requests are the ones a judge-bench run sent for the public dialogues (`--cache-dir`, a run
with `--turn-look` or `--score checklist`), each asked again, both ways, of the same model:

python bench/local_choices.py --model qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --cache-dir ~/.cache/flowrate-card \
  --limit 6 [--like fed-]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import threading
import time
from pathlib import Path

import orjson
from common import ROOT  # noqa: F401  (puts the project on the path)

from flowrate.judge.backend import TOP_LOGPROBS
from flowrate.judge.cache import read_records
from flowrate.judge.local_choices import chat_prompt, held_tokens
from flowrate.judge.local_model import generate, load_llama
from flowrate.judge.logprobs import restored
from flowrate.scores.checklist import ANSWERS, yes_no_reading, yes_no_schema


def evaluate_prompt(llama, prompt: list[int]) -> None:
    """Evaluate `prompt`, keeping the tokens the model already holds from its start (as
    `Llama.generate` keeps them; at least its last token is evaluated again)."""
    llama.n_tokens = held_tokens(llama.input_ids[: llama.n_tokens], prompt)  # `Llama.eval` drops the rest
    llama.eval(prompt[llama.n_tokens :])


def yes_no_keys(text: str) -> list[str] | None:
    """The keys of a yes/no reply (every value "yes" or "no"), or None for any other reply."""
    try:
        found = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if isinstance(found, dict) and found and all(value in ANSWERS for value in found.values()):
        return list(found)
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, type=Path, help="the GGUF file the cache's replies came from")
    parser.add_argument("--cache-dir", required=True, type=Path)
    parser.add_argument("--limit", type=int, default=6, help="how many yes/no requests to ask again")
    parser.add_argument("--like", default="", help="only conversations whose id holds this text (a set's prefix)")
    args = parser.parse_args()
    db = sqlite3.connect(args.cache_dir / "responses.sqlite3")
    asked = []
    query = "SELECT DISTINCT conversation_id FROM responses WHERE instr(conversation_id, ?) ORDER BY conversation_id"
    for (conversation,) in db.execute(query, (args.like,)):
        for record in read_records(db, conversation):
            keys = yes_no_keys(record.texts[0]) if record.messages else None
            if keys:
                logprobs = db.execute("SELECT logprobs FROM responses WHERE key = ?", (record.key,)).fetchone()[0]
                asked.append((conversation, record.messages, keys, record.texts[0], logprobs))
        if len(asked) >= args.limit:
            break
    llama = load_llama(args.model)
    stop = threading.Event()
    print(
        "| conversation | keys | prompt tokens | token by token s | choices s | ratio | same answers | max abs P(yes) change | against the cache's |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    ratios, changes, changes_kept = [], [], []
    guesses: dict[str, str] = {}  # as a run keeps them: each answer guessed as the call before answered it
    for conversation, messages, keys, cached, logprobs in asked[: args.limit]:
        response_format = {"type": "json_object", "schema": yes_no_schema(keys)}
        timed, read = [], []
        evaluate_prompt(llama, chat_prompt(llama, messages[:-1]))  # the grading call's prompt, as in a run
        held = llama.save_state()
        for choices in (False, True):
            llama.load_state(held)
            started = time.perf_counter()
            completion = generate(llama, messages, response_format, 0.0, None, stop, TOP_LOGPROBS, choices, guesses)
            timed.append(time.perf_counter() - started)
            read.append(yes_no_reading(dict(zip(keys, keys)), completion.texts[0], completion.tokens(0)))
        kept = yes_no_reading(dict(zip(keys, keys)), cached, restored(orjson.loads(logprobs))[0] if logprobs else None)
        change = max(abs(read[0].p_yes[key] - read[1].p_yes[key]) for key in keys)
        from_cache = max(abs(kept.p_yes[key] - read[1].p_yes[key]) for key in keys)
        changes_kept.append(from_cache)
        ratios.append(timed[0] / timed[1])
        changes.append(change)
        print(
            f"| {conversation} | {len(keys)} | {completion.usage.prompt_tokens} | {timed[0]:.1f} | {timed[1]:.1f} |"
            f" {timed[0] / timed[1]:.2f} | {read[0].answers == read[1].answers} | {change:.4f} | {from_cache:.4f} |"
        )
    print(
        f"\nmedian ratio {statistics.median(ratios):.2f}; largest P(yes) change {max(changes):.4f},"
        f" against the cache's {max(changes_kept):.4f}"
    )


if __name__ == "__main__":
    main()
