"""`--model gguf:PATH`: a GGUF model file run in this process through llama-cpp-python (the
optional extra `flowrate[local]`), for private data: no server, no key, no network. The rubric's
reply schema is its grammar, so every reply is the JSON the rubric asks for; the model's own
tokenizer counts the tokens, so a long conversation is cut to its real window.

llama-cpp-python is imported, and the model loaded, on the first use; a missing extra or model
file is a plain error naming the fix."""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property, partial
from pathlib import Path
from typing import Any

from flowrate.errors import JudgeAccessError
from flowrate.judge.address import GGUF_PREFIX, JudgeAddress
from flowrate.judge.backend import SELF_HOSTED_TIMEOUT_S, TOP_LOGPROBS, Completion, JudgeBackend, PerLoop, Usage
from flowrate.judge.errors import CONTEXT_WORDS, ContextWindowExceeded, TimedOut, window_named
from flowrate.judge.local_choices import (
    Stopped,
    choice_fields,
    choose,
    held_tokens,
    named_steps,
    starting_tokens,
    step_logprobs,
)
from flowrate.judge.schema_forms import bounded_schema

# The window loaded when FLOWRATE_GGUF_N_CTX does not say: the model's trained context, capped.
# Qwen2.5's 32,768 tokens would reserve a KV cache of about 0.9 GB at 1.5B parameters for replies
# to prompts that are 3,000-6,000 tokens long; 8,192 holds the rubric and a long conversation.
DEFAULT_N_CTX = 8192
IDENTITY_BYTES = 1 << 20  # the model's identity: its size and the sha256 of its first and last MiB
INSTALL_HINT = "pip install 'flowrate[local]'"


def _not_a_model_file(path: Path) -> str | None:
    """What keeps `path` from being a model file to load (None: nothing)."""
    if path.is_dir():
        return "is a directory, not a model file"
    return None if path.is_file() else "no such model file"


