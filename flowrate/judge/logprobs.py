"""What a served judge learns of token log-probabilities during a run: whether its server refused
them (llama-cpp-python's started with `--logits_all false` answers a 500 saying so), then asked
again without them and never again; and how many replies came without the ones asked for. The
run's end tells either once (`note`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from flowrate.judge.backend import Completion
from flowrate.judge.errors import LogprobsRefused


class LogprobsLearned:
    """A served judge's log-probabilities as its server answered them this run; see the module."""

    def __init__(self) -> None:
        self.refused: str | None = None  #: what the server said when it refused them
        self.missing = 0  #: replies asked with log-probabilities that came without

    async def complete(self, asked: int, send: Callable[[], Awaitable[Completion]]) -> Completion:
        """`send`'s completion, asked with `asked` alternatives a token (0: none); a refusal of
        them is learned, and the request sent again (`send` then asks none)."""
        try:
            completion = await send()
        except LogprobsRefused as error:
            if not asked:
                raise
            self.refused = str(error)
            completion = await send()
            completion.requests += 1
            return completion
        if asked:
            self.missing += sum(1 for i in range(len(completion.texts)) if completion.tokens(i) is None)
        return completion

    def note(self) -> str | None:
        """Why this run's replies came without log-probabilities; None when they came with them."""
        if self.refused is not None:
            hint = " (llama-cpp-python's server gives them unless started with --logits_all false)"
            hint = hint if "logits_all" in self.refused else ""
            return (
                f"the judge refused token log-probabilities{hint}: level_probs and expected_score are null"
                f" on this run's new rows. It said: {self.refused[:200]}"
            )
        if self.missing:
            return (
                f"{self.missing} judge reply(ies) came without the token log-probabilities asked for:"
                " their level_probs and expected_score are null"
            )
        return None
