"""The rubric metric's context budget: the judge's window (known, told by its server, or named
in a refusal), what the rubric, its examples and the reply take of it, and what is left for the
conversation.

`ContextBudget` is a part of `Planning`; it reads the metric's rubric, backend and language."""

from __future__ import annotations

from functools import cached_property

import orjson

from flowrate.errors import ConfigError
from flowrate.inputs.conversation import ConversationalEvalTestCase, EvalTestCase
from flowrate.judge.server import SERVER_WINDOW_SHARE
from flowrate.rubric.fitting import PER_MESSAGE_OVERHEAD
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


class ContextBudget:
    """The context budget of a rubric metric's calls; see the module."""

    def check_budget(self) -> None:
        """Raise `ConfigError` when `max_input_tokens` cannot hold the rubric, its examples, room
        for the reply and a minimal transcript: the judge would be sent no conversation."""
        if self._max_input_tokens is None:
            return
        if self._max_input_tokens < self.minimum_input_tokens:
            raise ConfigError(
                f"option max_input_tokens: {self._max_input_tokens} cannot hold the rubric and a conversation;"
                f" the minimum for this rubric and model is {self.minimum_input_tokens}"
            )

    @cached_property
    def minimum_input_tokens(self) -> int:
        """The smallest context budget that holds the rubric, the reply and `MIN_TRANSCRIPT_TOKENS`."""
        return self._needs + MIN_TRANSCRIPT_TOKENS

    def _window_needs(self) -> int:
        empty = ConversationalEvalTestCase(turns=[EvalTestCase(input="", actual_output="")])
        wrapper = self.backend.count_tokens(grading_request(empty, self.language, self.rubric.task))
        return self._prefix_tokens + wrapper + self._reply_reserve

    @cached_property
    def reply_token_limit(self) -> int:
        """max_tokens of each reply: what the rubric's schema needs (see `REPLY_TOKENS_MARGIN`),
        sized from the examples' bytes: counting them with the model's tokenizer loaded it at
        start-up, 1.1 s of every `flowrate eval` (bench/startup.py)."""
        longest = max((len(orjson.dumps(e.reply)) for e in self.rubric.examples), default=0)
        return max(REPLY_TOKENS_FLOOR, REPLY_TOKENS_MARGIN * -(-longest // REPLY_BYTES_PER_TOKEN))

    @cached_property
    def _reply_limit(self) -> int | None:
        """The max_tokens sent: none to a judge that cannot take it or spends it on hidden reasoning."""
        return self.reply_token_limit if self.backend.bounds_replies() else None

    @property
    def _reply_reserve(self) -> int:
        """Room left in the context for one reply (each of n choices has its own)."""
        return self._reply_limit or REPLY_RESERVE_TOKENS

    _learned_window: int | None = None  #: the window a server named in a refusal, as `learn_window` keeps it

    @property
    def _window(self) -> int | None:
        """The context window planned for: --max-input-tokens, else one a server named in a
        refusal, else the model's known window."""
        return self._max_input_tokens or self._learned_window or self._known_window

    @cached_property
    def _known_window(self) -> int | None:
        return self.backend.context_window()

    def learn_window(self, told: int) -> None:
        """The server refused a prompt as too long and named its window, `told` tokens of its
        own tokenizer (llama-cpp-python says it nowhere else): plan every conversation from now
        on to fit it, with room for the tokenizer flowrate counts with (`SERVER_WINDOW_SHARE`).
        A --max-input-tokens given is kept: the user chose it."""
        window = int(told * SERVER_WINDOW_SHARE)
        if self._window is None or window < self._window:
            self._learned_window = window

    @cached_property
    def _prefix_tokens(self) -> int:
        return sum(self.backend.count_tokens(m["content"]) + PER_MESSAGE_OVERHEAD for m in self.rubric.prefix_messages)

    @property
    def input_budget(self) -> int | None:
        """Tokens the conversation may take: the window (`_window`) less the rubric, its examples
        and room for the reply. None when no window is known."""
        if not self._window:
            return None
        return max(self._window - self._needs, MIN_TRANSCRIPT_TOKENS)

    @cached_property
    def _needs(self) -> int:
        return self._window_needs()
