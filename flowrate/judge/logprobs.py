"""What a served judge learns of token log-probabilities during a run: whether its server refused
them (llama-cpp-python's started with `--logits_all false` answers a 500 saying so), then asked
again without them and never again; and how many replies came without usable ones (`tokens_fault`:
none, numbers that are not numbers, tokens that do not spell the reply), online or in a provider
batch's output. The run's end tells each case once (`notes`)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from flowrate.judge.errors import LogprobsRefused

Tokens = list[dict[str, Any]]  # OpenAI's `choices[i].logprobs.content`: token, logprob, top_logprobs


class Answer(Protocol):
    """What `LogprobsLearned.complete` reads of a `judge.backend.Completion` (`judge.backend`
    imports this module for `JudgeBackend.logprobs`, so this one does not import it)."""

    texts: list[str]
    requests: int

    def tokens(self, index: int) -> Tokens | None: ...


A = TypeVar("A", bound=Answer)

#: what each fault of `tokens_fault` leaves a reply, as the run's end says it
FAULT_NOTES = {
    "missing": "came without the token log-probabilities asked for",
    "not numbers": "came with log-probabilities that are not numbers (NaN), read as no distribution",
    "unspelled": "came with token log-probabilities that do not spell the reply (a server writing a token"
    " that ends inside a character as U+FFFD sends such), so no value could be found in them",
}


def tokens_fault(text: str, tokens: Tokens | None) -> str | None:
    """Why a reply `text` with its `tokens` gives no distribution: "missing" (none came),
    "not numbers" (a log-probability that is NaN, +Infinity or absent: a NaN is cached as `KEPT_NAN`),
    "unspelled" (the tokens do not spell `text`); None when they are usable."""
    if not tokens:
        return "missing"
    for token in tokens:
        alternatives = [token, *(token.get("top_logprobs") or [])]
        if not all(_is_logprob(alternative.get("logprob")) for alternative in alternatives):
            return "not numbers"
    if "".join(str(token.get("token", "")) for token in tokens) != text:
        return "unspelled"
    return None


#: a NaN log-probability as the cache keeps it. JSON has neither NaN nor -Infinity, and orjson
#: writes both as null; every cache written before NaN replies were kept holds null for -Infinity
#: only (a probability of 0: a token the grammar masked, or one the in-process judge found no logit
#: for), so null reads back as -Infinity and a NaN is kept as this text, read as "not numbers".
KEPT_NAN = "NaN"


def storable(tokens: list[Tokens | None]) -> list[Tokens | None]:
    """`tokens` as the cache keeps them: each NaN log-probability as `KEPT_NAN` (`restored` reads them back)."""
    return [None if reply is None else [_mapped(token, _kept) for token in reply] for reply in tokens]


def restored(tokens: list[Tokens | None]) -> list[Tokens | None]:
    """`tokens` read back from the cache: null as -Infinity, `KEPT_NAN` left for `tokens_fault`."""
    return [None if reply is None else [_mapped(token, _read) for token in reply] for reply in tokens]


def _kept(value: Any) -> Any:
    return KEPT_NAN if isinstance(value, float) and math.isnan(value) else value


def _read(value: Any) -> Any:
    return -math.inf if value is None else value


def _mapped(token: dict[str, Any], change: Callable[[Any], Any]) -> dict[str, Any]:
    out = {**token, "logprob": change(token.get("logprob"))}
    if token.get("top_logprobs"):
        out["top_logprobs"] = [_mapped(alternative, change) for alternative in token["top_logprobs"]]
    return out


def _is_logprob(value: Any) -> bool:
    """Whether `value` can be a log-probability: a number below +Infinity, -Infinity (a probability of 0) included."""
    return isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value) and value < math.inf


class LogprobsLearned:
    """A served judge's log-probabilities as its server answered them this run; see the module."""

    def __init__(self) -> None:
        self.refused: str | None = None  #: what the server said when it refused them
        #: replies asked with log-probabilities that gave no distribution, by `tokens_fault`
        self.faults: Counter[str] = Counter()

    async def complete(self, asked: int, send: Callable[[], Awaitable[A]]) -> A:
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
        self.heard(asked, completion.texts, [completion.tokens(i) for i in range(len(completion.texts))])
        return completion

    def heard(self, asked: int, texts: list[str], tokens: list[Tokens | None]) -> None:
        """Count the replies `texts` with their `tokens` that give no distribution, when they were
        asked with `asked` alternatives a token (0: none asked, nothing counted)."""
        if asked:
            for index, text in enumerate(texts):
                fault = tokens_fault(text, tokens[index] if index < len(tokens) else None)
                if fault is not None:
                    self.faults[fault] += 1

    def notes(self) -> list[str]:
        """Why this run's replies came without usable log-probabilities, a note for each case; empty when they did."""
        notes = []
        if self.refused is not None:
            hint = " (llama-cpp-python's server gives them unless started with --logits_all false)"
            hint = hint if "logits_all" in self.refused else ""
            notes.append(
                f"the judge refused token log-probabilities{hint}: level_probs and expected_score are null"
                f" on this run's new rows. It said: {self.refused[:200]}"
            )
        for fault, said in FAULT_NOTES.items():
            if self.faults[fault]:
                notes.append(
                    f"{self.faults[fault]} judge reply(ies) {said}: their level_probs and expected_score are null"
                    " (a --score that needs them keeps the verdict's score, score_from says so)"
                )
        return notes
