"""The context budget of a rubric metric's calls: the judge's window (known, told by its server,
or named in a refusal), what the rubric, its examples and the reply take of it, and what is left
for the conversation."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import orjson

from flowrate.errors import ConfigError
from flowrate.inputs.conversation import ConversationalEvalTestCase, EvalTestCase
from flowrate.judge.backend import JudgeBackend
from flowrate.judge.server import SERVER_WINDOW_SHARE
from flowrate.rubric.fitting import PER_MESSAGE_OVERHEAD
from flowrate.rubric.model import Rubric
from flowrate.rubric.prompt import grading_request

REPLY_RESERVE_TOKENS = 1024  # room for the reply in the context, where no reply limit is sent
MIN_TRANSCRIPT_TOKENS = 64  # a budget must hold at least a short turn besides the rubric
# max_tokens of each reply: the rubric's longest example reply, in tokens, times REPLY_TOKENS_MARGIN,
# and never below REPLY_TOKENS_FLOOR. The examples measure 59-113 tokens (flow), 172-286 (the
# virtual-agent suite) with LiteLLM's default tokenizer; a real reply runs longer when a conversation
# has more lapses, and a small model's tokenizer counts 10-25 % more. A runaway key-issue list from
# a 1.5B model reached 1,352 tokens (254 s on CPU) before it stopped (issue 14).
REPLY_TOKENS_MARGIN = 3
# An example reply's tokens, from its bytes: the examples' JSON runs 3.4-4.1 bytes a token with
# the tokenizers measured (tiktoken's, SmolLM2's, Qwen2.5's); REPLY_TOKENS_MARGIN covers the rest.
REPLY_BYTES_PER_TOKEN = 4
REPLY_TOKENS_FLOOR = 512


@dataclass(eq=False)
class Budget:
    """The context window of one metric's calls and how it is shared. `rubric` and `language`
    make the prompt's fixed part (its prefix size), `backend` tells the model's window, counts
    tokens and says whether a reply limit is sent; `max_input_tokens` (--max-input-tokens) caps
    the window; `learned_window` is a window a server named in a refusal (`learn_window`).

    The window, the tokenizer and the prefix's tokens are looked up on first use only: counting
    with a model's tokenizer loads it (1.1 s of every `flowrate eval`, bench/startup.py)."""

    rubric: Rubric
    backend: JudgeBackend
    language: str
    max_input_tokens: int | None = None
    learned_window: int | None = None

    def check(self) -> None:
        """Raise `ConfigError` when `max_input_tokens` cannot hold the rubric, its examples, room
        for the reply and a minimal transcript: the judge would be sent no conversation."""
        if self.max_input_tokens is not None and self.max_input_tokens < self.minimum_input_tokens:
            raise ConfigError(
                f"option max_input_tokens: {self.max_input_tokens} cannot hold the rubric and a conversation;"
                f" the minimum for this rubric and model is {self.minimum_input_tokens}"
            )

    @cached_property
    def minimum_input_tokens(self) -> int:
        """The smallest context budget that holds the rubric, the reply and `MIN_TRANSCRIPT_TOKENS`."""
        return self.needs + MIN_TRANSCRIPT_TOKENS

    @cached_property
    def needs(self) -> int:
        """Tokens of the window the conversation cannot have: the rubric, its examples, the
        grading request's wrapper and room for the reply."""
        empty = ConversationalEvalTestCase(turns=[EvalTestCase(input="", actual_output="")])
        wrapper = self.backend.count_tokens(grading_request(empty, self.language, self.rubric.task))
        return self.prefix_tokens + wrapper + self.reply_reserve

    @cached_property
    def prefix_bytes(self) -> int:
        """Bytes of the rubric's fixed messages (its instructions and examples), message overheads included."""
        return sum(len(m["content"].encode()) + PER_MESSAGE_OVERHEAD for m in self.rubric.prefix_messages)

    @cached_property
    def prefix_tokens(self) -> int:
        """Tokens of the rubric's fixed messages, counted with the model's tokenizer."""
        return sum(self.backend.count_tokens(m["content"]) + PER_MESSAGE_OVERHEAD for m in self.rubric.prefix_messages)

    @cached_property
    def reply_token_limit(self) -> int:
        """max_tokens of each reply: what the rubric's schema needs (see `REPLY_TOKENS_MARGIN`),
        sized from the examples' bytes: counting them with the model's tokenizer loaded it at
        start-up, 1.1 s of every `flowrate eval` (bench/startup.py)."""
        longest = max((len(orjson.dumps(e.reply)) for e in self.rubric.examples), default=0)
        return max(REPLY_TOKENS_FLOOR, REPLY_TOKENS_MARGIN * -(-longest // REPLY_BYTES_PER_TOKEN))

    @cached_property
    def reply_limit(self) -> int | None:
        """The max_tokens sent: none to a judge that cannot take it or spends it on hidden reasoning."""
        return self.reply_token_limit if self.backend.bounds_replies() else None

    @property
    def reply_reserve(self) -> int:
        """Room left in the context for one reply (each of n choices has its own)."""
        return self.reply_limit or REPLY_RESERVE_TOKENS

    @property
    def window(self) -> int | None:
        """The context window planned for: --max-input-tokens, else one a server named in a
        refusal, else the model's known window."""
        return self.max_input_tokens or self.learned_window or self.known_window

    @cached_property
    def known_window(self) -> int | None:
        """The model's window as its backend knows it (None: unknown)."""
        return self.backend.context_window()

    def learn_window(self, told: int) -> None:
        """The server refused a prompt as too long and named its window, `told` tokens of its
        own tokenizer (llama-cpp-python says it nowhere else): plan every conversation from now
        on to fit it, with room for the tokenizer flowrate counts with (`SERVER_WINDOW_SHARE`).
        A --max-input-tokens given is kept: the user chose it."""
        window = int(told * SERVER_WINDOW_SHARE)
        if self.window is None or window < self.window:
            self.learned_window = window

    @property
    def input_budget(self) -> int | None:
        """Tokens the conversation may take: the window less the rubric, its examples and room
        for the reply. None when no window is known."""
        if not self.window:
            return None
        return max(self.window - self.needs, MIN_TRANSCRIPT_TOKENS)

    def may_overflow(self, prompt_bytes: int) -> bool:
        """Whether a prompt of `prompt_bytes` may not fit the window with room for the reply:
        bytes bound tokens from above, so a prompt that passes needs no tokenizer."""
        return self.window is not None and prompt_bytes > self.window - self.reply_reserve