class LocalModel(JudgeBackend):
    """A GGUF file as a judge backend: one generation at a time, in a worker thread, stopped at
    the next token when its call is abandoned."""

    def __init__(self, address: JudgeAddress):
        """`address`: a `gguf:PATH` judge's (`JudgeAddress.parse`)."""
        if address.gguf_path is None:
            raise ValueError(f"{address.model!r} names no GGUF file")
        self._given = address.model.removeprefix(GGUF_PREFIX)
        self.path = address.gguf_path
        self.model_name = f"{GGUF_PREFIX}{address.name}"
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="flowrate-gguf")
        self._load_lock = threading.Lock()
        self._slot = PerLoop(lambda: asyncio.Semaphore(1))
        self._guesses: dict[str, str] = {}  # a reply of choices' last answer under each key: the next one's guess

    # -- before any call ------------------------------------------------------------------
    def check_access(self) -> None:
        """The model file is there, and llama-cpp-python is installed."""
        if not self._given.strip():  # Path("") is ".", which would be named as the missing file
            raise JudgeAccessError("--model gguf: names no model file: give its path, --model gguf:PATH")
        if problem := _not_a_model_file(self.path):
            raise JudgeAccessError(f"{self.path}: {problem} (--model gguf:PATH names a .gguf file)")
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            raise JudgeAccessError(f"--model gguf: runs the model with llama-cpp-python: {INSTALL_HINT}") from None

    def check_model(self) -> None:
        _ = self._llama

    @cached_property
    def _llama(self) -> Any:
        """The loaded model (seconds for a 1 GB file), with its trained window capped."""
        self.check_access()
        with self._load_lock:
            return load_llama(self.path)

    def context_window(self) -> int | None:
        """The loaded window, exact: the model's own tokenizer counts every prompt."""
        return self._llama.n_ctx()

    def count_tokens(self, text: str) -> int:
        return len(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    # -- what the calls may ask ---------------------------------------------------------------
    def default_timeout_s(self) -> float:
        return SELF_HOSTED_TIMEOUT_S

    def retries_timeouts(self) -> bool:
        """No: the model is this process's, and it serves one call at a time."""
        return False

    def server_slot(self) -> asyncio.Semaphore:
        """One call at a time at the model, so no call waits for the worker with its timeout running."""
        return self._slot.get()

    def cache_identity(self) -> str:
        return f"{GGUF_PREFIX}{self._identity}"

    @cached_property
    def _identity(self) -> str:
        return file_identity(self.path)

    def response_format_id(self) -> str | None:
        return "gguf_grammar"

    def top_logprobs(self) -> int:  # the logits are this process's: read at every token when asked
        return TOP_LOGPROBS if self.asks_logprobs else 0

    def structured_output(self, name: str, schema: dict[str, Any]) -> dict[str, Any] | None:
        """The schema in llama-cpp-python's form, which it compiles to a grammar."""
        return {"type": "json_object", "schema": schema}

    async def complete(
        self,
        messages: list[dict[str, str]],
        *,
        n: int,
        timeout: float,
        response_format: dict | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> Completion:
        """One reply, generated in the worker thread; a timeout or a stopping run stops it at
        its next token."""
        response_format = bounded_grammar(response_format, max_tokens)
        stop = threading.Event()
        asked = partial(
            generate, self._llama, messages, response_format, temperature, max_tokens, stop,
            top_logprobs=self.top_logprobs(), guesses=self._guesses,
        )  # fmt: skip
        generation = asyncio.get_running_loop().run_in_executor(self._worker, asked)
        generation.add_done_callback(lambda done: done.cancelled() or done.exception())  # a stopped one is not awaited
        try:
            return await asyncio.wait_for(asyncio.shield(generation), timeout)
        except TimeoutError:
            stop.set()
            raise TimedOut(f"the model took longer than {timeout:g} seconds") from None
        except ValueError as error:  # llama-cpp-python's "Requested tokens (N) exceed context window of M"
            raise local_error(error) from error
        except BaseException:
            stop.set()
            raise


def bounded_grammar(response_format: dict | None, max_tokens: int | None) -> dict | None:
    """`response_format`'s schema (the grammar) bounded to fit `max_tokens` (`bounded_schema`)."""
    if response_format is None or not response_format.get("schema"):
        return response_format
    return {**response_format, "schema": bounded_schema(response_format["schema"], max_tokens)}


def load_llama(path: Path) -> Any:
    """llama-cpp-python's model of the file at `path`, its window FLOWRATE_GGUF_N_CTX (else
    `DEFAULT_N_CTX`) capped at the trained one, on FLOWRATE_GGUF_THREADS threads (else every core)."""
    from llama_cpp import Llama

    wanted = int(os.environ.get("FLOWRATE_GGUF_N_CTX") or DEFAULT_N_CTX)
    threads = int(os.environ.get("FLOWRATE_GGUF_THREADS") or os.cpu_count() or 1)  # its default: half the cores
    try:
        llama = Llama(model_path=str(path), n_ctx=wanted, n_threads=threads, verbose=False)
        trained = next((int(v) for k, v in llama.metadata.items() if k.endswith(".context_length") and v.isdigit()), 0)
        if 0 < trained < wanted:  # past its trained window a model's replies degrade
            del llama
            llama = Llama(model_path=str(path), n_ctx=trained, n_threads=threads, verbose=False)
    except (ValueError, RuntimeError) as error:  # not a GGUF file, or one it cannot load
        raise JudgeAccessError(f"{path}: llama-cpp-python cannot load it: {error}") from None
    return llama


def generate(
    llama: Any,
    messages: list[dict[str, str]],
    response_format: dict | None,
    temperature: float,
    max_tokens: int | None,
    stop: threading.Event,
    top_logprobs: int = 0,
    choices: bool = True,
    guesses: dict[str, str] | None = None,
) -> Completion:
    """One streamed reply of `llama` to `messages`, stopped (`Stopped`) at the token after `stop` is
    set; with `top_logprobs`, each token's log-probability and its alternatives read (`LogitsTrace`).
    A reply whose schema leaves only choices is read where it chooses (`local_choices.choose`)
    unless `choices` is false (`bench/local_choices.py` times both), its answers guessed as in
    `guesses` (the answers of the calls before, updated)."""
    if choices and not temperature and (fields := choice_fields(llama, response_format)) is not None:
        chosen = choose(llama, messages, fields, max_tokens, stop, top_logprobs, guesses)
        if chosen is not None:
            return chosen
    before = list(llama.input_ids[: llama.n_tokens]) if llama.n_tokens else []  # what the model holds
    parts: list[str] = []
    finish: str | None = None
    trace = LogitsTrace(llama, top_logprobs, enum_values(response_format)) if top_logprobs else None
    chunks = llama.create_chat_completion(
        messages=messages,
        temperature=temperature,
        max_tokens=max_tokens,
        response_format=response_format,
        stream=True,
        logits_processor=[trace] if trace is not None else None,
    )
    for chunk in chunks:
        if stop.is_set():
            raise Stopped()
        choice = chunk["choices"][0]
        text = choice.get("delta", {}).get("content")
        if text:
            parts.append(text)  # llama-cpp-python streams one token per chunk
        finish = choice.get("finish_reason") or finish
    generated = len(parts)
    prompt_tokens = max(llama.n_tokens - generated, 0)
    held = held_tokens(before, llama.input_ids[:prompt_tokens]) if before else 0
    usage = Usage(prompt_tokens=prompt_tokens, completion_tokens=generated, cached_tokens=held)
    return Completion(
        texts=["".join(parts)],
        usage=usage,
        finish_reasons=[finish],
        response_format="gguf_grammar",
        logprobs=[trace.tokens(parts) if trace is not None else None],
    )


class LogitsTrace:
    """A logits processor that reads, at each token the model generates, the log-probabilities of
    its `top` most likely tokens and of every token that begins one of `values` (the schema's
    enums: a level is read even where it is not among the top). It is called before the grammar
    constrains the choice, so the alternatives are the model's own."""

    def __init__(self, llama: Any, top: int, values: list[str]):
        self.llama = llama
        self.top = top
        self.watched = starting_tokens(llama, values)
        self.steps: list[dict[int, float]] = []

    def __call__(self, _input_ids: Any, logits: Any) -> Any:
        self.steps.append(step_logprobs(logits, self.top, self.watched))
        return logits

    def tokens(self, pieces: list[str]) -> list[dict[str, Any]] | None:
        """The generated `pieces` with their log-probabilities, in OpenAI's `logprobs.content`
        shape; None when the steps read do not match the pieces one to one."""
        if len(self.steps) < len(pieces):
            return None
        out = []
        for piece, step in zip(pieces, self.steps):
            top = named_steps(self.llama, step)
            chosen = next((t["logprob"] for t in top if t["token"] == piece), float("-inf"))
            out.append({"token": piece, "logprob": chosen, "top_logprobs": top})
        return out


def enum_values(response_format: dict | None) -> list[str]:
    """Every value a schema's enums allow, as text: where the judge's levels are."""
    found: list[str] = []

    def walk(part: Any) -> None:
        if isinstance(part, dict):
            found.extend(str(value) for value in part.get("enum") or [])
            for value in part.values():
                walk(value)
        elif isinstance(part, list):
            for value in part:
                walk(value)

    walk((response_format or {}).get("schema"))
    return found


def local_error(error: ValueError) -> Exception:
    """llama-cpp-python's error as one of flowrate's: a prompt past the loaded window, or `error` itself."""
    message = str(error)
    if CONTEXT_WORDS.search(message):
        return ContextWindowExceeded(message, window_tokens=window_named(message))
    return error


def file_identity(path: Path) -> str:
    """A model file's size and a digest of its ends: a renamed copy still hits the cache, a new
    quantisation of the same model does not. Hashing all of the 1.1 GB Qwen2.5-Coder-1.5B file took
    1.25 s here (page-cached), its ends 2 ms: a cost every run would pay at start."""
    digest = hashlib.sha256()
    size = path.stat().st_size
    with path.open("rb") as handle:
        digest.update(handle.read(IDENTITY_BYTES))
        handle.seek(max(size - IDENTITY_BYTES, 0))
        digest.update(handle.read(IDENTITY_BYTES))
    return f"{size}:{digest.hexdigest()[:32]}"
